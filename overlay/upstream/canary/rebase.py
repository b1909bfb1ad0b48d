"""Replay a line's series onto a new upstream base, patch by patch, as commits.

The line's series is first committed on its own base (the upstream tag ``v<line>``), one
commit per patch. Each patch is then tried on the target's files (with the earlier
patches already replayed): the strict applier decides *applies unchanged*, *with
offset*, *already upstream* (the reverse applies) or *file missing*
(:func:`overlay.upstream.matrix.check_patch`); where it does not apply, a 3-way merge
per file (``git merge-file``: base = the file before the patch on the line, ours = the
target, theirs = after the patch) decides *applies after 3-way merge*, *already
upstream* (the merge adds nothing) or *conflicts* (the regions with their markers). A
conflicting patch is left out of the rebased series, as a packager drops a patch that no
longer applies; the rest become commits on the target, so ``git range-diff`` shows how
each patch changed in the port.

Example: a patch whose context moved 12 lines down on main.
Becomes: ``PatchOnTarget(status=OFFSET, offsets=(12,))`` and a commit in the rebased series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from overlay._git import merge_file
from overlay.text.applier import HunkMismatchError, apply_file, apply_patch, decode, encode
from overlay.text.series import Patch, Series
from overlay.upstream.canary.gitrepo import Scratch, fixed_date
from overlay.upstream.canary.results import (
    ConflictHunk,
    PatchOnTarget,
    TargetResult,
    TextStatus,
    UpstreamEvidence,
)
from overlay.upstream.matrix import Status, check_patch
from overlay.worktree import commit_message

CONTEXT_LINES = 3
ARM_TREE = "backends/arm"
APPLIED = frozenset({TextStatus.UNCHANGED, TextStatus.OFFSET, TextStatus.MERGED})
Texts = dict[str, str]


@dataclass(frozen=True)
class Step:
    """One patch of the line's own series: the files before and after it, and its commit."""

    patch: Patch
    before: Texts
    after: Texts
    commit: str


@dataclass(frozen=True)
class LineSeries:
    """The line's series committed on its base."""

    base: str
    tip: str
    steps: tuple[Step, ...]


def message_of(patch: Patch) -> str:
    """Return the commit message carrying a patch (its DEP-3 header, as ``overlay edit`` does)."""
    return commit_message(patch.name, patch.subject, patch.header_text)


def date_of(patch: Patch) -> str:
    """Return the fixed commit date of a patch (its Last-Update), for reproducible ids."""
    return fixed_date(patch.header.get("Last-Update", ""))


def commit_series(scratch: Scratch, series: Series, base: str) -> LineSeries:
    """Commit each patch of ``series`` on ``base`` (the strict applier, offsets allowed)."""
    texts = {p: decode(d) for p, d in scratch.files(base, series.targets()).items()}
    steps = []
    tip = base
    for patch in series.patches:
        after = apply_patch(patch, texts, allow_offset=True)
        changed = {p: encode(after[p]) for p in patch.targets}
        tip = scratch.commit(tip, changed, message_of(patch), date=date_of(patch))
        steps.append(Step(patch, dict(texts), after, tip))
        texts = after
    return LineSeries(base, tip, tuple(steps))


def offsets_of(patch: Patch, texts: Mapping[str, str]) -> tuple[int, ...]:
    """Return every hunk's offset when ``patch`` applies to ``texts`` at an offset."""
    found: list[int] = []
    for patched_file in patch.files:
        found += apply_file(texts[patched_file.path], patched_file, allow_offset=True).offsets
    return tuple(found)


def conflict_hunks(path: str, merged: str, context: int = CONTEXT_LINES) -> list[ConflictHunk]:
    """Return each ``<<<<<<<`` .. ``>>>>>>>`` region of a merged text, with context lines."""
    lines = merged.splitlines(keepends=True)
    hunks = []
    start = None
    for number, line in enumerate(lines):
        if line.startswith("<<<<<<< "):
            start = number
        elif line.startswith(">>>>>>> ") and start is not None:
            first, last = max(start - context, 0), min(number + 1 + context, len(lines))
            hunks.append(ConflictHunk(path, "".join(lines[first:last])))
            start = None
    return hunks


def three_way(
    patch: Patch, texts: Mapping[str, str], step: Step, labels: tuple[str, str, str]
) -> tuple[TextStatus, Texts, list[ConflictHunk]]:
    """Merge each file of ``patch`` (base: before the patch on the line; theirs: after it)."""
    merged_texts = dict(texts)
    hunks: list[ConflictHunk] = []
    for path in patch.targets:
        merged, conflicts = merge_file(
            encode(texts[path]), encode(step.before[path]), encode(step.after[path]), labels
        )
        merged_texts[path] = decode(merged)
        if conflicts:
            hunks += conflict_hunks(path, decode(merged))
    if hunks:
        return TextStatus.CONFLICT, dict(texts), hunks
    if all(merged_texts[p] == texts[p] for p in patch.targets):
        return TextStatus.UPSTREAM, dict(texts), []
    return TextStatus.MERGED, merged_texts, []


