"""Apply or revert the series on an executorch tree, atomically and all-or-nothing.

A target is a folder holding the ``executorch`` package and its ``.dist-info``:
a site-packages folder, a venv, or an unpacked wheel. Every check runs before
the first write; files are staged beside their destination and renamed into
place (a hardlinked cache file is never written through); any failure while
renaming restores what was already renamed.
"""

from __future__ import annotations

import contextlib
import enum
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.version import Version

from overlay._cache import cache_dir
from overlay._dist import read_dist_info
from overlay._hashing import sha256_bytes
from overlay.applier import transform_checked
from overlay.errors import (
    ApplyError,
    DriftError,
    LockTimeoutError,
    TargetError,
    UnsafePatchError,
)
from overlay.series import Series

LOCK_TIMEOUT_S = 120.0
_DIST_NAME = "executorch"


class FileState(enum.Enum):
    """Where one target file stands relative to the series."""

    PRISTINE = "pristine"
    PATCHED = "patched"
    DRIFTED = "drifted"
    MISSING = "missing"


@dataclass(frozen=True)
class Target:
    """An executorch tree on disk."""

    root: Path  # folder that holds ``executorch/`` and the dist-info
    dist_info: Path
    version: Version
    record: frozenset[str]

    def file(self, repo_path: str, package_dir: str = _DIST_NAME) -> Path:
        """Return the on-disk path of a repository path."""
        return self.root / package_dir / repo_path


@dataclass(frozen=True)
class FileChange:
    """One file's bytes before and after."""

    repo_path: str
    path: Path
    old: bytes
    new: bytes


@dataclass(frozen=True)
class Plan:
    """Everything a commit will write, computed and checked without writing."""

    target: Target
    reverse: bool
    changes: tuple[FileChange, ...]
    unchanged: tuple[str, ...]  # already in the wanted state

    @property
    def is_noop(self) -> bool:
        """Return True when every file is already in the wanted state."""
        return not self.changes


def _site_packages_of(path: Path) -> Path | None:
    candidates = sorted(path.glob("lib/python3*/site-packages")) + sorted(
        path.glob("Lib/site-packages")
    )
    for candidate in candidates:
        if any(candidate.glob(f"{_DIST_NAME}-*.dist-info")):
            return candidate
    return None


def find_target(path: Path) -> Target:
    """Locate the executorch tree at ``path`` (site-packages, venv, unpacked wheel)."""
    root = path
    if root.name == _DIST_NAME and any(root.parent.glob(f"{_DIST_NAME}-*.dist-info")):
        root = root.parent
    if not any(root.glob(f"{_DIST_NAME}-*.dist-info")):
        root = _site_packages_of(root) or root
    dist_infos = sorted(root.glob(f"{_DIST_NAME}-*.dist-info"))
    if len(dist_infos) != 1:
        raise TargetError(
            f"no single executorch installation at {path}",
            expected="a folder with executorch/ and one executorch-*.dist-info "
            "(site-packages, a venv, or an unpacked wheel)",
            found=", ".join(d.name for d in dist_infos) or "no executorch-*.dist-info",
            hint="pass the site-packages folder of the environment to patch",
        )
    info = read_dist_info(dist_infos[0])
    return Target(root=root, dist_info=info.path, version=info.version, record=info.record_paths)


def safe_file(series: Series, target: Target, repo_path: str) -> Path:
    """Return the file for ``repo_path`` after refusing unlisted files and symlinked paths."""
    wheel_path = series.pins.wheel_path(repo_path)
    if wheel_path not in target.record:
        raise UnsafePatchError(
            f"{wheel_path} is not listed in {target.dist_info.name}/RECORD",
            expected="a file the executorch distribution installed",
            found="a path the distribution does not own",
            hint="check the patch's paths (they are repository paths, backends/arm/...)",
        )
    root = target.root.resolve()
    current = root
    for part in wheel_path.split("/"):
        current = current / part
        if current.is_symlink():
            raise UnsafePatchError(
                f"{wheel_path} goes through a symlink at {current}",
                expected="real files and folders inside the target",
                found=f"{current} -> {os.readlink(current)}",
                hint="patch a real installation, not a link farm",
            )
    if not current.resolve().is_relative_to(root):
        raise UnsafePatchError(f"{wheel_path} resolves outside {root}")
    return current


@dataclass(frozen=True)
class _Read:
    """One target file as read once: its checked path, bytes and state."""

    path: Path
    data: bytes
    state: FileState


