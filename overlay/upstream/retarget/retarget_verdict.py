"""What each patch becomes on the new release (its text: :func:`plan_series`; then stock's
behaviour: :func:`final_verdict`), whether the candidate can be promoted (:func:`readiness`),
and ``retarget.json`` (:class:`Retarget`, which ``promote`` reads), laid out as blocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from overlay import worktree
from overlay._hashing import sha256_bytes
from overlay.render import Block, Heading, Item, Items, Para, Table, item
from overlay.text.applier import decode
from overlay.text.series import PATCH_SUFFIX, Series
from overlay.upstream import replay
from overlay.upstream.results import (
    APPLYING,
    KEPT,
    NOT_NEEDED,
    REPORT_SCHEMA,
    Action,
    Applied,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    PinAttempt,
    ReleaseRun,
    Status,
    UpstreamInfo,
    parse_applied_upstream,
)


@dataclass(frozen=True)
class CaseMove:
    """One corpus case across the move: pinned patched build vs new patched build."""

    case: str
    old_patched: str  # quality
    new_patched: str
    changes: tuple[str, ...]  # observations that differ
    attribution: str  # "no change", "upstream change", "patch", "upstream change and patch"
    note: str
    covered_by: str = ""  # the existing target line's own fix of a lost case ("fix 7")

    @property
    def lost(self) -> bool:
        """Return True when the case was right with the pinned build and is not now."""
        return self.old_patched == "right" and self.new_patched != "right"


@dataclass(frozen=True)
class WheelRecord:
    """One wheel of a release for a pinned interpreter/platform."""

    file: str
    sha256: str  # "" when the release publishes no such wheel
    python: str
    platform: str
    note: str = ""


@dataclass(frozen=True)
class Retarget:
    """Everything one retarget found and wrote (``retarget.json``, which ``promote`` reads)."""

    old_version: str
    version: str
    candidate: str  # the candidate series folder
    fast: bool
    problems: tuple[str, ...]
    wheels: tuple[WheelRecord, ...]
    runtime: dict[str, str]
    attempts: tuple[PinAttempt, ...]
    patches: tuple[PatchVerdict, ...]  # on the pinned release (where measured), then the new
    runtime_form: str
    moves: tuple[CaseMove, ...]
    runs: dict[str, ReleaseRun]  # "old" / "new"
    timings: dict[str, float]
    worktree: str  # "" when none was written
    resume: str
    locks: tuple[str, ...]  # the candidate's locks (locks/<tag>.txt)
    schema: int = REPORT_SCHEMA

    @property
    def ready(self) -> bool:
        """Return True when the candidate can be promoted."""
        return not self.problems


@dataclass(frozen=True)
class TextPlan:
    """A patch's text on the new release, before behaviour is known (the candidate's input)."""

    replayed: OnBase
    action: Action
    source: str  # "pinned", "port 1.5.1", "3-way merge", "Applied-Upstream: ...", ...
    after: dict[str, str]  # the release's texts after it, for each file it changes
    message: str  # the work tree commit message (the port's header for a port)
    commit: str = ""  # the work tree commit it was taken from (--resume), "" when none

    @property
    def name(self) -> str:
        """Return the patch's file name."""
        return self.replayed.patch


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


def plan_series(
    series: Series,
    ports: replay.Ports,
    old_files: Mapping[str, bytes],
    new_files: Mapping[str, bytes],
    *,
    version: str,
    taken: Mapping[str, Mapping[str, str]] | None = None,
) -> list[TextPlan]:
    """Plan every patch in order; a kept patch's result is the base of the next one.

    ``taken``: the files after each patch the retarget's work tree already holds
    (``--resume``): the later patches are planned on top of them.
    """
    infos = {
        p.name: parse_applied_upstream(p.header.get("Applied-Upstream", "")) for p in series.patches
    }
    old = {p: decode(d) for p, d in old_files.items()}
    carries = replay.replay(
        series.patches,
        {p: decode(d) for p, d in new_files.items()},
        frozenset(new_files),
        steps=replay.line_steps(series.patches, old),
        ports=replay.ports_for(ports, version),
        base=f"executorch {version}",
        line=str(series.pins.executorch),
        keep=lambda r: text_action(r, infos[r.patch])[0] in KEPT or r.patch in (taken or {}),
        taken=taken,
    )
    plans = []
    for patch, carry in zip(series.patches, carries, strict=True):
        text = carry.carrier or patch
        action, source = text_action(carry.replayed, infos[patch.name])
        after = {p: carry.after[p] for p in text.targets if p in carry.after}
        message = worktree.commit_message(patch.name, text.subject, text.header_text)
        plans.append(TextPlan(carry.replayed, action, source, after, message))
    return plans


