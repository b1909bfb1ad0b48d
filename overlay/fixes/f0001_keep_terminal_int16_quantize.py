"""Fix 1: keep terminal int16 quantize nodes unfolded (``0001-keep-terminal-int16-quantize``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from overlay.fixes.model import (
    Direction,
    Divergence,
    Effect,
    ErrorSignature,
    Fix,
    Probe,
    RuntimeForm,
    Trigger,
    UpstreamNote,
)


def keep_terminal_int16_quantize(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``FoldAndAnnotateQParamsPass.is_foldable``."""
    import torch
    from executorch.backends.arm.tosa.specification import get_context_spec

    q_ops, dq_ops = module.Q_OPS, module.DQ_OPS

    def is_graph_output_quantize(q_node: Any) -> bool:
        return any(user.op == "output" for user in q_node.users)

    def feeds_grid_sampler_through_dq(q_node: Any) -> bool:
        for dq_user in q_node.users:
            if dq_user.op != "call_function" or dq_user.target not in dq_ops:
                continue
            for consumer in dq_user.users:
                if consumer.op != "call_function":
                    continue
                name = str(consumer.target)
                if "grid_sampler.default" in name or "grid_sampler_2d.default" in name:
                    return True
        return False

    def spec_can_keep_quantize() -> bool:
        try:
            return bool(get_context_spec().support_float())
        except RuntimeError:  # outside a TosaLoweringContext (the pass run on its own)
            return True

    def has_terminal_int16_quantize(node: Any) -> bool:
        for user in node.users:
            if user.op != "call_function" or user.target not in q_ops:
                continue
            if len(user.args) <= 5 or user.args[5] != torch.int16:
                continue
            if is_graph_output_quantize(user) or feeds_grid_sampler_through_dq(user):
                return spec_can_keep_quantize()
        return False

    def is_foldable(node: Any) -> bool:
        """Refuse to fold a node whose int16 quantize ends the graph or feeds a grid sampler.

        Example: an a16w8 conv whose output leaves the graph through its int16 quantize
        (the output dequantize removed), or an int16 grid feeding grid_sample via a
        dequantize: 1.2.0 folds the quantize into the conv's qparams.
        Becomes: False for that node when the active TOSA spec has FP, so the quantize
        stays an explicit node that DecomposeQuantNodesPass lowers with FP ops; on an
        INT-only spec (TOSA-1.0+INT+int16, Ethos-U55/U85) the node folds as 1.2.0 folds it
        (the RESCALE to int16 is the integer lowering of that quantize). Every other node is
        foldable exactly when 1.2.0 says so.
        """
        # 1.2.0 returns True on exactly the two branches the diff narrows.
        if not original(node):
            return False
        return not has_terminal_int16_quantize(node)

    return staticmethod(is_foldable)