def _read_files(series: Series, target: Target) -> dict[str, _Read]:
    """Read and classify every file the series touches, each exactly once."""
    patched = series.expected_patched_sha256()
    files = {}
    for repo_path in series.targets():
        path = safe_file(series, target, repo_path)
        if not path.is_file():
            files[repo_path] = _Read(path, b"", FileState.MISSING)
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TargetError(f"cannot read {path}: {exc}", hint="check permissions") from exc
        digest = sha256_bytes(data)
        if digest == series.pins.pristine_sha256(repo_path):
            state = FileState.PRISTINE
        elif digest == patched[repo_path]:
            state = FileState.PATCHED
        else:
            state = FileState.DRIFTED
        files[repo_path] = _Read(path, data, state)
    return files


def file_states(series: Series, target: Target) -> dict[str, FileState]:
    """Classify every file the series touches (reads only)."""
    return {p: read.state for p, read in _read_files(series, target).items()}


def plan(series: Series, target: Target, *, reverse: bool = False) -> Plan:
    """Check everything and compute the new bytes of every file; write nothing."""
    series.pins.check_version(target.version)
    files = _read_files(series, target)
    states = {p: read.state for p, read in files.items()}
    want, have = (
        (FileState.PRISTINE, FileState.PATCHED)
        if reverse
        else (FileState.PATCHED, FileState.PRISTINE)
    )
    bad = {p: s for p, s in states.items() if s not in (want, have)}
    if bad:
        listing = "\n".join(f"    {p}: {s.value}" for p, s in bad.items())
        raise DriftError(
            f"{len(bad)} file(s) are neither pristine nor patched; nothing was written",
            expected=f"executorch {series.pins.executorch} files as pinned, or as the "
            "series leaves them",
            found="other content",
            details=listing,
            hint="reinstall executorch to get pristine files, then apply again",
        )
    changes, unchanged = [], []
    for repo_path, read in files.items():
        if read.state is want:
            unchanged.append(repo_path)
            continue
        new = transform_checked(series, repo_path, read.data, reverse=reverse)
        changes.append(FileChange(repo_path, read.path, read.data, new))
    return Plan(target, reverse, tuple(changes), tuple(unchanged))


def lock_path(target: Target) -> Path:
    """Return the lock file serialising writers of ``target`` (kept outside the tree)."""
    key = sha256_bytes(str(target.root.resolve()).encode())[:16]
    return cache_dir() / "locks" / f"{key}.lock"


@contextlib.contextmanager
def locked(target: Target, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the target's lock; raise LockTimeoutError if another run keeps it."""
    path = lock_path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TargetError(
            f"cannot create the lock folder {path.parent}: {exc}",
            hint="set OVERLAY_CACHE_DIR to a writable folder",
        ) from exc
    lock = FileLock(str(path), timeout=timeout)
    try:
        with lock:
            yield
    except Timeout as exc:
        raise LockTimeoutError(
            f"another overlay run holds the lock on {target.root}",
            expected=f"the lock within {timeout:.0f} s",
            found=f"{path} still held",
            hint="wait for the other run to finish, then retry",
        ) from exc


def _stage(path: Path, data: bytes) -> Path:
    """Write ``data`` to a new file beside ``path`` with ``path``'s mode; return it."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".overlay-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, path.stat().st_mode & 0o7777)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def commit(plan_: Plan) -> None:
    """Write a plan: stage every file, rename each into place, roll back on failure.

    The caller holds the target's lock (see :func:`apply`), so the plan's reads are current.
    """
    staged: list[tuple[FileChange, Path]] = []
    done: list[FileChange] = []
    try:
        for change in plan_.changes:
            staged.append((change, _stage(change.path, change.new)))
        for change, tmp in staged:
            os.replace(tmp, change.path)
            done.append(change)
    except (OSError, KeyboardInterrupt) as exc:
        problems = _roll_back(done)
        for _, tmp in staged:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        state = "rolled back" if not problems else "ROLL-BACK FAILED for " + problems
        raise ApplyError(
            f"writing {plan_.target.root} failed: {exc}; {state}",
            expected="every staged file renamed into place",
            found=f"{len(done)} of {len(plan_.changes)} renamed before the failure",
            hint="fix the cause (disk space, permissions) and run the command again",
        ) from exc


def _roll_back(done: list[FileChange]) -> str:
    failed = []
    for change in reversed(done):
        try:
            os.replace(_stage(change.path, change.old), change.path)
        except OSError:
            failed.append(change.repo_path)
    return ", ".join(failed)


def apply(series: Series, target: Target, *, reverse: bool = False) -> Plan:
    """Apply (or with ``reverse``, revert) the series under the target's lock.

    Re-running is a no-op success: files already in the wanted state are left alone.
    """
    with locked(target):
        result = plan(series, target, reverse=reverse)
        commit(result)
    return result
