# mypy: allow-subclassing-any
"""Models the equivalence corpus does not hold: a team's own ``--models`` file, as a test.

Names the corpus never used, several sizes; a16w8 on the integer-only and the FP int16
specs, grid warps (a conv branch makes the positions ``grid_sample`` reads), conv chains,
an int8 chain also compiled for Ethos-U and a float warp. ``tests/test_hidden_models.py``
runs it with the line's runtime forms and with a seed-shaped runtime patch as path (b) and
checks each verdict against what the fixes' mechanisms predict; by hand:
``nox -s equivalence -- --line 1.2.0 --models tests/hidden_models.py --runtime-patch
SEED.py:apply_arm_backend_monkey_patch``.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch spelling


class ConvChain(torch.nn.Module):
    """``depth`` 3x3 convs with ReLUs between them; ``widths`` its channels, first is input."""

    def __init__(self, widths: tuple[int, ...]) -> None:
        super().__init__()
        pairs = itertools.pairwise(widths)
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(a, b, 3, padding=1) for a, b in pairs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, conv in enumerate(self.convs):
            x = conv(x)
            if index < len(self.convs) - 1:
                x = torch.relu(x)
        return x


class Warp(torch.nn.Module):
    """Offsets from a conv branch, squashed to [-1, 1], warp the image with ``grid_sample``."""

    def __init__(self, channels: int, squash: str, mode: str, padding: str) -> None:
        super().__init__()
        self.offsets = torch.nn.Conv2d(channels, 2, 3, padding=1)
        self.squash, self.mode, self.padding = squash, mode, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offsets = self.offsets(x)
        grid = torch.tanh(offsets) if self.squash == "tanh" else F.hardtanh(offsets)
        return F.grid_sample(
            x,
            grid.permute(0, 2, 3, 1),
            mode=self.mode,
            padding_mode=self.padding,
            align_corners=False,
        )


def _image(channels: int, size: int) -> tuple[torch.Tensor, ...]:
    return (torch.rand(1, channels, size, size),)


CASES = {
    "team_denoise_head_int16": {
        "module": lambda: ConvChain((4, 6)),
        "inputs": _image(4, 24),
        "spec": "TOSA-1.0+INT+int16",
        "quantize": "a16w8",
    },
    "team_feature_stack_int16": {
        "module": lambda: ConvChain((3, 8, 8, 4)),
        "inputs": _image(3, 16),
        "spec": "TOSA-1.0+INT+int16",
        "quantize": "a16w8",
    },
    "team_feature_stack_fp16": {
        "module": lambda: ConvChain((3, 8, 8, 4)),
        "inputs": _image(3, 16),
        "spec": "TOSA-1.0+INT+FP+int16",
        "quantize": "a16w8",
    },
    "team_flow_warp_int16": {
        "module": lambda: Warp(3, "clamp", "bilinear", "border"),
        "inputs": _image(3, 32),
        "spec": "TOSA-1.0+INT+int16",
        "quantize": "a16w8",
    },
    "team_flow_warp_fp16": {
        "module": lambda: Warp(3, "clamp", "bilinear", "border"),
        "inputs": _image(3, 20),
        "spec": "TOSA-1.0+INT+FP+int16",
        "quantize": "a16w8",
    },
    "team_tanh_warp_fp16": {
        "module": lambda: Warp(3, "tanh", "bilinear", "border"),
        "inputs": _image(3, 16),
        "spec": "TOSA-1.0+INT+FP+int16",
        "quantize": "a16w8",
    },
    "team_tanh_warp_int16": {
        "module": lambda: Warp(2, "tanh", "bilinear", "border"),
        "inputs": _image(2, 12),
        "spec": "TOSA-1.0+INT+int16",
        "quantize": "a16w8",
    },
    "team_backbone_int8": {
        "module": lambda: ConvChain((3, 16, 16, 8)),
        "inputs": _image(3, 20),
        "spec": "TOSA-1.0+INT",
        "quantize": "a8w8",
        "ethos_u": True,
    },
    "team_float_warp": {
        "module": lambda: Warp(3, "clamp", "bilinear", "border"),
        "inputs": _image(3, 16),
        "spec": "TOSA-1.0+FP",
        "quantize": None,
    },
}