def dequantize_folded_int16_grids(module: Any, original: Any) -> Any:
    """Build 1.5.1's replacement of ``InsertGridSamplerGridDequantPass.call``."""
    import torch

    grid_sampler = module.exir_ops.edge.aten.grid_sampler_2d.default

    def folded_quantized_grids(graph_module: Any) -> list[tuple[Any, Any, Any]]:
        readers: dict[Any, list[Any]] = {}  # grid node -> grid qparams of each sampler
        for node in graph_module.graph.nodes:
            if node.op != "call_function" or node.target != grid_sampler:
                continue
            grid = node.args[1]
            if isinstance(grid, torch.fx.Node):
                readers.setdefault(grid, []).append(node.meta.get("input_qparams", {}).get(1))
        found = []
        for grid, qparams in readers.items():
            grid_val = grid.meta["val"]
            if not grid_val.dtype.is_floating_point or any(q is None for q in qparams):
                continue
            dtypes = {q.dtype for q in qparams}
            if len(dtypes) == 1:
                found.append((grid, grid_val, dtypes.pop()))
        return found

    def call(self: Any, graph_module: Any) -> Any:
        """Run 1.5.1's method with the port's change around it.

        Example: a16w8 conv -> tanh -> permute -> grid_sample, lowered for VGF on
        TOSA-1.0+INT+FP+int16 (corpus ``grid_warp_a16w8_vgf``). FoldAndAnnotateQParamsPass folds
        the permute's q/dq and records the int16 grid qparams on the sampler
        (``input_qparams[1]``), but the permute's fake tensor is still float32, so 1.5.1's
        ``call`` skips the grid as "float"; the int16 grid reaches
        RewriteGridSamplerToTosaCustomPass: ``RuntimeError: grid_sampler rewrite only supports
        per-tensor int8 grids; unsupported qparams should have been dequantized earlier``.

        Becomes: before the 1.5.1 ``call`` runs, every sampler grid whose fake tensor is float
        but whose sampler holds grid qparams gets a fake tensor of the qparams' dtype
        (``val.to(qparams.dtype)``, as the port does); the original then sees a quantized grid
        and does what it does for one: keeps a per-tensor int8 grid on the sampler path, else
        inserts ``dequantize_per_tensor(grid, scale, zp, qmin, qmax, int16)`` (fake tensor
        float32, from the integer one) and drops ``input_qparams[1]``, or rejects per-channel
        qparams. The grid's own fake tensor is put back afterwards (the port never changes it),
        also when the original raises. Then every sampler left with a float grid and a folded
        quantized image gets the float image boundary (:func:`float_image_boundary`).
        Float grids without qparams and integer grids reach the
        original unchanged. The fake tensor belongs to the grid node, not to one sampler: a grid
        read by several samplers is retyped only when every one of them holds grid qparams of
        one dtype, else it is left as 1.5.1 leaves it.
        """
        folded = folded_quantized_grids(graph_module)
        for grid, grid_val, dtype in folded:
            grid.meta["val"] = grid_val.to(dtype)
        try:
            result = original(self, graph_module)
        finally:
            for grid, grid_val, _ in folded:
                grid.meta["val"] = grid_val
        bounded = False
        for node in list(graph_module.graph.nodes):
            if (
                node.op == "call_function"
                and node.target == grid_sampler
                and float_image_boundary(graph_module, node)
            ):
                bounded = True
        if not bounded:
            return result
        graph_module.graph.eliminate_dead_code()
        graph_module.recompile()
        return module.PassResult(graph_module, True)

    def float_image_boundary(graph_module: Any, node: Any) -> bool:
        """Give a float grid a float image, and quantize the sampler output back.

        Example: the same a16w8 grid warp once 1.5.1's ``call`` has dequantized its int16
        grid: the sampler reads a float grid and the folded int16 image (its fake tensor is
        float32), so RewriteGridSamplerToTosaCustomPass describes the image as float and the
        shader reads int16 data as float32: the executed VGF output is all zeros.
        Becomes: ``dequantize_per_tensor(image, scale, zp, qmin, qmax, int16)`` before the
        sampler (``input_qparams[0]`` dropped) and ``quantize_per_tensor`` to its folded
        output qparams after it (``output_qparams`` emptied), as the port's
        ``_insert_float_image_boundary``. A sampler whose image is the graph input's int16
        quantize node was retraced as int16: its fake tensor becomes float32, or the output
        quantize is decomposed with int16 constants (``Expected matching dtypes``). A sampler
        with a quantized grid (the int8 sampler path) or an unquantized image is left alone;
        per-channel image qparams raise.
        """
        grid = node.args[1]
        input_qparams = node.meta.get("input_qparams", {})
        if not isinstance(grid, torch.fx.Node) or 1 in input_qparams:
            return False
        image = node.args[0]
        image_qparams = input_qparams.get(0)
        if not isinstance(image, torch.fx.Node) or image_qparams is None:
            return False
        if image_qparams.per_channel:
            raise RuntimeError("grid_sampler image dequant only supports per-tensor qparams")
        image_val = image.meta["val"]
        if image_val.dtype.is_floating_point:
            image_val = image_val.to(image_qparams.dtype)
        ops = module.exir_ops.edge.quantized_decomposed
        with graph_module.graph.inserting_before(node):
            dequant_image = module.create_node(
                graph_module.graph,
                op_target=ops.dequantize_per_tensor.default,
                args=module._get_per_tensor_dequant_args(image, image_qparams),
                from_node=node,
            )
            module._set_fake_tensor_meta(dequant_image, image_qparams.dequantize_value(image_val))
        module.set_node_arg(node, 0, dequant_image)
        node.meta["input_qparams"] = {i: q for i, q in input_qparams.items() if i != 0}
        sampler_val = node.meta["val"]  # a graph-input image gave the retraced sampler int16
        if not sampler_val.dtype.is_floating_point:
            module._set_fake_tensor_meta(node, sampler_val.to(dequant_image.meta["val"].dtype))
        output_qparams = node.meta.get("output_qparams", {})
        if not output_qparams:
            return True
        out_qparams = output_qparams[0]
        with graph_module.graph.inserting_after(node):
            quant_output = module.create_node(
                graph_module.graph,
                op_target=ops.quantize_per_tensor.default,
                args=module._get_per_tensor_dequant_args(node, out_qparams),
                from_node=node,
            )
            module._set_fake_tensor_meta(quant_output, out_qparams.quantize_value(node.meta["val"]))
        node.replace_all_uses_with(
            quant_output, delete_user_cb=lambda user: user is not quant_output
        )
        node.meta["output_qparams"] = {}
        return True

    return call


