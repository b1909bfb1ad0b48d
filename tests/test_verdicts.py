"""Every upstream verdict: tests (for the right reason), behaviour, retarget, readiness.

The fake pytest runs are what :func:`overlay.upstream.upstream_tests.read_run` makes of
pytest's JUnit report: each test's end state and reason. Counting failures alone would
pass several of them for the wrong reason.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest
from equivalence_samples import ethos, lowered, measured, numerics, quality, vgf
from hypothesis import given
from hypothesis import strategies as st

from overlay import lines
from overlay.equivalence import corpus
from overlay.equivalence.protocol import (
    ErrorInfo,
    ItemResult,
    RunStatus,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.equivalence.verdict import Limits, Quality
from overlay.text.series import load_series
from overlay.upstream.behaviour import target_texts
from overlay.upstream.commit_rules import Identity
from overlay.upstream.export import Export, commit_message
from overlay.upstream.results import (
    Action,
    Applied,
    CaseOutcome,
    Conflict,
    Counts,
    OnBase,
    Outcome,
    PatchBehaviour,
    Status,
    TestOutcome,
    TestResult,
    TestRun,
    TestState,
    parse_applied_upstream,
)
from overlay.upstream.retarget.retarget_verdict import (
    CaseMove,
    apply_behaviour,
    final_verdict,
    readiness,
    text_action,
)
from overlay.upstream.verdicts import (
    case_quality,
    compared_targets,
    decide_patch,
    failure_reasons,
    is_own_failure,
    judge_tests,
    spirv_header,
    spirv_problems,
    stale_main,
    submission_problems,
    suite_changes,
    unmeasured_claims,
)

ROOT = Path(__file__).resolve().parent.parent

NODE = "backends/arm/test/passes/test_rewrite_conv_pass.py::test_fused_relu"
OUT_VARIANTS = (
    "RuntimeError: Missing out variants: {'quantized_decomposed::quantize_per_tensor',"
    " 'quantized_decomposed::dequantize_per_tensor'}"
)
NO_OVERLOAD = (
    "AttributeError: The underlying op of 'quantized_decomposed.quantize_per_tensor'"
    " has no overload name 'out'"
)
GRID = (
    "VGF: RuntimeError: grid_sampler rewrite only supports per-tensor int8 grids;"
    " unsupported qparams should have been dequantized earlier"
)


def _side(*tests: tuple[TestState, str], problem: str = "") -> Counts:
    """A pytest run whose tests ended as given."""
    results = (TestResult(f"{NODE}{n}", state, reason) for n, (state, reason) in enumerate(tests))
    return Counts(tuple(results), problem)


PASSED = (TestState.PASSED, "")


def _run(stock: Counts, patched: Counts) -> TestRun:
    return TestRun("pytest ...", (NODE,), stock, patched, 1.0)


FAILS = "fails before, passes after"
CASES = {
    "own assertion": (_side((TestState.FAILED, "assert 2 == 1")), FAILS),
    "assertion with a message": (
        _side((TestState.FAILED, "AssertionError: Output 0 does not match reference output")),
        FAILS,
    ),
    "pytest.raises did not raise": (
        _side((TestState.FAILED, "Failed: DID NOT RAISE <class 'ValueError'>")),
        FAILS,
    ),
    "out variants not registered (torch 2.11)": (
        _side((TestState.FAILED, OUT_VARIANTS)),
        f"could not run: stock: {NODE}0: {OUT_VARIANTS}",
    ),
    "no overload 'out'": (_side((TestState.FAILED, NO_OVERLOAD)), "could not run: stock:"),
    "collection error": (
        _side((TestState.ERROR, "collection failure: ModuleNotFoundError: No module named 'x'")),
        "could not run: stock:",
    ),
    "setup error": (
        _side((TestState.ERROR, "setup: ImportError: no module named x")),
        "could not run: stock:",
    ),
    "skipped": (_side((TestState.SKIPPED, "needs a GPU")), "could not run: stock:"),
    "timeout": (_side((TestState.FAILED, "Failed: Timeout >900.0s")), "could not run: stock:"),
    "pytest crashed": (
        _side(problem="pytest exited with 4 and reported no test: ImportError conftest"),
        "could not run: stock: pytest exited with 4",
    ),
    "nothing ran": (Counts(), "could not run: stock: no test ran"),
    "one own failure, one registration error": (
        _side((TestState.FAILED, "assert False"), (TestState.FAILED, OUT_VARIANTS)),
        "could not run: stock:",
    ),
    "passes before": (_side(PASSED), "passes before"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fails_before_counts_only_the_tests_own_failures(name: str) -> None:
    stock, expected = CASES[name]
    verdict = judge_tests(_run(stock, _side(PASSED)), [])
    assert verdict.text.startswith(expected) or verdict.outcome.value == expected, verdict


def test_why_tests_fail_before_is_each_reason_once_with_long_words_cut() -> None:
    """0008's 16 payload tests failed on one assertion over a base64 shader: one line."""
    payload = "AssertionError: assert '" + "AwIjBwAA" * 400 + "' == 'x'"

    def failed(*reasons: str, causes: tuple[str, ...] = ()) -> list[TestResult]:
        return [TestResult(f"t{i:02d}", TestState.FAILED, r, causes) for i, r in enumerate(reasons)]

    reasons = failed(*[payload] * 16, "assert torch.int16 == torch.float32")
    assert failure_reasons(reasons[::-1]) == (
        "16 tests: AssertionError: assert ... == 'x'; assert torch.int16 == torch.float32"
    )
    # the innermost exception, not the wrapper (0007's lifted-constant ValueError)
    wrapped = failed("ValueError: Failed processing ... Is the origin", causes=("ValueError: x",))
    assert failure_reasons(wrapped) == "ValueError: x"
    long = failure_reasons(failed("", "x" * 30 + " y" * 80))
    assert long == "failed; " + "x" * 30 + " y" * 63 + " ..." and len(long) == len("failed; ") + 160


