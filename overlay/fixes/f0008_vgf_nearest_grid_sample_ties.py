# mypy: allow-subclassing-any
"""Fix 8: VGF nearest grid_sample reads PyTorch's texel at ties (docs/fixes.md, "Fix 8")."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from overlay import lines
from overlay._cache import cache_dir
from overlay._files import write_text_atomic
from overlay.errors import RuntimePatchError
from overlay.fixes.model import Case, Effect, Fix, PullRequest, UpstreamNote, case, runtime_form
from overlay.lines.listing import read_series_names, read_text

NUMBER = 8
SHADERS = "backends/arm/vgf/shaders"
SHADER_FILE = f"{SHADERS}/grid_sampler.py"
TEST_FILE = "backends/arm/test/misc/test_custom_shader_payload.py"
GRID_SAMPLER_TESTS = "backends/arm/test/ops/test_grid_sampler.py"
# the nearest variants: (int8, align_corners) -> the shader's file stem
NEAREST = {
    (int8, corners): "grid_sampler_sampler"
    + ("_int8" if int8 else "")
    + "_nearest"
    + ("_align_corners" if corners else "")
    for int8 in (False, True)
    for corners in (False, True)
}
BINARY = ".spirv.b64"
_HUNK = re.compile(r"^@@ -0,0 \+1(?:,(\d+))? @@")


def created_text(patch: str, repo_path: str) -> str:
    """Return the text a patch creates at ``repo_path``: its ``--- /dev/null`` hunk's lines.

    Read by hand: the runtime form runs in a worker's environment, without unidiff.

    Example: ``--- /dev/null``, ``+++ b/s.glsl``, ``@@ -0,0 +1,2 @@``, ``+a``, ``+b``.
    Becomes: ``"a\\nb\\n"`` (without the last newline where ``\\ No newline`` follows).
    """
    rows = patch.split("\n")
    at = rows.index(f"+++ b/{repo_path}") + 1
    match = _HUNK.match(rows[at]) if rows[at - 2] == "--- /dev/null" else None
    if match is None:
        raise RuntimePatchError(
            f"fix {NUMBER}'s patch does not create {repo_path}",
            expected=f"'--- /dev/null', '+++ b/{repo_path}', then one '@@ -0,0 +1,N @@' hunk",
            found=rows[at],
            hint="regenerate the line's patch (`executorch-arm-overlay regenerate`)",
        )
    count = int(match.group(1) or 1)
    body = [row[1:] + "\n" for row in rows[at + 1 : at + 1 + count]]
    if rows[at + 1 + count].startswith("\\ No newline"):
        body[-1] = body[-1][:-1]
    return "".join(body)


def _shipped_shaders() -> dict[str, Path]:
    """Return the nearest shaders' SPIR-V files as the patch of the installed executorch's line
    creates them, by stem.

    Kept in the overlay cache under their content's sha256 (written once, atomically):
    the runtime form never writes into the installed package.
    """
    root = lines.default_root()
    if not lines.is_series_folder(root):
        root = lines.line_for_version(root, importlib.metadata.version("executorch")).directory
    name = next(n for n in read_series_names(root) if n.startswith(f"{NUMBER:04d}-"))
    patch = read_text(root / name)
    folder = cache_dir() / "runtime" / f"fix-{NUMBER}"
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    for stem in NEAREST.values():
        text = created_text(patch, f"{SHADERS}/{stem}{BINARY}")
        path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}-{stem}{BINARY}"
        if not path.is_file():
            write_text_atomic(path, text)
        found[stem] = path
    return found


@runtime_form(SHADER_FILE, "", "_sampler_shader_file")
def sample_nearest_at_pytorchs_texel(module: Any, original: Any) -> Any:
    """Build 1.5.1's replacement of ``_sampler_shader_file`` (the shaders: the line's patch)."""
    shaders = _shipped_shaders()
    int8_format = module.GRID_SAMPLER_2D_SAMPLER_INT8_VK_FORMAT

    def _sampler_shader_file(
        sampler_vk_format: str | None, align_corners: bool, interpolation_mode: Any = None
    ) -> str:
        """Pick the shader that samples PyTorch's nearest texel for nearest sampling.

        Example: ``build_grid_sampler_2d_payload(interpolation_mode=1, ...)`` for a 1x4xHxW
        float image: 1.5.1 picks ``grid_sampler_sampler.spirv.b64``, whose sampler nearest
        filter reads texel ``floor(x + 0.5)``, so a grid point exactly between two texels
        takes the upper one where PyTorch rounds half to even.
        Becomes: the path of ``grid_sampler_sampler_nearest.spirv.b64`` as the line's patch
        creates it (``_int8`` for an int8 image, ``_align_corners`` when set), which the
        payload builder reads as it reads its own shaders; that shader picks PyTorch's
        texel and samples its centre. Any other mode: 1.5.1's choice. 1.5.1's payload
        builder passes no mode (the patch adds the argument) and is bound by name in the
        rewrite pass, so the mode is read from its call.
        """
        if interpolation_mode is None:
            interpolation_mode = sys._getframe(1).f_locals.get("interpolation_mode", 0)
        if int(interpolation_mode) != 1:
            return str(original(sampler_vk_format, align_corners=align_corners))
        stem = NEAREST[(sampler_vk_format == int8_format, bool(align_corners))]
        return str(shaders[stem])

    return _sampler_shader_file


def _image(size: int) -> Any:
    """A 1x4xHxW image whose neighbouring texels differ (1 to 4), so a texel off shows."""
    import torch

    rows, cols = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    plane = 1.0 + (cols % 2) + 2.0 * (rows % 2)
    return plane.expand(1, 4, size, size).clone()


def _sample(padding: str, align_corners: bool) -> Any:
    """Return the reproducer's module: ``F.grid_sample(x, grid, mode="nearest")``."""
    import torch

    class Sample(torch.nn.Module):
        def forward(self, x: Any, grid: Any) -> Any:
            return torch.nn.functional.grid_sample(
                x, grid, mode="nearest", padding_mode=padding, align_corners=align_corners
            )

    return Sample()


