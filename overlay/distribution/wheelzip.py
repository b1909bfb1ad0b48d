"""Read a wheel with every member checked against its RECORD; write one deterministically.

Hand-written: pypa/wheel's ``WheelFile`` is no public API, and ``installer`` checks a whole
archive at once where a repack reads a few members.
"""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from installer.records import RecordEntry

from overlay.distribution import distinfo
from overlay.distribution.distinfo import RECORD
from overlay.errors import OverlayError, WheelError

SIGNATURES = ("RECORD.jws", "RECORD.p7s")  # signature files RECORD does not list
STRONG_HASHES = ("sha256", "sha384", "sha512", "blake2b", "blake2s", "sha3_256", "sha3_512")
DEFAULT_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold
# A regular file, rw-rw-r--: the mode RECORD (and a member given no other) gets, as
# pypa/wheel writes it, so a repack here gives the bytes the locks pin.
DEFAULT_MODE = 0o100664 << 16
_UNIX = 3  # ZipInfo.create_system of an archive made on Unix (zipfile's default on Windows: 0)
NO_REPACK_HINT = "delete it from the cache and run again"


def _unreadable(wheel: Path, detail: str) -> WheelError:
    return WheelError(
        f"{wheel.name} is not a readable wheel: {detail}",
        expected="a zip whose members match its RECORD",
        found=detail,
        hint=NO_REPACK_HINT,
    )


def dist_info_of(names: Iterable[str], *, where: str) -> str:
    """Return the one top-level ``*.dist-info`` folder among archive member names."""
    found = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(found) != 1:
        raise WheelError(
            f"{where} has {len(found)} .dist-info folders",
            expected="exactly one <name>-<version>.dist-info",
            found=", ".join(found) or "none",
            hint=NO_REPACK_HINT,
        )
    return found[0]


class WheelArchive:
    """An open wheel: its members, each read checked against its RECORD row."""

    def __init__(self, path: Path, archive: zipfile.ZipFile) -> None:
        self.path = path
        self.zip = archive
        self.infos = [i for i in archive.infolist() if not i.is_dir()]
        self.dist_info = dist_info_of((i.filename for i in self.infos), where=path.name)
        try:
            record = archive.read(f"{self.dist_info}/{RECORD}")
        except KeyError:
            raise _unreadable(path, f"no {self.dist_info}/{RECORD}") from None
        where = f"{path.name}: {self.dist_info}/{RECORD}"
        try:
            rows = distinfo.parse_record(distinfo.decode_text(record, where=where), where=where)
        except OverlayError as exc:
            raise _unreadable(path, exc.message) from exc
        self.rows: dict[str, RecordEntry] = {row.path: row for row in rows}
        for info in self.infos:
            name = info.filename
            if name.removeprefix(f"{self.dist_info}/") in (RECORD, *SIGNATURES):
                continue
            row = self.rows.get(name)
            if row is None or row.hash_ is None:
                raise _unreadable(path, f"{name} has no hash in RECORD")
            if row.hash_.name not in STRONG_HASHES:
                raise _unreadable(path, f"{name} has a {row.hash_.name} hash (PEP 427: sha256+)")

    def read(self, name: str) -> bytes:
        """Return a member's bytes after checking them against RECORD."""
        data = self.zip.read(name)
        row = self.rows.get(name)
        if row is not None and not row.validate_stream(io.BytesIO(data)):
            raise _unreadable(self.path, f"{name} does not match its RECORD row")
        return data


@contextlib.contextmanager
def open_wheel(path: Path) -> Iterator[WheelArchive]:
    """Open a wheel for checked reading; a damaged zip is a WheelError naming the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            yield WheelArchive(path, archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise _unreadable(path, f"{type(exc).__name__}: {exc}") from exc


def read_members(wheel: Path, select: Callable[[str], bool] | None = None) -> dict[str, bytes]:
    """Return ``{member name: bytes}`` of the selected file members (all when None)."""
    with open_wheel(wheel) as archive:
        return {
            info.filename: archive.read(info.filename)
            for info in archive.infos
            if select is None or select(info.filename)
        }


def member(name: str, like: zipfile.ZipInfo | None = None) -> zipfile.ZipInfo:
    """Return the ZipInfo of a member: deflated, ``like``'s date and mode (or 1980, 0664)."""
    info = zipfile.ZipInfo(name, like.date_time if like else DEFAULT_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = _UNIX
    info.external_attr = like.external_attr if like else DEFAULT_MODE
    return info


class WheelWriter:
    """Write a wheel member by member; closing it writes RECORD (dated like ``record_like``, 0664).

    RECORD lists every member in the order added, then itself. A member named RECORD of
    the dist-info is skipped: RECORD is always written anew. On an exception the file is
    closed without RECORD (the caller writes into a scratch folder and discards it).
    """

    def __init__(self, path: Path, *, record_like: zipfile.ZipInfo | None = None) -> None:
        self.path = path
        self.record_like = record_like
        self.rows: list[RecordEntry] = []
        self.zip = zipfile.ZipFile(path, "w")

    def add(self, name: str, data: bytes, *, like: zipfile.ZipInfo | None = None) -> None:
        """Add one member with ``like``'s date and mode (default: the zip epoch, 0664)."""
        if name.endswith(f".dist-info/{RECORD}"):
            return
        self.zip.writestr(member(name, like), data)
        self.rows.append(distinfo.record_entry(name, data))

    def __enter__(self) -> WheelWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is None:
                where = self.path.name
                record = f"{dist_info_of((r.path for r in self.rows), where=where)}/{RECORD}"
                rows = [*self.rows, RecordEntry(record, None, None)]
                info = member(record, self.record_like)
                info.external_attr = DEFAULT_MODE
                self.zip.writestr(info, distinfo.format_record(rows))
        finally:
            self.zip.close()
