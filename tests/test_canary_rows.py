"""The status page rows: what to do next, and what counts as newly conflicting."""

from __future__ import annotations

from overlay.upstream.canary.results import (
    BisectResult,
    ConflictHunk,
    Forwarded,
    ForwardState,
    PatchBehaviour,
    PatchOnTarget,
    Row,
    TextStatus,
)
from overlay.upstream.canary.rows import build_row, next_step, result_text, upstream_text

NAME = "0002-x.patch"
CONFLICT = PatchOnTarget(NAME, TextStatus.CONFLICT, conflicts=(ConflictHunk("a.py", "<<<"),))


def _fwd(state: ForwardState, release: str = "", applied: str = "") -> Forwarded:
    commit = (
        "c" * 40 if state in (ForwardState.MERGED_AS_SENT, ForwardState.MERGED_MODIFIED) else ""
    )
    return Forwarded(NAME, "https://github.com/o/r/pull/7", "pr", 7, state, commit=commit,
                     matched_by="PR number" if commit else "", release=release,
                     applied_upstream=applied)  # fmt: skip


BISECT = BisectResult(NAME, "Broken-by", "b" * 40, "Rework", "2026-01-05", 3, "text")


def test_next_step_by_finding() -> None:
    open_pr = _fwd(ForwardState.OPEN)
    unchanged = PatchOnTarget(NAME, TextStatus.UNCHANGED)
    assert next_step("1.2.0", unchanged, open_pr, None, None, None).startswith(
        "keep; upstream review"
    )
    merged_old = _fwd(ForwardState.MERGED_AS_SENT, "v1.3.0")
    assert next_step("1.5.1", CONFLICT, merged_old, None, None, None) == (
        "drop: merged upstream in cccccccccccc (as sent), first released in v1.3.0"
    )
    assert next_step("1.2.0", CONFLICT, merged_old, None, None, None).startswith(
        "keep on 1.2.0; drop on lines from v1.3.0 on"
    )
    needed = PatchBehaviour(NAME, "fails before, passes after", "fails on stock main")
    port_ok = PatchOnTarget(NAME, TextStatus.OFFSET, port="1.5.1")
    assert next_step("1.2.0", CONFLICT, merged_old, port_ok, needed, None).startswith(
        "keep the port 1.5.1: main still fails without it"
    )
    unreleased = _fwd(ForwardState.MERGED_MODIFIED)
    assert "not yet in a release" in next_step("1.2.0", CONFLICT, unreleased, None, None, None)
    port = PatchOnTarget(NAME, TextStatus.OFFSET, port="1.5.1")
    assert next_step("1.2.0", CONFLICT, open_pr, port, None, BISECT).startswith(
        "keep: the port 1.5.1"
    )
    assert next_step("1.2.0", CONFLICT, open_pr, None, None, BISECT).startswith(
        "port: resolve the conflict, broken by bbbbbbbbbbbb"
    )
    fixed = PatchBehaviour(NAME, "already fixed on stock", "passes on stock")
    assert next_step("1.2.0", unchanged, open_pr, None, fixed, None).startswith("possibly fixed")
    upstream = PatchOnTarget(NAME, TextStatus.UPSTREAM)
    assert next_step("1.2.0", upstream, open_pr, None, None, None).startswith(
        "drop: already upstream"
    )
    noted = _fwd(ForwardState.OPEN, applied="not triggered with torchao >= 0.16")
    assert next_step("1.2.0", unchanged, noted, None, None, None).startswith(
        "drop? Applied-Upstream"
    )
    assert "forward it upstream" in next_step(
        "1.2.0", unchanged, _fwd(ForwardState.NOT_FORWARDED), None, None, None
    )


def test_texts() -> None:
    assert upstream_text(_fwd(ForwardState.OPEN)) == "still open: pr #7"
    assert upstream_text(_fwd(ForwardState.MERGED_MODIFIED)) == (
        "merged modified in cccccccccccc (not yet in a release; by PR number)"
    )
    offset = PatchOnTarget(NAME, TextStatus.OFFSET, offsets=(3, -2))
    assert result_text(offset, None) == "applies at offset +3,-2"
    assert result_text(CONFLICT, None) == "conflicts in a.py (1 hunks)"


def _row(previous: dict[tuple[str, str], Row] | None, found: Forwarded | None = None) -> Row:
    return build_row("1.2.0", subject="s", on_main=CONFLICT, found=found or _fwd(ForwardState.OPEN),
                     port=None, behaviour=None, bisect=BISECT, today="2026-02-02",
                     previous=previous)  # fmt: skip


def test_newly_conflicting_needs_a_previous_page_where_it_did_not_conflict() -> None:
    assert not _row(None).newly_conflicting  # a first run has no baseline
    applied = Row("1.2.0", NAME, "s", TextStatus.UNCHANGED, "", "", "", "2026-01-01")
    assert _row({("1.2.0", NAME): applied}).newly_conflicting
    assert _row({}).newly_conflicting  # a patch new since the last page
    known = Row("1.2.0", NAME, "s", TextStatus.CONFLICT, "", "", "", "2026-01-01")
    row = _row({("1.2.0", NAME): known})
    assert not row.newly_conflicting and row.since == "2026-01-01"
    assert not _row({}, _fwd(ForwardState.MERGED_MODIFIED)).newly_conflicting  # upstream has it
    assert _row({("1.2.0", NAME): applied}).since == "2026-02-02"
    assert _row(None).bisect == "Broken-by: " + "b" * 40
