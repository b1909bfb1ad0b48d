"""Distribution metadata: METADATA's version and RECORD, read and written in one place."""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from installer.records import Hash, InvalidRecordEntry, RecordEntry, parse_record_file
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from overlay import codec
from overlay._hashing import record_digest
from overlay.codec import CodecError
from overlay.errors import TargetError

METADATA = "METADATA"
RECORD = "RECORD"
# The dist-info as it was before an in-place apply: folder name and METADATA, and RECORD
# itself (the same inode, kept by a hardlink), so `revert` restores both byte for byte.
ORIGINAL_FILE = "ARM_OVERLAY_ORIGINAL.json"
ORIGINAL_RECORD = "ARM_OVERLAY_ORIGINAL_RECORD"


def decode_text(data: bytes, *, where: str) -> str:
    """Decode a metadata file as UTF-8; refuse anything else with the byte's position."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TargetError(
            f"{where} is not UTF-8 text",
            expected="UTF-8 metadata, as every installer writes it",
            found=f"byte 0x{data[exc.start]:02x} at offset {exc.start}",
            hint="reinstall the distribution (`uv pip install --reinstall ...`)",
        ) from exc


def read_text(path: Path) -> str:
    """Read a dist-info file as UTF-8 text with a clear error when it is unreadable."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TargetError(
            f"cannot read {path}",
            expected="a readable file every installed wheel has",
            found=str(exc),
            hint="reinstall the distribution with pip or uv",
        ) from exc
    return decode_text(data, where=str(path))


def metadata_version(text: str, *, where: str) -> Version:
    """Return the ``Version:`` of a METADATA text."""
    raw = HeaderParser().parsestr(text).get("Version")
    if raw is None:
        raise TargetError(
            f"{where} has no Version field",
            expected="a 'Version:' header",
            found="none",
            hint="reinstall the distribution",
        )
    try:
        return Version(str(raw).strip())
    except InvalidVersion as exc:
        raise TargetError(f"{where}: unreadable version", found=str(raw)) from exc


def set_metadata_version(text: str, version: str, *, where: str) -> str:
    """Return METADATA with its ``Version:`` line replaced (every other byte kept)."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("Version:"):
            lines[index] = f"Version: {version}"
            return "\n".join(lines)
        if not line.strip():
            break  # end of the headers
    raise TargetError(f"{where} has no Version field", hint="use an unmodified wheel")


def set_requirements(text: str, requires: Sequence[str], extras: Sequence[str]) -> str:
    """Return METADATA whose ``Requires-Dist`` of the named packages are exactly ``requires``.

    Example: ``Requires-Dist: torch>=2.11.0`` with requires ``torch==2.11.*`` becomes
    ``Requires-Dist: torch==2.11.*``; each of ``extras`` not yet declared gets a
    ``Provides-Extra`` line. Every other byte is kept.
    """
    names = {canonicalize_name(Requirement(r).name) for r in requires}
    head, sep, body = text.partition("\n\n")
    lines: list[str] = []
    insert_at = None
    declared = set()
    for line in head.split("\n"):
        key, _, value = line.partition(":")
        if key == "Provides-Extra":
            declared.add(value.strip())
        if key == "Requires-Dist":
            if canonicalize_name(Requirement(value.strip()).name) in names:
                insert_at = len(lines)
                continue
            insert_at = len(lines) + 1
        lines.append(line)
    new = [f"Provides-Extra: {e}" for e in extras if e not in declared]
    new += [f"Requires-Dist: {r}" for r in requires]
    at = len(lines) if insert_at is None else insert_at
    lines[at:at] = new
    return "\n".join(lines) + sep + body


def set_generator(text: str, generator: str) -> str:
    """Return WHEEL with its ``Generator:`` line replaced."""
    return "\n".join(
        f"Generator: {generator}" if line.startswith("Generator:") else line
        for line in text.split("\n")
    )


@functools.lru_cache(maxsize=4)
def _record_rows(text: str) -> tuple[RecordEntry, ...]:
    """Parse RECORD rows (cached: one apply reads the same RECORD several times, a test's
    kill matrix hundreds; 5,327 rows take 16 ms; nothing changes a RecordEntry after parsing)."""
    return tuple(
        RecordEntry.from_elements(path, hash_, size)
        for path, hash_, size in parse_record_file(text.splitlines())
    )


def parse_record(text: str, *, where: str) -> tuple[RecordEntry, ...]:
    """Parse RECORD rows into :class:`installer.records.RecordEntry` values."""
    try:
        return _record_rows(text)
    except (InvalidRecordEntry, ValueError, csv.Error) as exc:
        raise TargetError(
            f"{where} is not a valid RECORD",
            expected="rows of path,sha256=<digest>,size",
            found=str(exc),
            hint="reinstall the distribution",
        ) from exc


def format_record(entries: Iterable[RecordEntry], *, line_end: str = "\n") -> str:
    """Render RECORD rows the way installers write them (CSV, ``\\n`` line ends by default)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=line_end).writerows(entry.to_row() for entry in entries)
    return buffer.getvalue()