def _ties_grid(align_corners: bool, size: int) -> Any:
    """A grid on exact ties, in and outside the image, and beside a texel centre.

    Row 0 ties in x on a texel-centre row, row 1 in x and y. With align_corners the
    image is 9 wide, so that the ties are exact in float (W - 1 = 8).
    """
    import torch

    ix = torch.tensor([-9.5, -8.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 6.5, 7.5, 8.5, 15.5, 2.25])
    if align_corners:
        gx, gy = 2 * ix / (size - 1) - 1, 2 * 3 / (size - 1) - 1
    else:
        gx, gy = (2 * ix + 1) / size - 1, 7 / size - 1
    grid = torch.full((1, 2, len(ix), 2), gy)
    grid[0, :, :, 0] = gx
    grid[0, 1, :, 1] = gx
    return grid


def nearest_downsample_2x() -> tuple[Any, tuple[Any, ...]]:
    """Build a 2x nearest downsampling: the identity grid of half the image's size.

    Every output is a tie in x and y (x = 2j + 0.5): PyTorch reads the even texels, stock's
    sampler nearest filter the odd ones.
    """
    import torch

    identity = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    grid = torch.nn.functional.affine_grid(identity, [1, 4, 4, 4], align_corners=False)
    return _sample("zeros", False), (_image(8), grid)