def test_a_failure_reason_is_whole_or_cut_between_words_and_alike_ones_merged() -> None:
    """Review 38 R-e: 0007's reason was cut inside its one telling name; 0008's four
    'missing' reasons, which differ in the file name only, were three entries."""
    fp32 = (
        "ValueError: TOSA-1.0+INT doesn't support tensor TosaArg(name="
        "'aten_grid_sampler_2d_default_grid_scale', dtype=FP32, shape=(1,))"
    )
    assert failure_reasons([TestResult("t", TestState.FAILED, fp32)]) == fp32  # 121 chars
    shaders = ["int8_nearest", "int8_nearest_align_corners", "nearest", "nearest_align_corners"]
    missing = [
        TestResult(f"a{s}", TestState.FAILED, f"AssertionError: grid_sampler_sampler_{s}.glsl"
                   " is missing")
        for s in shaders
    ]  # fmt: skip
    bilinear = [TestResult(f"b{i}", TestState.FAILED, "AssertionError: nearest sampling got"
                           " the bilinear shader") for i in range(12)]  # fmt: skip
    assert failure_reasons([*missing, *bilinear]) == (
        "4 tests: AssertionError: grid_sampler_sampler_*.glsl is missing;"
        " 12 tests: AssertionError: nearest sampling got the bilinear shader"
    )
    apart = [TestResult(n, TestState.FAILED, f"KeyError: {n}") for n in ("alpha", "beta")]
    assert failure_reasons(apart) == "KeyError: alpha; KeyError: beta"  # nothing shared
    words = " ".join(f"name_{i:03d}" for i in range(30))  # 239 chars
    cut = failure_reasons([TestResult("t", TestState.FAILED, words)])
    assert cut.endswith(" name_016 ...") and len(cut) <= 160


