"""The retarget's git work tree: the new release's sources, one commit per patch; a conflict's
files are left uncommitted with its header as ``.git/OVERLAY_MERGE_MSG``, and ``--resume``
commits the resolution (docs/upstream.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import worktree
from overlay._files import write_files
from overlay._git import git
from overlay.errors import UpstreamError
from overlay.text.applier import decode, encode
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.replay import MARKER
from overlay.upstream.results import KEPT, Action
from overlay.upstream.retarget.retarget_verdict import TextPlan

MERGE_MESSAGE = "OVERLAY_MERGE_MSG"


@dataclass(frozen=True)
class WorkCommit:
    """A patch as the work tree holds it: its commit, the files it leaves, its message."""

    commit: str
    after: dict[str, str]
    message: str


def commit_plans(plans: Sequence[TextPlan], dest: Path) -> TextPlan | None:
    """Commit each kept plan the work tree lacks, in order; return the conflict it stops at.

    A conflict's files (with their markers) are left uncommitted, its header saved as the
    commit message to edit.
    """
    for plan in plans:
        if plan.action is Action.DROP or plan.commit:
            continue
        files = {path: encode(text) for path, text in plan.after.items()}
        if plan.action is Action.CONFLICT:
            write_files(dest, files)
            (dest / ".git" / MERGE_MESSAGE).write_text(plan.message, encoding="utf-8")
            return plan
        worktree.commit_files(dest, files, plan.message)
    return None


def commit_resolution(dest: Path) -> None:
    """Commit a resolved conflict with its saved header; a clean work tree needs nothing."""
    message = dest / ".git" / MERGE_MESSAGE
    if not (dest / ".git").is_dir():
        raise UpstreamError(
            f"{dest} has no retarget in progress",
            expected="the work tree a retarget wrote",
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
    if not git(dest, "status", "--porcelain").strip():
        message.unlink(missing_ok=True)
        return
    if not message.is_file():
        raise UpstreamError(
            f"uncommitted changes in {dest}, and no conflict to commit them to",
            expected="a clean work tree (every patch is a commit)",
            found=git(dest, "status", "--short").strip()[:500],
            hint="amend the commit of the patch you changed (`git commit --amend`),"
            " then resume again",
        )
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-F", str(message))
    message.unlink()


def marked_files(dest: Path) -> list[str]:
    """Return the files of the work tree that still hold a conflict marker."""
    found = []
    listed = git(dest, "ls-files", "--cached", "--others", "--exclude-standard")
    for path in filter(None, listed.splitlines()):
        try:
            text = (dest / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.startswith(MARKER) for line in text.splitlines()):
            found.append(path)
    return found


def work_commits(work: Path) -> dict[str, WorkCommit]:
    """Return each patch the work tree holds, by its ``Overlay-Patch:`` trailer."""
    repo = Scratch(work)  # read as the canary reads its series' commits
    found = {}
    for entry in repo.log(f"{worktree.BASE_TAG}..HEAD"):
        message = entry.message.strip()
        last = message.rsplit("\n", 1)[-1]
        name = last.removeprefix(worktree.NAME_TRAILER).strip()
        if not last.startswith(worktree.NAME_TRAILER) or name in found:
            continue  # newest first: an older commit of the same patch was replaced
        changed = repo.run("diff-tree", "-r", "--no-commit-id", "--name-status", entry.commit)
        entries = [line.split("\t", 1) for line in changed.splitlines() if line]
        added = [path for status, path in entries if status != "M"]
        if added:
            raise UpstreamError(
                f"the work tree commit of {name} adds or removes files",
                expected="changes to files of the release (put a new test into an existing file)",
                found=", ".join(added),
                hint=f"amend commit {entry.commit[:10]} in {work}, then resume again",
            )
        after = repo.files(entry.commit, [path for _, path in entries])
        found[name] = WorkCommit(
            entry.commit, {p: decode(d) for p, d in after.items()}, message + "\n"
        )
    return found


def resolved(plan: TextPlan, held: WorkCommit) -> TextPlan:
    """Take what the work tree holds for a patch: a resolved conflict, or an edited patch.

    A patch the text alone would drop (its header names an upstream fix) but that stock
    still needed became a conflict only after behaviour, so any plan may take a commit; a
    carried or ported patch whose commit was amended by hand takes it too.
    """
    kept = plan.action in KEPT
    if kept and held.after == plan.after:
        return replace(plan, commit=held.commit)
    source = f"{plan.source}, edited in the work tree" if kept else "3-way merge, resolved by hand"
    return replace(
        plan, action=Action.PORTED, source=source, after=held.after, message=held.message,
        commit=held.commit,
    )  # fmt: skip