def nearest_ties_int8(padding: str, align_corners: bool = False) -> Callable[[], Any]:
    """Return the builder of an int8 nearest case: a8w8 for VGF, grid scale 2^-6, ``padding``.

    Pre-quantised (the case's quantize is None): VgfQuantizer's PT2E graph for
    TOSA-1.0+INT+FP, the grid's quantize/dequantize then set to scale 2^-6 (a fixed-point
    grid, as a flow network's), so that int8 grid values land on exact ties, in and outside
    the image (every 16th without align_corners on an 8-wide image; every 4th of the grid's
    with align_corners on a 9-wide one, W - 1 = 8); the int8 sampler shader runs.
    """

    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        from executorch.backends.arm.quantizer import (
            VgfQuantizer,
            get_symmetric_quantization_config,
        )
        from executorch.backends.arm.vgf import VgfCompileSpec
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        grid = torch.arange(-128, 128, 4, dtype=torch.float32).reshape(1, 4, 8, 2) / 64
        inputs = ((_image(9 if align_corners else 8) - 2.5) / 5, grid)
        quantizer = VgfQuantizer(VgfCompileSpec("TOSA-1.0+INT+FP"))
        quantizer.set_global(get_symmetric_quantization_config())
        module = _sample(padding, align_corners)
        graph = torch.export.export(module, inputs).module(check_guards=False)
        prepared = prepare_pt2e(graph, quantizer)
        prepared(*inputs)
        converted = convert_pt2e(prepared)
        grid_input = next(
            n for n in converted.graph.nodes if n.op == "placeholder" and n.name == "grid"
        )
        # a line whose quantizer leaves grid_sample alone (1.2.0) has no grid quantize: float
        for quantize in [u for u in grid_input.users if ".quantize_per_tensor" in str(u.target)]:
            for node in (quantize, *(d for d in quantize.users if "dequantize" in str(d.target))):
                node.args = (node.args[0], 2.0**-6, *node.args[2:])
        converted.recompile()
        return converted, inputs

    return build


# a VGF case of this fix, fast, quantised by its builder or not at all
_case = partial(case, quantize=None, fast=True, targets_vgf=True)


def _ties_case(padding: str, align_corners: bool = False, *, int8: bool = False) -> Case:
    """A case of the reproducer's ties with ``padding``: float, or int8 (the int8 shader)."""
    corners = ", align_corners=True" if align_corners else ""
    ties = f"`F.grid_sample(x, grid, mode='nearest', padding_mode='{padding}'{corners})`"
    name = f"grid_sample_nearest_{padding}{'_align_corners' if align_corners else ''}"
    image = "x 1x4x9x9" if align_corners else "x 1x4x8x8"
    if int8:
        shader = "align_corners sampler shader" if align_corners else "sampler shader"
        return _case(
            f"{name}_int8_intfp",
            "TOSA-1.0+INT+FP",
            note="the reproducer a8w8 for VGF (pre-quantised, grid scale 2^-6): the int8"
            f" {shader}, {padding} padding",
            model=f"{ties}, {image}, grid 1x4x8x2, quantised by `VgfQuantizer` with"
            " `get_symmetric_quantization_config()`, the grid's q/dq then set to scale 2^-6",
        )(nearest_ties_int8(padding, align_corners))

    def build() -> tuple[Any, tuple[Any, ...]]:  # float: the reproducer's ties
        size = 9 if align_corners else 8
        return _sample(padding, align_corners), (_image(size), _ties_grid(align_corners, size))

    return _case(
        f"{name}_fp",
        "TOSA-1.0+FP",
        note="F.grid_sample(mode='nearest') of a 1x4 image on a grid of exact ties in and outside"
        f" the image (the reproducer), float, {padding} padding{corners}",
        model=f"{ties}, {image}, grid 1x2x14x2 on exact ties"
        + ("" if align_corners else " in and outside the image"),
    )(build)


CASES = (
    *(_ties_case(padding) for padding in ("zeros", "border", "reflection")),
    _ties_case("border", align_corners=True),
    _ties_case("zeros", align_corners=True),
    _case(
        "grid_sample_nearest_downsample_2x_fp",
        "TOSA-1.0+FP",
        note="2x nearest downsampling (the identity grid of half the size), float: every output"
        " a tie",
        model="`F.grid_sample(x, F.affine_grid(identity, [1, 4, 4, 4]), mode='nearest')`,"
        " x 1x4x8x8 (2x downsampling: every output on a tie)",
    )(nearest_downsample_2x),
    _ties_case("reflection", int8=True),
    _ties_case("zeros", align_corners=True, int8=True),
)

WHY = (
    "stock's sampler nearest filter reads texel floor(x + 0.5): each exact tie of the grid"
    " takes the upper texel where PyTorch rounds half to even"
)