def test_the_bugs_own_error_counts_as_failing_before() -> None:
    stock = _side((TestState.FAILED, GRID.removeprefix("VGF: ")))
    assert judge_tests(_run(stock, _side(PASSED)), [GRID]).outcome is (
        TestOutcome.FAILS_BEFORE_PASSES_AFTER
    )
    assert judge_tests(_run(stock, _side(PASSED)), []).outcome is TestOutcome.COULD_NOT_RUN
    assert is_own_failure("RuntimeError: grid_sampler rewrite only supports per-tensor", [GRID])
    assert not is_own_failure(OUT_VARIANTS, [GRID])
    assert not is_own_failure(OUT_VARIANTS, [""])  # an empty expected error matches nothing
    # the lowering wraps the bug's error: the trigger's error is among the causes
    wrapped = "ValueError: Failed processing lifted tensor constant placeholder: g_scale"
    cause = "ValueError: TOSA-1.0+INT doesn't support tensor TosaArg(name='g_scale', dtype=FP32)"
    fp32 = "doesn't support tensor TosaArg(name='g_scale', dtype=FP32)"
    assert is_own_failure(wrapped, [fp32], [cause])
    assert not is_own_failure(wrapped, [fp32])


def test_suite_changes_name_the_tests_the_patches_break_and_fix() -> None:
    ok, bad, err, skip = TestState.PASSED, TestState.FAILED, TestState.ERROR, TestState.SKIPPED
    stock = Counts(
        tuple(TestResult(n, s) for n, s in (("a", ok), ("b", bad), ("c", ok), ("d", err)))
    )
    after = (("a", skip), ("b", ok), ("c", ok), ("d", ok), ("new", bad))
    patched = Counts(tuple(TestResult(n, s) for n, s in after))
    assert suite_changes(stock, patched) == (("a",), ("b", "d"))
    # lowered with the patches, then no executor_runner: not broken
    unrun = Counts(tuple(TestResult(n, TestState.NO_TARGET) for n in "ac"))
    assert suite_changes(stock, unrun) == ((), ())


def test_after_must_pass_and_must_have_run() -> None:
    stock = _side((TestState.FAILED, "assert 2 == 1"))
    fails = judge_tests(_run(stock, _side((TestState.FAILED, "assert 2 == 1"))))
    assert fails.outcome is TestOutcome.FAILS_AFTER and "assert 2 == 1" in fails.text
    env = judge_tests(_run(stock, _side((TestState.ERROR, "setup: ImportError: x"))))
    assert env.outcome is TestOutcome.COULD_NOT_RUN and env.text.startswith(
        "could not run: patched"
    )
    nothing = judge_tests(_run(Counts(problem="pytest exited with 4"), _side(PASSED)))
    assert nothing.outcome is TestOutcome.COULD_NOT_RUN


def test_a_test_with_no_target_to_run_on_neither_passes_nor_fails() -> None:
    stock = _side((TestState.FAILED, "assert 2 == 1"), (TestState.FAILED, "assert 3 == 1"))
    runner = (TestState.NO_TARGET, "FileNotFoundError: Did not find build arm_executor_runner")
    some = judge_tests(_run(stock, _side(PASSED, runner)))
    assert some.outcome is TestOutcome.FAILS_BEFORE_PASSES_AFTER
    assert some.text.endswith("with the patch, not run here: test_fused_relu1 need an"
                              " executor_runner (upstream's setup_testing*.sh)")  # fmt: skip
    none = judge_tests(_run(stock, _side(runner, runner)))
    assert none.outcome is TestOutcome.COULD_NOT_RUN
    assert none.text.startswith("could not run: patched: every test lowered, none ran:")
    # nothing ran on stock: no verdict either way
    only = judge_tests(_run(_side(runner), _side(PASSED)))
    assert only.outcome is TestOutcome.COULD_NOT_RUN
    assert only.text.startswith("could not run: stock: every test lowered, none ran:")
    # beside one that ran, it is no failure before
    beside = judge_tests(_run(_side(runner, PASSED), _side(PASSED, PASSED)))
    assert beside.outcome is TestOutcome.PASSES_BEFORE
    # a failure with the patch is one, whatever else did not run
    failed = judge_tests(_run(stock, _side((TestState.FAILED, "assert 1 == 0"), runner)))
    assert failed.outcome is TestOutcome.FAILS_AFTER
    # every test that failed before only got as far as needing a target: nothing passed after
    further = judge_tests(_run(stock, _side(runner, runner, PASSED)))
    assert further.outcome is TestOutcome.COULD_NOT_RUN
    assert further.text.startswith("could not run: patched: no test that fails before passes")


