# mypy: allow-subclassing-any
"""Fix 7: VGF leaves grid_sample on the CPU without FP (``0007-vgf-grid-sampler-needs-fp``)."""

from __future__ import annotations

from typing import Any

from overlay.fixes.model import Effect, Fix, PullRequest, UpstreamNote, case, runtime_form

PARTITIONER = "backends/arm/vgf/partitioner.py"


@runtime_form(PARTITIONER, "VgfPartitioner", "__init__")
def partition_grid_sampler_only_with_fp(module: Any, original: Any) -> Any:
    """Build 1.5.1's replacement of ``VgfPartitioner.__init__``."""
    grid_sampler = module.exir_ops.edge.aten.grid_sampler_2d.default

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 (the attribute)
        """Register grid_sampler_2d as a VGF custom partition op only where the spec has FP.

        Example: a quantized ``F.grid_sample`` lowered with ``VgfPartitioner`` for
        ``TOSA-1.0+INT``: 1.5.1 always partitions it, its shader takes an FP32 grid scale
        (int8 path) or a float image and float ops around it (float path), and lowering
        fails with ``doesn't support tensor TosaArg(name='..._grid_scale', dtype=FP32)``,
        ``doesn't support float32 for MUL`` (a16w8 on TOSA-1.0+INT+int16) or, with fix 1's
        float path, ``Unsupported dtype torch.float32 for PAD``.
        Becomes: 1.5.1's ``__init__``; then, when ``tosa_spec.support_float()`` is false,
        ``grid_sampler_2d`` taken out of the custom partition ops again (the patch does not
        register it there): the op stays outside the delegate, as the TOSA partitioner leaves
        it, and the rest is delegated. A later explicit ``register_custom_partition_op``
        still registers it.
        """
        original(self, *args, **kwargs)
        if not self.tosa_spec.support_float():
            self._custom_partition_ops.discard(grid_sampler)

    return __init__


@case(
    "grid_warp_int8_vgf_int",
    "TOSA-1.0+INT",
    "a8w8",
    fast=True,
    note="the grid warp (conv -> tanh -> permute -> grid_sample), a8w8 for VGF on an"
    " integer-only spec",
    targets_vgf=True,
    model="`grid_sample(x, tanh(conv(x)).permute(0, 2, 3, 1))`, x 1x3x8x8",
)
def grid_warp() -> tuple[Any, tuple[Any, ...]]:
    """Build case ``grid_warp_int8_vgf_int``: conv -> tanh -> permute -> grid_sample."""
    import torch

    class GridWarp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

        def forward(self, x: Any) -> Any:
            grid = torch.tanh(self.conv(x)).permute(0, 2, 3, 1)
            return torch.nn.functional.grid_sample(x, grid, align_corners=False)

    return GridWarp(), (torch.rand(1, 3, 8, 8),)


@case(
    "flow_offset_warp_snorm_vgf_int",
    "TOSA-1.0+INT",
    "a8w8_snorm",
    fast=True,
    note="upstream's FlowOffsetSamplerChain (relu -> flow-offset grid_sample -> relu), VGF SNORM"
    " on an integer-only spec",
    targets_vgf=True,
    expect_broken="get_vgf_snorm_quantization_config is new in executorch 1.5",
    broken_releases="<1.5",
    model="`relu(grid_sample(relu(x), (base + flow[:, :2]).permute(0, 2, 3, 1),"
    " padding_mode='border', align_corners=True))`, x and flow 1x4x8x12, base the cat of two"
    " linspace(-1, 1) (upstream's FlowOffsetSamplerChain)",
)
def flow_offset_warp() -> tuple[Any, tuple[Any, ...]]:
    """Build upstream's ``FlowOffsetSamplerChain`` (the canonical pattern of
    ``FuseGridSamplerFlowOffsetPass``; bilinear, border, align_corners) with its test's inputs."""
    import torch

    class FlowOffsetSamplerChain(torch.nn.Module):
        def forward(self, image: Any, flow: Any) -> Any:
            image = torch.relu(image)
            height, width = image.shape[-2:]
            horizontal = torch.linspace(-1.0, 1.0, width, dtype=image.dtype)
            vertical = torch.linspace(-1.0, 1.0, height, dtype=image.dtype)
            base_grid = torch.cat(
                (
                    horizontal.view(1, 1, 1, width).expand(1, -1, height, -1),
                    vertical.view(1, 1, height, 1).expand(1, -1, -1, width),
                ),
                dim=1,
            )
            grid = (base_grid + flow[:, :2]).permute(0, 2, 3, 1)
            sampled = torch.nn.functional.grid_sample(
                image, grid, mode="bilinear", padding_mode="border", align_corners=True
            )
            return torch.relu(sampled)

    generator = torch.Generator().manual_seed(0)
    image = torch.randn(1, 4, 8, 12, generator=generator)
    flow = torch.randn(1, 4, 8, 12, generator=generator) * 0.01
    return FlowOffsetSamplerChain(), (image, flow)


