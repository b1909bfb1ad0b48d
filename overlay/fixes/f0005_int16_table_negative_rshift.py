"""Fix 5: int16 TABLE zeroed by a negative right shift (a backport of upstream 9c7fba0e9b)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overlay.fixes.model import (
    WRONG_NUMBERS,
    Direction,
    Divergence,
    Effect,
    Fix,
    UpstreamNote,
    runtime_form,
)

TABLE_OPS = "backends/arm/_passes/insert_table_ops.py"


@runtime_form(TABLE_OPS, "InsertTableOpsPass", "generate_16_bit_table_values")
def int16_table_nonnegative_rshift(module: Any, original: Any) -> Any:
    """Build 1.2.0's replacement of ``InsertTableOpsPass.generate_16_bit_table_values``."""
    import torch

    def generate_16_bit_table_values(
        torch_op: Callable[[Any], Any], in_quantargs: Any, out_quantargs: Any
    ) -> tuple[Any, int]:
        """Build the int16 lookup table of ``torch_op`` without a negative right shift.

        Example: a16w8 ``tanh`` whose int16 output has scale 2**-12 (the a16w8 observer's
        eps): the largest table value is 4096, so 1.2.0 computes rshift = -3, and
        ``lut_values >> -3`` is 0 (-1 for negative entries): the TABLE is all 0/-1 and the
        op outputs 0 for every input (conv -> relu -> conv -> tanh off by 0.64 on a range
        of 0.99).
        Becomes: 1.2.0's table with ``rshift = max(rshift, 0)`` (values that already fit
        in int16 are not shifted; rescale_lshift = -7, the int16 case), a staticmethod as
        upstream made it (1.2.0's call ``self.generate_16_bit_table_values(...)`` works
        either way).
        """

        def f(x: Any) -> Any:
            x = x.clamp(in_quantargs.qmin, in_quantargs.qmax).to(dtype=in_quantargs.dtype)
            x = in_quantargs.dequantize_value(x & ~0x7F)  # the 7 LSBs are not used
            return out_quantargs.quantize_value(torch_op(x))

        lut_values = f(
            torch.linspace(
                start=in_quantargs.qmin, end=in_quantargs.qmax + 1, steps=513, dtype=torch.int32
            )
        )
        rshift = int(torch.ceil(torch.log2(lut_values.abs().max()))) + 1 - 16
        rshift = max(rshift, 0)
        return (lut_values >> rshift).to(dtype=torch.int16), rshift - 7

    return staticmethod(generate_16_bit_table_values)


FIX = Fix(
    number=5,
    title="int16 TABLE lookup values without a negative right shift (upstream 9c7fba0e9b)",
    repo_paths=(TABLE_OPS, "backends/arm/test/ops/test_sigmoid_32bit.py"),
    runtime={
        "1.2.0": int16_table_nonnegative_rshift,
    },
    claims={
        "1.2.0": Effect.FIXED.triggers(
            zoo_grid_warp_a16w8_intfp16="a16w8 grid warp (conv -> tanh -> grid_sample) on"
            " INT+FP+int16: stock's tanh TABLE is all zeros (75% of the range off), right with"
            " the fix",
            zoo_grid_warp_a16w8_int16="the same network on INT+int16 (and its Ethos-U55/U85"
            " streams): stock's tanh outputs 0, right with the fix",
            grid_warp_a16w8_vgf="VGF a16w8 conv -> tanh -> permute -> grid_sample: stock's tanh"
            " outputs 0 (TOSA and executed VGF about 60% of the range off), right with the fix",
        ),
    },
    divergences={
        "1.2.0": (
            Divergence(
                name="int16-table-zeroed",
                direction=Direction.IMPROVEMENT,
                spec_has=("int16",),
                quantize="a16w8",
                involves=("aten::tanh", "aten::sigmoid"),
                other=WRONG_NUMBERS,
                reason="a runtime patch without fix 5 (the seed) keeps 1.2.0's int16 TABLE of"
                " an a16w8 tanh or sigmoid, all zeros: its outputs (a grid warp's grid"
                " positions) are wrong, about 60-75% of the output's range",
            ),
        ),
    },
    upstream=UpstreamNote(
        narrowing=(
            "Upstream's own commit 9c7fba0e9b (PR #20668), released in 1.4.0: nothing to"
            " send; the line carries it as a backport until it moves to 1.4.0 or later."
        ),
        reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineINT
from executorch.backends.arm.quantizer import get_symmetric_a16w8_quantization_config


class ConvTanh(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x))


pipeline = TosaPipelineINT(
    ConvTanh(), (torch.rand(1, 3, 8, 8),), [], [], tosa_extensions=["int16"]
)
pipeline.quantize.quantizer.set_global(get_symmetric_a16w8_quantization_config())
pipeline.run()  # outputs are all zeros on 1.2.0
""",
    ),
)
