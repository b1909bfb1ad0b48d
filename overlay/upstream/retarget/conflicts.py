"""The retarget's git work tree: pristine sources of the new release, one commit per patch.

At a conflict, the merged files with their markers are left uncommitted, the patch's
DEP-3 header is saved as the commit message (``.git/OVERLAY_MERGE_MSG``) and the patches
still to come are recorded; ``--resume`` commits the resolution, carries the rest, and a
later re-run takes every patch from its commit (named by its ``Overlay-Patch:`` trailer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import codec, worktree
from overlay._git import git, git_bytes
from overlay.errors import UpstreamError
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Series
from overlay.upstream.replay import MARKER
from overlay.upstream.results import KEPT, Action, Applied, Status
from overlay.upstream.retarget.text_plan import TextPlan

RESUME_STATE = "overlay-retarget.json"
MERGE_MESSAGE = "OVERLAY_MERGE_MSG"


@dataclass(frozen=True)
class ResumeState:
    """Where a retarget stopped at a conflict (``.git/overlay-retarget.json``)."""

    version: str
    conflict: str  # the patch whose conflict is resolved by hand
    remaining: tuple[str, ...]  # the kept patches after it, in series order


def _write_state(path: Path, state: ResumeState) -> None:
    path.write_text(codec.dumps(state) + "\n", encoding="utf-8")


def write_worktree(
    plans: Sequence[TextPlan],
    new_files: Mapping[str, bytes],
    version: str,
    dest: Path,
) -> None:
    """Lay out the new pristine sources and one commit per kept patch (edit-style).

    Every file of the release's ``backends/arm`` is there, so a resolution may touch
    more than the patch did (a test beside the fix).
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    for path in sorted(new_files):
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(new_files[path])
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--allow-empty", "-m", f"executorch {version} pristine sources")
    git(dest, "tag", worktree.BASE_TAG)
    for index, plan in enumerate(plans):
        if plan.action is Action.DROP:
            continue
        for path, text in plan.after.items():
            (dest / path).write_bytes(encode(text))
        if plan.action is Action.CONFLICT:
            (dest / ".git" / MERGE_MESSAGE).write_text(plan.message, encoding="utf-8")
            remaining = tuple(p.name for p in plans[index + 1 :] if p.action is not Action.DROP)
            _write_state(dest / ".git" / RESUME_STATE, ResumeState(version, plan.name, remaining))
            return
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=plan.message)


def resume_worktree(series: Series, dest: Path, new_files: Mapping[str, bytes]) -> list[str]:
    """Commit a resolved conflict and carry the remaining patches; return what is left.

    Each remaining patch is applied (at an offset if need be) on top of the work tree's
    HEAD; one that does not apply stops again like the first conflict.
    """
    state_path = dest / ".git" / RESUME_STATE
    if not (dest / ".git").is_dir():
        raise UpstreamError(
            f"{dest} has no retarget in progress",
            expected=f"a work tree with {state_path} (written at a conflict)",
            found="no work tree",
            hint="run `executorch-arm-overlay retarget VERSION` first",
        )
    marked = marked_files(dest)
    if marked:
        raise UpstreamError(
            "conflict markers are still in the work tree",
            expected="every <<<<<<< ... >>>>>>> block resolved",
            found=", ".join(marked),
            hint="edit those files, then run the resume command again",
        )
    if not state_path.is_file():
        # Resumed before: a re-run measures the committed work tree again.
        if git(dest, "status", "--porcelain").strip():
            raise UpstreamError(
                f"uncommitted changes in {dest}, and no conflict to commit them to",
                expected="a clean work tree (every patch is a commit)",
                found=git(dest, "status", "--short").strip()[:500],
                hint="amend the commit of the patch you changed (`git commit --amend`),"
                " then resume again",
            )
        return []
    state = codec.loads(ResumeState, state_path.read_text(encoding="utf-8"), RESUME_STATE)
    if git(dest, "status", "--porcelain").strip():
        message = (dest / ".git" / MERGE_MESSAGE).read_text(encoding="utf-8")
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=message)
    remaining = state.remaining
    tracked = set(_tracked(dest))
    texts: dict[str, str] = {}
    for position, name in enumerate(remaining):
        patch = series.get(name)
        for path in patch.targets:
            if path in texts:
                continue
            if path in tracked:
                texts[path] = decode(git_bytes(dest, "show", f"HEAD:{path}"))
            elif path in new_files:
                texts[path] = decode(new_files[path])
        message = worktree.commit_message(patch.name, patch.subject, patch.header_text)
        try:
            after = apply_patch(patch, texts, allow_offset=True)
        except HunkMismatchError:
            state = replace(state, conflict=name, remaining=remaining[position + 1 :])
            (dest / ".git" / MERGE_MESSAGE).write_text(message, encoding="utf-8")
            _write_state(state_path, state)
            return [name]
        for path in patch.targets:
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(encode(after[path]))
        texts.update(after)
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-F", "-", stdin=message)
    state_path.unlink()
    return []


