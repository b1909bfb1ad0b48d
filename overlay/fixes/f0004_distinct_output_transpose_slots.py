# mypy: allow-subclassing-any
"""Fix 4: one transpose per duplicated graph output slot (``0004-distinct-output-...``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from overlay.fixes.model import Effect, Fix, Probe, UpstreamNote, case, runtime_form

MEMORY_FORMAT_PASS = "backends/arm/_passes/to_tosa_memory_format_pass.py"


@runtime_form(MEMORY_FORMAT_PASS, "ToTosaMemoryFormatPass", "insert_input_transpose")
def distinct_output_transpose_slots(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``ToTosaMemoryFormatPass.insert_input_transpose``."""
    exir_ops = module.exir_ops
    create_node = module.create_node
    get_first_fake_tensor = module.get_first_fake_tensor
    pass_class = module.ToTosaMemoryFormatPass

    def replace_input(node: Any, input_node: Any, replacement: Any) -> None:
        if node.op != "output":
            node.replace_input_with(input_node, replacement)
            return
        outputs = node.args[0]
        if not isinstance(outputs, list | tuple):
            raise TypeError(f"Expected output node args to be a list or tuple, got {type(outputs)}")
        rewritten = list(outputs)
        for index, existing in enumerate(rewritten):
            if existing is input_node:
                rewritten[index] = replacement
                break
        else:
            raise RuntimeError(
                "Could not find the original output node while rewriting the output tuple."
            )
        node.args = (rewritten if isinstance(outputs, list) else tuple(rewritten),)

    def insert_input_transpose(node: Any, input_node: Any, graph_module: Any) -> None:
        """Transpose one output slot at a time, not every slot the input fills.

        Example: two equal constant outputs merged by FuseEqualPlaceholdersPass (one
        placeholder in two output slots), one of them channels_last: 1.2.0's
        ``replace_input_with`` rewires both slots to the one transpose.
        Becomes: 1.2.0's transpose insertion, rewiring only the first slot still holding
        the input (a non-output user is rewired as before).
        """
        # The 1.2.0 body, with node.replace_input_with -> replace_input (as in the diff).
        if input_node.target == exir_ops.backend.tosa.TRANSPOSE.default:
            replace_input(node, input_node, input_node.all_input_nodes[0])
            return
        rank = len(get_first_fake_tensor(input_node).size())
        spatial_rank = input_node.meta["tosa_spatial_rank"]
        mem_format = pass_class._channels_last_inverse_order(rank, spatial_rank)
        assert sorted(mem_format) == list(range(rank)), (
            f"bad perm {mem_format} for rank {rank} in insert_input_transpose"
        )
        with graph_module.graph.inserting_before(node):
            permute_node = create_node(
                graph_module.graph,
                exir_ops.backend.tosa.TRANSPOSE.default,
                args=(input_node, list(mem_format)),
                from_node=node,
            )
            replace_input(node, input_node, permute_node)
            permute_node.meta["tosa_dim_order"] = tuple(range(len(input_node.meta["val"].size())))
            permute_node.meta["tosa_spatial_rank"] = spatial_rank

    return staticmethod(insert_input_transpose)


@case("equal_constant_outputs_channels_last", "TOSA-1.0+FP", None, fast=True)
def equal_constants() -> tuple[Any, tuple[Any, ...]]:
    """Build case ``equal_constant_outputs_channels_last``: two equal constant outputs."""
    import torch

    class EqualConstants(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("a", torch.arange(24.0).reshape(1, 2, 3, 4))
            self.register_buffer("b", torch.arange(24.0).reshape(1, 2, 3, 4))

        def forward(self, x: Any) -> Any:
            channels_last = (self.b + 0).contiguous(memory_format=torch.channels_last)
            return x + 1, self.a + 0, channels_last

    return EqualConstants(), (torch.randn(1, 4),)


def output_transposes(*, duplicated: bool) -> Any:
    """Probe ``insert_input_transpose`` on an output tuple holding one node (twice)."""
    import torch
    from executorch.backends.arm._passes.to_tosa_memory_format_pass import (
        ToTosaMemoryFormatPass,
    )
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    with FakeTensorMode():
        x.meta["val"] = torch.empty(1, 2, 3, 4)
    x.meta["tosa_spatial_rank"] = 2
    output = graph.output((x, x) if duplicated else (x,))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    ToTosaMemoryFormatPass.insert_input_transpose(output, x, module)
    return graph


FIX = Fix(
    number=4,
    title="one transpose per duplicated graph output slot",
    repo_paths=(MEMORY_FORMAT_PASS,),
    runtime={
        "1.2.0": distinct_output_transpose_slots,
    },
    claims={
        "1.2.0": Effect.FIXED.triggers(
            equal_constant_outputs_channels_last="two equal constant outputs merged by"
            " FuseEqualPlaceholdersPass, one channels_last",
        ),
    },
    cases=(equal_constants,),
    probes=tuple(
        Probe(f"insert_input_transpose.{name}", what, partial(output_transposes, duplicated=twice))
        for name, what, twice in (
            ("duplicated_output", "fix 4: one node twice in the output tuple", True),
            ("single_output", "fix 4 control: plain output", False),
        )
    ),
    upstream=UpstreamNote(
        reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineFP


class TwoEqualOutputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.ones(1, 2, 3, 3))
        self.register_buffer("b", torch.ones(1, 2, 3, 3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x + 1, self.a, self.b


x = torch.rand(1, 2, 3, 3).to(memory_format=torch.channels_last)
TosaPipelineFP(TwoEqualOutputs(), (x,), [], []).run()
""",
    ),
)
