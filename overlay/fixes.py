"""The fix registry: one entry per fix, read by every layer that needs to know a fix.

A fix is identified by its number and its patch file; the entry says which files it
touches, how the runtime monkey-patch form replaces the function (``overlay.runtime``
builds it), which corpus cases trigger it and with what effect (the equivalence run checks
each claim), and what an upstream pull request needs (test file, reproducer, narrowing).
Pure data: no torch, no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from overlay.errors import OverlayError


class Effect(enum.StrEnum):
    """What a fix does to a trigger case, stock vs patched (an a-vs-b verdict)."""

    FIXED = "fixed"
    REGRESSION = "regression"
    CHANGED = "changed"


@dataclass(frozen=True)
class Trigger:
    """A corpus case that shows the fix: stock and patched differ there, as ``effect``.

    ``releases`` is a PEP 440 specifier of the executorch releases the claim is made for
    ("" for every release); a FIXED trigger is a *bug trigger*: stock fails it.
    """

    case: str
    effect: Effect
    why: str
    releases: str = ""

    def applies_to(self, version: str | None) -> bool:
        """Return True when the claim is made for executorch ``version`` (None: any)."""
        return release_matches(self.releases, version)


def release_matches(releases: str, version: str | None) -> bool:
    """Return True when ``version`` is in the PEP 440 specifier ``releases`` ("" or None: any)."""
    if version is None or not releases:
        return True
    try:
        public = Version(version).public
        return SpecifierSet(releases).contains(public, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


@dataclass(frozen=True)
class RuntimeHook:
    """Which attribute the runtime form replaces: ``owner`` is a class name, or "" (module)."""

    owner: str
    attribute: str
    builder: str  # name of the function in overlay.runtime that builds the replacement


@dataclass(frozen=True)
class UpstreamNote:
    """Where a fix's regression test belongs upstream and how to reproduce the bug."""

    test_file: str
    reproducer: str
    narrowing: str = ""  # how the upstream version differs from the overlay's patch
    affected_tests: tuple[str, ...] = ()  # upstream test files to run with the fix


@dataclass(frozen=True)
class Fix:
    """One fix of the series."""

    number: int
    patch: str  # file name in the series, e.g. 0001-keep-terminal-int16-quantize.patch
    title: str
    repo_paths: tuple[str, ...]
    runtime: RuntimeHook
    triggers: tuple[Trigger, ...]
    upstream: UpstreamNote

    @property
    def stem(self) -> str:
        """Return the patch name without ``.patch``."""
        return self.patch.removesuffix(".patch")


