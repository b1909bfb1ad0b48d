"""One line's ``pins.toml``: versions, wheels and pristine file hashes."""

from __future__ import annotations

import dataclasses
import platform
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from packaging.version import InvalidVersion, Version

from overlay import codec
from overlay.errors import PristineMismatchError, SeriesError, TargetError

PINS_FILE = "pins.toml"
LOCKS_DIR = "locks"  # a line's locks: patches/<line>/locks/<wheel tag>.txt
SERIES_FILE = "series"
T = TypeVar("T")


@dataclass(frozen=True)
class WheelPin:
    """One pinned executorch wheel file (a ``[[wheels]]`` entry)."""

    file: str  # its file name
    sha256: str  # empty when not yet known (the version matrix records it on first fetch)
    python: str  # "3.11"
    platform: str  # pip --platform value

    @property
    def version(self) -> str:
        """Return the executorch version in the file name."""
        return self.file.split("-")[1]

    @property
    def abi(self) -> str:
        """Return the CPython ABI tag, e.g. ``cp311``."""
        return "cp" + self.python.replace(".", "")

    @property
    def tag(self) -> str:
        """Return the ``cp311-manylinux_2_28_x86_64`` style tag."""
        return f"{self.abi}-{self.platform}"


@dataclass(frozen=True)
class Pins:
    """Everything one series is pinned to: its ``pins.toml`` (``source``: where it was read)."""

    source: Path
    executorch: str  # the pinned release, e.g. "1.5.1" (as a Version: :attr:`version`)
    upstream_repo: str
    package_dir: str
    runtime: dict[str, str]  # distribution name -> exact version
    wheels: tuple[WheelPin, ...]
    pristine: dict[str, str]  # repository path -> sha256
    extras: dict[str, tuple[str, ...]] = field(default_factory=dict)  # extra -> runtime names
    macos_deployment_target: str = ""  # the macOS a lock targets ("" = uv's default)

    @property
    def version(self) -> Version:
        """Return the pinned release as a Version."""
        return Version(self.executorch)

    @property
    def pythons(self) -> tuple[str, ...]:
        """Return the interpreter versions the pinned wheels are built for, ascending."""
        return tuple(sorted({w.python for w in self.wheels}, key=Version))

    def runtime_requirements(self) -> list[str]:
        """Return the pip requirements that sit beside executorch in a ready venv."""
        return [f"{name}=={version}" for name, version in self.runtime.items()]

    def wheel_requirements(self) -> tuple[str, ...]:
        """Return the patched wheel's Requires-Dist for the runtime pins, series-narrowed.

        Example: torch 2.11.0 gives ``torch==2.11.*``; tosa-tools under extra ``arm`` gives
        ``tosa-tools==2026.2.*; extra == "arm"``.
        """
        extra_of = {name: extra for extra, names in self.extras.items() for name in names}
        out = []
        for name, version in self.runtime.items():
            release = Version(version).release
            spec = f"{name}=={'.'.join(map(str, release[:2]))}.*"
            out.append(f'{spec}; extra == "{extra_of[name]}"' if name in extra_of else spec)
        return tuple(out)

    def executorch_requirement(self) -> str:
        """Return ``executorch==<pinned version>``."""
        return f"executorch=={self.executorch}"

    def wheel_path(self, repo_path: str) -> str:
        """Map a repository path (``backends/arm/X``) to its path inside the wheel."""
        return f"{self.package_dir}/{repo_path}"

    def module_name(self, repo_path: str) -> str:
        """Map a repository path to its dotted module name (``executorch.backends.arm...``)."""
        return self.wheel_path(repo_path).removesuffix(".py").replace("/", ".")

    def host_wheel(self, python: str | None = None) -> WheelPin:
        """Return the pinned wheel for this machine and ``python`` (default: this one)."""
        python = python or f"{sys.version_info.major}.{sys.version_info.minor}"
        machine = platform.machine().lower()
        system = sys.platform
        for pin in self.wheels:
            if pin.python != python:
                continue
            if system.startswith("linux") and pin.platform.endswith("_" + machine):
                return pin
            if system == "darwin" and machine == "arm64" and pin.platform.endswith("arm64"):
                return pin
        raise TargetError(
            "no pinned executorch wheel for this interpreter and machine",
            expected=f"one of: {', '.join(p.file for p in self.wheels)}",
            found=f"Python {python} on {system}/{machine}",
            hint=f"use a Python this line pins ({', '.join(self.pythons)}), or add a wheel for"
            f" this machine to {self.source}",
        )

    def wheel_for(self, filename_or_tag: str) -> WheelPin:
        """Find a pinned wheel by file name or by ``cp311-manylinux_2_28_x86_64`` style tag."""
        for pin in self.wheels:
            if filename_or_tag in (pin.file, pin.tag):
                return pin
        raise TargetError(
            f"{filename_or_tag!r} is not a pinned executorch wheel",
            expected=", ".join(p.file for p in self.wheels),
            found=filename_or_tag,
            hint=f"use one of the pinned wheels, or pin the new one in {self.source}",
        )

    def pristine_sha256(self, repo_path: str) -> str:
        """Return the pinned sha256 of a pristine file; refuse a file with no pin."""
        try:
            return self.pristine[repo_path]
        except KeyError:
            raise SeriesError(
                f"the series touches {repo_path}, which has no pinned pristine sha256",
                expected=f"an entry for {repo_path} under [pristine] in {self.source}",
                found="none",
                hint="pin the file's sha256 from the wheel's RECORD",
            ) from None

    def check_pristine(self, repo_path: str, digest: str, *, where: str, hint: str) -> None:
        """Refuse ``digest`` unless it is the pinned pristine sha256 of ``repo_path``."""
        wanted = self.pristine_sha256(repo_path)
        if digest != wanted:
            raise PristineMismatchError(
                f"{where}: {repo_path} is not the pinned pristine executorch "
                f"{self.executorch} file",
                expected=f"sha256 {wanted}",
                found=f"sha256 {digest}",
                hint=hint,
            )

    def check_version(self, version: Version | str) -> None:
        """Refuse any executorch but the pinned release (a local ``+tag`` is allowed)."""
        try:
            found = Version(str(version))
        except InvalidVersion:
            found = None
        if found is None or Version(found.public) != self.version:
            raise TargetError(
                "wrong executorch version",
                expected=f"executorch {self.executorch} (the pinned release)",
                found=f"executorch {version}",
                hint=f"install executorch=={self.executorch}, or use "
                "`executorch-arm-overlay matrix` to see how the series fares on other releases",
            )


