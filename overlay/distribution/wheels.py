"""Fetch a pinned executorch wheel and repack it with the series applied (cached by content)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from overlay import _mutex, _process
from overlay._cache import cache_dir
from overlay._faults import fault_point
from overlay._hashing import sha256_bytes, sha256_file
from overlay.distribution import provenance as _provenance
from overlay.distribution import wheelzip
from overlay.distribution.distinfo import METADATA, decode_text, metadata_version, set_generator
from overlay.distribution.provenance import (
    PROVENANCE_FILE,
    FileRecord,
    Provenance,
    local_version,
    make_provenance,
    parse_provenance,
    patched_metadata,
)
from overlay.errors import TargetError, WheelError
from overlay.lines.pins import WheelPin
from overlay.text.applier import transform, transform_checked
from overlay.text.series import Series

# Bump when the repack writes other bytes for the same inputs (it keys the wheel cache).
REPACK_FORMAT = 2
WHEEL_FILE = "WHEEL"
LOCK_TIMEOUT_S = 600.0  # a download or repack of the 20 MB wheel takes seconds
BUILD_LOCK = ".overlay-build.lock"  # in --out, deleted when released
DOWNLOAD_LOCK = ".download.lock"  # in the wheel cache, deleted when released


@dataclass(frozen=True)
class BuildResult:
    """A patched wheel on disk and whether this call had to build it."""

    path: Path
    version: str
    built: bool  # False: reused from the output folder or the overlay cache
    provenance: Provenance
    sha256: str = ""
    note: str | None = None  # why the wheel already in the output folder was not reused
    removed: tuple[str, ...] = ()  # stale build folders of killed runs, removed
    linked: bool = False  # put in place from the overlay cache (built there now or before)


def wheel_cache() -> Path:
    """Return the folder downloaded pinned wheels are kept in."""
    return cache_dir() / "wheels"


def patched_cache() -> Path:
    """Return the folder built patched wheels are kept in, one subfolder per content key."""
    return cache_dir() / "patched"


def verify_wheel(path: Path, pin: WheelPin) -> None:
    """Refuse a wheel whose sha256 is not the pinned one."""
    digest = sha256_file(path)
    if digest != pin.sha256:
        raise WheelError(
            f"{path.name} does not match its pinned sha256",
            expected=pin.sha256,
            found=digest,
            hint="delete the file and download it again; if it persists the index "
            "serves a different file than the pin (check pins.toml)",
        )


def fetch_wheel(pin: WheelPin, *, cache: Path | None = None) -> Path:
    """Return the verified wheel for ``pin``, downloading it with pip if it is not cached.

    A pin with an empty sha256 is downloaded unverified; the caller records its hash.
    Downloads into one cache are serialised; folders of killed downloads are removed.
    """
    folder = cache or wheel_cache()
    path = folder / pin.file
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with _folder_lock(folder / DOWNLOAD_LOCK):
            _remove_stale(folder, ".download-*")
            if not path.is_file():  # another run may have fetched it while this one waited
                _download(pin, folder, path)
    if pin.sha256:
        verify_wheel(path, pin)
    return path


def fetch_pinned(pin: WheelPin, progress: Callable[[str], None] = lambda _: None) -> Path:
    """Return the verified pinned wheel from the wheel cache, saying so when it downloads."""
    if not (wheel_cache() / pin.file).is_file():
        progress(f"downloading {pin.file} (pinned sha256 {pin.sha256[:12]}...)")
    return fetch_wheel(pin)


def _download(pin: WheelPin, folder: Path, path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        requirement = f"executorch=={pin.version}"
        if pin.sha256:
            requirement += f" --hash=sha256:{pin.sha256}"
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(requirement + "\n", encoding="utf-8")
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--quiet",
            "--platform", pin.platform, "--python-version", pin.python,
            "--implementation", "cp", "--abi", pin.abi,
            "-r", str(requirements), "-d", tmp,
        ]  # fmt: skip
        if pin.sha256:
            command.append("--require-hashes")

        def refuse(output: str) -> WheelError:
            versions = re.search(r"\(from versions: ([^)]*)\)", output)
            errors = [line for line in output.splitlines() if not line.startswith("WARNING:")]
            found = "\n".join(errors).strip()[-2000:] or "no file"
            hint = "check network access to the package index (`pip config list` shows which)"
            if versions is not None:  # pip's errors, not its warnings, or the versions it has
                have = versions.group(1).strip() or "none"
                found = f"executorch {pin.version} is not on the package index for {pin.tag}"
                found += f" (it has: {have})"
                hint = "pick a version the index has"
            return WheelError(
                f"pip could not download {pin.file}",
                expected=f"{pin.file} from the package index",
                found=found,
                hint=hint,
            )

        _process.run(command, refuse)
        downloaded = Path(tmp) / pin.file
        if not downloaded.is_file():
            raise refuse("")
        if pin.sha256:
            verify_wheel(downloaded, pin)
        os.replace(downloaded, path)


def pin_for_file(series: Series, path: Path) -> WheelPin:
    """Return the pin a local wheel file claims to be, verified by sha256."""
    pin = series.pins.wheel_for(path.name)
    verify_wheel(path, pin)
    return pin


def read_wheel_sources(source: Path, series: Series) -> dict[str, bytes]:
    """Return the pinned pristine bytes of every file the series edits, read from a wheel
    that must ship each of them, as pinned, and none the series creates."""
    wanted = {series.pins.wheel_path(p): p for p in series.targets()}
    members = wheelzip.read_members(source, wanted.__contains__)
    created = {series.pins.wheel_path(p) for p in series.created}
    missing = sorted(set(wanted) - set(members) - created)
    if missing:
        raise TargetError(
            f"{source.name} lacks files the series patches",
            expected=", ".join(sorted(set(wanted) - created)),
            found=f"missing: {', '.join(missing)}",
            hint="the series and the wheel are for different releases",
        )
    shipped = sorted(created & set(members))
    if shipped:
        raise TargetError(
            f"{source.name} ships files the series creates",
            expected=f"no {', '.join(shipped)} (the series creates them)",
            found=f"{', '.join(shipped)} in the wheel",
            hint="the series and the wheel are for different releases: port the patch",
        )
    sources = {wanted[name]: data for name, data in members.items()}
    for repo_path, data in sources.items():
        series.pins.check_pristine(
            repo_path, sha256_bytes(data), where=source.name, hint=wheelzip.NO_REPACK_HINT
        )
    return sources


def read_provenance(path: Path) -> Provenance | None:
    """Return the provenance of a patched wheel, or None if it has none or is unreadable."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            name = next((n for n in names if n.endswith(f".dist-info/{PROVENANCE_FILE}")), "")
            return parse_provenance(archive.read(name).decode("utf-8")) if name else None
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