def _case(name: str, stock: Quality, patched: Quality | None = None) -> CaseOutcome:
    return CaseOutcome(name, stock, patched, None, "boom" if stock is Quality.FAILED else "")


def test_decide_patch_by_behaviour() -> None:
    right, failed = Quality.RIGHT, Quality.FAILED
    fixed = decide_patch("p", "1.5.1", [_case("a", right)], [], kept=False)
    assert fixed.outcome is Outcome.FIXED_ON_STOCK
    assert fixed.text == "fixed upstream in 1.5.1: trigger cases now pass on stock (a)"
    needed = decide_patch("p", "1.5.1", [_case("a", failed)], [], kept=False)
    assert needed.outcome is Outcome.STILL_FAILS
    none = decide_patch("p", "1.5.1", [], [_case("b", right)], kept=False)
    assert none.outcome is Outcome.NO_BUG_TRIGGER
    harmful = decide_patch("p", "1.2.0", [], [_case("b", right)], kept=True, regressions=["c"])
    assert harmful.outcome is Outcome.REGRESSION and harmful.regressions == ("c",)
    works = decide_patch("p", "1.5.1", [_case("a", failed, right)], [], kept=True)
    assert works.outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    regress = decide_patch(
        "p", "1.5.1", [_case("a", failed, right)], [], kept=True, regressions=["c"]
    )
    assert regress.outcome is Outcome.REGRESSION
    silent = _run(_side(PASSED), _side(PASSED))
    untested = decide_patch("p", "1.5.1", [_case("a", failed, right)], [], kept=True, test=silent)
    assert untested.outcome is Outcome.STILL_FAILS  # its test passes on stock: it tests nothing


def test_a_test_that_could_not_run_makes_the_patch_not_ready() -> None:
    broken = _run(_side((TestState.FAILED, OUT_VARIANTS)), _side((TestState.FAILED, OUT_VARIANTS)))
    found = decide_patch("p", "1.5.1", [_case("a", Quality.WRONG, Quality.RIGHT)], [], kept=True,
                         test=broken)  # fmt: skip
    assert found.outcome is Outcome.COULD_NOT_RUN
    assert "but its upstream test could not run: stock:" in found.text
    assert found.test_verdict is not None and "Missing out variants" in found.test_verdict.text
    ported = final_verdict(PORTED, Action.PORTED, "port 1.5.1", found, "1.5.1")
    problems = readiness([ported], [], behaviour_checked=True)
    assert problems == (f"p: {found.text}",)
    fixed = _run(_side((TestState.FAILED, "assert 1 == 0")), _side(PASSED))
    good = decide_patch(
        "p", "1.5.1", [_case("a", Quality.WRONG, Quality.RIGHT)], [], kept=True, test=fixed
    )
    assert good.outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    sent = final_verdict(PORTED, Action.PORTED, "port 1.5.1", good, "1.5.1")
    assert readiness([sent], [], behaviour_checked=True) == ()


PORTED = OnBase("p", Applied(Status.CONFLICT), "1.5.1", Applied(Status.APPLIES))
CARRIED = OnBase("p", Applied(Status.OFFSET, "+1 lines", (1,)))


