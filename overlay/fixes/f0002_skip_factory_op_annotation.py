# mypy: allow-subclassing-any
"""Fix 2: leave factory op outputs unannotated (``0002-skip-factory-op-annotation``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from overlay.fixes.model import Effect, Fix, Probe, UpstreamNote, case, runtime_form

ANNOTATOR = "backends/arm/quantizer/quantization_annotator.py"


@runtime_form(ANNOTATOR, "", "get_quant_properties")
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


@case("factory_op_output", "TOSA-1.0+INT", "a8w8", fast=True)
def factory_op_output() -> tuple[Any, tuple[Any, ...]]:
    """Build case ``factory_op_output``: ``x + 1`` and an ``aten.full`` constant, both outputs."""
    import torch

    class FactoryOutput(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x + 1, torch.full((1, 4), 2.0)

    return FactoryOutput(), (torch.randn(1, 4),)


def quant_properties(target: str) -> Any:
    """Probe ``get_quant_properties`` on ``aten.full`` or ``aten.add`` under a8w8 (None: none)."""
    import torch
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from executorch.backends.arm.quantizer import quantization_annotator as annotator
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    if target == "full":
        node = graph.call_function(torch.ops.aten.full.default, ([1, 4], 2.0))
    else:
        node = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 4)
        node.meta["val"] = torch.empty(1, 4)
    graph.output((node,))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    props = annotator.get_quant_properties(node, module, get_symmetric_quantization_config())
    if props is None:
        return None

    def describe(prop: Any) -> Any:
        if prop is None:
            return None
        if isinstance(prop, list):
            return [describe(p) for p in prop]
        spec = getattr(prop, "qspec", None)
        return {
            "index": getattr(prop, "index", None),
            "dtype": str(getattr(spec, "dtype", None)),
            "qspec": type(spec).__name__,
        }

    return {
        "quant_inputs": describe(props.quant_inputs),
        "quant_output": describe(props.quant_output),
    }


FIX = Fix(
    number=2,
    title="leave factory op outputs unannotated",
    repo_paths=(ANNOTATOR,),
    runtime={
        "1.2.0": skip_factory_op_annotation,
    },
    claims={
        "1.2.0": Effect.CHANGED.triggers(
            factory_op_output="aten.full feeding a graph output: stock (torchao >= 0.16)"
            " delegates it, the patch keeps it on the CPU; both outputs are right",
        ),
    },
    cases=(factory_op_output,),
    probes=tuple(
        Probe(f"get_quant_properties.{op}", description, partial(quant_properties, op))
        for op, description in (
            ("full", "fix 2: aten.full under a8w8"),
            ("add", "fix 2 control: aten.add under a8w8"),
        )
    ),
    upstream=UpstreamNote(
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
