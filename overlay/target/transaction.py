"""Apply or revert the series on an executorch tree: one journaled file-system transaction.

A target is a folder holding the ``executorch`` package and its ``.dist-info``: a
site-packages folder, a venv, or an unpacked wheel. :func:`plan` runs every check and
computes every new byte before anything is written: the patched sources, the stale bytecode
of each replaced module, and the dist-info an installed patched wheel would have (METADATA
``Version: 1.2.0+armfix.<series>``, the folder renamed to match, RECORD rows true again,
``ARM_OVERLAY.json`` provenance, and ``ARM_OVERLAY_ORIGINAL.json`` so ``revert`` restores
the dist-info byte for byte). :func:`apply` takes the target's lock (a file beside the
dist-info, deleted on release), settles whatever an earlier run left unfinished, and hands
the plan to :mod:`overlay.journal` as one transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.util
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from installer.records import RecordEntry
from packaging.version import Version

from overlay import _mutex
from overlay._hashing import sha256_bytes, sha256_file
from overlay.dist.distinfo import (
    METADATA,
    ORIGINAL_FILE,
    ORIGINAL_RECORD,
    RECORD,
    DistInfo,
    Original,
    parse_record,
    read_dist_info,
    read_text,
    rewrite_record,
)
from overlay.dist.wheels import (
    PROVENANCE_FILE,
    TOOL,
    FileRecord,
    local_version,
    make_provenance,
    parse_provenance,
    patched_metadata,
)
from overlay.errors import (
    BusyError,
    DriftError,
    TargetError,
    UnfinishedRunError,
    UnsafePatchError,
)
from overlay.target import journal
from overlay.text.applier import transform_checked
from overlay.text.series import Series

LOCK_TIMEOUT_S = 120.0
_DIST_NAME = "executorch"
_DIST_INFO_RE = re.compile(rf"^{_DIST_NAME}-[A-Za-z0-9.+!_-]+\.dist-info$")
STALE_STAGING = ".*.overlay-tmp"  # staging files older versions of this tool left beside files


class FileState(enum.Enum):
    """Where one target file stands relative to the series."""

    PRISTINE = "pristine"
    PATCHED = "patched"
    DRIFTED = "drifted"
    MISSING = "missing"


class MetadataState(enum.Enum):
    """What the dist-info says about the tree."""

    STOCK = "stock"  # as executorch installed it
    IN_PLACE = "patched in place"  # rewritten by `apply` (provenance + the saved original)
    WHEEL = "patched wheel"  # installed from the patched wheel


class TreeState(enum.Enum):
    """The whole tree, as `status` reports it."""

    PRISTINE = "pristine"
    PATCHED = "patched"
    MIXED = "mixed"  # some files pristine, some patched, and no journal
    DRIFTED = "drifted"
    INTERRUPTED = "interrupted"  # an unfinished journal: `apply` or `revert` settles it
    BUSY = "busy"  # another run holds the lock


@dataclass(frozen=True)
class Target:
    """An executorch tree on disk."""

    root: Path  # folder that holds ``executorch/`` and the dist-info
    dist_info: Path
    version: Version
    record: frozenset[str]
    info: DistInfo = dataclasses.field(compare=False, repr=False)
    stamp: tuple[int, int, int] = (0, 0, 0)  # RECORD's inode, size, mtime when read

    def file(self, repo_path: str, package_dir: str = _DIST_NAME) -> Path:
        """Return the on-disk path of a repository path."""
        return self.root / package_dir / repo_path

    def is_current(self) -> bool:
        """Return True when the dist-info on disk is still the one this was read from."""
        try:
            return _stamp(self.dist_info / RECORD) == self.stamp
        except OSError:
            return False


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class FileChange:
    """One file's bytes before and after."""

    repo_path: str
    path: Path
    old: bytes
    new: bytes


@dataclass(frozen=True)
class StaleBytecode:
    """A ``__pycache__`` entry of a replaced module (any interpreter, level, invalidation mode)."""

    path: Path
    sha256: str


