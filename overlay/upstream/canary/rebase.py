"""A line's series as git commits on an upstream commit, replayed onto another (a conflicting
patch left out, so ``git range-diff`` shows how each patch changed), and the text bisect of
a patch on main (docs/canary.md: no monotonicity assumed)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Patch, Series
from overlay.upstream import replay
from overlay.upstream.canary.canary_report import BisectResult, Replay
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.replay import Carry, Step, try_patch
from overlay.upstream.results import BROKEN, Status
from overlay.worktree import commit_message

ARM_TREE = "backends/arm"
SUPERSEDED = "Superseded-by"
BROKEN_BY = "Broken-by"
WANTED = {SUPERSEDED: frozenset({Status.CONTAINED}), BROKEN_BY: BROKEN}


@dataclass(frozen=True)
class LineSeries:
    """The line's series committed on its base: each patch's files before and after it."""

    base: str
    tip: str
    patches: tuple[Patch, ...]
    steps: tuple[Step, ...]


def _commit(scratch: Scratch, parent: str, patch: Patch, after: Mapping[str, str]) -> str:
    """Commit a patch as ``overlay edit`` does, dated its Last-Update (reproducible ids)."""
    changed = {p: encode(after[p]) for p in patch.targets}
    message = commit_message(patch.name, patch.subject, patch.header_text)
    date = fixed_date(patch.header.get("Last-Update", ""))
    return scratch.commit(parent, changed, message, date=date)


def commit_series(scratch: Scratch, series: Series, base: str) -> LineSeries:
    """Commit each patch of ``series`` on ``base`` (the strict applier, offsets allowed)."""
    texts = {p: decode(d) for p, d in scratch.files(base, series.targets()).items()}
    steps = replay.line_steps(series.patches, texts)
    tip = base
    for patch, step in zip(series.patches, steps, strict=True):
        tip = _commit(scratch, tip, patch, step.after)
    return LineSeries(base, tip, series.patches, tuple(steps))


def tree_names(scratch: Scratch, commit: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Return the paths under ``backends/arm`` at ``commit`` (for moved-file detection)."""
    listing = scratch.run("ls-tree", "-r", "-z", "--name-only", commit, "--", ARM_TREE)
    return frozenset(filter(None, listing.split("\0"))) | frozenset(extra)


def replay_onto(
    scratch: Scratch,
    line: LineSeries,
    target: tuple[str, str],
    *,
    line_name: str,
    ports: Mapping[int, tuple[str, Patch]],
) -> tuple[Replay, list[Carry], str]:
    """Replay ``line`` onto ``target`` (name, commit); return it, each patch, the rebased tip."""
    name, commit = target
    paths = {p for patch in line.patches for p in patch.targets}
    paths |= {p for _, port in ports.values() for p in port.targets}
    texts = {p: decode(d) for p, d in scratch.files(commit, sorted(paths)).items()}
    carries = replay.replay(
        line.patches, texts, tree_names(scratch, commit, texts), steps=line.steps,
        ports=ports, base=name, commit=commit, line=line_name,
    )  # fmt: skip
    tip = commit
    for carry in carries:
        if carry.carrier is not None:
            tip = _commit(scratch, tip, carry.carrier, carry.after)
    range_diff = scratch.range_diff((line.base, line.tip), (commit, tip))
    found = Replay(name, commit, tuple(c.replayed for c in carries), range_diff)
    return found, carries, tip


def fixed_date(day: str) -> str:
    """Return a commit date for ``day`` (YYYY-MM-DD; anything else: the epoch), UTC noon."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day.strip()):
        return f"{day.strip()}T12:00:00+0000"
    return "1970-01-01T00:00:00+0000"


def state_at(
    scratch: Scratch, commit: str, patch: Patch, step: Step, earlier: Sequence[Patch]
) -> Status:
    """Return how ``patch`` fares on upstream ``commit`` (text only)."""
    paths = list(patch.targets)
    texts = {p: decode(d) for p, d in scratch.files(commit, paths).items()}
    for before in earlier:
        edits = set(before.targets) - set(before.creates)
        if set(before.targets) & set(paths) and edits <= set(texts):
            try:
                texts = apply_patch(before, texts, allow_offset=True)
            except HunkMismatchError:
                continue
    found, _ = try_patch(patch, texts, frozenset(texts), step, (commit[:12], "before", patch.name))
    return found.status


def bisect(
    scratch: Scratch,
    line: LineSeries,
    wanted: Mapping[str, str],
    main: str,
    progress: Callable[[str], None] = lambda _: None,
) -> list[BisectResult]:
    """Return, for each patch name of ``wanted``, the first commit on main where it is its kind
    (a key of WANTED); a patch no commit makes so is left out."""
    found: list[BisectResult] = []
    if not wanted:
        return found
    fork = scratch.run("merge-base", line.base, main).strip()
    for name, kind in wanted.items():
        progress(f"bisecting {name} ({kind})")
        index = next(i for i, patch in enumerate(line.patches) if patch.name == name)
        patch, step, earlier = line.patches[index], line.steps[index], line.patches[:index]
        commits = scratch.log(f"{line.base}..{main}", patch.targets, first_parent=True)
        # a commit breaks the patch only where it applied before: at the fork point or later
        applied = kind != BROKEN_BY or state_at(scratch, fork, patch, step, earlier) not in BROKEN
        for tested, entry in enumerate(reversed(commits), start=1):
            state = state_at(scratch, entry.commit, patch, step, earlier)
            if applied and state in WANTED[kind]:
                found.append(
                    BisectResult(
                        name, kind, entry.commit, entry.subject, entry.date, tested, "text"
                    )
                )
                break
            applied = applied or state not in BROKEN
    return found
