"""Fix 3: conv rescale qparams from the source conv or its clamp (``0003-conv-rescale-...``)."""

from __future__ import annotations

from typing import Any

from overlay.equivalence.protocol import ItemId, ItemKind
from overlay.fixes.model import (
    DeclaredDivergence,
    Effect,
    Fix,
    RuntimeForm,
    Trigger,
    UpstreamNote,
)


def conv_rescale_qparams_from_source(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``RewriteConvPass.insert_output_rescale``."""
    get_output_qparams = module.get_output_qparams
    convolution = module.exir_ops.edge.aten.convolution.default
    clamp = module.exir_ops.edge.aten.clamp.default

    def source_conv(tosa_op: Any) -> Any | None:
        # 1.2.0's call() inserts the TOSA conv right after the aten conv it replaces.
        previous = tosa_op.prev
        if (
            previous.op == "call_function"
            and previous.target == convolution
            and tosa_op.args[:1] == previous.args[:1]
        ):
            return previous
        return None

    def effective_output_qparams(node: Any) -> Any:
        try:
            return get_output_qparams(node)
        except ValueError:
            users = list(node.users)
            if (
                len(users) == 1
                and users[0].target == clamp
                and "output_qparams" in users[0].meta
                and len(users[0].meta["output_qparams"]) > 0
            ):
                return get_output_qparams(users[0])
            raise

    def insert_output_rescale(self: Any, graph_module: Any, node: Any) -> Any:
        """Rescale the TOSA conv's output with the qparams of the conv it replaces.

        Example: a conv -> relu feeding a cat with a differently quantised input: the
        output qparams sit on the aten conv or, when FoldAndAnnotateQParamsPass left them
        there, on its one clamp user; 1.2.0 reads them from the new TOSA conv node, which
        has none (lowering fails) or the wrong ones.
        Becomes: 1.2.0's rescale, run with the source conv's (or its clamp's) output
        qparams lent to the TOSA node for the call and taken back afterwards.
        """
        source = source_conv(node)
        if source is None:
            return original(self, graph_module, node)
        qparams = effective_output_qparams(source)
        had_key = "output_qparams" in node.meta
        saved = node.meta.get("output_qparams")
        node.meta["output_qparams"] = qparams
        try:
            return original(self, graph_module, node)
        finally:
            if had_key:
                node.meta["output_qparams"] = saved
            else:
                del node.meta["output_qparams"]

    return insert_output_rescale


FIX = Fix(
    number=3,
    patch="0003-conv-rescale-qparams-from-source.patch",
    title="conv rescale qparams from the source conv or its clamp",
    repo_paths=("backends/arm/_passes/rewrite_conv_pass.py",),
    runtime={
        "1.2.0": RuntimeForm(
            repo_path="backends/arm/_passes/rewrite_conv_pass.py",
            owner="RewriteConvPass",
            attribute="insert_output_rescale",
            build=conv_rescale_qparams_from_source,
        ),
    },
    claims={
        "1.2.0": (
            Trigger(
                "conv_relu_cat_mixed_qparams",
                Effect.FIXED,
                "conv -> relu feeding a cat with a differently quantised input",
            ),
        ),
        "1.5.1": (
            Trigger(
                "conv_relu_cat_mixed_qparams",
                Effect.FIXED,
                "the same branch on 1.5: FuseQuantizedActivationPass fuses the ReLU into the"
                " qmin of the conv's output qparams, which its output RESCALE ignores (values"
                " below zero pass); the 1.5.1 port clamps the rescale",
            ),
        ),
    },
    divergences={
        "1.2.0": (
            DeclaredDivergence(
                id="seed-stale-grouped-transpose-check",
                item=ItemId(ItemKind.PROBE, "RewriteConvPass.grouped_transposed_fp"),
                b_error_type="RuntimeError",
                b_error_contains="Grouped transpose convolutions are not supported",
                reason=(
                    "the seed monkey-patch replaces RewriteConvPass.call with a copy that still"
                    " raises 'Grouped transpose convolutions are not supported', a check"
                    " upstream dropped in 5123efe184 (before 1.2.0); the diffs do not carry"
                    " it. In a full lowering DecomposeGroupedConvPass splits grouped"
                    " transposed convs first, so it is reachable only when RewriteConvPass"
                    " runs with the seed on such a conv directly"
                ),
            ),
        ),
    },
    upstream=UpstreamNote(
        test_file="backends/arm/test/passes/test_rewrite_conv_pass.py",
        narrowing=(
            "The 1.2.0 patch (rescale qparams from the conv's clamp user) is upstream since"
            " 22867a9148. Since ad9902c464 (#21974) the ReLU is no longer a clamp there:"
            " FuseQuantizedActivationPass folds it into qmin = zp, which RewriteConvPass's"
            " output RESCALE does not honour. The 1.5.1 port adds a CLAMP after that"
            " RESCALE when qmin is a zero point above the dtype minimum."
        ),
        affected_tests=(
            "backends/arm/test/passes/test_rewrite_conv_pass.py",
            "backends/arm/test/passes/test_fuse_quantized_activation_pass.py",
            "backends/arm/test/passes/test_fold_qdq_pass.py",
            "backends/arm/test/passes/test_convert_to_clamp.py",
            "backends/arm/test/passes/test_fuse_consecutive_clamps_pass.py",
        ),
        reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineINT


class ConvReluCat(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # relu shares its output qparams with the cat, whose range is mostly y's
        return torch.cat([torch.relu(self.conv(x)), y * 10], dim=1)


torch.manual_seed(0)
inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 2, 8, 8))
TosaPipelineINT(ConvReluCat(), inputs, [], []).run()  # outputs do not match the reference
""",
    ),
)