def rewrite_record(
    rows: Iterable[RecordEntry],
    *,
    line_end: str,
    rename: tuple[str, str],
    contents: Mapping[str, bytes],
    unhash: Iterable[str] = (),
) -> str:
    """Return RECORD text with the dist-info folder renamed and its rows true again.

    ``rename``: (old, new) dist-info folder name; every row under it moves. ``contents``:
    path (after the rename) -> the bytes it now holds; its row is rehashed, or added before
    RECORD's own row. ``unhash``: paths whose file is gone but stays owned (stale bytecode:
    the row keeps the path, without a hash).
    """
    old, new = rename
    out: list[RecordEntry] = []
    gone = set(unhash)
    seen = set()
    for entry in rows:
        moved = entry.path.startswith(old + "/")
        path = new + entry.path[len(old) :] if moved else entry.path
        if path in contents:
            out.append(record_entry(path, contents[path]))
            seen.add(path)
        elif entry.path in gone and entry.hash_ is not None:
            out.append(RecordEntry(path, None, None))
        else:
            out.append(RecordEntry(path, entry.hash_, entry.size))
    added = [record_entry(path, data) for path, data in contents.items() if path not in seen]
    own = next((i for i, e in enumerate(out) if e.path == f"{new}/{RECORD}"), len(out))
    out[own:own] = added
    return format_record(out, line_end=line_end)


def record_entry(path: str, data: bytes) -> RecordEntry:
    """Return the RECORD row of a file with these bytes."""
    return RecordEntry(path, Hash("sha256", record_digest(data)), len(data))


@dataclass(frozen=True)
class DistInfo:
    """One ``.dist-info`` folder as read from disk."""

    path: Path
    version: Version
    record: tuple[RecordEntry, ...]
    metadata_text: str
    record_text: str

    @property
    def record_paths(self) -> frozenset[str]:
        """Return every path RECORD lists."""
        return frozenset(entry.path for entry in self.record)


def read_dist_info(path: Path) -> DistInfo:
    """Read the version and RECORD of an installed ``.dist-info`` folder."""
    metadata = read_text(path / METADATA)
    version = metadata_version(metadata, where=str(path / METADATA))
    record_text = read_text(path / RECORD)
    record = parse_record(record_text, where=str(path / RECORD))
    return DistInfo(path, version, record, metadata, record_text)


@dataclass(frozen=True)
class Original:
    """The dist-info as it was before an in-place apply (its RECORD is ``ORIGINAL_RECORD``)."""

    tool: str
    series_digest: str
    dist_info: str  # folder name
    metadata: str  # METADATA text, byte for byte (UTF-8)

    def to_json(self) -> str:
        """Return the JSON text (sorted keys: the same original gives the same bytes)."""
        return codec.dumps(self, indent=1) + "\n"

    @staticmethod
    def read(path: Path) -> Original:
        """Read ``ORIGINAL_FILE``; refuse a malformed one with a clear TargetError."""
        try:
            return codec.loads(Original, read_text(path), where=path.name)
        except CodecError as exc:
            raise TargetError(
                f"{path} is unreadable",
                expected="the original folder name and METADATA an in-place apply saved",
                found=f"{exc.message} ({exc.found})",
                hint="reinstall executorch (`uv pip install --reinstall executorch==<pin>`)",
            ) from exc