@dataclass(frozen=True)
class DistFile:
    """One file of the dist-info folder: its sha256 now (None: absent) and its bytes after."""

    name: str
    old_sha256: str | None
    new: bytes | None  # None: removed
    link_from: str | None = None  # a file of the folder that holds ``new`` now


@dataclass(frozen=True)
class MetadataChange:
    """The dist-info rewrite of a plan."""

    dist_info: str  # folder name now
    to: str  # folder name after (equal when not renamed)
    version: str  # METADATA's Version after
    state: MetadataState  # after
    files: tuple[DistFile, ...]


@dataclass(frozen=True)
class Plan:
    """Everything a commit will write, computed and checked without writing."""

    target: Target
    reverse: bool
    changes: tuple[FileChange, ...]
    unchanged: tuple[str, ...]  # already in the wanted state
    bytecode: tuple[StaleBytecode, ...] = ()
    metadata: MetadataChange | None = None
    recovery: journal.Recovery | None = None  # what settling an earlier run did first

    @property
    def is_noop(self) -> bool:
        """Return True when every file and the dist-info are already in the wanted state."""
        return not self.changes and not self.bytecode and self.metadata is None


# --- finding the target ----------------------------------------------------------------------


def _site_packages_of(path: Path) -> list[Path]:
    candidates = sorted(path.glob("lib/python3*/site-packages")) + sorted(
        path.glob("Lib/site-packages")
    )
    found: dict[Path, Path] = {}
    for candidate in candidates:
        if any(candidate.glob(f"{_DIST_NAME}-*.dist-info")):
            found.setdefault(candidate.resolve(), candidate)
    return list(found.values())


def find_target(path: Path) -> Target:
    """Locate the executorch tree at ``path`` (site-packages, venv, unpacked wheel).

    Refuses, naming both, a venv whose two site-packages hold executorch and a folder with
    two executorch dist-infos: patching one of them silently would leave the other.
    """
    root = path.resolve()  # one spelling of the target for its lock, journal and paths
    if root.name == _DIST_NAME and any(root.parent.glob(f"{_DIST_NAME}-*.dist-info")):
        root = root.parent
    if not any(root.glob(f"{_DIST_NAME}-*.dist-info")):
        sites = _site_packages_of(root)
        if len(sites) > 1:
            raise TargetError(
                f"{path} holds executorch in {len(sites)} site-packages folders",
                expected="one executorch installation",
                found=", ".join(str(s) for s in sites),
                hint="pass the site-packages folder to patch with --target",
            )
        root = sites[0] if sites else root
    dist_infos = sorted(root.glob(f"{_DIST_NAME}-*.dist-info"))
    if len(dist_infos) != 1:
        raise TargetError(
            f"no single executorch installation at {path}",
            expected="a folder with executorch/ and one executorch-*.dist-info "
            "(site-packages, a venv, or an unpacked wheel)",
            found=", ".join(str(d) for d in dist_infos) or "no executorch-*.dist-info",
            hint="pass the site-packages folder of the environment to patch; remove a stale"
            " dist-info by reinstalling executorch",
        )
    stamp = _stamp(dist_infos[0] / RECORD) if (dist_infos[0] / RECORD).is_file() else (0, 0, 0)
    info = read_dist_info(dist_infos[0])
    return Target(root, info.path, info.version, info.record_paths, info, stamp)


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
        _refuse_symlink(current, wheel_path)
    if not current.resolve().is_relative_to(root):
        raise UnsafePatchError(f"{wheel_path} resolves outside {root}")
    return current


def _refuse_symlink(path: Path, what: str) -> None:
    if path.is_symlink():
        raise UnsafePatchError(
            f"{what} goes through a symlink at {path}",
            expected="real files and folders inside the target",
            found=f"{path} -> {os.readlink(path)}",
            hint="patch a real installation, not a link farm",
        )


# --- reading the tree ------------------------------------------------------------------------


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