def read_toml(cls: type[T], source: Path, what: str) -> T:
    """Return a TOML pins file decoded into ``cls`` (``source`` added); refuse one unreadable,
    not of that shape, or with an empty required string, naming the file (``what``) and entry."""
    try:
        data = tomllib.loads(source.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, OSError) as exc:
        raise SeriesError(
            f"cannot read {source}: {exc}",
            expected="a UTF-8 TOML file",
            found=type(exc).__name__,
            hint="restore it from git",
        ) from exc
    try:
        decoded = codec.decode(cls, {**data, "source": str(source)}, source.name)
    except codec.CodecError as exc:
        raise _invalid(source, what, f"{exc.where}: {exc.expected}", exc.found or "") from exc
    empty = _empty(decoded, "")
    if empty:
        raise _invalid(source, what, "non-empty strings", f"empty: {', '.join(empty)}")
    return decoded


def _empty(value: object, where: str) -> list[str]:
    """Return where a required string of ``value`` (a dataclass, nested ones too) is empty."""
    found = []
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        item = getattr(value, f.name)
        if item == "" and f.default is dataclasses.MISSING:
            found.append(where + f.name)
        for index, nested in enumerate(item if isinstance(item, tuple) else ()):
            if dataclasses.is_dataclass(nested):
                found += _empty(nested, f"{where}{f.name}[{index}].")
    return found


def _invalid(source: Path, what: str, expected: str, found: str) -> SeriesError:
    hint = "restore it from git, or fix the entry by hand"
    return SeriesError(f"{source} is not a valid {what}", expected=expected, found=found, hint=hint)


def load(directory: Path) -> Pins:
    """Read and validate ``pins.toml`` of a series folder."""
    source = directory / PINS_FILE
    if not source.is_file():
        raise SeriesError(
            f"no {PINS_FILE} in {directory}",
            expected=f"{source} with the series' versions and hashes",
            found="nothing",
            hint="point --patches at a series folder (it holds 'series' and 'pins.toml')",
        )
    pins = read_toml(Pins, source, "pins file")
    try:
        Version(pins.executorch)
    except InvalidVersion as exc:
        raise _invalid(source, "pins file", "a PEP 440 executorch version", str(exc)) from exc
    if not pins.wheels:
        raise _invalid(source, "pins file", "one or more [[wheels]] entries", "none")
    for extra, names in pins.extras.items():
        if not set(names) <= set(pins.runtime):
            expected = f"[extras] {extra} = a list of [runtime] names"
            raise _invalid(source, "pins file", expected, repr(list(names)))
    return pins
