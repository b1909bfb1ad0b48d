"""Torch-free tests: verdict logic, declared divergences, claims, report rendering, CASES checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from overlay import corpus, equivalence, report
from overlay.equivalence import DeclaredDivergence, ItemVerdict, Report


def _ok(**extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": "ok",
        "error": None,
        "graph": ["cpu: q", "delegate[0] TOSABackend: aten::convolution"],
        "payloads": [{"backend": "TOSABackend", "size": 10, "sha256": "aa"}],
        "numerics": {
            "outputs": [{"sha256": "o1"}],
            "max_abs_err_vs_float": [0.01],
            "max_abs_err_vs_fake_quant": [0.0],
            "reference_max_abs": [2.0],
        },
        "vgf": {"skipped": "no converter"},
    }
    result.update(extra)
    return result


def _fail(kind: str = "ValueError", message: str = "boom") -> dict[str, Any]:
    return {"status": "fail", "error": {"type": kind, "message": message, "stage": "lower"}}


CASE_INFO = {"name": "x", "spec": "TOSA-1.0+INT", "quantize": "a8w8", "claim": None}


def test_identical_results_agree() -> None:
    verdict = equivalence.judge("case:x", CASE_INFO, {"a": _ok(), "b": _ok(), "c": _ok()})
    assert (verdict.bc, verdict.ab, verdict.bc_diffs, verdict.ab_diffs) == ("agree", "same", [], [])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"graph": ["cpu: other"]}, "graph"),
        ({"payloads": [{"backend": "TOSABackend", "size": 10, "sha256": "bb"}]}, "tosa payload"),
        ({"numerics": {"outputs": [{"sha256": "o2"}]}}, "numerics"),
        (
            {"vgf": {"payloads": [{"backend": "VgfBackend", "size": 1, "sha256": "v"}]}},
            "vgf payload",
        ),
    ],
)
def test_any_observation_difference_is_undeclared(change: dict[str, Any], field: str) -> None:
    verdict = equivalence.judge("case:x", CASE_INFO, {"a": _ok(), "b": _ok(), "c": _ok(**change)})
    assert verdict.bc == "UNDECLARED"
    assert verdict.bc_diffs == [field]


def test_same_failure_agrees_but_different_message_does_not() -> None:
    same = equivalence.judge("case:x", CASE_INFO, {"a": _ok(), "b": _fail(), "c": _fail()})
    assert same.bc == "agree" and same.ab == "regression"
    other = equivalence.judge(
        "case:x", CASE_INFO, {"a": _ok(), "b": _fail(), "c": _fail(message="other")}
    )
    assert other.bc == "UNDECLARED" and other.bc_diffs == ["error"]


def test_classify_fixed_regression_and_wrong_numbers() -> None:
    assert equivalence.classify(_fail(), _ok()) == "fixed"
    assert equivalence.classify(_ok(), _fail()) == "regression"
    wrong = _ok(
        numerics={
            "outputs": [{"sha256": "w"}],
            "max_abs_err_vs_fake_quant": [11.0],
            "reference_max_abs": [23.0],
        }
    )
    assert equivalence.numerically_wrong(wrong)
    assert not equivalence.numerically_wrong(_ok())
    assert equivalence.classify(wrong, _ok()) == "fixed"
    assert equivalence.classify(_ok(), wrong) == "regression"


def test_declared_divergence_matches_only_its_exact_observation() -> None:
    declared = DeclaredDivergence("d1", "probe:p", "RuntimeError", "stale check", "because")
    seed_fail = _fail("RuntimeError", "x stale check y")
    ok = {"status": "ok", "error": None, "value": [1]}
    hit = equivalence.judge("probe:p", {}, {"a": ok, "b": seed_fail, "c": ok}, [declared])
    assert (hit.bc, hit.declared) == ("declared", "d1")
    for item, b in (
        ("probe:other", seed_fail),
        ("probe:p", _fail("RuntimeError", "another message")),
        ("probe:p", _fail("ValueError", "stale check")),
    ):
        miss = equivalence.judge(item, {}, {"a": ok, "b": b, "c": ok}, [declared])
        assert miss.bc == "UNDECLARED", item


def test_the_seed_divergence_is_declared_with_a_reason() -> None:
    ids = [d.id for d in equivalence.DECLARED_DIVERGENCES]
    assert "seed-stale-grouped-transpose-check" in ids
    assert all(
        d.reason and d.item.split(":")[0] in {"case", "probe"}
        for d in equivalence.DECLARED_DIVERGENCES
    )


def _claimed(effect: str, fix: int) -> dict[str, Any]:
    return {**CASE_INFO, "claim": {"fix": fix, "effect": effect, "trigger": "t"}}


def test_claims_are_checked() -> None:
    verdict = equivalence.judge(
        "case:x", _claimed("fixed", 3), {"a": _fail(), "b": _ok(), "c": _ok()}
    )
    verdict.fix = 3
    equivalence.check_claim(verdict)
    assert verdict.claim_problem is None
    verdict.fix = 2
    equivalence.check_claim(verdict)
    assert verdict.claim_problem is not None and "fixed by patch 3" in verdict.claim_problem
    none = equivalence.judge(
        "case:x", _claimed("regression", 1), {"a": _ok(), "b": _ok(), "c": _ok()}
    )
    equivalence.check_claim(none)
    assert none.claim_problem is not None and "no difference" in none.claim_problem


def _report(verdicts: list[ItemVerdict]) -> Report:
    workers = {
        p: {"python": f"/py/{p}", "executorch": "1.2.0", "import_seconds": 1.0} for p in "abc"
    }
    return Report({}, workers, verdicts, equivalence.DECLARED_DIVERGENCES, 3.0, {"cases": 2.0})


def test_report_shows_regression_error_text_and_fails_on_undeclared() -> None:
    regression = equivalence.judge(
        "case:reg",
        CASE_INFO,
        {
            "a": _ok(),
            "b": _fail("TosaValueError", "no float"),
            "c": _fail("TosaValueError", "no float"),
        },
    )
    regression.fix = 1
    bad = equivalence.judge("case:bad", CASE_INFO, {"a": _ok(), "b": _ok(), "c": _ok(graph=[])})
    rendered = _report([regression, bad])
    table = report.render_table(rendered)
    assert "stock OK, patched FAIL: TosaValueError: no float" in table
    assert "regression vs stock (patch 1)" in table
    assert "attributed to 0001-keep-terminal-int16-quantize.patch" in table
    assert "UNDECLARED: graph" in table
    assert "seed-stale-grouped-transpose-check" in table
    assert "verdict: FAIL" in table
    assert rendered.failures and "case:bad" in rendered.failures[0]
    markdown = report.render_markdown(rendered)
    assert "## Declared divergences" in markdown and "| reg |" in markdown
    data = json.loads(report.render_json(rendered))
    assert data["failures"] == rendered.failures
    assert data["items"][0]["a_vs_b"]["verdict"] == "regression"
    assert data["items"][0]["a_vs_b"]["fix"] == 1


def test_passing_report_says_pass() -> None:
    agree = equivalence.judge("case:x", CASE_INFO, {"a": _ok(), "b": _ok(), "c": _ok()})
    rendered = _report([agree])
    assert rendered.failures == []
    assert "verdict: PASS" in report.render_table(rendered)


def test_vgf_line_counts_compared_failed_and_skipped() -> None:
    def with_vgf(vgf: dict[str, Any]) -> ItemVerdict:
        result = {**_ok(), "vgf": vgf}
        return equivalence.judge("case:v", CASE_INFO, {"a": result, "b": result, "c": result})

    payloads = {"payloads": [{"sha256": "ab", "size": 3}]}
    rendered = _report(
        [with_vgf(payloads), with_vgf(payloads), with_vgf({"error": {"type": "E", "message": "m"}})]
    )
    assert report.vgf_line(rendered) == "VGF: payloads compared on 2 case(s), lowering failed on 1"
    skipped = _report([with_vgf({"skipped": "no model_converter"})])
    assert report.vgf_line(skipped).endswith("skipped: no model_converter")
    assert "VGF: payloads compared on 0" in report.render_table(skipped)


def test_corpus_covers_specs_quantisations_and_every_fix() -> None:
    cases = corpus.CASES
    assert len(cases) >= 15
    specs = {c.spec for c in cases}
    assert {"TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+FP"} <= specs
    assert any("int16" in s for s in specs)
    assert {c.quantize for c in cases} >= {None, "a8w8", "a16w8"}
    claimed = {(c.claim.fix, c.claim.effect) for c in cases if c.claim}
    assert {1, 2, 3, 4} <= {fix for fix, _ in claimed}
    assert (1, "regression") in claimed
    assert all(c.claim for c in cases if c.claim) and all(c.fast for c in cases if c.claim)
    assert len({c.name for c in cases}) == len(cases)


def _entry(**change: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "module": lambda: None,
        "inputs": (1,),
        "spec": "TOSA-1.0+INT",
        "quantize": "a8w8",
    }
    entry.update(change)
    return entry


def test_user_case_validation() -> None:
    assert corpus.validate_case("ok", _entry()) == []
    assert corpus.validate_case("ok", _entry(per_channel=False)) == []
    assert corpus.validate_case("fp", _entry(spec="TOSA-1.0+FP", quantize=None)) == []
    bad = {
        "spec": _entry(spec="TOSA-2.0+INT"),
        "quantize": _entry(quantize="a4w4"),
        "inputs": _entry(inputs=[1]),
        "module": _entry(module=3),
        "per_channel": _entry(per_channel="yes"),
        "unknown": _entry(extra=1),
        "a16w8": _entry(quantize="a16w8"),
        "INT spec": _entry(spec="TOSA-1.0+FP"),
    }
    for needle, entry in bad.items():
        problems = corpus.validate_case("c", entry)
        assert problems and any(needle in p for p in problems), (needle, problems)
    missing = {k: v for k, v in _entry().items() if k != "spec"}
    assert any("missing key(s) spec" in p for p in corpus.validate_case("c", missing))
    assert corpus.validate_cases({}, origin="f.py")
    assert corpus.validate_cases({"bad name!": _entry()}, origin="f.py")
    assert corpus.validate_cases({"good": _entry()}, origin="f.py") == []
