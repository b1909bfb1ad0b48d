"""The equivalence corpus as torch-free tables: what the controller selects, workers run.

Every case is built under :data:`SEED`, so every path lowers bit-identical weights and inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from overlay import fixes
from overlay.errors import EquivalenceInputError
from overlay.fixes.model import Case
from overlay.items import CaseInfo, ProbeInfo

SEED = 20261202
# The grid-warp family: every grid_sample mode x padding the VGF shader lowers, on both
# int16 specs (on TOSA-1.0+INT+int16 the sampler stays on the CPU, fix 7).
GRID_WARP_MODES = tuple(
    itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"))
)
# the grid warps in upstream's words (PR texts name the model, never the case)
GRID_FROM_CONV = "`grid_sample(x, tanh(conv(x)).permute(0, 2, 3, 1))`, x 1x3x8x8"
ZOO_GRID_WARP = (
    "`grid_sample(x, base + 0.25 * tanh(conv(relu(conv(x)))).permute(0, 2, 3, 1),"
    " align_corners=True)`, x 1x3x16x16, base the 16x16 identity grid (meshgrid of linspace(-1, 1))"
)
POOL_ZERO_POINT = (
    "upstream: 1.5.1 hands TOSA AVG_POOL2D zero points quantised as if they were values"
    " (10 where the tensor's is 5), so a window mean at a tie rounds in the wrong frame: one"
    " step off the exact reference (docs/notes/findings.md); 1.2.0 is right"
)
GROUPS = ("core", "zoo")
# the cases the fixes bring (each built by its fix module), by name
FIX_CASES: dict[str, Case] = {case.info.name: case for fix in fixes.FIXES for case in fix.cases}
CASES: tuple[CaseInfo, ...] = (
    CaseInfo("conv_relu_int8", "TOSA-1.0+INT", "a8w8", fast=True),
    CaseInfo("depthwise_conv_int8", "TOSA-1.0+INT", "a8w8"),
    CaseInfo("linear_int8", "TOSA-1.0+INT", "a8w8"),
    CaseInfo("transposed_conv_int8", "TOSA-1.0+INT", "a8w8"),
    CaseInfo(
        "grouped_transposed_conv_int8",
        "TOSA-1.0+INT",
        "a8w8",
        per_channel=False,
        note="1.2.0 rejects grouped transposed conv with per-channel weights; per-tensor here",
    ),
    CaseInfo("grouped_transposed_conv_fp", "TOSA-1.0+FP", None, fast=True),
    CaseInfo("add_cat_mean_int8", "TOSA-1.0+INT", "a8w8"),
    CaseInfo(
        "avg_pool_ties_int8",
        "TOSA-1.0+INT",
        "a8w8",
        note="a 2x2 average pool over ties, zero point 5: the exact reference's rounding",
        expect_broken=POOL_ZERO_POINT,
        broken_releases="==1.5.1",
    ),
    CaseInfo("conv_relu_fp", "TOSA-1.0+FP", None),
    CaseInfo("add_cat_mean_fp", "TOSA-1.0+FP", None),
    CaseInfo("conv_relu_int8_intfp", "TOSA-1.0+INT+FP", "a8w8"),
    CaseInfo("conv_a16w8_intfp16", "TOSA-1.0+INT+FP+int16", "a16w8"),
    CaseInfo("linear_a16w8_intfp16", "TOSA-1.0+INT+FP+int16", "a16w8"),
    CaseInfo(
        "int16_quantize_output",
        "TOSA-1.0+INT+FP+int16",
        None,
        fast=True,
        note="module is pre-quantised (a16w8 PT2E) and returns int16; quantize=None",
    ),
    CaseInfo("conv_a16w8_int16", "TOSA-1.0+INT+int16", "a16w8", fast=True),
    CaseInfo(
        "grid_warp_a16w8_vgf",
        "TOSA-1.0+INT+FP+int16",
        "a16w8",
        fast=True,
        note="VGF-quantised conv -> tanh -> permute -> grid_sample: an int16 grid",
        targets_vgf=True,
        model=GRID_FROM_CONV,
    ),
    CaseInfo(
        "grid_sample_reflection_align_corners_fp",
        "TOSA-1.0+FP",
        None,
        note="bilinear grid_sample, reflection padding, align_corners=True, on a grid past"
        " every edge",
        targets_vgf=True,
        expect_broken="upstream: VGF's mirrored address mode reflects about the image edges,"
        " PyTorch (align_corners=True) about the corner texel centres: every sample outside"
        " the image reads another texel on executed VGF (docs/notes/findings.md)",
        broken_releases="==1.5.1",
    ),
    CaseInfo(
        "grid_sample_two_channels_fp",
        "TOSA-1.0+FP",
        None,
        note="bilinear grid_sample of a 1x2x6x6 image: VGF's generic shader",
        targets_vgf=True,
        expect_broken="upstream: a grid_sample the sampler shaders do not take (C not 3 or"
        " 4, N > 1, bicubic) gets grid_sampler.glsl, which writes 0.0 to every output, and"
        " VgfPartitioner still delegates it: all zeros on executed VGF"
        " (docs/notes/findings.md)",
        broken_releases="==1.5.1",
    ),
    *(case.info for case in FIX_CASES.values()),
    *(
        CaseInfo(
            f"grid_warp_{mode}_{padding}_a16w8_{variant}",
            spec,
            "a16w8",
            note=f"32x32 base grid + conv -> tanh offsets, grid_sample {mode}/{padding}",
            targets_vgf=True,
        )
        for mode, padding in GRID_WARP_MODES
        for variant, spec in (("int16", "TOSA-1.0+INT+int16"), ("intfp16", "TOSA-1.0+INT+FP+int16"))
    ),
)


# --- the zoo: real network shapes (corpus/zoo.py), `--group zoo`; deep int8 nets are judged
# by SQNR with a loose max-error guard, float variants by the float default.
ZOO_INT8_SQNR_DB = 20.0
ZOO_INT8_TOLERANCE = 0.25
ZOO_TIMEOUT_S = 1800.0  # per path: TOSA + VGF (lowered and run) + Ethos-U55/U85 lowering


def _zoo(
    network: str, variant: str, spec: str, quantize: str | None, **more: Any
) -> tuple[str, CaseInfo]:
    """Return (the network's builder in corpus.zoo, the case); ``more``: CaseInfo fields."""
    # the pre-quantised grid networks are built for their spec: one builder per variant
    builder = f"{network}_{variant}" if network == "grid_warp_int16_grid" else network
    deep_int = quantize is not None
    return builder, CaseInfo(
        f"zoo_{network}_{variant}",
        spec,
        quantize,
        tolerance=ZOO_INT8_TOLERANCE if deep_int else None,
        sqnr_db=ZOO_INT8_SQNR_DB if deep_int else None,
        group="zoo",
        **{"timeout": ZOO_TIMEOUT_S, **more},
    )


_ZOO: tuple[tuple[str, CaseInfo], ...] = (
    *(
        case
        for network in (
            "mobilenet_v2",
            "mobilenet_v3_small",
            "resnet18",
            "efficientnet_b0",
            "deit_tiny",
            "lstm",
            "unet",
        )
        for case in (
            _zoo(network, "int8", "TOSA-1.0+INT", "a8w8", ethos_u=True),
            _zoo(network, "fp", "TOSA-1.0+FP", None),
        )
    ),
    _zoo(
        "grid_warp",
        "a16w8_intfp16",
        "TOSA-1.0+INT+FP+int16",
        "a16w8",
        note="a conv branch makes int16 grid positions that feed grid_sample (VGF)",
        model=ZOO_GRID_WARP,
    ),
    _zoo(
        "grid_warp",
        "a16w8_int16",
        "TOSA-1.0+INT+int16",
        "a16w8",
        ethos_u=True,
        model=ZOO_GRID_WARP,
    ),
    *(
        _zoo(
            "grid_warp_int16_grid",
            variant,
            spec,
            None,
            fast=variant == "intfp16",
            note="pre-quantised a16w8; the int16 grid positions are the graph output (seed)",
        )
        for variant, spec in (("intfp16", "TOSA-1.0+INT+FP+int16"), ("int16", "TOSA-1.0+INT+int16"))
    ),
    # TOSA only, so that three paths fit 600 s (docs/equivalence.md, "The zoo")
    _zoo(
        "gru_kws",
        "int8",
        "TOSA-1.0+INT",
        "a8w8",
        note="49 MFCC frames x 10, nn.GRU hidden 64, linear to 12 classes (Ethos-U model zoo)",
        vgf=False,
        timeout=600.0,
    ),
    _zoo("grid_warp", "int8", "TOSA-1.0+INT", "a8w8", model=ZOO_GRID_WARP),
    _zoo("grid_warp", "fp", "TOSA-1.0+FP", None, model=ZOO_GRID_WARP),
    _zoo(
        "mobilenet_v2_full",
        "int8",
        "TOSA-1.0+INT",
        "a8w8",
        note="full width, BatchNorm statistics from seeded noise, 64x64: the fake-quantised"
        " model is ~6% of the range off the integer program, the exact reference 0 steps",
    ),
)
ZOO_CASES: tuple[CaseInfo, ...] = tuple(case for _, case in _ZOO)
ZOO_NETWORKS: dict[str, str] = {case.name: builder for builder, case in _ZOO}  # -> zoo builder
ALL_CASES: tuple[CaseInfo, ...] = CASES + ZOO_CASES

# --- bystanders: models outside every fix's bug, whose TOSA operators the upstream export
# compares stock vs each patch (docs/upstream.md); outside ALL_CASES, never selected here.
BYSTANDER = "bystander"
_TOSA_Q, _VGF_Q = "TOSAQuantizer, get_symmetric", "VgfQuantizer, get_symmetric"
_CONV2 = "conv -> conv (no activation)"
_GRID = "conv -> tanh -> permute -> grid_sample"
BYSTANDERS: tuple[CaseInfo, ...] = tuple(
    # a name ending in _vgf lowers for VGF too
    CaseInfo(
        f"bystander_{name}", spec, q, group=BYSTANDER, targets_vgf=name.endswith("_vgf"), note=n
    )
    for name, spec, q, n in (
        ("conv_conv_int8", "TOSA-1.0+INT", "a8w8", f"{_CONV2}, {_TOSA_Q}_quantization_config()"),
        (
            "conv_relu_int8",
            "TOSA-1.0+INT",
            "a8w8",
            f"conv -> ReLU (fused, zero point -128), {_TOSA_Q}_quantization_config()",
        ),
        (
            "conv_conv_snorm_vgf",
            "TOSA-1.0+INT",
            "a8w8_snorm",
            f"{_CONV2}, VgfQuantizer, get_vgf_snorm_quantization_config()",
        ),
        (
            "linear_linear_int8",
            "TOSA-1.0+INT",
            "a8w8",
            f"linear -> linear (no activation), {_TOSA_Q}_quantization_config()",
        ),
        (
            "conv_conv_a16w8_int16",
            "TOSA-1.0+INT+int16",
            "a16w8",
            f"{_CONV2}, {_TOSA_Q}_a16w8_quantization_config()",
        ),
        ("conv_conv_fp", "TOSA-1.0+FP", None, f"{_CONV2}, float"),
        ("grid_sample_fp_vgf", "TOSA-1.0+FP", None, f"{_GRID}, float, VgfPartitioner"),
        (
            "grid_sample_int8_vgf",
            "TOSA-1.0+INT+FP",
            "a8w8",
            f"{_GRID}, {_VGF_Q}_quantization_config()",
        ),
    )
)

# --- the probes: each fix's, from its module -------------------------------------------

PROBES: tuple[ProbeInfo, ...] = tuple(
    ProbeInfo(probe.name, probe.description, fix.number)
    for fix in fixes.FIXES
    for probe in fix.probes
)
PROBE_RUNS: dict[str, Callable[[], Any]] = {
    probe.name: probe.run for fix in fixes.FIXES for probe in fix.probes
}


def info(name: str) -> CaseInfo:
    """Return the corpus entry ``name`` (a bystander too)."""
    for case in (*ALL_CASES, *BYSTANDERS):
        if case.name == name:
            return case
    raise EquivalenceInputError(
        f"no corpus case {name!r}",
        expected=", ".join(c.name for c in (*ALL_CASES, *BYSTANDERS)),
        found=name,
        hint="list the corpus with `executorch-arm-overlay equivalence --list`",
    )