def test_final_verdict_trusts_behaviour_and_flags_disagreements() -> None:
    gone = decide_patch("p", "1.5.1", [_case("a", Quality.RIGHT)], [], kept=False)
    verdict = final_verdict(CARRIED, Action.CARRIED, "pinned", gone, "1.5.1")
    assert verdict.action is Action.DROP
    assert "redundant" in verdict.flags[0]
    dropped = OnBase("p", Applied(Status.CONFLICT, "hunk 1/1 fails"))
    still = decide_patch("p", "1.5.1", [_case("a", Quality.FAILED)], [], kept=False)
    verdict = final_verdict(dropped, Action.DROP, "Applied-Upstream: 1.3.0", still, "1.5.1")
    assert verdict.action is Action.CONFLICT and verdict.source == "3-way merge"
    assert verdict.flags[0].startswith("text says drop (Applied-Upstream: 1.3.0)")
    assert verdict.text.endswith("; hunk 1/1 fails")
    unknown = final_verdict(CARRIED, Action.CARRIED, "pinned", None, "1.5.1", registered=False)
    assert unknown.text == "carried (pinned); behaviour not checked"
    assert unknown.flags == ("no fix module in overlay/fixes/: no trigger cases to check",)
    assert apply_behaviour(Action.CARRIED, "pinned", CARRIED.own, gone)[0] is Action.DROP
    assert apply_behaviour(Action.CARRIED, "pinned", CARRIED.own, still) == (
        Action.CARRIED,
        "pinned",
    )


def test_text_action_prefers_the_port_then_the_patch_then_the_header() -> None:
    header = parse_applied_upstream("1.3.0, commit:abc")
    assert text_action(PORTED, header) == (Action.PORTED, "port 1.5.1")
    assert text_action(CARRIED, header) == (Action.CARRIED, "pinned")
    merged = OnBase("p", Applied(Status.MERGED))
    assert text_action(merged, header) == (Action.DROP, "Applied-Upstream: 1.3.0, commit:abc")
    assert text_action(merged, parse_applied_upstream("")) == (Action.PORTED, "3-way merge")
    contained = OnBase("p", Applied(Status.CONTAINED))
    assert text_action(contained, parse_applied_upstream("")) == (
        Action.DROP,
        "contained upstream",
    )
    moved = OnBase("p", Applied(Status.MOVED, "a.py -> b/a.py"))
    assert text_action(moved, parse_applied_upstream("")) == (Action.CONFLICT, "3-way merge")


def test_a_kept_patch_whose_header_names_an_upstream_fix_is_flagged() -> None:
    found = decide_patch("p", "1.5.1", [_case("a", Quality.FAILED, Quality.RIGHT)], [], kept=True)
    verdict = final_verdict(CARRIED, Action.CARRIED, "pinned", found, "1.5.1")
    assert verdict.action is Action.CARRIED and verdict.flags == ()
    stale = parse_applied_upstream("1.3.0, commit:abc")
    flagged = final_verdict(CARRIED, Action.CARRIED, "pinned", found, "1.5.1", header=stale)
    assert flagged.flags[-1].startswith("kept on 1.5.1, yet its header says Applied-Upstream")
    later = final_verdict(CARRIED, Action.CARRIED, "pinned", found, "1.2.5", header=stale)
    assert later.flags == ()  # fixed only later
    none = parse_applied_upstream("")
    assert final_verdict(CARRIED, Action.CARRIED, "pinned", found, "1.5.1", header=none) == verdict


def test_readiness_names_every_problem() -> None:
    region = Conflict("x.py", 3, "<<<<<<< main\n")
    conflict = OnBase("c", Applied(Status.CONFLICT, "hunk 1/1", conflicts=(region,)))
    verdict = final_verdict(conflict, Action.CONFLICT, "3-way merge", None, "1.5.1")
    lost = CaseMove("case", "right", "wrong", ("numerics",), "upstream change", "")
    problems = readiness([verdict], [lost], behaviour_checked=False, other=["locks: uv failed"])
    assert problems == (
        "locks: uv failed",
        "c: conflict (x.py: conflict at line 3)",
        "behaviour not checked (--no-behaviour): not promotable",
        "case: right with the pinned build, wrong now",
    )


