"""What each patch becomes on the new release, and whether the candidate can be promoted.

Pure, decided once: its text there (:func:`text_action`), then stock of the new release
(:func:`apply_behaviour`), combined with why and the disagreements (:func:`final_verdict`);
:func:`readiness` lists what keeps the candidate from promotion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.version import Version

from overlay.upstream.results import (
    APPLYING,
    KEPT,
    NOT_NEEDED,
    Action,
    Applied,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    Status,
    UpstreamInfo,
)
from overlay.upstream.retarget.retarget_report import CaseMove


def text_action(replayed: OnBase, info: UpstreamInfo) -> tuple[Action, str]:
    """Return what a patch's text on the new release says to do, and where its text comes from.

    A port that applies wins; then the patch itself; contained or named upstream by its
    header: drop; a clean 3-way merge: ported; anything else is a conflict to resolve.
    """
    own = replayed.own.status
    if replayed.carried_by_port:
        return Action.PORTED, f"port {replayed.port_version}"
    if own in APPLYING:
        return Action.CARRIED, "pinned"
    if own is Status.CONTAINED:
        return Action.DROP, "contained upstream"
    if info.text:
        return Action.DROP, f"Applied-Upstream: {info.text}"
    if own is Status.MERGED:
        return Action.PORTED, "3-way merge"
    return Action.CONFLICT, "3-way merge"


def conflict_text(applied: Applied) -> str:
    """Return where a conflict is: ``path: conflict at line 10; ...`` (else its detail)."""
    found = [f"{c.path}: conflict at line {c.line}" for c in applied.conflicts]
    return "; ".join(found) or applied.detail


def apply_behaviour(
    action: Action, source: str, own: Applied, found: PatchBehaviour | None
) -> tuple[Action, str]:
    """Let stock of the new release decide: drop what it no longer needs, keep what it does.

    A patch the text would drop (its header names an upstream fix) but whose trigger still
    fails on stock is kept: merged when git merges it, else a conflict to resolve by hand.
    """
    if found is None:
        return action, source
    if found.outcome in NOT_NEEDED:
        return Action.DROP, source
    if action is Action.DROP and own.status is not Status.CONTAINED:
        return (Action.PORTED if own.status is Status.MERGED else Action.CONFLICT), "3-way merge"
    return action, source


def final_verdict(
    replayed: OnBase,
    action: Action,
    source: str,
    found: PatchBehaviour | None,
    version: str,
    *,
    registered: bool = True,
    subject: str = "",
    pinned: OnBase | None = None,
    header: UpstreamInfo | None = None,
) -> PatchVerdict:
    """Combine a patch's text on the new release and its behaviour there
    (:func:`apply_behaviour` decides what to do; this says why and flags disagreements).

    ``registered`` says whether the fix registry knows the patch (its trigger cases);
    ``pinned``: the patch on the pinned release, where measured (the verdict's first base);
    ``header``: its ``Applied-Upstream`` header in the candidate. A kept patch whose header
    still says upstream fixed it by ``version`` is flagged: the export sends no patch that
    names an upstream fix, so the header (carried over from the pinned patch, or left in a
    resolved conflict's commit message) must say what the kept text fixes.
    """
    final, kept = apply_behaviour(action, source, replayed.own, found)
    flags: list[str] = []
    upstream_ref = f" ({source})" if source.startswith("Applied-Upstream") else ""
    if found is None:
        text = f"{action.value} ({source}); behaviour not checked"
        if action is Action.CONFLICT:
            text = f"conflict: {conflict_text(replayed.own)}"
    elif found.outcome in NOT_NEEDED:
        if found.outcome is Outcome.FIXED_ON_STOCK:
            text = found.text + upstream_ref
        else:
            text = f"drop: {found.text}{upstream_ref}"
        if action in KEPT:
            flags.append(
                f"text says {action.value} ({source}) but no trigger case differs"
                f" on stock {version}: redundant, or its bug is not covered by a case"
            )
    else:
        text = f"{final.value} ({kept}): {found.text}"
        if action is Action.DROP and replayed.own.status is not Status.CONTAINED:
            flags.append(
                f"text says drop ({source}) but stock {version} still fails its"
                f" trigger cases: {found.text}"
            )
            if final is Action.CONFLICT:
                text += f"; {conflict_text(replayed.own)}"
    if not registered:
        flags.append("no fix module in overlay/fixes/: no trigger cases to check")
    later = header is not None and header.version and Version(header.version) > Version(version)
    if final in KEPT and header is not None and header.text and not later:
        flags.append(
            f"kept on {version}, yet its header says Applied-Upstream: {header.text}: rewrite the"
            " header (the commit message in the work tree) to say what it fixes on this"
            " release; the export sends no patch that names an upstream fix"
        )
    bases = (*([pinned] if pinned else []), replace(replayed, behaviour=found))
    return PatchVerdict(replayed.patch, subject, bases, final, text, source=kept, flags=(*flags,))


def readiness(
    verdicts: Sequence[PatchVerdict],
    moves: Sequence[CaseMove],
    *,
    behaviour_checked: bool,
    other: Sequence[str] = (),
) -> tuple[str, ...]:
    """Return every problem that keeps a candidate from promotion (empty: ready)."""
    problems = list(other)
    for verdict in verdicts:
        if verdict.action is Action.CONFLICT:
            problems.append(f"{verdict.patch}: conflict ({conflict_text(verdict.on.own)})")
        found = verdict.on.behaviour
        if (
            verdict.action in KEPT
            and found is not None
            and found.outcome is not Outcome.FAILS_BEFORE_PASSES_AFTER
        ):
            problems.append(f"{verdict.patch}: {found.text}")
    if not behaviour_checked:
        problems.append("behaviour not checked (--no-behaviour): not promotable")
    for move in moves:
        if move.lost and not move.covered_by:
            problems.append(f"{move.case}: right with the pinned build, {move.new_patched} now")
    return tuple(problems)