def patched_wheel_name(pin: WheelPin, series: Series) -> str:
    """Return the file name of the patched wheel for ``pin``."""
    return pin.file.replace(f"-{series.pins.executorch}-", f"-{local_version(series)}-", 1)


def build_record(wheel: Path) -> Path:
    """Return the file holding the sha256 a build recorded for ``wheel`` (hidden, beside it)."""
    return wheel.with_name(f".{wheel.name}.sha256")


def build_patched_wheel(
    series: Series,
    source: Path,
    pin: WheelPin,
    out_dir: Path,
    *,
    force: bool = False,
    cache: Path | None = None,
) -> BuildResult:
    """Repack ``source`` with the series applied into ``out_dir`` (skipped when up to date).

    An existing wheel is reused only when its sha256 is the one recorded when it was built
    and it is a readable wheel of this series; otherwise it is rebuilt and ``note`` says why.
    With ``cache`` (see :func:`patched_cache`) a wheel built before from the same inputs, in
    any checkout, is linked into ``out_dir`` (checked the same way) instead of being repacked.
    Builds into one folder are serialised, and build folders of killed runs are removed.
    """
    out = out_dir / patched_wheel_name(pin, series)
    _make_folder(out_dir, hint="pass a writable --dist")

    def make() -> BuildResult:
        verify_wheel(source, pin)  # only read when something is built or linked from it
        if cache is None:
            return _repacked(series, source, pin, out)
        cached = cached_wheel(series, pin, cache)
        _make_folder(cached.parent, hint="set OVERLAY_CACHE_DIR")
        built = _reused_or(
            series, pin, cached, force, lambda: _repacked(series, source, pin, cached)
        )
        _link_or_copy(cached, out)
        _link_or_copy(build_record(cached), build_record(out))
        return dataclasses.replace(built, path=out, linked=True)

    return _reused_or(series, pin, out, force, make)


