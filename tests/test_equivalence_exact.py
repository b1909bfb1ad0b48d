"""The exact reference against the TOSA reference model (worker side: torch, executorch).

TOSA's integer rules as the reference applies them; right programs of the corpus equal it
value for value where the fake-quantised model is off; a planted one-step error in one
rescale reads wrong, and the reference names the conv it sits after.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from equivalence_samples import quality
from planted_rescale import PLANTED_MODULE, apply_all

from overlay.equivalence import corpus, verdict
from overlay.equivalence.protocol import ExactCheck, ItemResult, Numerics, RunRequest
from overlay.items import CaseInfo, ItemId, ItemKind

pytestmark = [
    pytest.mark.torch,
    # torch's pytree pickling warns from copyreg, which no module filter names
    pytest.mark.filterwarnings("ignore:.*treespec.*:FutureWarning"),
    # executorch's VGF backend leaves the converter's output file open; the collector
    # reports it whenever it runs, in whichever test that is
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run in a folder of the test's own (a VGF run writes its layer folder into the
    working directory, as a worker does into its log folder), and collect what the test
    leaked (the VGF backend's open files) while its warning filters hold."""
    monkeypatch.chdir(tmp_path)
    yield
    gc.collect()


def _worker(name: str) -> ModuleType:
    """Return a worker module; the test skips where executorch is not installed."""
    pytest.importorskip("executorch")
    return importlib.import_module(f"overlay.equivalence.worker.{name}")


def _run(name: str) -> ItemResult:
    """Run a corpus case as a worker does (stock's functions: no runtime fix swapped in),
    without its Ethos-U and VGF lowerings: these tests read TOSA's numbers, and Vela's
    compile of MobileNetV2 for two targets took 91 of its 143 s; VGF lowers it again and
    runs it on lavapipe where that is installed."""
    lowering = _worker("lowering")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lowering, "_ethos_u", lambda *_: ())
        patch.setattr(lowering, "_vgf", lambda *_: None)  # as a case without VGF
        runner = _worker("runner").TorchRunner()
        return runner.run(RunRequest(ItemId(ItemKind.CASE, name)))  # type: ignore[no-any-return]


def _checked(numerics: Numerics | None) -> ExactCheck:
    """Return a run's check against the exact reference (there must be one)."""
    assert numerics is not None and numerics.exact is not None
    return numerics.exact


def test_a_rescale_rounds_once_half_up_and_a_pool_half_away_from_zero() -> None:
    exact = _worker("exact")
    import torch

    assert exact.scale_parts(0.5) == (1 << 30, 31)
    assert exact.scale_parts(1.0) == (1 << 30, 30)  # a shared scale leaves integers alone
    halves = torch.tensor([5, -5, 3, -3, 4, -4])  # x 0.5: 2.5, -2.5, 1.5, -1.5, 2, -2
    assert exact.apply_scale(halves, [exact.scale_parts(0.5)]).tolist() == [3, -2, 2, -1, 2, -2]
    channels = torch.tensor([[[3]], [[3]]]).reshape(1, 2, 1, 1)  # x 0.5 and x 0.25 by channel
    parts = [exact.scale_parts(0.5), exact.scale_parts(0.25)]
    assert exact.apply_scale(channels, parts).flatten().tolist() == [2, 1]
    assert exact.reciprocal_parts(4) == ((1 << 30) + 1, 32)
    sums = torch.tensor([2, -2, -14, 6])  # / 4: 0.5, -0.5, -3.5, 1.5
    assert exact.apply_scale(sums, [exact.reciprocal_parts(4)]).tolist() == [1, -1, -4, 2]


