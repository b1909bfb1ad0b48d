"""Fetch the pinned executorch wheel and repack it with the series applied.

The patched wheel keeps every file of the original except the patched sources,
the renamed dist-info (``1.2.0+armfix.<series>``), a regenerated RECORD (written
by ``wheel.wheelfile.WheelFile``) and a provenance file.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version
from wheel.wheelfile import WheelError as _WheelFileError
from wheel.wheelfile import WheelFile

from overlay import __version__, pins
from overlay.cache import cache_dir, sha256_bytes, sha256_file
from overlay.errors import TargetError, WheelError
from overlay.series import Series
from overlay.tree import check_version, transform

PROVENANCE_FILE = "ARM_OVERLAY.json"
LOCAL_PREFIX = "armfix"


@dataclass(frozen=True)
class BuildResult:
    """A patched wheel on disk and whether this call had to build it."""

    path: Path
    version: str
    built: bool
    provenance: dict[str, object]


def local_version(series: Series) -> str:
    """Return the PEP 440 version of the patched wheel, e.g. ``1.2.0+armfix.1a2b3c4d5e``."""
    return f"{pins.EXECUTORCH_VERSION}+{LOCAL_PREFIX}.{series.short_digest}"


def wheel_cache() -> Path:
    """Return the folder downloaded pinned wheels are kept in."""
    return cache_dir() / "wheels"


def verify_wheel(path: Path, pin: pins.WheelPin) -> None:
    """Refuse a wheel whose sha256 is not the pinned one."""
    digest = sha256_file(path)
    if digest != pin.sha256:
        raise WheelError(
            f"{path.name} does not match its pinned sha256",
            expected=pin.sha256,
            found=digest,
            hint="delete the file and download it again; if it persists the index "
            "serves a different file than the pin (check overlay/pins.py)",
        )


def fetch_wheel(pin: pins.WheelPin, *, cache: Path | None = None) -> Path:
    """Return the verified wheel for ``pin``, downloading it with pip if it is not cached.

    A pin with an empty sha256 is downloaded unverified; the caller records its hash.
    """
    folder = cache or wheel_cache()
    path = folder / pin.filename
    if path.is_file():
        if pin.sha256:
            verify_wheel(path, pin)
        return path
    folder.mkdir(parents=True, exist_ok=True)
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
        try:
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise WheelError(f"cannot run pip: {exc}", hint="install pip in this Python") from exc
        downloaded = Path(tmp) / pin.filename
        if proc.returncode != 0 or not downloaded.is_file():
            raise WheelError(
                f"pip could not download {pin.filename}",
                expected=f"{pin.filename} from the package index",
                found=(proc.stderr or proc.stdout).strip()[-2000:] or "no file",
                hint="check network access to the package index, or pass --wheel FILE",
            )
        if pin.sha256:
            verify_wheel(downloaded, pin)
        os.replace(downloaded, path)
    return path


def pin_for_file(path: Path) -> pins.WheelPin:
    """Return the pin a local wheel file claims to be, verified by sha256."""
    pin = pins.wheel_pin_for(path.name)
    verify_wheel(path, pin)
    return pin


@contextlib.contextmanager
def _source_date_epoch(epoch: int) -> Iterator[None]:
    """Pin zip timestamps (RECORD's too) so a rebuild gives identical bytes."""
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if old is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def _epoch_of(info: zipfile.ZipInfo) -> int:
    return calendar.timegm((*info.date_time, 0, 0, 0))


def _provenance(
    series: Series, pin: pins.WheelPin, files: dict[str, dict[str, str]]
) -> dict[str, object]:
    return {
        "tool": f"executorch-arm-overlay {__version__}",
        "version": local_version(series),
        "base_wheel": pin.filename,
        "base_sha256": pin.sha256,
        "series_digest": series.digest,
        "patches": [
            {"name": p.name, "subject": p.subject, "sha256": sha256_bytes(p.text.encode())}
            for p in series.patches
        ],
        "files": files,
    }


def read_provenance(path: Path) -> dict[str, object] | None:
    """Return the provenance of a patched wheel, or None if it has none or is unreadable."""
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if name.endswith(f".dist-info/{PROVENANCE_FILE}"):
                    data: dict[str, object] = json.loads(archive.read(name))
                    return data
    except (OSError, zipfile.BadZipFile, json.JSONDecodeError):
        return None
    return None


def patched_wheel_name(pin: pins.WheelPin, series: Series) -> str:
    """Return the file name of the patched wheel for ``pin``."""
    return pin.filename.replace(f"-{pins.EXECUTORCH_VERSION}-", f"-{local_version(series)}-", 1)


def build_patched_wheel(
    series: Series, source: Path, pin: pins.WheelPin, out_dir: Path, *, force: bool = False
) -> BuildResult:
    """Repack ``source`` with the series applied into ``out_dir`` (skipped when up to date)."""
    verify_wheel(source, pin)
    out = out_dir / patched_wheel_name(pin, series)
    existing = read_provenance(out) if out.is_file() else None
    if not force and existing is not None and _is_current(existing, series, pin):
        return BuildResult(out, local_version(series), built=False, provenance=existing)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        provenance = _repack(series, source, pin, out)
    except (_WheelFileError, zipfile.BadZipFile, KeyError) as exc:
        raise WheelError(
            f"{source.name} is not a readable wheel: {exc}",
            hint="delete it from the cache and run again",
        ) from exc
    return BuildResult(out, local_version(series), built=True, provenance=provenance)


def _is_current(provenance: dict[str, object], series: Series, pin: pins.WheelPin) -> bool:
    return (
        provenance.get("series_digest") == series.digest
        and provenance.get("base_sha256") == pin.sha256
        and provenance.get("tool") == f"executorch-arm-overlay {__version__}"
    )


def _repack(series: Series, source: Path, pin: pins.WheelPin, out: Path) -> dict[str, object]:
    version = local_version(series)
    patched_sha = series.expected_patched_sha256()
    old_dist = f"executorch-{pins.EXECUTORCH_VERSION}.dist-info/"
    new_dist = f"executorch-{version}.dist-info/"
    wanted = {pins.wheel_path(p): p for p in series.targets()}
    files: dict[str, dict[str, str]] = {}
    with WheelFile(source) as src:
        infos = [i for i in src.infolist() if not i.is_dir()]
        names = {i.filename for i in infos}
        missing = sorted(set(wanted) - names)
        if missing:
            raise TargetError(
                f"{source.name} lacks files the series patches",
                expected=", ".join(sorted(wanted)),
                found=f"missing: {', '.join(missing)}",
            )
        metadata = src.read(old_dist + "METADATA").decode("utf-8")
        check_version(Version(_metadata_version(metadata)))
        record_info = src.getinfo(old_dist + "RECORD")
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as tmp_dir:
            tmp = Path(tmp_dir) / out.name  # WheelFile wants a proper wheel file name
            with _source_date_epoch(_epoch_of(record_info)), WheelFile(tmp, "w") as dst:
                for info in infos:
                    name = info.filename
                    if name == old_dist + "RECORD":
                        continue
                    data = src.read(name)  # WheelFile checks it against RECORD
                    if name in wanted:
                        repo_path = wanted[name]
                        pristine = sha256_bytes(data)
                        if pristine != pins.PRISTINE_SHA256[repo_path]:
                            raise TargetError(
                                f"{name} in {source.name} is not the pinned pristine file",
                                expected=pins.PRISTINE_SHA256[repo_path],
                                found=pristine,
                            )
                        data = transform(series, repo_path, data)
                        files[name] = {"pristine": pristine, "patched": sha256_bytes(data)}
                        if files[name]["patched"] != patched_sha[repo_path]:
                            raise WheelError(
                                f"{name}: the series produced unexpected bytes",
                                expected=patched_sha[repo_path],
                                found=files[name]["patched"],
                                hint="`python -m overlay refresh` rewrites SHA256SUMS",
                            )
                    if name == old_dist + "METADATA":
                        data = _set_metadata_version(metadata, version).encode("utf-8")
                    dst.writestr(_renamed(info, old_dist, new_dist), data)
                provenance = _provenance(series, pin, files)
                prov_info = zipfile.ZipInfo(new_dist + PROVENANCE_FILE, record_info.date_time)
                prov_info.compress_type = zipfile.ZIP_DEFLATED
                prov_info.external_attr = record_info.external_attr
                dst.writestr(prov_info, json.dumps(provenance, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, out)
    return provenance


def _renamed(info: zipfile.ZipInfo, old_dist: str, new_dist: str) -> zipfile.ZipInfo:
    name = info.filename
    if name.startswith(old_dist):
        name = new_dist + name[len(old_dist) :]
    copy = zipfile.ZipInfo(name, info.date_time)
    copy.compress_type = zipfile.ZIP_DEFLATED
    copy.external_attr = info.external_attr
    return copy


def _metadata_version(metadata: str) -> str:
    for line in metadata.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise WheelError("METADATA has no Version field")


def _set_metadata_version(metadata: str, version: str) -> str:
    lines = metadata.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("Version:"):
            lines[index] = f"Version: {version}"
            return "\n".join(lines)
    raise WheelError("METADATA has no Version field")


def read_wheel_sources(source: Path, series: Series) -> dict[str, bytes]:
    """Return the pristine bytes of every file the series touches, read from a wheel."""
    out: dict[str, bytes] = {}
    try:
        with WheelFile(source) as src:
            for repo_path in series.targets():
                out[repo_path] = src.read(pins.wheel_path(repo_path))
    except (_WheelFileError, KeyError, zipfile.BadZipFile) as exc:
        raise WheelError(f"cannot read the series' files from {source.name}: {exc}") from exc
    return out


def unpack_wheel(source: Path, dest: Path) -> Path:
    """Unpack a wheel (RECORD-checked) into ``dest`` and return it."""
    try:
        with WheelFile(source) as src:
            for info in src.infolist():
                src.extract(info, dest)
    except (_WheelFileError, zipfile.BadZipFile) as exc:
        raise WheelError(f"cannot unpack {source.name}: {exc}") from exc
    return dest


def patched_checksums(series: Series, source: Path) -> dict[str, str]:
    """Apply the series to the wheel's pristine files in memory; return their new sha256."""
    hashes = {}
    for repo_path, data in read_wheel_sources(source, series).items():
        if sha256_bytes(data) != pins.PRISTINE_SHA256.get(repo_path):
            raise TargetError(
                f"{repo_path} in {source.name} is not the pinned pristine file",
                expected=pins.PRISTINE_SHA256.get(repo_path, "a pinned sha256"),
                found=sha256_bytes(data),
            )
        hashes[repo_path] = sha256_bytes(transform(series, repo_path, data))
    return hashes
