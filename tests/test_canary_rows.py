"""The status page rows: what to do next, and what counts as newly conflicting."""

from __future__ import annotations

from dataclasses import replace

from overlay.upstream.canary.canary_report import (
    NEWLY_CONFLICTING,
    BisectResult,
    Forwarded,
    ForwardState,
    result_text,
)
from overlay.upstream.canary.canary_run import build_row, next_step, upstream_text
from overlay.upstream.results import (
    Action,
    Applied,
    Conflict,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    Status,
)

NAME = "0002-x.patch"
CONFLICT = OnBase(NAME, Applied(Status.CONFLICT, conflicts=(Conflict("a.py", 3, "<<<"),)))


def _fwd(state: ForwardState, release: str = "", applied: str = "") -> Forwarded:
    commit = (
        "c" * 40 if state in (ForwardState.MERGED_AS_SENT, ForwardState.MERGED_MODIFIED) else ""
    )
    return Forwarded(NAME, "https://github.com/o/r/pull/7", "pr", 7, state, commit=commit,
                     matched_by="PR number" if commit else "", release=release,
                     applied_upstream=applied)  # fmt: skip


BISECT = BisectResult(NAME, "Broken-by", "b" * 40, "Rework", "2026-01-05", 3, "text")


def _said(outcome: Outcome, text: str) -> PatchBehaviour:
    return PatchBehaviour(NAME, "main", (), (), outcome, text)


def _port(status: Status) -> OnBase:
    return OnBase(NAME, CONFLICT.own, "1.5.1", Applied(status))


def _step(
    line: str,
    on_main: OnBase,
    found: Forwarded,
    behaviour: PatchBehaviour | None,
    bisect: BisectResult | None,
) -> str:
    """Return the next step for a patch on main, its behaviour there measured or not."""
    return next_step(line, replace(on_main, behaviour=behaviour), found, bisect)[1]


def test_next_step_by_finding() -> None:
    open_pr = _fwd(ForwardState.OPEN)
    unchanged = OnBase(NAME, Applied(Status.APPLIES))
    assert _step("1.2.0", unchanged, open_pr, None, None).startswith("keep; upstream review")
    merged_old = _fwd(ForwardState.MERGED_AS_SENT, "v1.3.0")
    assert _step("1.5.1", CONFLICT, merged_old, None, None) == (
        "drop: merged upstream in cccccccccccc (as sent), first released in v1.3.0"
    )
    assert _step("1.2.0", CONFLICT, merged_old, None, None).startswith(
        "keep on 1.2.0; drop on lines from v1.3.0 on"
    )
    needed = _said(Outcome.FAILS_BEFORE_PASSES_AFTER, "fails on stock main")
    assert _step("1.2.0", _port(Status.OFFSET), merged_old, needed, None).startswith(
        "keep the port 1.5.1: main still fails without it"
    )
    unreleased = _fwd(ForwardState.MERGED_MODIFIED)
    assert "not yet in a release" in _step("1.2.0", CONFLICT, unreleased, None, None)
    assert _step("1.2.0", _port(Status.OFFSET), open_pr, None, BISECT).startswith(
        "keep: the port 1.5.1 carries it to main (offset)"
    )
    assert _step("1.2.0", _port(Status.CONFLICT), open_pr, None, BISECT).startswith(
        "port: resolve the conflict"
    )
    assert _step("1.2.0", CONFLICT, open_pr, None, BISECT).startswith(
        "port: resolve the conflict, broken by bbbbbbbbbbbb"
    )
    fixed = _said(Outcome.FIXED_ON_STOCK, "passes on stock")
    assert _step("1.2.0", unchanged, open_pr, fixed, None).startswith("possibly fixed")
    upstream = OnBase(NAME, Applied(Status.CONTAINED))
    assert _step("1.2.0", upstream, open_pr, None, None).startswith("drop: already upstream")
    noted = _fwd(ForwardState.OPEN, applied="not triggered with torchao >= 0.16")
    assert _step("1.2.0", unchanged, noted, None, None).startswith("drop? Applied-Upstream")
    assert "forward it upstream" in _step(
        "1.2.0", unchanged, _fwd(ForwardState.NOT_FORWARDED), None, None
    )


def test_next_step_says_what_to_do() -> None:
    open_pr = _fwd(ForwardState.OPEN)
    released = _fwd(ForwardState.MERGED_AS_SENT, "v1.3.0")
    assert next_step("1.5.1", CONFLICT, released, None)[0] is Action.DROP
    assert next_step("1.2.0", CONFLICT, released, None)[0] is Action.KEEP
    assert next_step("1.2.0", CONFLICT, open_pr, BISECT)[0] is Action.CONFLICT
    assert next_step("1.2.0", _port(Status.OFFSET), open_pr, BISECT)[0] is Action.KEEP


def test_texts() -> None:
    assert upstream_text(_fwd(ForwardState.OPEN)) == "still open: pr #7"
    assert upstream_text(_fwd(ForwardState.MERGED_MODIFIED)) == (
        "merged modified in cccccccccccc (not yet in a release; by PR number)"
    )
    offset = OnBase(NAME, Applied(Status.OFFSET, offsets=(3, -2)))
    assert result_text(offset) == "applies at offset +3,-2"
    assert result_text(CONFLICT) == "conflicts in a.py (1 regions)"
    assert result_text(_port(Status.APPLIES)).endswith("; port 1.5.1: applies")


def _row(
    previous: dict[tuple[str, str], PatchVerdict] | None, found: Forwarded | None = None
) -> PatchVerdict:
    return build_row("1.2.0", subject="s", on_main=CONFLICT, found=found or _fwd(ForwardState.OPEN),
                     bisect_found=BISECT, today="2026-02-02", previous=previous)  # fmt: skip


def _seen(status: Status) -> PatchVerdict:
    """Return a row of an earlier page: the patch had ``status`` on main since 2026-01-01."""
    return PatchVerdict(NAME, "s", (OnBase(NAME, Applied(status)),), Action.KEEP, "",
                        since="2026-01-01")  # fmt: skip


def test_newly_conflicting_needs_a_previous_page_where_it_did_not_conflict() -> None:
    assert NEWLY_CONFLICTING not in _row(None).flags  # a first run has no baseline
    applied = _seen(Status.APPLIES)
    assert NEWLY_CONFLICTING in _row({("1.2.0", NAME): applied}).flags
    assert NEWLY_CONFLICTING in _row({}).flags  # a patch new since the last page
    known = _seen(Status.CONFLICT)
    row = _row({("1.2.0", NAME): known})
    assert NEWLY_CONFLICTING not in row.flags and row.since == "2026-01-01"
    merged = _row({}, _fwd(ForwardState.MERGED_MODIFIED))
    assert NEWLY_CONFLICTING not in merged.flags  # upstream has it
    assert _row({("1.2.0", NAME): applied}).since == "2026-02-02"
    assert _row(None).flags == ("Broken-by: " + "b" * 40,)
    assert (_row(None).upstream, _row(None).on) == ("still open: pr #7", CONFLICT)