def build_action(
    series: Series, pin: WheelPin, out_dir: Path, *, force: bool = False, cache: Path | None = None
) -> str:
    """Return what :func:`build_patched_wheel` would do into ``out_dir`` (reads, never writes).

    ``up to date`` (the wheel there is reused), ``linked from the cache`` (built before, in
    any checkout) or ``built``.
    """
    out = out_dir / patched_wheel_name(pin, series)
    if not force and out.is_file() and _reusable(out, series, pin)[0] is not None:
        return "up to date"
    if not force and cache is not None and cached_wheel(series, pin, cache).is_file():
        return "linked from the cache"
    return "built"


def _reused_or(
    series: Series, pin: WheelPin, out: Path, force: bool, make: Callable[[], BuildResult]
) -> BuildResult:
    """Return the wheel at ``out`` if it can be reused, else what ``make`` builds there.

    Under the folder's lock, after removing the build folders of killed runs in it.
    """
    with _folder_lock(out.parent / BUILD_LOCK):
        removed = _remove_stale(out.parent, ".build-*")
        note = None
        if out.is_file() and not force:
            existing, note = _reusable(out, series, pin)
            if existing is not None:
                version, digest = local_version(series), build_record_sha(out)
                return BuildResult(out, version, False, existing, digest, removed=removed)
        built = make()
    return dataclasses.replace(built, note=note, removed=removed)