FIX = Fix(
    number=7,
    title="VGF partitions grid_sample only where the TOSA spec has FP",
    repo_paths=(PARTITIONER, "backends/arm/test/misc/test_multiple_delegates.py"),
    runtime={
        "1.5.1": partition_grid_sampler_only_with_fp,
    },
    claims={
        "1.5.1": Effect.FIXED.triggers(
            grid_warp_int8_vgf_int="VGF a8w8 conv -> tanh -> permute -> grid_sample on"
            " TOSA-1.0+INT: stock partitions the sampler and its int8 shader's FP32 grid scale"
            " cannot be lowered; with the fix grid_sample runs on the CPU",
            flow_offset_warp_snorm_vgf_int="upstream's FlowOffsetSamplerChain, VGF SNORM on"
            " TOSA-1.0+INT: stock's flow-offset fusion does not match the exported pattern and"
            " the plain rewrite raises (an int8 sampler needs an int8 grid); with the fix"
            " grid_sample runs on the CPU",
            zoo_grid_warp_int8="the zoo grid warp, a8w8 on TOSA-1.0+INT: the same FP32 grid scale",
            zoo_grid_warp_a16w8_int16="the zoo grid warp, a16w8 on TOSA-1.0+INT+int16: stock's"
            " float shader path needs a float MUL the spec lacks",
        ),
    },
    cases=(grid_warp, flow_offset_warp),
    upstream=UpstreamNote(
        narrowing=(
            "VgfPartitioner registers grid_sampler_2d unconditionally since the VGF grid"
            " sampler landed; the FP32 inputs of the rewrite's shaders make every"
            " integer-only VGF lowering of an exported grid_sample fail (the fused"
            " flow-offset shader needs none, but its matcher does not reach an exported"
            " model). The patch registers it in __init__ only when the spec supports FP;"
            " register_custom_partition_op and its docs stay as they are."
        ),
        affected_tests=(
            "backends/arm/test/misc/test_multiple_delegates.py",
            "backends/arm/test/ops/test_grid_sampler.py",
            "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
            "backends/arm/test/ops/test_custom_shader_lowering.py",
        ),
        reproducer="""\
import torch
from executorch.backends.arm.quantizer import (
    VgfQuantizer,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class Sample(torch.nn.Module):
    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.grid_sample(x, grid, align_corners=False)


inputs = (torch.rand(1, 3, 8, 8), torch.rand(1, 8, 8, 2) * 2 - 1)
quantizer = VgfQuantizer(VgfCompileSpec("TOSA-1.0+INT"))
quantizer.set_global(get_symmetric_quantization_config())
prepared = prepare_pt2e(torch.export.export(Sample(), inputs).module(), quantizer)
prepared(*inputs)
program = torch.export.export(convert_pt2e(prepared), inputs)
# main, 1.5.1: ValueError: TOSA-1.0+INT doesn't support tensor TosaArg(... grid_scale, dtype=FP32)
to_edge_transform_and_lower(
    program, partitioner=[VgfPartitioner(VgfCompileSpec("TOSA-1.0+INT"))]
)
""",
        symptom="quantized grid_sample fails to lower for VGF on an integer-only TOSA spec",
        regressed_by=(
            # registered grid_sampler_2d as a VGF custom partition op on every spec; before
            # it grid_sample stayed on the CPU for an integer-only spec (right on 1.2.0)
            PullRequest(19547, "Arm backend: Lower grid_sampler_2d to VGF TOSA CUSTOM", "bdemirb"),
        ),
        related=(
            # the int8 image path, whose FP32 grid scale an integer-only spec cannot carry
            PullRequest(
                20329, "Arm backend: Support sampler-backed VGF grid_sample for RIFE", "bdemirb"
            ),
            # the fused flow-offset shader, which takes no FP32 tensor but no export reaches
            PullRequest(
                21775, "Arm backend: Fuse canonical flow-offset grid sampling", "YufengShi-dudu"
            ),
        ),
    ),
)
