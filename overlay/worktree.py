"""Edit patches as git commits: lay the series out as a work tree, then regenerate it."""

from __future__ import annotations

import datetime
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from overlay import fixes
from overlay._files import write_files, write_text_atomic
from overlay._git import git, show
from overlay._hashing import sha256_bytes
from overlay.errors import OverlayError, SeriesError
from overlay.lines.pins import SERIES_FILE, Pins
from overlay.text.applier import transform
from overlay.text.series import (
    CHECKSUMS_FILE,
    HEADER_END,
    PATCH_SUFFIX,
    Series,
    format_checksums,
    load_series,
    parse_patch,
)

BASE_TAG = "overlay-base"
NAME_TRAILER = "Overlay-Patch: "


@dataclass(frozen=True)
class Regenerated:
    """What ``regenerate`` wrote into the series folder ``patches`` (``dry_run``: would write)."""

    patches: Path
    dry_run: bool
    written: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: tuple[str, ...]


def commit_message(name: str, subject: str, header_text: str) -> str:
    """Return the commit message that carries one patch's header and file name."""
    return f"{subject}\n\n{header_text.rstrip()}\n\n{NAME_TRAILER}{name}\n"


def check_dest(dest: Path) -> None:
    """Refuse a work tree folder that is a file or not empty (before any download)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise OverlayError(
            f"{dest} is not empty",
            expected="a new or empty folder for the work tree",
            found=", ".join(sorted(p.name for p in dest.iterdir())[:5])
            if dest.is_dir()
            else "a file",
            hint="pass another --dir, or delete the folder",
        )


def create(series: Series, sources: dict[str, bytes], dest: Path) -> None:
    """Lay out ``sources`` (pristine, by repository path) and the series as commits in ``dest``."""
    check_dest(dest)
    lay_out_base(sources, str(series.pins.executorch), dest)
    current: dict[str, bytes | None] = {p: sources.get(p) for p in series.targets()}
    for patch in series.patches:
        for repo_path in patch.targets:
            current[repo_path] = transform((patch,), repo_path, current[repo_path])
        commit_files(dest, {p: current[p] for p in patch.targets},
                     commit_message(patch.name, patch.subject, patch.header_text))  # fmt: skip


def lay_out_base(files: Mapping[str, bytes], version: str, dest: Path) -> None:
    """Commit ``files`` (a release's pristine sources) as a new work tree's base, tagged
    ``overlay-base``: what ``edit`` and a retarget's work tree start from."""
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    write_files(dest, files)
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--allow-empty", "-m", f"executorch {version} pristine sources")
    git(dest, "tag", BASE_TAG)


def commit_files(dest: Path, files: Mapping[str, bytes | None], message: str) -> None:
    """Write ``files`` into the work tree (None: remove the file) and commit them as one
    patch's commit, its DEP-3 header in ``message``."""
    write_files(dest, files)
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-F", "-", stdin=message)


def _slug(subject: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:48] or "patch"


def _header_for(message: str, *, today: str) -> tuple[str | None, str]:
    """Split a commit message into (patch file name or None, DEP-3 header text)."""
    lines = message.rstrip("\n").split("\n")
    name = None
    if lines and lines[-1].startswith(NAME_TRAILER):
        name = lines.pop()[len(NAME_TRAILER) :].strip()
    subject, _, rest = "\n".join(lines).partition("\n\n")
    rest = rest.strip("\n")
    if rest.startswith("Description:"):
        return name, rest + "\n"
    body = "".join(f" {line}\n" if line.strip() else " .\n" for line in rest.splitlines())
    header = f"Description: {subject.strip()}\n{body}Forwarded: no\nLast-Update: {today}\n"
    return name, header


def regenerate(
    worktree: Path, patches_dir: Path, *, today: str | None = None, dry_run: bool = False
) -> Regenerated:
    """Rewrite ``patches_dir`` (series, patches, SHA256SUMS) from ``overlay-base..HEAD``.

    ``dry_run``: every check, and what would be written and removed; nothing is.
    """
    day = today or datetime.date.today().isoformat()
    old = load_series(patches_dir)
    old_text = {p.name: p.text for p in old.patches}
    commits = git(worktree, "rev-list", "--reverse", f"{BASE_TAG}..HEAD").split()
    if not commits:
        raise SeriesError(f"{worktree} has no commits after {BASE_TAG}", hint="commit a change")
    texts: dict[str, str] = {}
    patches = []
    # a new commit carries a new fix: the number after every fix the registry knows
    numbers = itertools.count(max({0, *old.numbers, *(f.number for f in fixes.FIXES)}) + 1)
    for commit in commits:
        message = git(worktree, "log", "-1", "--format=%B", commit)
        name, header = _header_for(message, today=day)
        diff = git(
            worktree, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--full-index",
            "--src-prefix=a/", "--dst-prefix=b/", f"{commit}~1", commit,
        )  # fmt: skip
        if not diff:
            raise SeriesError(f"commit {commit[:10]} changes nothing", hint="drop it")
        name = name or f"{next(numbers):04d}-{_slug(message.splitlines()[0])}{PATCH_SUFFIX}"
        previous = old_text.get(name)
        if previous is not None and previous.split(HEADER_END, 1)[-1] != diff:
            header = re.sub(r"(?m)^Last-Update: .*$", f"Last-Update: {day}", header)
        texts[name] = header + HEADER_END + diff
        patches.append(parse_patch(name, texts[name]))  # refuse what the loader would refuse
    new_series = old.with_patches(tuple(patches))
    base_files = {
        path: None if path in new_series.created else show(worktree, f"{BASE_TAG}:{path}")
        for path in new_series.targets()
    }
    hashes = _checked_hashes(new_series, base_files, worktree)
    checksums = format_checksums(new_series, hashes)
    return _write_patches(patches_dir, old.pins, texts, checksums, old_text, dry_run=dry_run)


def _checked_hashes(
    series: Series, base: dict[str, bytes | None], worktree: Path
) -> dict[str, str]:
    """Apply the new series to the base files (None: one it creates); return the sha256 of each
    result, which must be HEAD's file byte for byte."""
    hashes = {}
    for repo_path, data in base.items():
        if data is not None:
            series.pins.check_pristine(
                repo_path,
                sha256_bytes(data),
                where=f"{worktree} at {BASE_TAG}",
                hint=f"patches may only edit pinned files; pin new ones in {series.pins.source}",
            )
        result = transform(series.patches, repo_path, data)
        head = show(worktree, f"HEAD:{repo_path}")
        if result is None or result != head:
            raise SeriesError(
                f"the regenerated series does not reproduce HEAD's {repo_path}",
                hint="commit or stash uncommitted changes in the work tree",
            )
        hashes[repo_path] = sha256_bytes(result)
    return hashes


def _write_patches(
    patches_dir: Path,
    pins: Pins,
    texts: dict[str, str],
    checksums: str,
    old_text: dict[str, str],
    *,
    dry_run: bool = False,
) -> Regenerated:
    if not dry_run:
        patches_dir.mkdir(parents=True, exist_ok=True)
    series_lines = [
        f"# Patch series against executorch {pins.executorch}, applied in this order.",
        "# Paths inside the patches are upstream repository paths (a/backends/arm/...).",
        *texts,
    ]
    outputs = {SERIES_FILE: "\n".join(series_lines) + "\n", CHECKSUMS_FILE: checksums, **texts}
    written, unchanged = [], []
    for name, text in outputs.items():
        path = patches_dir / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            unchanged.append(name)
            continue
        if not dry_run:
            write_text_atomic(path, text)
        written.append(name)
    removed = [n for n in old_text if n not in texts]
    for name in () if dry_run else removed:
        (patches_dir / name).unlink()
    return Regenerated(patches_dir, dry_run, tuple(written), tuple(removed), tuple(unchanged))
