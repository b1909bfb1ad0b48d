"""Plan an apply or revert of some or all fixes: every check and every new byte, no write. A file
edited by hand is refused only when the run would write it; every path the plan changes must be
writable first; ``ARM_OVERLAY_ORIGINAL.json`` lets the last revert restore the dist-info."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from installer.records import RecordEntry

from overlay._hashing import sha256_bytes, sha256_file
from overlay.distribution.distinfo import (
    METADATA,
    ORIGINAL_FILE,
    ORIGINAL_RECORD,
    RECORD,
    Original,
    parse_record,
    read_text,
    rewrite_record,
    set_metadata_version,
)
from overlay.distribution.provenance import (
    PROVENANCE_FILE,
    TOOL,
    FileRecord,
    local_version,
    make_provenance,
)
from overlay.errors import ApplyError, DriftError, TargetError
from overlay.lines.selection import describe
from overlay.text.applier import HunkMismatchError, transform, transform_checked
from overlay.text.series import Series
from overlay.tree import journal
from overlay.tree.locate import DIST_INFO_RE, DIST_NAME, Target, refuse_symlink
from overlay.tree.state import (
    FileRead,
    FileState,
    MetadataState,
    Record,
    fix_states,
    read_files,
    read_record,
)


@dataclass(frozen=True)
class FileChange:
    """One file's bytes before and after (None: no file, one the series creates)."""

    repo_path: str
    path: Path
    old: bytes | None
    new: bytes | None


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
    chosen: frozenset[int] = frozenset()  # the fixes asked for (every fix without --fix)
    before: frozenset[int] = frozenset()  # the fixes the tree held
    after: frozenset[int] = frozenset()  # the fixes it holds after the commit
    left_alone: tuple[str, ...] = ()  # edited by hand, not written by this run
    not_restored: tuple[str, ...] = ()  # RECORD's .pyc of files a revert makes pristine, absent

    @property
    def is_noop(self) -> bool:
        """Return True when every file and the dist-info are already in the wanted state."""
        return not self.changes and not self.bytecode and self.metadata is None


def plan(
    series: Series,
    target: Target,
    *,
    reverse: bool = False,
    fixes: frozenset[int] | None = None,
) -> Plan:
    """Check everything and compute the new bytes of every file; write nothing.

    ``fixes``: the fixes to apply or revert (None: all of them).
    """
    series.pins.check_version(target.version)
    chosen = series.numbers if fixes is None else frozenset(fixes)
    files = read_files(series, target)
    bad = {
        p: r.state for p, r in files.items() if r.state in (FileState.DRIFTED, FileState.MISSING)
    }
    # files no fix of the run writes are left alone: a revert writes those of fixes held
    held, _ = fix_states(series, {p: r for p, r in files.items() if p not in bad})
    writes = chosen & held if reverse else chosen
    aside = {p for p in bad if not series.touching(p) & writes}
    files = {p: r for p, r in files.items() if p not in aside}
    before, half = fix_states(series, files)
    after = before - chosen if reverse else before | chosen
    # a file set aside must hold none of the fixes the tree keeps (they span files)
    _refuse_drift(
        series, {p: s for p, s in bad.items() if p not in aside or after & series.touching(p)}
    )
    _refuse_half_applied(series, files, half - chosen)
    record = read_record(series, target.dist_info)
    _refuse_wheel_metadata(series, target, reverse, record)
    changes, unchanged = [], []
    now: dict[str, bytes | None] = {}
    for repo_path, read in files.items():
        want = after & series.touching(repo_path)
        if read.fixes == want:
            unchanged.append(repo_path)
            now[repo_path] = read.data
            continue
        new = _bytes_holding(series, read, want, reverse=reverse, chosen=chosen)
        if read.data is None:
            _refuse_no_folder(read.path, target)
        changes.append(FileChange(repo_path, read.path, read.data, new))
        now[repo_path] = new
    bytecode = _stale_bytecode(changes)
    metadata = _plan_metadata(series, target, record, after, now)
    _refuse_unwritable(
        target,
        [c.path for c in changes] + [b.path for b in bytecode],
        metadata is not None,
    )
    return Plan(
        target,
        reverse,
        tuple(changes),
        tuple(unchanged),
        bytecode,
        metadata,
        chosen=chosen,
        before=before,
        after=after,
        left_alone=tuple(sorted(aside)),
        not_restored=_not_restored(series, target, changes) if reverse else (),
    )


def _refuse_drift(series: Series, bad: dict[str, FileState]) -> None:
    """Refuse files that are neither pristine nor patched, saying what reinstalling costs."""
    if not bad:
        return
    listing = "\n".join(f"    {p}: {s.value}" for p, s in bad.items())
    others = series.numbers - frozenset().union(*(series.touching(p) for p in bad))
    rest = f"; or leave them alone: --fix {','.join(map(str, sorted(others)))}" if others else ""
    raise DriftError(
        f"{len(bad)} file(s) are neither pristine nor patched; nothing was written",
        expected=f"executorch {series.pins.executorch} files as pinned, or as fixes of the"
        " series leave them",
        found="other content (edited by hand, or another version of the file)",
        details=listing,
        hint=f"reinstall executorch (`uv pip install --reinstall executorch=="
        f"{series.pins.executorch}`: this discards the edits in those files), then apply"
        f" again{rest}",
    )


