# mypy: allow-subclassing-any
"""The core corpus in torch: each case's module and inputs (worker side, imports torch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Builder = Callable[[], tuple[Any, tuple[Any, ...]]]


def image(*shape: int) -> Any:
    """Return a random input of ``shape`` (under the caller's seed)."""
    return torch.randn(*shape)


def identity_grid(size: int) -> Any:
    """Return the ``1 x size x size x 2`` grid_sample grid that samples every pixel as is."""
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    return torch.stack([xs, ys], dim=-1).unsqueeze(0)


class Conv(nn.Module):
    """A 3x3 conv to 8 channels from ``cin`` (``groups``: 8 is depthwise), then a ReLU."""

    def __init__(self, cin: int = 3, groups: int = 1, *, relu: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, 8, 3, padding=1, groups=groups)
        self.with_relu = relu

    def forward(self, x: Any) -> Any:
        y = self.conv(x)
        return torch.relu(y) if self.with_relu else y


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))


class Transposed(nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            4, 4, 3, stride=2, padding=1, output_padding=1, groups=groups
        )

    def forward(self, x: Any) -> Any:
        return self.conv(x)


class AddCatMean(nn.Module):
    def forward(self, x: Any, y: Any) -> Any:
        return torch.cat([x + y, x], dim=1).mean(dim=(2, 3), keepdim=True)


class ConvConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, padding=1)
        self.second = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: Any) -> Any:
        return self.second(self.first(x))


class LinearLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.second = nn.Linear(32, 8)

    def forward(self, x: Any) -> Any:
        return self.second(self.first(x))


class GridWarp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x: Any) -> Any:
        grid = torch.tanh(self.conv(x)).permute(0, 2, 3, 1)
        return torch.nn.functional.grid_sample(x, grid, align_corners=False)


class GridWarpOffsets(nn.Module):
    """A base grid plus conv -> tanh offsets, sampled with one grid_sample mode and padding.

    The offsets reach past the image edge, so every padding mode is used.
    """

    def __init__(self, mode: str, padding: str, size: int = 32) -> None:
        super().__init__()
        self.mode, self.padding = mode, padding
        self.offsets = nn.Conv2d(3, 2, 3, padding=1)
        self.register_buffer("base", identity_grid(size))

    def forward(self, x: Any) -> Any:
        grid = self.base + torch.tanh(self.offsets(x)).permute(0, 2, 3, 1) * 0.25
        return torch.nn.functional.grid_sample(
            x, grid, mode=self.mode, padding_mode=self.padding, align_corners=False
        )


class GridSample(nn.Module):
    """Bilinear ``grid_sample`` of an image and a grid (no weights)."""

    def __init__(self, padding: str = "zeros", align_corners: bool = False) -> None:
        super().__init__()
        self.padding, self.align_corners = padding, align_corners

    def forward(self, x: Any, grid: Any) -> Any:
        return torch.nn.functional.grid_sample(
            x, grid, padding_mode=self.padding, align_corners=self.align_corners
        )


def _two_channels() -> tuple[Any, tuple[Any, ...]]:
    """A 1x2x6x6 image (not 1x3/1x4xHxW: VGF's generic shader) and a grid inside it."""
    return GridSample(), (torch.rand(1, 2, 6, 6) + 0.5, torch.rand(1, 5, 5, 2) * 1.6 - 0.8)


def _reflect_aligned() -> tuple[Any, tuple[Any, ...]]:
    """A 1x4x9x9 image and a grid reaching past every edge (unnormalised -4 .. 12)."""
    xs = torch.linspace(-2.0, 2.0, 9)
    grid = torch.stack(torch.meshgrid(xs, xs, indexing="xy"), dim=-1).unsqueeze(0)
    return GridSample("reflection", align_corners=True), (torch.rand(1, 4, 9, 9), grid)