def metadata_state(dist_info: Path) -> tuple[MetadataState, str | None]:
    """Return what the dist-info says, and the series digest its provenance names."""
    provenance_file = dist_info / PROVENANCE_FILE
    if not provenance_file.exists():
        return MetadataState.STOCK, None
    provenance = parse_provenance(read_text(provenance_file))
    digest = provenance.series_digest if provenance else None
    if (dist_info / ORIGINAL_FILE).exists():
        return MetadataState.IN_PLACE, digest
    return MetadataState.WHEEL, digest


# --- planning --------------------------------------------------------------------------------


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
    meta, meta_series = metadata_state(target.dist_info)
    _refuse_wheel_metadata(series, target, reverse, meta, meta_series)
    changes, unchanged = [], []
    for repo_path, read in files.items():
        if read.state is want:
            unchanged.append(repo_path)
            continue
        new = transform_checked(series, repo_path, read.data, reverse=reverse)
        changes.append(FileChange(repo_path, read.path, read.data, new))
    after = {p: (read.data if read.state is want else b"") for p, read in files.items()}
    after.update({c.repo_path: c.new for c in changes})
    metadata = _plan_metadata(series, target, reverse, meta, after)
    return Plan(
        target,
        reverse,
        tuple(changes),
        tuple(unchanged),
        _stale_bytecode(changes),
        metadata,
    )


def _refuse_wheel_metadata(
    series: Series, target: Target, reverse: bool, meta: MetadataState, digest: str | None
) -> None:
    if meta is not MetadataState.WHEEL or (not reverse and digest == series.digest):
        return
    raise TargetError(
        f"{target.dist_info.name} was installed from a patched wheel"
        + ("" if reverse else f" of another series ({(digest or '?')[:10]})"),
        expected="executorch as released (to patch in place) or patched in place by `apply`",
        found=f"{PROVENANCE_FILE} of a patched wheel, no {ORIGINAL_FILE}",
        hint=f"reinstall: `uv pip install --reinstall executorch=={series.pins.executorch}`"
        " for stock, or the current patched wheel (`nox -s build_patched_executorch`)",
    )


def _stale_bytecode(changes: list[FileChange]) -> tuple[StaleBytecode, ...]:
    """Return every ``__pycache__`` entry compiled from a file the plan replaces."""
    found = []
    for change in changes:
        cache = change.path.parent / "__pycache__"
        _refuse_symlink(cache, str(change.path))
        if not cache.is_dir():
            continue
        for pyc in sorted(cache.glob(f"{change.path.stem}.*.pyc")):
            try:
                source = importlib.util.source_from_cache(str(pyc))
            except (ValueError, NotImplementedError):
                continue
            if Path(source) != change.path:
                continue
            _refuse_symlink(pyc, str(change.path))
            found.append(StaleBytecode(pyc, sha256_file(pyc)))
    return tuple(found)


def _bytecode_rows(series: Series, record: frozenset[str]) -> set[str]:
    """Return the RECORD rows of bytecode compiled from a file the series patches."""
    sources = {series.pins.wheel_path(p) for p in series.targets()}
    rows = set()
    for path in record:
        if "/__pycache__/" not in path or not path.endswith(".pyc"):
            continue
        try:
            source = importlib.util.source_from_cache(path)
        except (ValueError, NotImplementedError):
            continue
        if source in sources:
            rows.add(path)
    return rows