def test_a_failed_vgf_lowering_fails_only_a_vgf_case() -> None:
    failed_vgf = VgfResult(TargetState.FAILED, error=ErrorInfo("RuntimeError", "no", Stage.VGF))
    result = ItemResult(RunStatus.OK, numerics=numerics(), vgf=failed_vgf)
    limit = Limits(0.05)
    assert quality(result, limit) is Quality.RIGHT
    assert case_quality(result, limit, vgf=False) is Quality.RIGHT
    assert case_quality(result, limit, vgf=True) is Quality.FAILED
    assert corpus.info("grid_warp_a16w8_vgf").targets_vgf


def test_a_case_whose_executed_vgf_program_is_off_is_wrong_though_tosa_is_right() -> None:
    # the canary measured this on stock main: TOSA 0.17% of range, VGF 56% (SQNR 0 dB)
    result = lowered(measured(error=0.0017, sqnr=53.4), vgf=vgf(measured(error=0.564, sqnr=0.0)))
    limit = Limits(0.05, 20.0)
    assert quality(result, limit) is Quality.RIGHT  # TOSA alone
    assert case_quality(result, limit, vgf=False) is Quality.WRONG
    right = lowered(measured(error=0.0017, sqnr=53.4), vgf=vgf(measured(error=0.0017, sqnr=53.4)))
    assert case_quality(right, limit, vgf=True) is Quality.RIGHT


def test_a_failed_lowering_outweighs_wrong_numbers() -> None:
    failed_vgf = VgfResult(TargetState.FAILED, error=ErrorInfo("RuntimeError", "no", Stage.VGF))
    wrong = lowered(measured(error=0.5, sqnr=0.0), vgf=failed_vgf)
    assert case_quality(wrong, Limits(0.05), vgf=True) is Quality.FAILED
    assert case_quality(wrong, Limits(0.05), vgf=False) is Quality.WRONG


# --- sending: a stale main, claims only where a target ran ---------------------------------

# 0003's description as it is on main today (96dca7b): Ethos-U was compiled, never executed
SAID_ON_MAIN = (
    "When the zero point is above the dtype minimum, as when\n the ReLU output shares its"
    " qparams with a cat whose other input is\n negative, negative values pass and the ReLU"
    " is lost: on executorch 1.5.1\n lowering succeeds and the conv (or linear) channels of"
    " the cat are wrong\n on TOSA, Ethos-U and VGF."
)


def _on(base: str, result: ItemResult) -> OnBase:
    texts = target_texts(result)
    case = CaseOutcome("c", Quality.WRONG, Quality.RIGHT, None, "", "", texts, texts)
    found = PatchBehaviour("0003-x.patch", base, (case,), (), Outcome.FAILS_BEFORE_PASSES_AFTER, "")
    return OnBase("0003-x.patch", Applied(Status.APPLIES), base=base, commit="c0ffee" * 7,
                  behaviour=found)  # fmt: skip