def test_a_48_bit_accumulator_has_two_programs_and_a_run_is_checked_against_the_nearer() -> None:
    exact = _worker("exact")
    observe = _worker("observe")
    import torch

    thirds = (3.0, 0, -32768, 32767, torch.int16)  # int16 codes at 3x the accumulator's scale
    sums = exact.Fixed(torch.tensor([90002.0, 65537.0, 65538.0, 3e9], dtype=torch.float64), (1.0,))
    wide = exact.Fixed(sums.ints, (1.0,), bits=48)
    # directly: a 15-bit multiplier for 1/3 (21845 / 2**16) loses the last step of 30000.67
    assert exact.rescale(wide, thirds).codes.tolist() == [30000, 21845, 21846, 32767]
    # through int32: exact to 31 bits, after saturating the accumulator at 2**31 - 1
    assert exact.rescale(wide, thirds, True).codes.tolist() == [30001, 21846, 21846, 32767]
    assert exact.rescale(sums, thirds, True).codes.tolist() == [30001, 21846, 21846, 32767]
    big = (1e6, 0, -32768, 32767, torch.int16)
    assert exact.rescale(wide, big, True).codes.tolist()[-1] == 2147  # (2**31 - 1) / 1e6
    assert exact.rescale(wide, big).codes.tolist()[-1] == 3000

    def codes(values: list[int]) -> Any:
        return exact.Codes(torch.tensor(values), 1.0, 0, torch.int16)

    both = exact.Evaluation((codes([1, 2, 3]),), (), {}, through_int32=(codes([1, 2, 4]),))
    got = (torch.tensor([1.0, 2.0, 4.0]),)
    assert observe.exact_check(got, both) == ExactCheck(steps=(0,), differing=(0,))
    one = exact.Evaluation((codes([1, 2, 3]),), (), {})
    assert observe.exact_check(got, one) == ExactCheck(steps=(1,), differing=(1,))
    far = (torch.tensor([1.0, 9.0, 4.0]),)  # the nearer by its largest step, then by count
    assert observe.exact_check(far, both) == ExactCheck(steps=(7,), differing=(1,))


class _Pool:
    """A 2x2 average pool over windows whose sums are ties of both signs."""

    @staticmethod
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch

        class Pool(torch.nn.Module):  # type: ignore[misc]
            def forward(self, x: Any) -> Any:
                return torch.nn.functional.avg_pool2d(x, 2, 2)

        codes = torch.tensor(
            [
                [-1, -1, -3, 0, 1, 1, -128, 127, -5, -4, 2, 3],
                [0, 0, 0, 1, 0, 0, 0, 1, -3, -2, -1, -2],
            ]
        )  # min -1.28 and max 1.27: scale 0.01, zero point 0, so the sums keep their signs
        return Pool().eval(), ((codes * 0.01).reshape(1, 1, 2, 12).float(),)


def test_an_average_pool_over_ties_equals_tosa_where_fake_quant_is_a_step_off() -> None:
    lowering = _worker("lowering")
    info = CaseInfo("pool_ties", "TOSA-1.0+INT", "a8w8")
    result = lowering.run_case(info, _Pool.build)
    assert result.ok and result.exact_reason == ""
    assert _checked(result.numerics).steps == (0,)
    assert result.numerics is not None
    fake_quant_off = result.numerics.max_abs_err_vs_fake_quant[0]
    assert fake_quant_off is not None and fake_quant_off > 0  # ties to even: a step away
    assert quality(result, verdict.limits(info)) is verdict.Quality.RIGHT
    if result.vgf is not None and result.vgf.numerics is not None:  # executed here
        assert _checked(result.vgf.numerics).steps == (0,)


@pytest.mark.parametrize("name", ["conv_relu_int8", "add_cat_mean_int8", "zoo_mobilenet_v2_int8"])
def test_a_right_integer_program_equals_its_exact_reference(name: str) -> None:
    result = _run(name)
    assert result.ok and result.exact_reason == ""
    check = _checked(result.numerics)
    assert check.steps == (0,) * len(check.steps) and check.first == ""


def test_a_planted_one_step_rescale_error_reads_wrong_and_names_its_conv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _worker("exact")
    passes = importlib.import_module("executorch.backends.arm._passes.rewrite_conv_pass")
    kept = passes.RewriteConvPass.insert_output_rescale
    monkeypatch.setattr(passes.RewriteConvPass, "insert_output_rescale", kept)  # undone after
    apply_all()
    result = _run("zoo_mobilenet_v2_int8")
    check = _checked(result.numerics)
    assert (check.steps[0] or 0) >= 1 and check.differing[0] > 0
    assert check.first.startswith(f"{PLANTED_MODULE}: conv2d (")
    info = corpus.info("zoo_mobilenet_v2_int8")
    assert quality(result, verdict.limits(info)) is verdict.Quality.WRONG


def test_an_op_without_a_rule_is_named_and_the_case_judged_as_before() -> None:
    exact, quantize = _worker("exact"), _worker("quantize")
    import torch
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec

    info = corpus.info("grid_warp_int8_vgf_int")
    torch.manual_seed(corpus.SEED)
    module, inputs = corpus.FIX_CASES[info.name].build()
    exported = torch.export.export(module.eval(), inputs)
    quantizer = quantize.case_quantizer(info, TosaCompileSpec(info.spec))
    converted = quantize.convert(exported, inputs, quantizer)
    with pytest.raises(exact.NoExactRule, match=r"no exact rule for aten\.grid_sampler"):
        exact.evaluate(converted, inputs)