def _make_folder(folder: Path, *, hint: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WheelError(f"cannot create {folder}: {exc}", hint=hint) from exc


def cached_wheel(series: Series, pin: WheelPin, cache: Path) -> Path:
    """Return where the cache keeps the patched wheel of ``pin`` (alone in its folder), keyed by
    series, base wheel, requirements, tool and format."""
    parts = (series.digest, pin.sha256, *series.pins.wheel_requirements(), _provenance.TOOL)
    key = hashlib.sha256("\0".join((*parts, str(REPACK_FORMAT))).encode()).hexdigest()
    return cache / key[:24] / patched_wheel_name(pin, series)


def _link_or_copy(source: Path, dest: Path) -> None:
    """Put ``source``'s bytes at ``dest`` atomically (a hardlink when on the same device)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copyfile(source, tmp)
    os.replace(tmp, dest)


@contextlib.contextmanager
def _folder_lock(path: Path) -> Iterator[None]:
    """Serialise writers of one folder (builds into --out, downloads into the cache)."""
    with contextlib.ExitStack() as stack:
        try:  # only taking the lock: an OSError of the block is the block's own
            stack.enter_context(
                _mutex.held(
                    path,
                    timeout=LOCK_TIMEOUT_S,
                    busy=f"another overlay run holds {path}",
                    hint="wait for the other build to finish, then retry",
                )
            )
        except OSError as exc:
            raise WheelError(
                f"cannot lock {path}: {exc}",
                expected="a writable folder (the lock is a file in it)",
                found=type(exc).__name__,
                hint=f"make {path.parent} writable, or remove {path} if it is not a file",
            ) from exc
        yield


def _remove_stale(folder: Path, pattern: str) -> tuple[str, ...]:
    """Remove what killed runs left in ``folder`` (the caller holds the folder's lock)."""
    stale = sorted(folder.glob(pattern))
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return tuple(str(p) for p in stale)


def build_record_sha(wheel: Path) -> str:
    """Return the sha256 recorded when ``wheel`` was built, or "" when none is."""
    try:
        text = build_record(wheel).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if len(text) == 64 else ""


def _reusable(out: Path, series: Series, pin: WheelPin) -> tuple[Provenance | None, str | None]:
    """Return (its provenance, None) if ``out`` can be reused, else (None, why not)."""
    recorded = build_record_sha(out)
    if not recorded:
        return None, f"{out.name} has no recorded sha256 (not built here); replaced"
    found = sha256_file(out)
    if found != recorded:
        return None, (
            f"{out.name} changed since it was built (sha256 {found[:12]}..., recorded"
            f" {recorded[:12]}...); replaced"
        )
    existing = read_provenance(out)
    if existing is None:
        return None, f"{out.name} is not a readable wheel; replaced"
    current = (
        existing.series_digest == series.digest
        and existing.base_sha256 == pin.sha256
        and existing.tool == _provenance.TOOL
        and existing.requires == series.pins.wheel_requirements()
    )
    return (existing, None) if current else (None, None)  # else: an ordinary rebuild


def _repacked(series: Series, source: Path, pin: WheelPin, out: Path) -> BuildResult:
    old_dist = f"executorch-{series.pins.executorch}.dist-info/"
    new_dist = f"executorch-{local_version(series)}.dist-info/"
    sources = read_wheel_sources(source, series)  # RECORD-checked; every target present
    wanted = {series.pins.wheel_path(p): p for p in series.targets()}
    files: dict[str, FileRecord] = {}
    with wheelzip.open_wheel(source) as src:
        names = {i.filename for i in src.infos}
        for required in (old_dist + METADATA, old_dist + "RECORD"):
            if required not in names:
                raise WheelError(
                    f"{source.name} has no {required}",
                    expected=f"an executorch {series.pins.executorch} wheel",
                    found=", ".join(sorted(n for n in names if ".dist-info/" in n)[:4]),
                    hint=wheelzip.NO_REPACK_HINT,
                )
        metadata = decode_text(src.read(old_dist + METADATA), where=old_dist + METADATA)
        series.pins.check_version(metadata_version(metadata, where=old_dist + METADATA))
        record_info = src.zip.getinfo(old_dist + "RECORD")

        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as tmp_dir:
            tmp = Path(tmp_dir) / out.name
            with wheelzip.WheelWriter(tmp, record_like=record_info) as dst:
                for info in src.infos:
                    name = info.filename
                    if name in wanted:
                        pristine = sources[wanted[name]]
                        data = _patched(series, wanted[name], pristine)
                        files[name] = FileRecord(sha256_bytes(pristine), sha256_bytes(data))
                    elif name == old_dist + METADATA:
                        data = patched_metadata(series, metadata, where=name).encode()
                    elif name == old_dist + WHEEL_FILE:
                        wheel_text = decode_text(src.read(name), where=name)
                        data = set_generator(wheel_text, _provenance.TOOL).encode()
                    else:  # RECORD too: the writer skips it and writes it anew
                        data = src.read(name)  # checked against the source's RECORD
                    if name.startswith(old_dist):
                        name = new_dist + name[len(old_dist) :]
                    dst.add(name, data, like=info)
                for repo_path in sorted(series.created):  # new files, dated like RECORD
                    name = series.pins.wheel_path(repo_path)
                    data = _patched(series, repo_path, None)
                    files[name] = FileRecord(None, sha256_bytes(data))
                    dst.add(name, data, like=record_info)
                provenance = make_provenance(
                    series, files, base_wheel=pin.file, base_sha256=pin.sha256
                )
                dst.add(new_dist + PROVENANCE_FILE, provenance.to_json().encode(), like=record_info)
            digest = sha256_file(tmp)
            fault_point("build: wheel written")
            record = Path(tmp_dir) / "sha256"
            record.write_text(digest + "\n", encoding="ascii")
            build_record(out).unlink(missing_ok=True)  # a kill until the last line: no record
            os.replace(tmp, out)
            os.replace(record, build_record(out))
    return BuildResult(out, local_version(series), True, provenance, digest)


def _patched(series: Series, repo_path: str, data: bytes | None) -> bytes:
    """Return a file after the series (None: one it creates), checked against SHA256SUMS."""
    new = transform_checked(series, repo_path, data)
    assert new is not None  # SHA256SUMS records bytes for every file after the series
    return new


def patched_checksums(series: Series, source: Path) -> dict[str, str]:
    """Apply the series to the wheel's pristine files in memory; return their new sha256."""
    sources = {**dict.fromkeys(series.created), **read_wheel_sources(source, series)}
    patched = {path: transform(series.patches, path, data) for path, data in sources.items()}
    return {path: sha256_bytes(new) for path, new in patched.items() if new is not None}
