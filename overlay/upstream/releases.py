"""Executorch releases: fetch and read their wheels, their metadata, and the series' ports.

Each release's Arm backend sources come from its cp311 manylinux wheel (the matrix wheel
of ``patches/upstream.toml``), fetched once into the wheel cache and checked against the
sha256 recorded there; a release not yet recorded is fetched unverified and reported with
the line to add. A retarget fetches the release's wheel for every interpreter/platform the
line pins (:func:`fetch_release_wheels`).

Public, reused by the retarget, the export and the canary: :func:`read_release`,
:func:`load_release`, :func:`release_metadata`, :func:`fetch_release_wheels`,
:class:`WheelRecord`, :func:`load_ports`, :func:`run_matrix`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from overlay import lines
from overlay._hashing import sha256_file
from overlay.dist.wheels import fetch_wheel, read_members
from overlay.errors import OverlayError, UpstreamError
from overlay.lines.listing import read_text
from overlay.lines.pins import Pins, WheelPin
from overlay.text.series import PATCH_SUFFIX, Patch, Series, load_series, parse_patch
from overlay.upstream.matrix import ARM_PREFIX, PORTS_DIR, Matrix, Release, build_matrix
from overlay.upstream.upstream_pins import UpstreamPins, for_series

Progress = Callable[[str], None]


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


def load_release(
    pins: Pins, shared: UpstreamPins, version: str, *, cache: Path | None = None
) -> Release:
    """Fetch (cached, sha256-checked when recorded) and read one release's Arm sources."""
    pin = shared.matrix_pin(version)
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
    """Return the maintained ports of the series' patches: version -> patch name -> port.

    The ports for release V are the patches of the line ``patches/V/`` when that line
    exists (beside the series' own line), else ``<series>/ports/V/<name>.patch``.
    """
    ports = _port_folders(patches_dir, series)
    names = {p.name for p in series.patches}
    here = patches_dir.resolve()
    for line in lines.all_lines(patches_dir.parent):
        if line.directory.resolve() == here or line.version <= series.pins.executorch:
            continue
        found = {p.name: p for p in load_series(line.directory).patches if p.name in names}
        ports.pop(line.name, None)
        if found:
            ports[line.name] = found
    return dict(sorted(ports.items(), key=lambda item: Version(item[0])))


def _port_folders(patches_dir: Path, series: Series) -> dict[str, dict[str, Patch]]:
    """Load ``ports/<version>/<name>.patch`` of a series folder."""
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
    shared = for_series(patches_dir)
    releases = [load_release(series.pins, shared, v, cache=cache) for v in dict.fromkeys(versions)]
    return build_matrix(series, ports, releases, str(shared.source))


def matrix_of(
    series: Series, versions: Sequence[str] = (), progress: Callable[[str], None] = lambda _: None
) -> Matrix:
    """Return the version matrix over ``versions`` (default: upstream.toml's matrix releases)."""
    chosen = list(dict.fromkeys(versions or for_series(series.directory).matrix_versions))
    progress(f"version matrix over executorch {', '.join(chosen)} (wheels fetched once, cached)")
    return run_matrix(series, series.directory, chosen)


@dataclass(frozen=True)
class WheelRecord:
    """One wheel of a release for a pinned interpreter/platform."""

    file: str
    sha256: str  # "" when the release publishes no such wheel
    python: str
    platform: str
    note: str = ""


def fetch_release_wheels(
    pins: Pins, shared: UpstreamPins, version: str, progress: Progress = lambda _: None
) -> list[WheelRecord]:
    """Download the release's wheel for every interpreter/platform the line pins.

    pip checks each file against the sha256 the index publishes; the matrix wheel also
    against ``upstream.toml`` when recorded. A wheel the release does not publish is
    recorded with an empty sha256 and the reason.
    """
    records = []
    for pin in pins.wheels:
        name = pin.filename.replace(f"-{pins.executorch}-", f"-{version}-", 1)
        known = shared.sha256.get(version, "") if shared.is_matrix(pin) else ""
        try:
            path = fetch_wheel(WheelPin(name, known, pin.python, pin.platform))
        except OverlayError as exc:
            records.append(WheelRecord(name, "", pin.python, pin.platform, exc.message))
            progress(f"{name}: not published ({exc.message})")
            continue
        digest = sha256_file(path)
        records.append(WheelRecord(name, digest, pin.python, pin.platform))
        progress(f"{name}: sha256 {digest[:12]}")
    return records


def release_metadata(wheel: Path) -> tuple[list[Requirement], str | None]:
    """Return the wheel's Requires-Dist and the upstream commit it was built from."""
    members = read_members(
        wheel,
        lambda n: n.endswith(".dist-info/METADATA") or n == "executorch/version.py",
    )
    requirements: list[Requirement] = []
    commit = None
    for name, data in members.items():
        text = data.decode("utf-8", "replace")
        if name.endswith("METADATA"):
            for raw in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
                try:
                    requirements.append(Requirement(raw))
                except InvalidRequirement:
                    continue
        else:
            for line in text.splitlines():
                if line.startswith("git_version"):
                    commit = line.split("=", 1)[1].strip().strip("'\"") or None
    return requirements, commit