def test_main_older_than_the_release_is_not_ready_there_saying_how_to_refresh_it() -> None:
    """Gate rule 2: the local snapshot (main cff6f4dd32, 2026-08-22) predates 1.5.1 (first
    uploaded to PyPI 2026-09-22, as patches/upstream.toml records)."""
    refresh = "`git -C /m fetch https://github.com/pytorch/executorch.git main:main`"
    main, date = "cff6f4dd32a1b2c3", "2026-08-22T15:26:39-07:00"
    assert stale_main(main, date, "1.5.1", "2026-09-22", refresh) == (
        "not ready on main: main cff6f4dd32 (2026-08-22) is older than executorch 1.5.1"
        f" (2026-09-22); refresh it: {refresh}, then run again"
    )
    assert stale_main(main, "2026-12-05T09:00:00+00:00", "1.5.1", "2026-09-22", refresh) == ""
    # the release commit's own date, where the clone has it: same day, earlier hour
    assert stale_main(main, "2026-09-22T10:00:00+02:00", "1.5.1", "2026-09-22T09:00:00+00:00", "")
    assert stale_main(main, date, "1.5.1", "", refresh).startswith(
        "not ready on main: main cff6f4dd32 (2026-08-22) cannot be compared with executorch"
        " 1.5.1, whose date is not recorded ([released] in patches/upstream.toml)"
    )


def test_a_claim_is_made_only_of_a_target_that_ran_and_was_compared() -> None:
    """Gate rule 3: TOSA and VGF executed and compared, Ethos-U compiled by Vela only, the
    VGF program of another case lowered and never run: "wrong" on Ethos-U is flagged."""
    ran = lowered(
        measured(error=0.0275, sqnr=27.6),
        vgf=vgf(measured(error=0.0275, sqnr=27.6)),
        ethos_u=(ethos("ethos-u55-128"), ethos("ethos-u85-256")),
    )
    assert target_texts(ran)["ethos-u55-128"].startswith("lowers")
    compared = compared_targets([_on("1.5.1", ran)])
    assert compared == {"TOSA", "VGF"}
    unrun = lowered(measured(error=0.0, sqnr=60.0), vgf=vgf())  # lowered, not executed
    assert compared_targets([_on("main", unrun)]) == {"TOSA"}
    failed = lowered(measured(error=0.0, sqnr=60.0), ethos_u=(ethos("ethos-u55-128",
                     state=TargetState.FAILED),))  # fmt: skip
    assert compared_targets([_on("main", failed)]) == {"TOSA", "Ethos-U"}  # Vela failed
    # the partitioner took nothing (fix 8's float grid_sample on TOSA): PyTorch's numbers
    on_cpu = lowered(measured(error=0.0, sqnr=99.0), graph=("cpu: aten.grid_sampler_2d.default",))
    assert target_texts(on_cpu)["tosa"] == (
        "not delegated (aten.grid_sampler_2d.default on the CPU)"
    )
    assert compared_targets([_on("main", on_cpu)]) == set()
    found = unmeasured_claims([SAID_ON_MAIN, SAID_ON_MAIN], compared)
    assert len(found) == 1 and found[0] == (
        "the text says 'wrong' of Ethos-U, which did not run and was not compared here"
        " (say 'compiled' or 'lowers'): \"...lowering succeeds and the conv"
        ' (or linear) channels of the cat are wrong on TOSA, Ethos-U and VGF."'
    )
    fine = (
        "The conv channels are wrong on TOSA and VGF; Ethos-U55 and U85 command streams were"
        " compiled by Vela.\n\nAdd TOSA INT, Ethos-U55, Ethos-U85 and VGF tests.\n\n"
        "```python\n# wrong on Ethos-U\n```\n| Ethos-U55 | fails |\n"
    )
    assert unmeasured_claims([fine], compared) == []
    # a caption naming the spec is no claim of the TOSA target (fix 8's tie cases, where
    # TOSA delegates nothing and so is not compared)
    caption = "`grid_sample(x, grid)`, x 1x4x8x8, grid on exact ties on TOSA-1.0+FP:"
    assert unmeasured_claims([caption], frozenset({"VGF"})) == []
    assert len(unmeasured_claims(["exact on TOSA"], frozenset({"VGF"}))) == 1
    assert len(unmeasured_claims(["It fails on VGF."], compared_targets([_on("m", unrun)]))) == 1
    # each list item is a clause of its own, with a full stop or without (0008's test plan,
    # where a count of failed tests and the bystanders' TOSA operators are two bullets)
    plan = "- all of them: without 16 failed (a reason)\n- 8 models, the same TOSA operators\n"
    assert unmeasured_claims([plan], frozenset({"VGF"})) == []
    assert len(unmeasured_claims(["- 16 failed on TOSA"], frozenset({"VGF"}))) == 1