def _refuse_unwritable(target: Target, paths: list[Path], dist_info: bool) -> None:
    """Refuse a plan whose files or folders this process cannot change; nothing is written.

    Folders need write permission (a file is replaced by a rename in its folder, or created
    there; the lock and the journal live beside the dist-info). Root passes every mode check:
    what stops it is an immutable file or a read-only file system, which ``os.access``
    reports too (a file the run creates is not there to ask).
    """
    if not paths and not dist_info:
        return
    folders = {target.root} | {p.parent for p in paths}
    if dist_info:
        folders.add(target.dist_info)
        paths = [*paths, *(p for p in target.dist_info.iterdir() if p.is_file())]
    blocked = sorted(f for f in folders if not os.access(f, os.W_OK | os.X_OK))
    if os.geteuid() == 0:
        blocked += sorted(p for p in paths if p.exists() and not os.access(p, os.W_OK))
    if not blocked:
        return
    shown = "\n".join(f"    {p}" for p in blocked[:10])
    more = f"\n    ... and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    raise TargetError(
        f"cannot write {target.root}: {len(blocked)} path(s) are read-only; nothing was written",
        expected="write permission on the files the run changes and on their folders",
        found=f"running as uid {os.geteuid()}; {target.root} belongs to uid"
        f" {target.root.stat().st_uid}",
        details=f"  read-only:\n{shown}{more}",
        hint="run as the owner of the environment, or with sudo (an immutable file:"
        " `chattr -i FILE`; a read-only file system: remount it read-write)",
    )


def _not_restored(series: Series, target: Target, changes: Iterable[FileChange]) -> tuple[str, ...]:
    """Return RECORD's ``.pyc`` of the files a revert makes pristine that are not on disk.

    An apply deletes them with their source; the revert does not write them back (Python
    compiles them again on the next import), and RECORD keeps their rows as installed.
    """
    pristine = {
        series.pins.wheel_path(c.repo_path)
        for c in changes
        if c.new is not None and sha256_bytes(c.new) == series.pins.pristine_sha256(c.repo_path)
    }
    return tuple(
        sorted(
            p
            for p in _bytecode_rows(series, target.record)
            if _source_of(p) in pristine and not (target.root / p).exists()
        )
    )


def _refuse_half_applied(series: Series, files: dict[str, FileRead], half: frozenset[int]) -> None:
    """Refuse a run that leaves a fix in some of its files only (without a journal)."""
    if not half:
        return
    numbers = ",".join(map(str, sorted(half)))
    listing = "\n".join(
        f"    {p}: holds {describe(series, r.fixes)}"
        for p, r in files.items()
        if series.touching(p) & half
    )
    raise DriftError(
        f"{describe(series, half)} in some of their files only; nothing was written",
        expected="each fix in every file it touches, or in none",
        found="files holding different fixes",
        details=listing,
        hint=f"apply or revert them whole (--fix {numbers}), or every fix (no --fix)",
    )


def _refuse_no_folder(path: Path, target: Target) -> None:
    """Refuse creating a file in a folder the tree lacks (a run creates files, not folders)."""
    if not path.parent.is_dir():
        raise TargetError(
            f"{path.relative_to(target.root)} cannot be created: its folder does not exist;"
            " nothing was written",
            expected=f"{path.parent} (executorch installs it)",
            found="no such folder",
            hint="reinstall executorch; a fix that creates a folder needs the patched wheel"
            " (`executorch-arm-overlay build-wheel`)",
        )


def _bytes_holding(
    series: Series, read: FileRead, want: frozenset[int], *, reverse: bool, chosen: frozenset[int]
) -> bytes | None:
    """Return the file's bytes holding exactly the fixes ``want`` (applied to its pristine;
    None: no file). Drifted and missing files were refused before."""
    if not want:
        return read.pristine
    if want == series.touching(read.repo_path):  # checked against SHA256SUMS
        return transform_checked(series, read.repo_path, read.pristine)
    try:
        return transform(series.of(want), read.repo_path, read.pristine)
    except HunkMismatchError as exc:
        others = series.touching(read.repo_path) - want
        together = ",".join(map(str, sorted(chosen | (want if reverse else others))))
        raise ApplyError(
            f"{read.repo_path}: {describe(series, want)} cannot be applied without"
            f" {describe(series, others)} (they edit the same lines); nothing was written",
            expected="fixes that apply on their own to the pinned file",
            found=exc.message,
            hint=f"{'revert' if reverse else 'apply'} them together: --fix {together}",
        ) from exc