def foldable_add(dtype: str, *, dequantize: bool) -> bool:
    """Probe ``is_foldable`` on an annotated add -> ``dtype`` quantize (-> dequantize) -> output."""
    import torch
    from executorch.backends.arm._passes.fold_qdq_with_annotated_qparams_pass import (
        FoldAndAnnotateQParamsPass,
    )
    from executorch.backends.arm.common.annotation_meta import ArmAnnotationInfo
    from executorch.exir.dialects._ops import ops as exir_ops
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 2, 3, 4)
    add = graph.call_function(exir_ops.edge.aten.add.Tensor, (x, x))
    add.meta["custom"] = {ArmAnnotationInfo.CUSTOM_META_KEY: ArmAnnotationInfo(quantized=True)}
    int_dtype = getattr(torch, dtype)
    info = torch.iinfo(int_dtype)
    q_args = (add, 0.01, 0, info.min, info.max, int_dtype)
    quant = graph.call_function(
        exir_ops.edge.quantized_decomposed.quantize_per_tensor.default, q_args
    )
    result = quant
    if dequantize:
        result = graph.call_function(
            exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
            (quant, *q_args[1:]),
        )
    graph.output((result,))
    return bool(FoldAndAnnotateQParamsPass.is_foldable(add))


GRID_DEQUANT = "backends/arm/vgf/_passes/insert_grid_sampler_grid_dequant_pass.py"