FIX = Fix(
    number=NUMBER,
    title="VGF nearest grid_sample reads PyTorch's texel at ties (round half to even)",
    repo_paths=(
        SHADER_FILE,
        TEST_FILE,
        GRID_SAMPLER_TESTS,
        *(f"{SHADERS}/{stem}{suffix}" for stem in NEAREST.values() for suffix in (".glsl", BINARY)),
    ),
    runtime={
        "1.5.1": sample_nearest_at_pytorchs_texel,
    },
    claims={
        "1.5.1": Effect.FIXED.triggers(
            **{
                f"grid_sample_nearest_{padding}_fp": f"{WHY} ({padding})"
                for padding in ("zeros", "border", "reflection")
            },
            grid_sample_nearest_border_align_corners_fp=f"{WHY}, with align_corners=True as well",
            grid_sample_nearest_downsample_2x_fp=f"{WHY}: 2x downsampling reads the odd texels,"
            " PyTorch the even ones",
            grid_sample_nearest_reflection_int8_intfp=f"the int8 sampler shader: {WHY}",
            grid_sample_nearest_zeros_align_corners_fp=f"{WHY}, with align_corners=True and zeros"
            " padding",
            grid_sample_nearest_zeros_align_corners_int8_intfp=f"the int8 align_corners sampler"
            f" shader: {WHY}",
        ),
    },
    cases=CASES,
    upstream=UpstreamNote(
        symptom="VGF nearest grid_sample takes the upper texel on ties; PyTorch rounds half"
        " to even",
        related=(
            # the sampler-backed path, which maps mode="nearest" to VK_FILTER_NEAREST
            PullRequest(
                20329, "Arm backend: Support sampler-backed VGF grid_sample for RIFE", "bdemirb"
            ),
            # the last change to the shader selection this fix extends (grid_sampler.py)
            PullRequest(
                21775, "Arm backend: Fuse canonical flow-offset grid sampling", "YufengShi-dudu"
            ),
        ),
        narrowing=(
            "The nearest variants are new files: grid_sampler_sampler[_int8]_nearest"
            "[_align_corners].glsl and their .spirv.b64, built by"
            " generate_grid_sampler_spirv.py with shaderc v2026.3's glslc (SPIR-V 1.0; it"
            " gives the SPIR-V of the directory's five shaders byte for byte). Reflection with"
            " align_corners=True stays wrong for both filters (the mirrored address mode"
            " reflects about the texel edges, PyTorch about the corner texel centres); it is"
            " not changed here."
        ),
        affected_tests=(
            TEST_FILE,
            "backends/arm/test/misc/test_custom_shader_payloads.py",
            GRID_SAMPLER_TESTS,
            "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
        ),
        reproducer="""\
import torch
import torch.nn.functional as F
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import to_edge_transform_and_lower


class Sample(torch.nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros",
                             align_corners=False)


W = 8
x = torch.arange(4 * W * W, dtype=torch.float32).reshape(1, 4, W, W)
ix = torch.tensor([-1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 6.5, 7.5, 8.5, 2.25])
grid = torch.zeros(1, 1, len(ix), 2)
grid[0, 0, :, 0] = (2 * ix + 1) / W - 1  # unnormalised x = ix
grid[0, 0, :, 1] = 7 / W - 1  # row 3, a texel centre
program = torch.export.export(Sample(), (x, grid))
edge = to_edge_transform_and_lower(
    program, partitioner=[VgfPartitioner(VgfCompileSpec("TOSA-1.0+FP"))]
)
# Lowering succeeds either way; run the program on a Vulkan runtime (VgfPipeline
# after backends/arm/test/setup_testing_vkml.sh, or the .vgf with the ML SDK
# scenario runner over the ML emulation layer): row 3 of channel 0 reads columns
# -, 0, 1, 2, 3, 4, 7, -, -, 2; PyTorch reads -, 0, 0, 2, 2, 4, 6, -, -, 2
# (-: zero padding). Or: pytest -c backends/arm/test/pytest.ini
# backends/arm/test/ops/test_grid_sampler.py -k nearest_ties (with a runtime).
""",
    ),
)