def _refuse_wheel_metadata(series: Series, target: Target, reverse: bool, record: Record) -> None:
    digest = record.series_digest
    if record.state is not MetadataState.WHEEL or (not reverse and digest == series.digest):
        return
    raise TargetError(
        f"{target.dist_info.name} was installed from a patched wheel"
        + ("" if reverse else f" of another series ({(digest or '?')[:10]})"),
        expected="executorch as released (to patch in place) or patched in place by `apply`",
        found=f"{PROVENANCE_FILE} of a patched wheel, no {ORIGINAL_FILE}",
        hint=f"reinstall: `uv pip install --reinstall executorch=={series.pins.executorch}`"
        " for stock, or the current patched wheel (`executorch-arm-overlay build-wheel`)",
    )


def _stale_bytecode(changes: list[FileChange]) -> tuple[StaleBytecode, ...]:
    """Return every ``__pycache__`` entry compiled from a file the plan replaces."""
    found = []
    for change in changes:
        cache = change.path.parent / "__pycache__"
        refuse_symlink(cache, str(change.path))
        if not cache.is_dir():
            continue
        for pyc in sorted(cache.glob(f"{change.path.stem}.*.pyc")):
            if _source_of(str(pyc)) == str(change.path):
                refuse_symlink(pyc, str(change.path))
                found.append(StaleBytecode(pyc, sha256_file(pyc)))
    return tuple(found)


def _source_of(pyc: str) -> str | None:
    """Return the source file a ``__pycache__/*.pyc`` path was compiled from (None: not one)."""
    try:
        return importlib.util.source_from_cache(pyc)
    except (ValueError, NotImplementedError):
        return None


def _bytecode_rows(series: Series, record: frozenset[str]) -> set[str]:
    """Return the RECORD rows of bytecode compiled from a file the series patches."""
    sources = {series.pins.wheel_path(p) for p in series.targets()}
    return {
        p
        for p in record
        if "/__pycache__/" in p and p.endswith(".pyc") and _source_of(p) in sources
    }


def _plan_metadata(
    series: Series,
    target: Target,
    record: Record,
    after: frozenset[int],
    now: dict[str, bytes | None],
) -> MetadataChange | None:
    """Compute the dist-info of a tree holding ``after``; None when it has it already."""
    meta = record.state
    if meta is MetadataState.WHEEL or (not after and meta is MetadataState.STOCK):
        return None
    dist = target.dist_info
    info = target.info
    rows, record_text = info.record, info.record_text
    if meta is MetadataState.IN_PLACE:
        original = Original.read(dist / ORIGINAL_FILE)
        if not DIST_INFO_RE.match(original.dist_info):
            raise TargetError(
                f"{dist / ORIGINAL_FILE} names an odd folder",
                expected="executorch-<version>.dist-info",
                found=repr(original.dist_info),
                hint="reinstall executorch",
            )
        record_text = read_text(dist / ORIGINAL_RECORD)
        if after:
            rows = parse_record(record_text, where=f"{original.dist_info}/{RECORD}")
    else:
        original = Original(TOOL, series.digest, dist.name, info.metadata_text)
    links = {ORIGINAL_RECORD: RECORD} if meta is MetadataState.STOCK else {RECORD: ORIGINAL_RECORD}
    if not after:
        name, version = original.dist_info, str(series.pins.executorch)
        wanted: dict[str, bytes | None] = {
            METADATA: original.metadata.encode(),
            RECORD: record_text.encode(),
            PROVENANCE_FILE: None,
            ORIGINAL_FILE: None,
            ORIGINAL_RECORD: None,
        }
    else:
        version = local_version(series, after)
        name = f"{DIST_NAME}-{version}.dist-info"
        wanted = _patched_dist_info(
            series, original, rows=rows, record_text=record_text, name=name, now=now, fixes=after
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
    state = MetadataState.IN_PLACE if after else MetadataState.STOCK
    return MetadataChange(dist.name, name, version, state, tuple(files))


def _patched_dist_info(
    series: Series,
    original: Original,
    *,
    rows: tuple[RecordEntry, ...],
    record_text: str,
    name: str,
    now: dict[str, bytes | None],
    fixes: frozenset[int],
) -> dict[str, bytes | None]:
    """Return the dist-info files of a tree holding ``fixes``, computed from the original."""
    where = f"{original.dist_info}/{METADATA}"
    version = local_version(series, fixes)  # requirements and extras stay as installed
    metadata = set_metadata_version(original.metadata, version, where=where).encode()
    provenance = make_provenance(
        series,
        {
            series.pins.wheel_path(p): FileRecord(series.pristine_sha256(p), sha256_bytes(data))
            for p, data in now.items()
            if series.touching(p) & fixes and data is not None
        },
        base_wheel=f"{original.dist_info} (patched in place)",
        base_sha256="",
        fixes=fixes,
    ).to_json()
    kept = dataclasses.replace(original, tool=TOOL, series_digest=series.digest).to_json()
    contents = {
        f"{name}/{METADATA}": metadata,
        f"{name}/{PROVENANCE_FILE}": provenance.encode(),
        f"{name}/{ORIGINAL_FILE}": kept.encode(),
        f"{name}/{ORIGINAL_RECORD}": record_text.encode(),
        **{series.pins.wheel_path(p): data for p, data in now.items() if data is not None},
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
