"""Releases for the version matrix: fetch and read one wheel per release, load the ports.

Each release's Arm backend sources come from its cp311 manylinux wheel, fetched once into
the wheel cache and checked against the sha256 recorded in ``pins.toml`` (``[matrix]``);
a release not yet recorded is fetched unverified and reported with the line to add.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay._hashing import sha256_file
from overlay.dist.wheels import fetch_wheel, read_members
from overlay.errors import OverlayError, UpstreamError
from overlay.lines.listing import read_text
from overlay.lines.pins import Pins
from overlay.text.series import PATCH_SUFFIX, Patch, Series, parse_patch
from overlay.upstream.matrix import ARM_PREFIX, PORTS_DIR, Matrix, Release, build_matrix


def read_release(
    pins: Pins, wheel: Path, version: str, *, prefix: str = ARM_PREFIX
) -> dict[str, bytes]:
    """Return ``{repository path: bytes}`` of the wheel's files under ``prefix``, RECORD-checked."""
    package = pins.package_dir + "/"
    try:
        members = read_members(wheel, lambda name: name.startswith(package + prefix))
    except OverlayError as exc:
        raise UpstreamError(
            f"cannot read {wheel.name}",
            expected=f"a readable executorch {version} wheel",
            found=exc.message,
            hint="delete it from the wheel cache and run again",
        ) from exc
    if not members:
        raise UpstreamError(
            f"{wheel.name} has no {prefix} sources",
            expected=f"{package}{prefix}... files",
            found="none",
            hint="the matrix needs a full executorch wheel",
        )
    return {name.removeprefix(package): data for name, data in members.items()}


def load_release(pins: Pins, version: str, *, cache: Path | None = None) -> Release:
    """Fetch (cached, sha256-checked when recorded) and read one release's Arm sources."""
    pin = pins.matrix_pin(version)
    try:
        wheel = fetch_wheel(pin, cache=cache)
    except OverlayError as exc:
        raise UpstreamError(
            f"cannot fetch executorch {version} for the matrix",
            expected=pin.filename,
            found=exc.message,
            hint=exc.hint or "check the version exists: `pip index versions executorch`",
        ) from exc
    digest = sha256_file(wheel)
    files = read_release(pins, wheel, version)
    return Release(version, wheel, digest, bool(pin.sha256), files)


def load_ports(patches_dir: Path, series: Series) -> dict[str, dict[str, Patch]]:
    """Load ``ports/<version>/<name>.patch``: version -> patch name -> port."""
    root = patches_dir / PORTS_DIR
    names = {p.name for p in series.patches}
    ports: dict[str, dict[str, Patch]] = {}
    if not root.is_dir():
        return ports
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            Version(folder.name)
        except InvalidVersion as exc:
            raise UpstreamError(
                f"{folder} is not named after an executorch release",
                expected="patches/<line>/ports/<version>/, e.g. patches/<line>/ports/1.5.1/",
                found=folder.name,
                hint="rename the folder to the release the ports were made against",
            ) from exc
        for path in sorted(folder.glob(f"*{PATCH_SUFFIX}")):
            if path.name not in names:
                raise UpstreamError(
                    f"port {path} does not belong to a patch of the series",
                    expected=f"a file named like one of: {', '.join(sorted(names))}",
                    found=path.name,
                    hint="name a port exactly like the patch it ports",
                )
            port = parse_patch(path.name, read_text(path))
            ports.setdefault(folder.name, {})[path.name] = port
    return ports


def run_matrix(
    series: Series, patches_dir: Path, versions: Sequence[str], *, cache: Path | None = None
) -> Matrix:
    """Fetch every release in ``versions`` and build the matrix."""
    if not versions:
        raise UpstreamError("no releases to check", hint="pass --versions 1.2.0,1.5.1")
    ports = load_ports(patches_dir, series)
    releases = [load_release(series.pins, v, cache=cache) for v in dict.fromkeys(versions)]
    return build_matrix(series, ports, releases)
