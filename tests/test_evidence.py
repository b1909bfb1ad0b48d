"""Tests for overlay.lines.evidence: what a promoted line records about each older patch.

The evidence is derived from the typed retarget report by ``promote.line_evidence``.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from overlay import codec, lines
from overlay.equivalence.verdict import AB, Quality
from overlay.errors import SeriesError
from overlay.lines import evidence
from overlay.lines.evidence import CaseResult, LineEvidence, PatchEvidence, Status
from overlay.text.series import load_series
from overlay.upstream.results import (
    Action,
    Applied,
    CaseOutcome,
    Counts,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    TestOutcome,
    TestResult,
    TestRun,
    TestState,
    TestVerdict,
)
from overlay.upstream.results import Status as TextStatus
from overlay.upstream.retarget.promote import line_evidence
from overlay.upstream.retarget.retarget_verdict import Retarget

ROOT = Path(__file__).resolve().parent.parent


def _report(
    action: Action = Action.DROP, tests: TestOutcome = TestOutcome.FAILS_BEFORE_PASSES_AFTER
) -> Retarget:
    """Return a retarget report as `retarget` writes it: one dropped, one ported patch."""
    behaviour = PatchBehaviour(
        patch="0004-x.patch",
        release="9.9.0",
        outcome=Outcome.FIXED_ON_STOCK,
        text="already fixed on stock",
        bug_cases=(CaseOutcome("c", Quality.RIGHT, None, None),),
        other_cases=(CaseOutcome("d", Quality.WRONG, Quality.RIGHT, AB.FIXED),),
        test=TestRun(
            command="pytest t.py",
            selection=("t.py",),
            stock=Counts((TestResult("t.py::a", TestState.FAILED, "boom"),)),
            patched=Counts((TestResult("t.py::a", TestState.PASSED),)),
            seconds=1.0,
        ),
        test_verdict=TestVerdict(tests, f"{tests.value} (1 failed -> 1 passed): boom"),
    )
    rows = (
        _verdict(
            "0004-x.patch",
            action,
            "fixed upstream in 9.9.0: trigger cases now pass on stock (c)",
            behaviour,
        ),
        _verdict("0005-y.patch", Action.PORTED, "ported", None),
    )
    return Retarget(
        old_version="1.2.0", version="9.9.0", candidate="out/patches", fast=False, problems=(),
        wheels=(), runtime={}, attempts=(), patches=rows, runtime_form="", moves=(),
        runs={}, timings={}, worktree="", resume="", locks=(),
    )  # fmt: skip


def _verdict(
    name: str, action: Action, text: str, behaviour: PatchBehaviour | None
) -> PatchVerdict:
    on = OnBase(name, Applied(TextStatus.APPLIES), behaviour=behaviour)
    return PatchVerdict(name, "", (on,), action, text, source="pinned")


def test_a_report_becomes_the_lines_evidence() -> None:
    found = line_evidence(_report(), {"0004-x.patch": "9.9.0"}, measured="2026-12-04")
    assert found == LineEvidence(
        schema=1,
        retargeted_from="1.2.0",
        measured="2026-12-04",
        corpus="full",
        patches=(
            PatchEvidence(
                patch="0004-x.patch",
                status=Status.DROPPED,
                reason="fixed upstream in 9.9.0: trigger cases now pass on stock (c)",
                cases=(CaseResult("c", "right", ""), CaseResult("d", "wrong", "right")),
                upstream_test="stock 1 failed -> patched 1 passed (fails before, passes after)",
                applied_upstream="9.9.0",
            ),
            PatchEvidence(patch="0005-y.patch", status=Status.PORTED, reason="ported"),
        ),
    )
    written = codec.loads(Retarget, codec.dumps(_report()))  # as promote reads it back
    assert line_evidence(written, {"0004-x.patch": "9.9.0"}, measured="2026-12-04") == found
    assert [p.patch for p in evidence.dropped(found)] == ["0004-x.patch"]


def test_a_test_that_does_not_fail_before_keeps_its_verdict() -> None:
    found = line_evidence(_report(tests=TestOutcome.PASSES_BEFORE), {}, measured="d")
    assert found.patches[0].upstream_test == "stock 1 failed -> patched 1 passed (passes before)"


def test_evidence_round_trips_through_its_toml(tmp_path: Path) -> None:
    found = line_evidence(_report(), {}, measured="2026-12-04")
    path = evidence.write(tmp_path, found)
    assert path.name == "evidence.toml"
    assert path.read_text(encoding="utf-8").startswith("# Written by `retarget --promote`")
    assert evidence.load(tmp_path) == found
    assert evidence.load(tmp_path / "none") is None
    assert evidence.dropped(None) == []


def test_an_unpromotable_verdict_is_refused() -> None:
    with pytest.raises(SeriesError) as info:
        line_evidence(_report(Action.CONFLICT), {}, measured="d")
    assert info.value.found == "conflict"
    assert "0004-x.patch" in info.value.message


def test_a_broken_evidence_file_says_how_to_restore_it(tmp_path: Path) -> None:
    (tmp_path / "evidence.toml").write_text("schema = [", encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        evidence.load(tmp_path)
    assert "git checkout" in (info.value.hint or "")


def test_the_151_line_records_every_patch_of_the_120_line() -> None:
    found = evidence.load(ROOT / "patches" / "1.5.1")
    assert found is not None and found.retargeted_from == "1.2.0"
    statuses = {p.patch[:4]: p.status for p in found.patches}
    assert statuses == {
        "0001": Status.PORTED,
        "0002": Status.DROPPED,
        "0003": Status.PORTED,
        "0004": Status.DROPPED,
        "0005": Status.DROPPED,
        "0006": Status.DROPPED,
    }
    assert json.dumps(statuses)  # plain strings (StrEnum)


@pytest.mark.parametrize(
    "line", [x for x in lines.all_lines(ROOT / "patches") if evidence.load(x.directory)],
    ids=lambda x: x.name,
)  # fmt: skip
def test_a_lines_evidence_is_current_and_one_line(line: lines.Line) -> None:
    """Gate rule 6: the evidence was measured on the line's patches as they are (not before
    the last Last-Update of any of them), and each Applied-Upstream is one line: that of the
    older line's patch for a dropped one, as the older line says it now."""
    found = evidence.load(line.directory)
    assert found is not None
    patches = load_series(line.directory).patches
    updated = max(date.fromisoformat(p.header["Last-Update"].strip()) for p in patches)
    assert date.fromisoformat(found.measured) >= updated
    assert [p.patch for p in found.patches if "\n" in p.applied_upstream] == []
    older = {p.number: p for p in load_series(ROOT / "patches" / found.retargeted_from).patches}
    for row in evidence.dropped(found):
        header = older[int(row.patch[:4])].header.get("Applied-Upstream", "")
        assert row.applied_upstream == " ".join(header.split()), row.patch


def test_promote_records_a_continued_header_on_one_line() -> None:
    continued = "1.5.1, fixed differently: the stride from\n kernel_size when absent"
    found = line_evidence(_report(), {"0004-x.patch": continued}, measured="d")
    assert found.patches[0].applied_upstream == (
        "1.5.1, fixed differently: the stride from kernel_size when absent"
    )
