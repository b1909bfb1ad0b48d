"""Executorch releases: fetch and read their wheels and their metadata; the version matrix
(the series, and its ports, replayed onto each release)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from overlay._hashing import sha256_file
from overlay.distribution.wheels import fetch_wheel
from overlay.distribution.wheelzip import read_members
from overlay.errors import OverlayError, UpstreamError, WheelError
from overlay.lines.pins import Pins
from overlay.text.applier import decode
from overlay.text.series import Series
from overlay.upstream import replay
from overlay.upstream.replay import ARM_PREFIX
from overlay.upstream.results import Matrix, PatchVerdict, Wheel, parse_applied_upstream
from overlay.upstream.upstream_pins import UpstreamPins, for_series
from overlay.upstream.verdicts import text_verdict

TESTS_PREFIX = ARM_PREFIX + "test/"


@dataclass(frozen=True)
class Release:
    """One executorch release's Arm backend sources (tests included), read from its wheel."""

    version: str
    wheel: Path
    sha256: str
    pinned: bool  # the sha256 was checked against patches/upstream.toml
    files: dict[str, bytes] = field(repr=False)  # repository path -> bytes, backends/arm/**

    @property
    def texts(self) -> dict[str, str]:
        """Return the files decoded losslessly."""
        return {path: decode(data) for path, data in self.files.items()}

    @property
    def tests(self) -> dict[str, bytes]:
        """Return the release's ``backends/arm/test`` files."""
        return {p: d for p, d in self.files.items() if p.startswith(TESTS_PREFIX)}

    @property
    def record(self) -> Wheel:
        """Return the wheel as reports show it."""
        return Wheel(self.wheel.name, self.sha256, self.pinned)


def load_release(pins: Pins, shared: UpstreamPins, version: str) -> Release:
    """Fetch (cached, sha256-checked when recorded) one release's wheel and read its
    ``backends/arm``, RECORD-checked."""
    pin = shared.matrix_pin(version)
    package = pins.package_dir + "/"
    try:
        wheel = fetch_wheel(pin)
    except OverlayError as exc:
        raise WheelError(
            f"cannot fetch executorch {version}",
            expected=pin.file,
            found=exc.message,
            hint=exc.hint or "check the version exists: `pip index versions executorch`",
        ) from exc
    try:
        members = read_members(wheel, lambda name: name.startswith(package + ARM_PREFIX))
    except OverlayError as exc:
        raise WheelError(
            f"cannot read {wheel.name}",
            expected=f"a readable executorch {version} wheel",
            found=exc.message,
            hint="delete it from the wheel cache and run again",
        ) from exc
    if not members:
        raise WheelError(
            f"{wheel.name} has no {ARM_PREFIX} sources",
            expected=f"{package}{ARM_PREFIX}... files",
            found="none",
            hint="the matrix needs a full executorch wheel",
        )
    files = {name.removeprefix(package): data for name, data in members.items()}
    return Release(version, wheel, sha256_file(wheel), bool(pin.sha256), files)


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


def build_matrix(
    series: Series, ports: replay.Ports, releases: Sequence[Release], pins_file: str
) -> Matrix:
    """Replay every patch (cumulatively) and its port onto every release."""
    ordered = sorted(releases, key=lambda r: Version(r.version))
    replays = [
        replay.replay(
            series.patches,
            release.texts,
            frozenset(release.files),
            ports=replay.ports_for(ports, release.version),
            base=release.version,
        )
        for release in ordered
    ]
    rows = []
    for patch, *carries in zip(series.patches, *replays, strict=True):
        header = patch.header.get("Applied-Upstream", "")
        cells = tuple(carry.replayed for carry in carries)
        action, text = text_verdict(parse_applied_upstream(header), cells)
        rows.append(PatchVerdict(patch.name, patch.subject, cells, action, text, header))
    wheels = {r.version: r.record for r in ordered}
    return Matrix(series.digest, pins_file, wheels, tuple(rows))


def matrix_of(
    series: Series, versions: Sequence[str] = (), progress: Callable[[str], None] = lambda _: None
) -> Matrix:
    """Return the version matrix over ``versions`` (default: upstream.toml's matrix releases)."""
    shared = for_series(series.directory)
    chosen = list(dict.fromkeys(versions or shared.matrix_versions))
    if not chosen:
        raise UpstreamError("no releases to check", hint="pass --versions 1.2.0,1.5.1")
    progress(f"version matrix over executorch {', '.join(chosen)} (wheels fetched once, cached)")
    releases = [load_release(series.pins, shared, v) for v in chosen]
    return build_matrix(series, replay.ports_of(series), releases, str(shared.source))
