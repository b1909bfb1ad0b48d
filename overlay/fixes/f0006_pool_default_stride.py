# mypy: allow-subclassing-any
"""Fix 6: ``F.max_pool2d(x, 2)`` with the stride left out (``0006-pool-default-stride``)."""

from __future__ import annotations

from typing import Any

from overlay.fixes.model import (
    Direction,
    Divergence,
    Effect,
    ErrorSignature,
    Fix,
    UpstreamNote,
    case,
    runtime_form,
)

SUPPORT = "backends/arm/operator_support/pool_2d_support.py"
DECOMPOSE = "backends/arm/_passes/decompose_maxpool2d_with_dilation_pass.py"


@runtime_form(SUPPORT, "MaxPool2dSupported", "is_node_tosa_supported")
def max_pool2d_support_default_stride(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``MaxPool2dSupported.is_node_tosa_supported``."""
    dilation_check = module.dilation_check
    kernel_check = module.kernel_check
    dim_check = module.dim_check
    stride_check = module.stride_check

    def is_node_tosa_supported(self: Any, node: Any, tosa_spec: Any) -> bool:
        """Check a max_pool2d whose stride may be left out.

        Example: ``F.max_pool2d(x, 2)``: torch.export drops the defaulted stride, the node is
        ``max_pool2d_with_indices(x, [2, 2])``, and 1.2.0's check reads ``node.args[2]``:
        ``IndexError: tuple index out of range`` from the partitioner, on every TOSA spec
        and Ethos-U target.
        Becomes: 1.2.0's check with the stride ``node.args[2]`` when present and not empty,
        else ``node.args[1]`` (kernel_size, the aten default), as the diff does (a copy of
        the whole check: the read sits in its middle).
        """
        shape = node.all_input_nodes[0].meta["val"].shape
        kernel = node.args[1]
        stride = node.args[2] if len(node.args) >= 3 and node.args[2] else node.args[1]
        padding = node.args[3] if len(node.args) >= 4 else (0, 0)
        dilation = node.args[4] if len(node.args) >= 5 else (1, 1)
        reject = self.reporter.report_reject
        if not dilation_check(shape, kernel, stride, padding, dilation):
            reject(
                node, f"Maxpool2d with dilation {dilation} needs stride = 1, got stride {stride}"
            )
            return False
        if not tosa_spec.is_U55_subset:
            return True
        if not kernel_check(kernel):
            reject(node, f"Maxpool2d needs kernel_y < 256, kernel_x*kernel_y<=65536, got {kernel}")
            return False
        if not dim_check(shape):
            reject(node, f"Maxpool2d needs N == 1, rest dims <= 65536, got shape {list(shape)}")
            return False
        if not stride_check(stride):
            reject(node, f"Maxpool2d needs stride <= 3, got {stride}")
            return False
        return True

    return is_node_tosa_supported


@runtime_form(DECOMPOSE, "DecomposeMaxPool2dPass", "call_operator")
def max_pool2d_pass_default_stride(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``DecomposeMaxPool2dPass.call_operator``."""
    edge_ops = module.EDGE_MAXPOOL2D

    def call_operator(self: Any, op: Any, args: Any, kwargs: Any, meta: Any) -> Any:
        """Give a max_pool2d without a stride its kernel size as the stride.

        Example: ``max_pool2d_with_indices(x, [2, 2])`` once the support check lets it into
        a partition: 1.2.0's pass reads ``args[2]`` (IndexError inside the backend
        pipeline; SizeAdjustInputPass and the MAX_POOL2D visitor read it later too).
        Becomes: the original called with ``(x, kernel_size, kernel_size, *rest)``, which
        writes the explicit argument list every later pass reads; graph and bytes equal
        the diff's.
        """
        if op in edge_ops and (len(args) < 3 or not args[2]):
            args = (args[0], args[1], args[1], *args[3:])
        return original(self, op, args, kwargs, meta)

    return call_operator


@case(
    "max_pool2d_default_stride",
    "TOSA-1.0+INT",
    "a8w8",
    fast=True,
    ethos_u=True,
    note="F.max_pool2d(x, 2): the stride is left out, as torch.export leaves it",
)
def conv_max_pool() -> tuple[Any, tuple[Any, ...]]:
    """Build case ``max_pool2d_default_stride``: ``F.max_pool2d(relu(conv(x)), 2)``."""
    import torch

    class ConvMaxPool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)  # no stride

    return ConvMaxPool(), (torch.randn(1, 3, 16, 16),)


FIX = Fix(
    number=6,
    title="max_pool2d with its stride left out defaults it to the kernel size",
    repo_paths=(SUPPORT, DECOMPOSE),
    runtime={
        "1.2.0": (
            max_pool2d_support_default_stride,
            max_pool2d_pass_default_stride,
        ),
    },
    claims={
        "1.2.0": Effect.FIXED.triggers(
            max_pool2d_default_stride="F.max_pool2d(x, 2): stock's partitioner raises IndexError"
            " (it reads the absent stride); with the fix it lowers as F.max_pool2d(x, 2, 2)",
        ),
    },
    divergences={
        "1.2.0": (
            Divergence(
                name="pool-stride-left-out",
                direction=Direction.IMPROVEMENT,
                involves=("max_pool2d",),
                other=(ErrorSignature("IndexError", "tuple index out of range"),),
                reason="a runtime patch without fix 6 (the seed) meets 1.2.0's IndexError on"
                " a max_pool2d whose stride is left out",
            ),
        ),
    },
    cases=(conv_max_pool,),
    upstream=UpstreamNote(
        narrowing=(
            "executorch 1.5.1 reads the stride the same way in pool_2d_support.py and"
            " normalises it in RewriteMaxPool2dPass (#18970): nothing to send upstream."
        ),
        reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineINT


class Pool(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.max_pool2d(x, 2)


TosaPipelineINT(Pool(), (torch.rand(1, 3, 8, 8),), [], []).run()  # IndexError on 1.2.0
""",
    ),
)