def _plan_metadata(
    series: Series,
    target: Target,
    reverse: bool,
    meta: MetadataState,
    after: dict[str, bytes],
) -> MetadataChange | None:
    """Compute the dist-info the tree should have after the plan; None when it has it."""
    if meta is MetadataState.WHEEL or (reverse and meta is MetadataState.STOCK):
        return None
    dist = target.dist_info
    info = target.info
    rows, record_text = info.record, info.record_text
    if meta is MetadataState.IN_PLACE:
        original = Original.read(dist / ORIGINAL_FILE)
        if not _DIST_INFO_RE.match(original.dist_info):
            raise TargetError(
                f"{dist / ORIGINAL_FILE} names an odd folder",
                expected="executorch-<version>.dist-info",
                found=repr(original.dist_info),
                hint="reinstall executorch",
            )
        record_text = read_text(dist / ORIGINAL_RECORD)
        if not reverse:
            rows = parse_record(record_text, where=f"{original.dist_info}/{RECORD}")
    else:
        original = Original(TOOL, series.digest, dist.name, info.metadata_text)
    links = {ORIGINAL_RECORD: RECORD} if meta is MetadataState.STOCK else {RECORD: ORIGINAL_RECORD}
    if reverse:
        name, version = original.dist_info, str(series.pins.executorch)
        wanted: dict[str, bytes | None] = {
            METADATA: original.metadata.encode(),
            RECORD: record_text.encode(),
            PROVENANCE_FILE: None,
            ORIGINAL_FILE: None,
            ORIGINAL_RECORD: None,
        }
    else:
        version = local_version(series)
        name = f"{_DIST_NAME}-{version}.dist-info"
        wanted = _patched_dist_info(
            series,
            original,
            rows=rows,
            record_text=record_text,
            name=name,
            version=version,
            after=after,
        )
    files = []
    for file_name, new in wanted.items():
        path = dist / file_name
        old = sha256_file(path) if path.is_file() else None
        if new is None and old is None:
            continue
        if new is not None and old == sha256_bytes(new):
            continue
        files.append(DistFile(file_name, old, new, links.get(file_name)))
    if not files and name == dist.name:
        return None
    state = MetadataState.STOCK if reverse else MetadataState.IN_PLACE
    return MetadataChange(dist.name, name, version, state, tuple(files))


def _patched_dist_info(
    series: Series,
    original: Original,
    *,
    rows: tuple[RecordEntry, ...],
    record_text: str,
    name: str,
    version: str,
    after: dict[str, bytes],
) -> dict[str, bytes | None]:
    """Return the dist-info files of the patched tree, computed from the original ones."""
    where = f"{original.dist_info}/{METADATA}"
    metadata = patched_metadata(series, original.metadata, where=where).encode()
    provenance = make_provenance(
        series,
        {
            series.pins.wheel_path(p): FileRecord(
                series.pins.pristine_sha256(p), sha256_bytes(after[p])
            )
            for p in series.targets()
        },
        base_wheel=f"{original.dist_info} (patched in place)",
        base_sha256="",
    ).to_json()
    kept = dataclasses.replace(original, tool=TOOL, series_digest=series.digest).to_json()
    contents = {
        f"{name}/{METADATA}": metadata,
        f"{name}/{PROVENANCE_FILE}": provenance.encode(),
        f"{name}/{ORIGINAL_FILE}": kept.encode(),
        f"{name}/{ORIGINAL_RECORD}": record_text.encode(),
        **{series.pins.wheel_path(p): data for p, data in after.items()},
    }
    record = rewrite_record(
        rows,
        line_end="\r\n" if "\r\n" in record_text else "\n",
        rename=(original.dist_info, name),
        contents=contents,
        unhash=_bytecode_rows(series, frozenset(row.path for row in rows)),
    )
    return {
        METADATA: metadata,
        RECORD: record.encode(),
        PROVENANCE_FILE: provenance.encode(),
        ORIGINAL_FILE: kept.encode(),
        ORIGINAL_RECORD: record_text.encode(),
    }


# --- the transaction -------------------------------------------------------------------------


def _journal_changes(plan_: Plan) -> list[journal.Change]:
    """Turn a plan into the journal's steps: sources, bytecode, dist-info files, the rename."""
    root = plan_.target.root

    def rel(path: Path) -> str:
        return path.relative_to(root).as_posix()

    steps: list[journal.Change] = [
        journal.Write(rel(c.path), c.new, sha256_bytes(c.old)) for c in plan_.changes
    ]
    steps += [journal.Delete(rel(b.path), b.sha256) for b in plan_.bytecode]
    meta = plan_.metadata
    if meta is not None:
        like = f"{meta.dist_info}/{METADATA}"
        for file in meta.files:
            path = f"{meta.dist_info}/{file.name}"
            if file.new is None:
                steps.append(journal.Delete(path, str(file.old_sha256)))
            else:
                link = f"{meta.dist_info}/{file.link_from}" if file.link_from else None
                steps.append(
                    journal.Write(path, file.new, file.old_sha256, like=like, link_from=link)
                )
        if meta.to != meta.dist_info:
            steps.append(journal.Rename(meta.dist_info, meta.to))
    return steps