def test_the_newest_lines_descriptions_claim_only_what_ran_here() -> None:
    """Gate rule 3 on the real patches: with TOSA and VGF executed and compared and Ethos-U
    compiled (no FVP here), no description says how a target did that never ran."""
    newest = lines.all_lines(ROOT / "patches")[-1]
    signer = Identity("Jane Doe", "jane.doe@example.org")
    said = [commit_message(p, signer) for p in load_series(newest.directory).patches]
    assert unmeasured_claims(said, frozenset({"TOSA", "VGF"})) == []


def _spirv(major: int, minor: int, tool: int, version: int, order: str = "<") -> bytes:
    """Return a hand-made SPIR-V module's base64: its 5-word header and one instruction."""
    words = (0x07230203, major << 16 | minor << 8, tool << 16 | version, 42, 0, 0x00020011)
    return base64.b64encode(struct.pack(f"{order}6I", *words))


@given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 0xFFFF),
       st.integers(0, 0xFFFF), st.sampled_from("<>"))  # fmt: skip
def test_a_spirv_header_reads_its_version_and_generator(
    major: int, minor: int, tool: int, version: int, order: str
) -> None:
    assert spirv_header(_spirv(major, minor, tool, version, order)) == (major, minor, tool, version)


def test_an_added_spirv_blob_must_look_like_its_siblings() -> None:
    """Review 41: 0008 added four blobs of glslc 0.11 (SPIR-V 1.6, generator 8) beside five
    of SPIR-V 1.0 from generator 13 (generate_grid_sampler_spirv.py): held back."""
    shaders, script = (
        "backends/arm/vgf/shaders",
        "backends/arm/scripts/generate_grid_sampler_spirv.py",
    )
    tree = {f"{shaders}/s{i}.spirv.b64": _spirv(1, 0, 13, 11) for i in range(5)}
    tree |= {script: b"", "backends/arm/other/far.spirv.b64": _spirv(1, 6, 8, 11)}
    new = f"{shaders}/nearest.spirv.b64"
    assert spirv_problems({new: _spirv(1, 6, 8, 11), f"{shaders}/n.glsl": b""}, tree) == [
        f"{new}: SPIR-V 1.6 from generator 8 v11 (Khronos Glslang Reference Front End), its 5"
        " siblings are SPIR-V 1.0 from generator 13 v11 (Google Shaderc over Glslang):"
        f" regenerate it with the tree's generator ({script})"
    ]
    (newer,) = spirv_problems({new: _spirv(1, 6, 13, 11)}, tree)  # the version alone
    assert newer.startswith(f"{new}: SPIR-V 1.6 from generator 13 v11 (Google Shaderc")
    (other,) = spirv_problems({new: _spirv(1, 0, 8, 11)}, tree)  # the tool alone
    assert other.startswith(f"{new}: SPIR-V 1.0 from generator 8 v11 (Khronos")
    assert spirv_problems({new: _spirv(1, 0, 13, 10)}, tree) == []  # a tool version: alike
    assert spirv_problems({"backends/arm/none/a.spirv.b64": _spirv(1, 6, 8, 11)}, tree) == []
    (broken,) = spirv_problems({new: base64.b64encode(b"not a module")}, {})
    assert broken == (
        f"{new}: no SPIR-V module (magic 0x07230203) in its base64: regenerate it with the"
        " tree's generator"
    )
    item = Export("0008-x.patch", "s", "m", "", {}, {new: _spirv(1, 6, 8, 11)})
    held = submission_problems((), None, [], lint_asked=False, texts=item, tree=tree)
    assert held == tuple(spirv_problems(item.after, tree))