def classify(
    patch: Patch,
    texts: Mapping[str, str],
    names: frozenset[str],
    step: Step | None,
    labels: tuple[str, str, str],
) -> tuple[PatchOnTarget, Texts]:
    """Classify one patch on ``texts`` (the target with the earlier patches replayed).

    ``step`` holds the files before and after the patch on its own line (the 3-way merge's
    base and theirs); without it a patch that does not apply is a conflict.
    """
    check, after = check_patch(patch, texts, names)
    if check.status is Status.APPLIES:
        return PatchOnTarget(patch.name, TextStatus.UNCHANGED), after
    if check.status is Status.OFFSET:
        offsets = offsets_of(patch, texts)
        return PatchOnTarget(patch.name, TextStatus.OFFSET, check.detail, offsets), after
    if check.status is Status.CONTAINED:
        evidence = (UpstreamEvidence("reverse applies", detail=check.detail),)
        return PatchOnTarget(
            patch.name, TextStatus.UPSTREAM, check.detail, evidence=evidence
        ), dict(texts)
    if check.status in (Status.MOVED, Status.MISSING):
        return PatchOnTarget(patch.name, TextStatus.MISSING, check.detail), dict(texts)
    if step is None or any(p not in texts for p in patch.targets):
        return PatchOnTarget(patch.name, TextStatus.CONFLICT, check.detail), dict(texts)
    status, merged, hunks = three_way(patch, texts, step, labels)
    if status is TextStatus.UPSTREAM:
        evidence = (UpstreamEvidence("merge adds nothing", detail=check.detail),)
        return PatchOnTarget(patch.name, status, check.detail, evidence=evidence), merged
    return PatchOnTarget(patch.name, status, check.detail, conflicts=tuple(hunks)), merged


def tree_names(scratch: Scratch, commit: str, extra: Sequence[str]) -> frozenset[str]:
    """Return the paths under ``backends/arm`` at ``commit`` (for moved-file detection)."""
    listing = scratch.run("ls-tree", "-r", "-z", "--name-only", commit, "--", ARM_TREE)
    return frozenset(filter(None, listing.split("\0"))) | frozenset(extra)


def replay(
    scratch: Scratch,
    line: LineSeries,
    target: str,
    commit: str,
    *,
    line_name: str,
) -> tuple[TargetResult, str]:
    """Replay ``line`` onto ``commit``; return the result and the rebased series' tip."""
    paths = sorted({p for step in line.steps for p in step.patch.targets})
    texts = {p: decode(d) for p, d in scratch.files(commit, paths).items()}
    names = tree_names(scratch, commit, list(texts))
    results = []
    tip = commit
    for step in line.steps:
        labels = (target, f"{line_name} before {step.patch.name}", step.patch.name)
        found, after = classify(step.patch, texts, names, step, labels)
        results.append(found)
        if found.status in APPLIED:
            changed = {p: encode(after[p]) for p in step.patch.targets}
            tip = scratch.commit(tip, changed, message_of(step.patch), date=date_of(step.patch))
        texts = after
    range_diff = scratch.range_diff((line.base, line.tip), (commit, tip))
    return TargetResult(target, commit, tuple(results), range_diff=range_diff), tip


def try_port(
    scratch: Scratch,
    port: Patch,
    version: str,
    commit: str,
    target: str,
) -> PatchOnTarget:
    """Try a port (made for release ``version``) alone on the target's files.

    With the tag ``v<version>`` upstream, a port that does not apply is 3-way merged from
    there; without it, it is a conflict.
    """
    texts = {p: decode(d) for p, d in scratch.files(commit, port.targets).items()}
    names = tree_names(scratch, commit, list(texts))
    step = None
    tag = f"v{version}"
    if scratch.has(f"refs/tags/{tag}"):
        base = {p: decode(d) for p, d in scratch.files(scratch.rev(tag), port.targets).items()}
        try:
            after = apply_patch(port, base, allow_offset=True)
        except HunkMismatchError:
            pass
        else:
            step = Step(port, base, after, "")
    labels = (target, f"{tag} before the port", f"port {version}/{port.name}")
    found, _ = classify(port, texts, names, step, labels)
    detail = (
        found.detail
        if step is not None or found.status in APPLIED
        else (f"{found.detail}; no tag {tag} upstream for a 3-way merge".lstrip("; "))
    )
    return PatchOnTarget(
        found.patch, found.status, detail, found.offsets, found.conflicts, found.evidence, version
    )