def candidate_pristine(plans: Sequence[TextPlan], new_files: Mapping[str, bytes]) -> dict[str, str]:
    """Return the release's sha256 of every file the kept patches touch, sorted by path
    (a file they create is not the release's)."""
    touched = {path for plan in plans if plan.action in KEPT for path in plan.after}
    return {path: sha256_bytes(new_files[path]) for path in sorted(touched) if path in new_files}


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


def _patch_items(result: Retarget) -> list[Item]:
    out = []
    for verdict in result.patches:
        out.append(item(f"{verdict.patch}: {verdict.text}"))
        own = verdict.on.own
        if own.conflicts:
            out.append(item(f"its own patch: {conflict_text(own)}", depth=1))
        for before in verdict.bases[:-1]:  # on the pinned release, where measured
            if before.behaviour is not None:
                out.append(item(f"on {before.base}: {before.behaviour.text}", depth=1))
        found = verdict.on.behaviour
        if found is not None:
            for case in found.cases:
                patched = f", patched {case.patched.value}" if case.patched else ""
                error = f" [{case.stock_error}]" if case.stock_error else ""
                out.append(item(f"{case.case}: stock {case.stock.value}{patched}{error}", depth=1))
            if found.test is not None:
                out.append(item(f"upstream test: {found.test.text}", depth=1))
                if found.test_verdict is not None:
                    out.append(item(found.test_verdict.text, depth=2))
                out.append(item(found.test.command, depth=2))
        out += [item(f"FLAG: {flag}", depth=1) for flag in verdict.flags]
    return out


def retarget_blocks(result: Retarget) -> list[Block]:
    """Lay out a retarget: the verdict per patch with its evidence, pins, moves, time."""
    ready = "ready to promote" if result.ready else "NOT ready"
    move = f"{result.old_version} -> {result.version}"
    corpus = "fast" if result.fast else "full"
    rows = tuple(
        (
            v.patch.removesuffix(PATCH_SUFFIX),
            v.on.short,
            v.action.value,
            v.on.behaviour.outcome.value if v.on.behaviour else "not checked",
        )
        for v in result.patches
    )
    attempts = []
    for a in result.attempts:
        pins = ", ".join(f"{k} {v}" for k, v in a.runtime.items())
        attempts.append(item(f"tried {pins}: {'ok' if a.ok else a.detail[:200]}"))
        attempts += [item(f"from: {a.origin}", depth=1)] if a.origin else []
    published = [w for w in result.wheels if w.sha256]
    out: list[Block] = [
        Heading(f"retarget executorch {move}: {ready} ({corpus} corpus)"),
        Para(f"candidate: {result.candidate}"),
        *(
            [Items(tuple(item(f"problem: {p}") for p in result.problems))]
            if result.problems
            else []
        ),
        Table(("patch", "text", "verdict", "behaviour"), rows),
        Items(tuple(_patch_items(result))),
        Heading("Runtime pins", 2),
        Para(", ".join(f"{k} {v}" for k, v in result.runtime.items())),
        Items(tuple(attempts)) if attempts else Para("(not checked)"),
        Heading(f"Wheels: {len(published)} of {len(result.wheels)} published", 2),
        Items(tuple(item(f"{w.file} {w.sha256 or 'not published'}") for w in result.wheels)),
    ]
    if result.locks:
        out += [Heading("Locks", 2), Items(tuple(item(path) for path in result.locks))]
    out += [Heading("Runtime form", 2), Items(tuple(map(item, result.runtime_form.splitlines())))]
    if result.moves:
        moves = tuple(
            (m.case, m.old_patched, m.new_patched, m.attribution, m.note) for m in result.moves
        )
        out += [
            Heading(f"What changes for a user moving to {result.version} (patched builds)", 2),
            Table(("case", result.old_version, result.version, "why", "note"), moves),
        ]
    out += [
        Heading("Time", 2),
        Items(tuple(item(f"{k}: {v:.1f} s") for k, v in result.timings.items())),
    ]
    if result.resume:
        out.append(Para(f"resume: {result.resume}"))
    return out