class AvgPool(nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.nn.functional.avg_pool2d(x, 2, 2)


def pool_ties() -> tuple[Any, tuple[Any, ...]]:
    """A 2x2 average pool over windows whose means are halves: the input spans [-133, 122]
    (int8 scale ~1, zero point 5), and two of its four windows average to 3.5 and 6."""
    rows = [[6, 6, -133, 122, 4, 4, 0, 0], [5, 5, 0, 0, 3, 3, 0, 1]]
    return AvgPool(), (torch.tensor(rows, dtype=torch.float32).reshape(1, 1, 2, 8),)


def int16_output_graph(
    model: Any, inputs: tuple[Any, ...], spec: str
) -> tuple[Any, tuple[Any, ...]]:
    """Quantise ``model`` a16w8 (PT2E) and drop its output dequantize: it returns int16.

    The graph then ends in the int16 quantize that fix 1 keeps explicit.
    """
    from executorch.backends.arm.quantizer import (
        TOSAQuantizer,
        get_symmetric_a16w8_quantization_config,
    )
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = TOSAQuantizer(TosaCompileSpec(spec))
    quantizer.set_global(get_symmetric_a16w8_quantization_config())
    graph = torch.export.export(model, inputs).module(check_guards=False)
    prepared = prepare_pt2e(graph, quantizer)
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    output = converted.graph.output_node()
    dequant = output.args[0][0]
    output.args = ((dequant.args[0],),)
    converted.graph.erase_node(dequant)
    converted.recompile()
    return converted, inputs


def _grid_warp(mode: str, padding: str) -> Builder:
    return lambda: (GridWarpOffsets(mode, padding), (torch.rand(1, 3, 32, 32),))


BUILDERS: dict[str, Builder] = {
    "conv_relu_int8": lambda: (Conv(), (image(1, 3, 16, 16),)),
    "depthwise_conv_int8": lambda: (Conv(8, groups=8), (image(1, 8, 12, 12),)),
    "linear_int8": lambda: (Linear(), (image(2, 16),)),
    "transposed_conv_int8": lambda: (Transposed(1), (image(1, 4, 6, 6),)),
    "grouped_transposed_conv_int8": lambda: (Transposed(2), (image(1, 4, 6, 6),)),
    "grouped_transposed_conv_fp": lambda: (Transposed(2), (image(1, 4, 6, 6),)),
    "add_cat_mean_int8": lambda: (AddCatMean(), (image(1, 4, 4, 4), image(1, 4, 4, 4))),
    "avg_pool_ties_int8": pool_ties,
    "conv_relu_fp": lambda: (Conv(), (image(1, 3, 16, 16),)),
    "add_cat_mean_fp": lambda: (AddCatMean(), (image(1, 4, 4, 4), image(1, 4, 4, 4))),
    "conv_relu_int8_intfp": lambda: (Conv(), (image(1, 3, 16, 16),)),
    "conv_a16w8_intfp16": lambda: (Conv(relu=False), (image(1, 3, 8, 8),)),
    "linear_a16w8_intfp16": lambda: (Linear(), (image(2, 16),)),
    "int16_quantize_output": lambda: int16_output_graph(
        Conv(relu=False).eval(), (image(1, 3, 8, 8),), "TOSA-1.0+INT+FP+int16"
    ),
    "conv_a16w8_int16": lambda: (Conv(relu=False), (image(1, 3, 8, 8),)),
    "grid_warp_a16w8_vgf": lambda: (GridWarp(), (torch.rand(1, 3, 8, 8),)),
    "grid_sample_reflection_align_corners_fp": _reflect_aligned,
    "grid_sample_two_channels_fp": _two_channels,
    "grid_warp_bilinear_zeros_a16w8_int16": _grid_warp("bilinear", "zeros"),
    "grid_warp_bilinear_zeros_a16w8_intfp16": _grid_warp("bilinear", "zeros"),
    "grid_warp_bilinear_border_a16w8_int16": _grid_warp("bilinear", "border"),
    "grid_warp_bilinear_border_a16w8_intfp16": _grid_warp("bilinear", "border"),
    "grid_warp_bilinear_reflection_a16w8_int16": _grid_warp("bilinear", "reflection"),
    "grid_warp_bilinear_reflection_a16w8_intfp16": _grid_warp("bilinear", "reflection"),
    "grid_warp_nearest_zeros_a16w8_int16": _grid_warp("nearest", "zeros"),
    "grid_warp_nearest_zeros_a16w8_intfp16": _grid_warp("nearest", "zeros"),
    "grid_warp_nearest_border_a16w8_int16": _grid_warp("nearest", "border"),
    "grid_warp_nearest_border_a16w8_intfp16": _grid_warp("nearest", "border"),
    "grid_warp_nearest_reflection_a16w8_int16": _grid_warp("nearest", "reflection"),
    "grid_warp_nearest_reflection_a16w8_intfp16": _grid_warp("nearest", "reflection"),
    # the bystanders (corpus.BYSTANDERS)
    "bystander_conv_conv_int8": lambda: (ConvConv(), (image(1, 3, 16, 16),)),
    "bystander_conv_relu_int8": lambda: (Conv(), (image(1, 3, 16, 16),)),
    "bystander_conv_conv_snorm_vgf": lambda: (ConvConv(), (image(1, 3, 16, 16),)),
    "bystander_linear_linear_int8": lambda: (LinearLinear(), (image(2, 16),)),
    "bystander_conv_conv_a16w8_int16": lambda: (ConvConv(), (image(1, 3, 16, 16),)),
    "bystander_conv_conv_fp": lambda: (ConvConv(), (image(1, 3, 16, 16),)),
    "bystander_grid_sample_fp_vgf": lambda: (GridWarp(), (torch.rand(1, 3, 8, 8),)),
    "bystander_grid_sample_int8_vgf": lambda: (GridWarp(), (torch.rand(1, 3, 8, 8),)),
}
