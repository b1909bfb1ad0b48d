"""Fix 2: leave factory op outputs unannotated (``0002-skip-factory-op-annotation``)."""

from __future__ import annotations

from typing import Any

from overlay.fixes.model import Effect, Fix, RuntimeForm, Trigger, UpstreamNote


def skip_factory_op_annotation(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``quantization_annotator.get_quant_properties``."""
    import torch

    factory_targets = (
        torch.ops.aten.full.default,
        torch.ops.aten.full,
        torch.ops.aten.zeros.default,
        torch.ops.aten.ones.default,
        torch.ops.aten.fill_.Scalar,
        torch.ops.aten.scalar_tensor.default,
    )

    def get_quant_properties(node: Any, gm: Any, quantization_config: Any) -> Any:
        """Give a factory op (full, zeros, ones, fill_, scalar_tensor) no quantization.

        Example: ``x + torch.full((1, 4), 2.0)``: 1.2.0 annotates the full's output as
        quantized, and PT2E prepare asserts on the factory op's dtype/device kwargs (or,
        with torchao >= 0.16, delegates the constant).
        Becomes: None for the factory node, so its consumers quantize at the boundary (as
        XNNPACK does); every other node gets 1.2.0's properties.
        """
        # No earlier branch of the 1.2.0 function matches these targets.
        if node.target in factory_targets:
            return None
        return original(node, gm, quantization_config)

    return get_quant_properties


FIX = Fix(
    number=2,
    patch="0002-skip-factory-op-annotation.patch",
    title="leave factory op outputs unannotated",
    repo_paths=("backends/arm/quantizer/quantization_annotator.py",),
    runtime={
        "1.2.0": RuntimeForm(
            repo_path="backends/arm/quantizer/quantization_annotator.py",
            owner="",
            attribute="get_quant_properties",
            build=skip_factory_op_annotation,
        ),
    },
    claims={
        "1.2.0": (
            Trigger(
                "factory_op_output",
                Effect.CHANGED,
                "aten.full feeding a graph output: stock (torchao >= 0.16) delegates it, the"
                " patch keeps it on the CPU; both outputs are right",
            ),
        ),
    },
    upstream=UpstreamNote(
        test_file="backends/arm/test/quantizer/test_generic_annotater.py",
        reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineINT


class Full(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.full((1, 4), 2.0)


TosaPipelineINT(Full(), (torch.rand(1, 4),), [], []).run()
""",
    ),
)
