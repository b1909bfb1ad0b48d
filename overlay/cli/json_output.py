"""What ``--json`` prints where a command's answer aggregates several domain values (one value
is printed as it is): typed reports, encoded by :mod:`overlay.codec`."""

from __future__ import annotations

import dataclasses

from overlay.in_place.deps import DepsCheck
from overlay.in_place.line_choice import Chosen
from overlay.tree.state import FileState, TreeState


@dataclasses.dataclass(frozen=True)
class PatchInfo:
    """One patch (fix) of the series."""

    number: int  # the fix number: the patch file's NNNN prefix, on every line
    name: str  # the patch file name
    subject: str
    upstream: str | None
    fix: str = ""  # the name `--fix` takes (the file name without NNNN- and .patch)
    state: str | None = None  # with a target: applied, not applied, or in some files


@dataclasses.dataclass(frozen=True)
class SeriesInfo:
    """The series and the patched wheel version it makes."""

    digest: str
    executorch: str
    wheel_version: str
    patches: tuple[PatchInfo, ...]


@dataclasses.dataclass(frozen=True)
class FileStatus:
    """One target file's state."""

    repo_path: str
    state: FileState


@dataclasses.dataclass(frozen=True)
class StatusReport:
    """``status``: the series and, with a target, each file's state."""

    series: SeriesInfo
    target: str | None
    target_version: str | None
    state: TreeState | None  # the whole tree: pristine, patched, partial, interrupted, ...
    summary: str | None  # the one-line state `status` prints
    files: tuple[FileStatus, ...]
    line: Chosen | None = None  # the release line, and why that one
    applied: tuple[int, ...] = ()  # the fixes the files hold
    recorded: tuple[int, ...] | None = None  # the fixes the dist-info lists (this series)
    complete: bool = False  # every fix, in the files and the dist-info (verify-install's ok)


@dataclasses.dataclass(frozen=True)
class DistInfoChange:
    """The dist-info rewrite of a plan."""

    folder: str  # the folder now
    to: str  # the folder after
    version: str  # METADATA's Version after


@dataclasses.dataclass(frozen=True)
class PlanDetails:
    """What a plan of apply or revert decided, beyond the files."""

    line: Chosen
    fixes: tuple[int, ...]  # the fixes asked for (all without --fix)
    before: tuple[int, ...]  # the fixes the tree held
    after: tuple[int, ...]  # the fixes it holds after
    stale_bytecode: int  # .pyc files of replaced modules the run deletes
    dist_info: DistInfoChange | None
    deps: DepsCheck | None  # None: not checked (revert, --no-deps-check)


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """``check`` and ``apply/revert --dry-run``: what would change; nothing was written.

    ``changes_due`` sets check's exit code 21.
    """

    target: str
    reverse: bool
    changes_due: bool
    would_change: tuple[str, ...]
    unchanged: tuple[str, ...]
    plan: PlanDetails | None = None


@dataclasses.dataclass(frozen=True)
class ApplyReport:
    """``apply`` and ``revert``: what the transaction changed."""

    target: str
    reverse: bool
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    recovered: str | None  # what settling an interrupted run did first
    plan: PlanDetails


@dataclasses.dataclass(frozen=True)
class BuildReport:
    """``build-wheel --report``: the wheel, its sha256, the lock that pins it, the index."""

    wheel: str
    version: str
    built: bool
    sha256: str
    lock: str | None
    index: str


@dataclasses.dataclass(frozen=True)
class LockEntry:
    """One pinned wheel's lock: where, how many packages, whether this run wrote it."""

    tag: str
    path: str
    packages: int
    written: bool  # False: only checked current (``--check``/``--dry-run``)


@dataclasses.dataclass(frozen=True)
class LockReport:
    """``lock``: every lock it checked or wrote."""

    line: str
    locks: tuple[LockEntry, ...]


@dataclasses.dataclass(frozen=True)
class BuildPlanReport:
    """``build-wheel --dry-run``: the wheel it would write and how; nothing was written."""

    wheel: str
    version: str
    downloads: bool  # the pinned wheel is not in the wheel cache yet
    action: str  # up to date, linked from the cache, or built


@dataclasses.dataclass(frozen=True)
class SyncReport:
    """``sync``: the venv, the lock it holds and what the sync did (``--dry-run``: would do)."""

    target: str
    line: str
    lock: str  # the lock file's name, "(stock)" for the stock flavour
    dry_run: bool
    up_to_date: bool  # its stamp says it holds the lock: uv was (would be) not run
    reason: str  # why it was (would be) synced; "" when up to date
    builds_wheel: bool  # the patched wheel is (or would be) built first
    executorch: str | None  # the verified version; None when nothing was synced
    modules: tuple[str, ...]  # the modules the check imported


@dataclasses.dataclass(frozen=True)
class RefreshReport:
    """``refresh``: the line's SHA256SUMS and whether it changed (``--dry-run``: would)."""

    path: str
    series: str  # the series' short digest
    dry_run: bool
    changed: bool


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """An error, as ``--json`` prints it on stdout (the message still goes to stderr)."""

    error: str
    exit_code: int
    message: str
    expected: str | None
    found: str | None
    hint: str | None