FIXES: tuple[Fix, ...] = (
    Fix(
        number=1,
        patch="0001-keep-terminal-int16-quantize.patch",
        title="keep terminal int16 quantize nodes unfolded",
        repo_paths=("backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py",),
        runtime=RuntimeHook(
            owner="FoldAndAnnotateQParamsPass",
            attribute="is_foldable",
            builder="keep_terminal_int16_quantize",
        ),
        triggers=(
            Trigger(
                "int16_quantize_output",
                Effect.CHANGED,
                "a16w8 conv whose graph ends in its int16 quantize (output dequantize removed):"
                " the quantize stays explicit, the TOSA payload changes, both outputs are right",
                releases="~=1.2.0",
            ),
            Trigger(
                "conv_a16w8_int16",
                Effect.REGRESSION,
                "ordinary a16w8 conv on an INT-only int16 spec",
                releases="~=1.2.0",
            ),
            Trigger(
                "grid_warp_a16w8_vgf",
                Effect.FIXED,
                "VGF a16w8 conv -> tanh -> permute -> grid_sample: stock leaves the int16 grid"
                " quantized and the grid-sampler rewrite refuses it; the 1.5.1 port dequantizes"
                " it in InsertGridSamplerGridDequantPass",
                releases="~=1.5.0",
            ),
            Trigger(
                "zoo_grid_warp_int16_grid_intfp16",
                Effect.CHANGED,
                "the seed's deployment: a conv branch's grid positions leave the graph as int16"
                " (INT+FP+int16): the quantize stays explicit, TOSA and VGF payloads change,"
                " the executed VGF and TOSA outputs are bit-identical to stock's",
                releases="~=1.2.0",
            ),
            Trigger(
                "zoo_grid_warp_int16_grid_int16",
                Effect.REGRESSION,
                "the same grid network on INT+int16: the kept quantize needs FP ops to lower",
                releases="~=1.2.0",
            ),
            Trigger(
                "zoo_grid_warp_a16w8_int16",
                Effect.REGRESSION,
                "a16w8 grid warp on INT+int16: stock lowers TOSA, VGF and Ethos-U55/U85; with"
                " the fix all of them fail (Ethos-U is an INT-only profile)",
                releases="~=1.2.0",
            ),
        ),
        upstream=UpstreamNote(
            test_file="backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
            narrowing=(
                "Of the 1.2.0 patch (keep terminal int16 quantizes unfolded) only the grid"
                " sampler branch still changes anything on 1.5.1: stock 1.5.1 already lowers an"
                " int16 quantize at a graph output. The port fixes that branch where 1.5.1"
                " handles grid inputs, InsertGridSamplerGridDequantPass (VGF only), instead of"
                " in FoldAndAnnotateQParamsPass: no lowering context or flag is needed, and"
                " TOSA and Ethos-U lowering do not change."
            ),
            affected_tests=(
                "backends/arm/test/passes/test_rewrite_grid_sampler_to_tosa_custom_pass.py",
                "backends/arm/test/passes/test_fuse_grid_sampler_flow_offset_pass.py",
                "backends/arm/test/passes/test_fold_qdq_pass.py",
                "backends/arm/test/ops/test_grid_sampler.py",
                "backends/arm/test/ops/test_custom_shader_lowering.py",
                "backends/arm/test/quantizer/test_generic_annotater.py",
                "backends/arm/test/quantizer/test_vgf_snorm_quantization.py",
                "backends/arm/test/misc/test_custom_shader_payload.py",
                "backends/arm/test/misc/test_custom_shader_payloads.py",
            ),
            reproducer="""\
import torch
from executorch.backends.arm.quantizer import (
    VgfQuantizer,
    get_symmetric_a16w8_quantization_config,
)
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
from executorch.exir import to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class GridWarp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        grid = torch.tanh(self.conv(x)).permute(0, 2, 3, 1)
        return torch.nn.functional.grid_sample(x, grid, align_corners=False)


spec = VgfCompileSpec("TOSA-1.0+INT+FP+int16")
quantizer = VgfQuantizer(spec)
quantizer.set_global(get_symmetric_a16w8_quantization_config())
x = (torch.rand(1, 3, 8, 8),)
graph = torch.export.export(GridWarp().eval(), x).module(check_guards=False)
prepared = prepare_pt2e(graph, quantizer)
prepared(*x)
program = torch.export.export(convert_pt2e(prepared), x)
to_edge_transform_and_lower(program, partitioner=[VgfPartitioner(spec)])
""",
        ),
    ),
    Fix(
        number=2,
        patch="0002-skip-factory-op-annotation.patch",
        title="leave factory op outputs unannotated",
        repo_paths=("backends/arm/quantizer/quantization_annotator.py",),
        runtime=RuntimeHook(
            owner="", attribute="get_quant_properties", builder="skip_factory_op_annotation"
        ),
        triggers=(
            Trigger(
                "factory_op_output",
                Effect.CHANGED,
                "aten.full feeding a graph output: stock (torchao >= 0.16) delegates it, the"
                " patch keeps it on the CPU; both outputs are right",
                releases="~=1.2.0",
            ),
        ),
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
    ),
    Fix(
        number=3,
        patch="0003-conv-rescale-qparams-from-source.patch",
        title="conv rescale qparams from the source conv or its clamp",
        repo_paths=("backends/arm/_passes/rewrite_conv_pass.py",),
        runtime=RuntimeHook(
            owner="RewriteConvPass",
            attribute="insert_output_rescale",
            builder="conv_rescale_qparams_from_source",
        ),
        triggers=(
            Trigger(
                "conv_relu_cat_mixed_qparams",
                Effect.FIXED,
                "conv -> relu feeding a cat with a differently quantised input",
                releases="~=1.2.0",
            ),
            Trigger(
                "conv_relu_cat_mixed_qparams",
                Effect.FIXED,
                "the same branch on 1.5: FuseQuantizedActivationPass fuses the ReLU into the"
                " qmin of the conv's output qparams, which its output RESCALE ignores (values"
                " below zero pass); the 1.5.1 port clamps the rescale",
                releases="~=1.5.0",
            ),
        ),
        upstream=UpstreamNote(
            test_file="backends/arm/test/passes/test_rewrite_conv_pass.py",
            narrowing=(
                "The 1.2.0 patch (rescale qparams from the conv's clamp user) is upstream since"
                " 22867a9148. Since ad9902c464 (#21974) the ReLU is no longer a clamp there:"
                " FuseQuantizedActivationPass folds it into qmin = zp, which RewriteConvPass's"
                " output RESCALE does not honour. The 1.5.1 port adds a CLAMP after that"
                " RESCALE when qmin is a zero point above the dtype minimum."
            ),
            affected_tests=(
                "backends/arm/test/passes/test_rewrite_conv_pass.py",
                "backends/arm/test/passes/test_fuse_quantized_activation_pass.py",
                "backends/arm/test/passes/test_fold_qdq_pass.py",
                "backends/arm/test/passes/test_convert_to_clamp.py",
                "backends/arm/test/passes/test_fuse_consecutive_clamps_pass.py",
            ),
            reproducer="""\
import torch
from executorch.backends.arm.test.tester.test_pipeline import TosaPipelineINT


class ConvReluCat(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # relu shares its output qparams with the cat, whose range is mostly y's
        return torch.cat([torch.relu(self.conv(x)), y * 10], dim=1)


torch.manual_seed(0)
inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 2, 8, 8))
TosaPipelineINT(ConvReluCat(), inputs, [], []).run()  # outputs do not match the reference
""",
        ),
    ),
    Fix(
        number=4,
        patch="0004-distinct-output-transpose-slots.patch",
        title="one transpose per duplicated graph output slot",
        repo_paths=("backends/arm/_passes/to_tosa_memory_format_pass.py",),
        runtime=RuntimeHook(
            owner="ToTosaMemoryFormatPass",
            attribute="insert_input_transpose",
            builder="distinct_output_transpose_slots",
        ),
        triggers=(
            Trigger(
                "equal_constant_outputs_channels_last",
                Effect.FIXED,
                "two equal constant outputs merged by FuseEqualPlaceholdersPass, one channels_last",
                releases="~=1.2.0",
            ),
        ),
        upstream=UpstreamNote(
            test_file="backends/arm/test/passes/test_ensure_unique_output_nodes_pass.py",
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
    ),
)


def by_number(number: int) -> Fix:
    """Return fix ``number``."""
    for fix in FIXES:
        if fix.number == number:
            return fix
    raise OverlayError(
        f"there is no fix {number}",
        expected=", ".join(str(f.number) for f in FIXES),
        found=str(number),
        hint="pick fix numbers from `overlay.fixes.FIXES`",
    )


def by_patch(name: str) -> Fix | None:
    """Return the fix whose patch is ``name`` (with or without ``.patch``), if any."""
    for fix in FIXES:
        if name in (fix.patch, fix.stem):
            return fix
    return None


def triggers_of(case: str, version: str | None = None) -> list[tuple[Fix, Trigger]]:
    """Return every (fix, trigger) that names corpus case ``case`` (claimed for ``version``)."""
    return [
        (fix, t) for fix in FIXES for t in fix.triggers if t.case == case and t.applies_to(version)
    ]