def marked_files(dest: Path) -> list[str]:
    """Return the files of the work tree that still hold a conflict marker."""
    found = []
    for path in _tracked(dest) + _untracked(dest):
        try:
            text = (dest / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.startswith(MARKER) for line in text.splitlines()):
            found.append(path)
    return found


def _tracked(dest: Path) -> list[str]:
    return [p for p in git(dest, "ls-files").splitlines() if p]


def _untracked(dest: Path) -> list[str]:
    return [p for p in git(dest, "ls-files", "--others", "--exclude-standard").splitlines() if p]


def resolved(plan: TextPlan, work: Path, left: Sequence[str]) -> TextPlan:
    """Take what the work tree holds for a patch: a resolved conflict, or an edited patch.

    A patch's text there is its commit (named by its ``Overlay-Patch:`` trailer): every
    file it changes, as it left them, and its message. A patch the text alone would drop
    (its header names an upstream fix) but that stock still needed became a conflict
    only after behaviour, so any plan may take a commit; a carried or ported patch whose
    commit was amended by hand takes it too.
    """
    if plan.name in left:
        own = Applied(Status.CONFLICT, f"{plan.name} does not apply on the resolved work tree")
        return replace(plan, action=Action.CONFLICT, replayed=replace(plan.replayed, own=own))
    commit = _commit_of(work, plan.name) if (work / ".git").is_dir() else None
    if commit is None:
        return plan
    changed = git(work, "diff-tree", "-r", "--no-commit-id", "--name-status", commit)
    entries = [line.split("\t", 1) for line in changed.splitlines() if line]
    added = [path for status, path in entries if status != "M"]
    if added:
        raise UpstreamError(
            f"the work tree commit of {plan.name} adds or removes files",
            expected="changes to files of the release (put a new test into an existing file)",
            found=", ".join(added),
            hint=f"amend commit {commit[:10]} in {work}, then resume again",
        )
    after = {p: decode(git_bytes(work, "show", f"{commit}:{p}")) for _, p in entries}
    kept = plan.action in KEPT
    if kept and after == plan.after:
        return plan
    source = f"{plan.source}, edited in the work tree" if kept else "3-way merge, resolved by hand"
    message = git(work, "log", "-1", "--format=%B", commit)
    return replace(plan, action=Action.PORTED, source=source, after=after, message=message)


def _commit_of(work: Path, name: str) -> str | None:
    """Return the work tree commit of patch ``name`` (by its trailer), if there is one."""
    log = git(work, "log", "--format=%H%x00%B%x01", f"{worktree.BASE_TAG}..HEAD")
    for entry in log.split("\x01"):
        commit, _, message = entry.strip("\n").partition("\x00")
        if f"\n{worktree.NAME_TRAILER}{name}" in f"\n{message.strip()}":
            return commit
    return None