@contextlib.contextmanager
def locked(target: Target, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the target's lock; raise BusyError if another run keeps it."""
    path = journal.lock_file(target.root)
    try:
        fd = _mutex.acquire(path, timeout=timeout)
    except OSError as exc:
        raise _lock_error(path, exc) from exc
    if fd is None:
        raise BusyError(
            f"another overlay run holds the lock on {target.root}",
            expected=f"the lock within {timeout:.0f} s",
            found=f"{path} still held",
            hint="wait for the other run to finish, then retry",
        )
    try:
        journal.hand_over(target.root)
        yield
    finally:
        _mutex.release(path, fd, remove_folder=True)


def _lock_error(path: Path, exc: OSError) -> TargetError:
    if isinstance(exc, IsADirectoryError):
        found, hint = f"{path} is a directory", f"remove it (`rmdir {path}`)"
    elif isinstance(exc, PermissionError):
        owner = path.parent.parent.stat().st_uid
        found = f"permission denied (running as uid {os.geteuid()}, the tree belongs to {owner})"
        hint = "run as the owner of the environment, or with sudo"
    else:
        found, hint = f"{type(exc).__name__}: {exc}", f"make {path.parent} a writable folder"
    return TargetError(
        f"cannot take the lock of {path.parent.parent}",
        expected=f"a lock file at {path} (created beside the dist-info, deleted after the run)",
        found=found,
        hint=hint,
    )


def _operation(reverse: bool) -> journal.Operation:
    return journal.Operation.REVERT if reverse else journal.Operation.APPLY


def _settle(target: Target, series: Series, *, reverse: bool) -> journal.Recovery | None:
    """Finish (same command) or undo (the other) an interrupted run; remove its leftovers."""
    wanted = _operation(reverse)

    def prefer(interrupted: journal.Operation) -> journal.Direction:
        return journal.Direction.FORWARD if interrupted is wanted else journal.Direction.BACK

    recovery = journal.recover(target.root, prefer)
    stale = _remove_stale_staging(series, target)
    if not stale:
        return recovery
    if recovery is None:
        return journal.Recovery(None, None, 0, "", 0, 0, (), stale)
    return dataclasses.replace(recovery, removed=recovery.removed + stale)


def _remove_stale_staging(series: Series, target: Target) -> tuple[str, ...]:
    """Remove ``.NAME.*.overlay-tmp`` files an older version of this tool left when killed."""
    folders = {target.file(p).parent for p in series.targets()}
    removed = []
    for folder in sorted(folders):
        for path in sorted(folder.glob(STALE_STAGING)) if folder.is_dir() else ():
            if path.is_file() and not path.is_symlink():
                path.unlink()
                removed.append(path.relative_to(target.root).as_posix())
    return tuple(removed)


def apply(series: Series, target: Target, *, reverse: bool = False) -> Plan:
    """Apply (or with ``reverse``, revert) the series under the target's lock.

    First settles a run an earlier command left unfinished (``Plan.recovery`` says how).
    Re-running is a no-op success: files already in the wanted state are left alone.
    """
    with locked(target):
        recovery = _settle(target, series, reverse=reverse)
        current = target if target.is_current() else find_target(target.root)
        result = plan(series, current, reverse=reverse)
        journal.commit(current.root, _operation(reverse), series.digest, _journal_changes(result))
    return dataclasses.replace(result, recovery=recovery)


# --- status ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    """The state of a target as `status`, `check` and `verify-install` see it."""

    target: Target
    series_digest: str
    state: TreeState
    files: dict[str, FileState]  # empty when interrupted or busy
    metadata: MetadataState
    metadata_series: str | None  # the series the dist-info's provenance names
    interrupted: journal.Journal | None = None
    steps_done: int = 0

    @property
    def complete(self) -> bool:
        """Return True when files and dist-info both say: patched by this series."""
        return (
            self.state is TreeState.PATCHED
            and self.metadata is not MetadataState.STOCK
            and self.metadata_series == self.series_digest
        )

    @property
    def summary(self) -> str:
        """Return the one-line state `status` prints."""
        if self.interrupted is not None:
            run = self.interrupted
            return (
                f"interrupted {run.operation.value} (pid {run.pid}, started {run.started},"
                f" {self.steps_done} of {len(run.steps)} steps done): run `apply` or `revert`"
            )
        if self.state is TreeState.BUSY:
            return "busy: another overlay run is writing this tree"
        if self.state is TreeState.PATCHED and self.metadata is MetadataState.STOCK:
            return "patched files, stock dist-info: run `apply` to record the patch in it"
        if self.state is TreeState.PATCHED and not self.complete:
            return (
                f"patched, but the dist-info names series {(self.metadata_series or '?')[:10]}:"
                " run `apply`"
            )
        if self.state is TreeState.PRISTINE and self.metadata is not MetadataState.STOCK:
            return f"pristine files, {self.metadata.value} dist-info: run `revert` or `apply`"
        if self.state is TreeState.PATCHED:
            return f"patched ({self.metadata.value}, executorch {self.target.version})"
        if self.state is TreeState.MIXED:
            return "mixed: some files patched, some pristine: run `apply` or `revert`"
        return str(self.state.value)


def inspect(series: Series, target: Target) -> Status:
    """Read the state of ``target`` without changing it (a busy lock is reported, not waited)."""
    path = journal.lock_file(target.root)
    try:
        fd = _mutex.acquire(path, timeout=0)
        busy = fd is None
    except OSError:
        fd, busy = None, False  # a read-only tree: read without the lock
    try:
        meta, meta_series = metadata_state(target.dist_info)
        if busy:
            return Status(target, series.digest, TreeState.BUSY, {}, meta, meta_series)
        pending = journal.read_journal(target.root)
        if pending is not None:
            done = journal.steps_done(target.root, pending)
            return Status(
                target,
                series.digest,
                TreeState.INTERRUPTED,
                {},
                meta,
                meta_series,
                pending,
                done,
            )
        files = file_states(series, target)
        kinds = set(files.values())
        if kinds & {FileState.DRIFTED, FileState.MISSING}:
            state = TreeState.DRIFTED
        elif kinds == {FileState.PATCHED}:
            state = TreeState.PATCHED
        elif kinds == {FileState.PRISTINE}:
            state = TreeState.PRISTINE
        else:
            state = TreeState.MIXED
        return Status(target, series.digest, state, files, meta, meta_series)
    finally:
        if fd is not None:
            _mutex.release(path, fd, remove_folder=True)


def preview(series: Series, target: Target, *, reverse: bool = False) -> Plan:
    """Dry run for `check`: refuse an interrupted, busy or mixed tree; else return the plan."""
    status = inspect(series, target)
    if status.state is TreeState.BUSY:
        raise BusyError(
            f"another overlay run is writing {target.root}",
            expected="no other run",
            found=f"{journal.lock_file(target.root)} held",
            hint="wait for it to finish, then check again",
        )
    if status.state in (TreeState.INTERRUPTED, TreeState.MIXED):
        files = ", ".join(f"{p}: {s.value}" for p, s in status.files.items())
        raise UnfinishedRunError(
            f"{target.root} is between pristine and patched: {status.summary}",
            expected="a tree that is pristine or patched",
            found=f"the journal {journal.journal_file(target.root)}"
            if status.interrupted
            else files,
            hint=f"`python -m overlay apply --target {target.root}` finishes it,"
            f" `python -m overlay revert --target {target.root}` undoes it",
        )
    return plan(series, target, reverse=reverse)