FIX = Fix(
    number=1,
    patch="0001-keep-terminal-int16-quantize.patch",
    title="keep terminal int16 quantize nodes unfolded where the spec has FP",
    repo_paths=(
        "backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py",
        GRID_DEQUANT,  # the 1.5.1 port, and its test
        "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
    ),
    runtime={
        "1.2.0": RuntimeForm(
            repo_path="backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py",
            owner="FoldAndAnnotateQParamsPass",
            attribute="is_foldable",
            build=keep_terminal_int16_quantize,
        ),
        "1.5.1": RuntimeForm(
            repo_path=GRID_DEQUANT,
            owner="InsertGridSamplerGridDequantPass",
            attribute="call",
            build=dequantize_folded_int16_grids,
        ),
    },
    claims={
        "1.2.0": (
            Trigger(
                "int16_quantize_output",
                Effect.CHANGED,
                "a16w8 conv whose graph ends in its int16 quantize (output dequantize removed):"
                " the quantize stays explicit, the TOSA payload changes, both outputs are right",
            ),
            Trigger(
                "zoo_grid_warp_int16_grid_intfp16",
                Effect.CHANGED,
                "the seed's deployment: a conv branch's grid positions leave the graph as int16"
                " (INT+FP+int16): the quantize stays explicit, TOSA and VGF payloads change,"
                " the executed VGF and TOSA outputs are bit-identical to stock's",
            ),
        ),
        "1.5.1": (
            Trigger(
                "grid_warp_a16w8_vgf",
                Effect.FIXED,
                "VGF a16w8 conv -> tanh -> permute -> grid_sample: stock leaves the int16 grid"
                " quantized and the grid-sampler rewrite refuses it; the 1.5.1 port dequantizes"
                " it in InsertGridSamplerGridDequantPass",
            ),
        ),
    },
    divergences={
        "1.2.0": (
            Divergence(
                name="int16-kept-int-only",
                direction=Direction.IMPROVEMENT,
                spec_has=("INT", "int16"),
                spec_lacks=("FP",),
                other=(  # the kept quantize, decomposed with float ops, met by the lowering
                    ErrorSignature("TosaValueError", "doesn't support torch.float32"),
                    ErrorSignature("ValueError", "doesn't support tensor TosaArg"),
                ),
                reason="a runtime patch with the first fix 1 (the seed's) keeps an int16"
                " quantize at a partition's output (the graph's, or a grid sampler's grid) on"
                " INT-only specs too, where its float decomposition cannot be lowered: TOSA,"
                " VGF and Ethos-U lowering fail where stock lowers; the diffs keep it only"
                " where the spec has FP",
            ),
        ),
    },
    probes=(
        Probe(
            "is_foldable.int16_output_quantize",
            "fix 1: add -> int16 quantize -> graph output",
            partial(foldable_add, "int16", dequantize=False),
        ),
        Probe(
            "is_foldable.int8_output_quantize",
            "fix 1 control: add -> int8 quantize -> output",
            partial(foldable_add, "int8", dequantize=False),
        ),
        Probe(
            "is_foldable.int16_quantize_then_dequantize",
            "fix 1 control: int16 q -> dq -> output",
            partial(foldable_add, "int16", dequantize=True),
        ),
    ),
    upstream=UpstreamNote(
        test_file="backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
        narrowing=(
            "Of the 1.2.0 patch (keep terminal int16 quantizes unfolded) only the grid"
            " sampler branch still changes anything on 1.5.1: stock 1.5.1 already lowers an"
            " int16 quantize at a graph output. The port fixes that branch where 1.5.1"
            " handles grid inputs, InsertGridSamplerGridDequantPass (VGF only), instead of"
            " in FoldAndAnnotateQParamsPass: no lowering context or flag is needed, and"
            " TOSA and Ethos-U lowering do not change."
        ),
        affected_tests=(
            "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
            "backends/arm/test/passes/test_fuse_grid_sampler_flow_offset_pass.py",
            "backends/arm/test/passes/test_fold_qdq_pass.py",
            "backends/arm/test/ops/test_grid_sampler.py",
            "backends/arm/test/ops/test_custom_shader_lowering.py",
            "backends/arm/test/quantizer/test_generic_annotater.py",
            "backends/arm/test/quantizer/test_vgf_snorm_quantization.py",
            "backends/arm/test/misc/test_custom_shader_payload.py",
            "backends/arm/test/misc/test_custom_shader_payloads.py",
        ),
        reproducer="""\
import torch
from executorch.backends.arm.quantizer import (
    VgfQuantizer,
    get_symmetric_a16w8_quantization_config,
)
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class GridWarp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grid = torch.tanh(self.conv(x)).permute(0, 2, 3, 1)
        return torch.nn.functional.grid_sample(x, grid, align_corners=False)


spec = VgfCompileSpec("TOSA-1.0+INT+FP+int16")
quantizer = VgfQuantizer(spec)
quantizer.set_global(get_symmetric_a16w8_quantization_config())
x = (torch.rand(1, 3, 8, 8),)
graph = torch.export.export(GridWarp().eval(), x).module(check_guards=False)
prepared = prepare_pt2e(graph, quantizer)
prepared(*x)
program = torch.export.export(convert_pt2e(prepared), x)
to_edge_transform_and_lower(program, partitioner=[VgfPartitioner(spec)])
""",
    ),
)
