"""The pins of a series (versions, wheel and file hashes), read from ``pins.toml`` beside it.

Code holds no version or hash: a series folder carries its own ``pins.toml``, so a tool
can rewrite it (refresh, retarget) and a candidate series for another release brings its
own pins. Only the line's own pins live here; what the upstream work needs about other
releases (the version matrix, upstream's torch pins, its tools) is shared by every line in
``patches/upstream.toml`` (:mod:`overlay.upstream.upstream_pins`). :mod:`overlay.lines`
says which series folder a command uses.
"""

from __future__ import annotations

import platform
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay.errors import PristineMismatchError, SeriesError, TargetError

PINS_FILE = "pins.toml"
LOCKS_DIR = "locks"  # a line's locks: patches/<line>/locks/<wheel tag>.txt
SERIES_FILE = "series"
# Tables of patches/upstream.toml (shared by every line), refused in a line's pins.toml.
SHARED_TABLES = ("matrix", "upstream", "torch")


@dataclass(frozen=True)
class WheelPin:
    """One pinned executorch wheel file."""

    filename: str
    sha256: str  # empty when not yet known (the version matrix records it on first fetch)
    python: str  # "3.11"
    platform: str  # pip --platform value

    @property
    def version(self) -> str:
        """Return the executorch version in the file name."""
        return self.filename.split("-")[1]

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
    """Everything one series is pinned to."""

    source: Path
    executorch: Version
    upstream_repo: str
    package_dir: str
    runtime: Mapping[str, str]  # distribution name -> exact version
    extras: Mapping[str, tuple[str, ...]]  # extra name -> runtime packages it brings
    macos_deployment_target: str  # the macOS a lock targets ("" = uv's default)
    wheels: tuple[WheelPin, ...]
    pristine: Mapping[str, str]  # repository path -> sha256

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
            expected=f"one of: {', '.join(p.filename for p in self.wheels)}",
            found=f"Python {python} on {system}/{machine}",
            hint=f"use a Python this line pins ({', '.join(self.pythons)}), or add a wheel for"
            f" this machine to {self.source}",
        )

    def wheel_for(self, filename_or_tag: str) -> WheelPin:
        """Find a pinned wheel by file name or by ``cp311-manylinux_2_28_x86_64`` style tag."""
        for pin in self.wheels:
            if filename_or_tag in (pin.filename, pin.tag):
                return pin
        raise TargetError(
            f"{filename_or_tag!r} is not a pinned executorch wheel",
            expected=", ".join(p.filename for p in self.wheels),
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
                repo_path=repo_path,
                expected=wanted,
                found=digest,
                hint=hint,
            )

    def check_version(self, version: Version | str) -> None:
        """Refuse any executorch but the pinned release (a local ``+tag`` is allowed)."""
        try:
            found = Version(str(version))
        except InvalidVersion:
            found = None
        if found is None or Version(found.public) != self.executorch:
            raise TargetError(
                "wrong executorch version",
                expected=f"executorch {self.executorch} (the pinned release)",
                found=f"executorch {version}",
                hint=f"install executorch=={self.executorch}, or use "
                "`executorch-arm-overlay matrix` to see how the series fares on other releases",
            )


def _table(data: Mapping[str, object], key: str, source: Path) -> Mapping[str, object]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise _bad(source, f"a [{key}] table", repr(value))
    return value


def _text(data: Mapping[str, object], key: str, source: Path) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        found = "nothing" if value in (None, "") else f"{type(value).__name__} {value}"
        raise _bad(source, f"a non-empty string {key}", found)
    return value


def _strings(data: Mapping[str, object], key: str, source: Path) -> dict[str, str]:
    table = _table(data, key, source)
    out: dict[str, str] = {}
    for name, value in table.items():
        if not isinstance(value, str):
            raise _bad(source, f"string values under [{key}]", f"{name} = {value!r}")
        out[name] = value
    return out


def _bad(source: Path, expected: str, found: str) -> SeriesError:
    return SeriesError(
        f"{source} is not a valid pins file",
        expected=expected,
        found=found,
        hint="restore it from git, or fix the entry by hand",
    )


def read_toml(source: Path) -> dict[str, object]:
    """Return a TOML file's tables; refuse an unreadable one (shared by every pins file)."""
    try:
        return tomllib.loads(source.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, OSError) as exc:
        raise SeriesError(
            f"cannot read {source}: {exc}",
            expected="a UTF-8 TOML file",
            found=type(exc).__name__,
            hint="restore it from git",
        ) from exc


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
    data = read_toml(source)
    executorch = _table(data, "executorch", source)
    runtime = _strings(data, "runtime", source)
    extras: dict[str, tuple[str, ...]] = {}
    for extra, names in _table(data, "extras", source).items() if "extras" in data else ():
        if not isinstance(names, list) or not all(n in runtime for n in names):
            raise _bad(source, f"[extras] {extra} = a list of [runtime] names", repr(names))
        extras[extra] = tuple(names)
    lock = _table(data, "lock", source) if "lock" in data else {}
    macos = lock.get("macos_deployment_target", "")
    if not isinstance(macos, str):
        raise _bad(source, "[lock] macos_deployment_target = a string", repr(macos))
    moved = [key for key in SHARED_TABLES if key in data]
    if moved:
        raise SeriesError(
            f"{source} holds shared upstream pins",
            expected="only the line's own pins (the upstream pins are shared by every line)",
            found=", ".join(f"[{key}]" for key in moved),
            hint=f"move them into {directory.parent / 'upstream.toml'} (beside the lines)",
        )
    wheels: list[WheelPin] = []
    raw_wheels = data.get("wheels")
    if not isinstance(raw_wheels, list) or not raw_wheels:
        raise _bad(source, "one or more [[wheels]] entries", repr(raw_wheels))
    for entry in raw_wheels:
        if not isinstance(entry, Mapping):
            raise _bad(source, "[[wheels]] tables", repr(entry))
        wheels.append(
            WheelPin(
                _text(entry, "file", source),
                _text(entry, "sha256", source),
                _text(entry, "python", source),
                _text(entry, "platform", source),
            )
        )
    try:
        version = Version(_text(executorch, "version", source))
    except InvalidVersion as exc:
        raise _bad(source, "a PEP 440 executorch version", str(exc)) from exc
    return Pins(
        source=source,
        executorch=version,
        upstream_repo=_text(executorch, "upstream_repo", source),
        package_dir=_text(executorch, "package_dir", source),
        runtime=runtime,
        extras=extras,
        macos_deployment_target=macos,
        wheels=tuple(wheels),
        pristine=_strings(data, "pristine", source),
    )
