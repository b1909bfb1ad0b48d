"""Fix 1: int16 quantize nodes the float lowering needs stay unfolded (see its title)."""

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
    PullRequest,
    UpstreamNote,
    runtime_form,
)

FOLD_PASS = "backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py"
QUANTIZER_SUPPORT = "backends/arm/quantizer/quantizer_support.py"
GRID_SAMPLER_TESTS = "backends/arm/test/ops/test_grid_sampler.py"
REWRITE_TESTS = "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py"


@runtime_form(FOLD_PASS, "FoldAndAnnotateQParamsPass", "is_foldable")
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


@runtime_form(QUANTIZER_SUPPORT, "", "TOSA_QUANTIZER_SUPPORT_DICT")
def check_grid_sampler_qspecs(module: Any, original: Any) -> Any:
    """Build 1.5.1's ``TOSA_QUANTIZER_SUPPORT_DICT`` with a pattern check for grid_sampler."""
    import torch

    class GridSamplerCheck(module.PatternCheck):  # type: ignore[misc]
        """Reject a grid_sampler pattern whose config has no qspec for its image or output.

        Example: a16w8 conv -> tanh -> permute -> grid_sample lowered for VGF on
        TOSA-1.0+INT+FP+int16 (corpus ``grid_warp_a16w8_vgf``): the config has fixed
        grid_sampler qparams for 8 bits only, so ``get_input_act_qspec`` of the image and
        ``get_output_act_qspec`` are None; 1.5.1's composable quantizer has no check for the
        pattern, marks the sampler quantized all the same, and FoldAndAnnotateQParamsPass
        folds the neighbours' int16 q/dq nodes into it: the grid-sampler rewrite refuses
        the folded grid (``grid_sampler rewrite only supports per-tensor int8 grids``), or,
        with a grid it does dequantize (``zoo_grid_warp_a16w8_intfp16``), the float shader
        reads the int16 image and the executed VGF output is all zeros.
        Becomes: the pattern is rejected, so the sampler is left unquantized as the legacy
        annotator leaves it: its q/dq nodes stay and the float shader samples dequantized
        data. A config with grid_sampler qspecs (int8), or none at all, is accepted as
        1.5.1 accepts it.
        """

        @classmethod
        def check_quantization_config(cls, pattern: Any, quantization_config: Any) -> bool:
            if quantization_config is None:
                return True
            node = pattern[0]
            return (
                quantization_config.get_input_act_qspec(node, node.args[0]) is not None
                and quantization_config.get_output_act_qspec(node) is not None
            )

    TOSA_QUANTIZER_SUPPORT_DICT = {  # noqa: N806 (the attribute it replaces)
        **original,
        (torch.ops.aten.grid_sampler.default,): GridSamplerCheck,
    }
    return TOSA_QUANTIZER_SUPPORT_DICT


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


FOLD_PROBES = (  # is_foldable.<name>, what it shows, the quantize's dtype, a dequantize after it
    ("int16_output_quantize", "fix 1: add -> int16 quantize -> graph output", "int16", False),
    ("int8_output_quantize", "fix 1 control: add -> int8 quantize -> output", "int8", False),
    ("int16_quantize_then_dequantize", "fix 1 control: int16 q -> dq -> output", "int16", True),
)


FIX = Fix(
    number=1,
    title="int16 q/dq nodes the float lowering needs stay unfolded (1.2.0: terminal ones;"
    " 1.5.1: those around an a16w8 grid sampler)",
    repo_paths=(
        FOLD_PASS,  # the 1.2.0 patch
        QUANTIZER_SUPPORT,  # the 1.5.1 patch, and its test
        REWRITE_TESTS,
    ),
    runtime={
        "1.2.0": keep_terminal_int16_quantize,
        "1.5.1": check_grid_sampler_qspecs,
    },
    claims={
        "1.2.0": Effect.CHANGED.triggers(
            int16_quantize_output="a16w8 conv whose graph ends in its int16 quantize (output"
            " dequantize removed): the quantize stays explicit, the TOSA payload changes, both"
            " outputs are right",
            zoo_grid_warp_int16_grid_intfp16="the seed's deployment: a conv branch's grid"
            " positions leave the graph as int16 (INT+FP+int16): the quantize stays explicit,"
            " TOSA and VGF payloads change, the executed VGF and TOSA outputs are bit-identical"
            " to stock's",
        ),
        "1.5.1": Effect.FIXED.triggers(
            grid_warp_a16w8_vgf="VGF a16w8 conv -> tanh -> permute -> grid_sample: stock marks"
            " the sampler quantized without qspecs and folds the int16 q/dq around it, the folded"
            " grid stays quantized and the grid-sampler rewrite refuses it; with the fix the"
            " sampler is left unquantized, keeps its q/dq and runs in float",
            zoo_grid_warp_a16w8_intfp16="the zoo grid warp, a16w8 for VGF: stock lowers, and its"
            " shader reads the folded int16 image as float32 (executed output all zeros); with"
            " the fix the sampler is left unquantized and runs in float",
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
    probes=tuple(
        Probe(f"is_foldable.{name}", description, partial(foldable_add, dtype, dequantize=dq))
        for name, description, dtype, dq in FOLD_PROBES
    ),
    upstream=UpstreamNote(
        narrowing=(
            "Of the 1.2.0 patch (keep terminal int16 quantizes unfolded) only the grid"
            " sampler branch still changes anything on 1.5.1: stock 1.5.1 already lowers an"
            " int16 quantize at a graph output. On 1.5.1 the cause is the marking: the"
            " composable quantizer accepts a grid_sampler pattern its config has no qspecs"
            " for and marks the node quantized, so FoldAndAnnotateQParamsPass folds into it."
            " The patch adds a pattern check that leaves such a sampler unquantized, as the"
            " legacy annotator does. int8 models do not change; the a16w8 grid warp through"
            " TOSAQuantizer and TOSAPartitioner lowers to the same operators and outputs"
            " (Ethos-U was not measured)."
        ),
        affected_tests=(
            "backends/arm/test/passes/test_fold_qdq_pass.py",
            GRID_SAMPLER_TESTS,
            REWRITE_TESTS,
            "backends/arm/test/passes/test_fuse_grid_sampler_flow_offset_pass.py",
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
# main and 1.5.1: RuntimeError: grid_sampler rewrite only supports per-tensor int8
# grids; lowers with the fix
to_edge_transform_and_lower(program, partitioner=[VgfPartitioner(spec)])
""",
        symptom="a16w8 grid_sample fails to lower for VGF, or its VGF program returns all zeros",
        related=(
            # the shader's int8 image payloads: it reads int8 or float images, never int16
            PullRequest(
                20329, "Arm backend: Support sampler-backed VGF grid_sample for RIFE", "bdemirb"
            ),
        ),
    ),
)
