"""The shared upstream pins: ``patches/upstream.toml`` beside the release lines (a
retarget's candidate carries its own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.version import InvalidVersion, Version

from overlay.errors import SeriesError, TargetError
from overlay.lines.pins import WheelPin, read_toml

UPSTREAM_FILE = "upstream.toml"


@dataclass(frozen=True)
class UpstreamPins:
    """What ``upstream.toml`` pins, in its shape (``source``: where it was read)."""

    source: Path
    matrix_versions: tuple[str, ...]  # the default selection of `matrix`
    python: str  # the interpreter of the matrix wheels and of release envs
    platform: str
    sha256: dict[str, str] = field(default_factory=dict)  # release -> its matrix wheel's
    torch: dict[str, str] = field(default_factory=dict)  # release -> torch_pin.py at its tag
    released: dict[str, str] = field(default_factory=dict)  # release -> its PyPI upload date
    test_requirements: tuple[str, ...] = ()
    lint_requirements: tuple[str, ...] = ()
    mypy_requirements: tuple[str, ...] = ()  # what upstream's MYPY job installs (torch aside)

    def matrix_pin(self, version: str) -> WheelPin:
        """Return the matrix wheel of a release (sha256 empty when not yet recorded)."""
        try:
            Version(version)
        except InvalidVersion as exc:
            raise TargetError(
                f"{version!r} is not a release version",
                expected="a version like 1.5.1",
                found=version,
                hint="list releases with `pip index versions executorch`",
            ) from exc
        abi = "cp" + self.python.replace(".", "")
        filename = f"executorch-{version}-{abi}-{abi}-{self.platform}.whl"
        return WheelPin(filename, self.sha256.get(version, ""), self.python, self.platform)

    def is_matrix(self, pin: WheelPin) -> bool:
        """Return True when ``pin`` is for the matrix interpreter and platform."""
        return pin.python == self.python and pin.platform == self.platform


def for_series(series_dir: Path) -> UpstreamPins:
    """Return the shared upstream pins a series folder uses: its own ``upstream.toml``, else
    its lines root's."""
    for folder in (series_dir, series_dir.parent):
        if (folder / UPSTREAM_FILE).is_file():
            return load(folder / UPSTREAM_FILE)
    raise SeriesError(
        f"no {UPSTREAM_FILE} for the series in {series_dir}",
        expected=f"{series_dir.parent / UPSTREAM_FILE} (beside the lines) or"
        f" {series_dir / UPSTREAM_FILE} (a candidate's own)",
        found="neither",
        hint="restore patches/upstream.toml from git, or re-run the retarget that wrote"
        " the candidate",
    )


def load(source: Path) -> UpstreamPins:
    """Read and validate an ``upstream.toml``."""
    return read_toml(UpstreamPins, source, "upstream pins file")


def with_release(text: str, version: str, *, sha256: str = "", torch: str = "") -> str:
    """Return ``upstream.toml`` text with ``version`` recorded in ``matrix_versions``,
    ``[sha256]`` and ``[torch]`` (comments and order kept)."""
    document = tomlkit.parse(text)
    versions = document["matrix_versions"]
    assert isinstance(versions, list)
    if version not in versions:
        versions.append(version)
    hashes = document.setdefault("sha256", tomlkit.table())
    if sha256 and version not in hashes:
        hashes[version] = sha256
    if torch:
        pins = document.setdefault("torch", tomlkit.table())
        if version not in pins:
            pins[version] = torch
    return tomlkit.dumps(document)
