"""Locks (``patches/<line>/locks/<tag>.txt``): resolve, read, and find a stale one offline."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from overlay._files import write_text_atomic
from overlay._hashing import sha256_bytes
from overlay.distribution.provenance import TOOL, local_version
from overlay.distribution.wheels import REPACK_FORMAT
from overlay.envs.venvs import find_uv, run_uv
from overlay.errors import LockfileError
from overlay.lines.pins import LOCKS_DIR, WheelPin
from overlay.text.series import Series

KEY_PREFIX = "# inputs-key: "
REFRESH = "nox -s lock"
_INPUT_NAME = "requirements.in"  # named in uv's "# via -r ..." annotations
# A lock's executorch entry: its line and the lines a trailing backslash continues it on.
_EXECUTORCH_ENTRY = re.compile(
    r"^executorch==[^\n]*?(?:\\[ \t]*\n[^\n]*?)*(?:\n|\Z)", flags=re.MULTILINE
)


@dataclass(frozen=True)
class LockedPackage:
    """One locked distribution: exact version and the sha256 of every acceptable file."""

    name: str  # canonical
    version: str
    hashes: tuple[str, ...]


@dataclass(frozen=True)
class Lock:
    """A lock file as read from disk."""

    path: Path
    key: str
    packages: tuple[LockedPackage, ...]

    def get(self, name: str) -> LockedPackage:
        """Return the locked package called ``name``."""
        wanted = canonicalize_name(name)
        for package in self.packages:
            if package.name == wanted:
                return package
        raise LockfileError(
            f"{self.path} does not lock {name}",
            expected=f"a line {name}==<version> --hash=sha256:...",
            found=", ".join(p.name for p in self.packages[:8]) + ", ...",
            hint=f"regenerate the lock: `{REFRESH}`",
        )


def lock_path(series: Series, pin: WheelPin) -> Path:
    """Return where the lock of ``pin`` lives: beside the series' pins."""
    return series.directory / LOCKS_DIR / f"{pin.tag}.txt"


def requirements(series: Series) -> list[str]:
    """Return what a lock is resolved from: the patched executorch with extras, the pins."""
    extras = ",".join(series.pins.extras)
    executorch = f"executorch[{extras}]" if extras else "executorch"
    return [f"{executorch}=={local_version(series)}", *series.pins.runtime_requirements()]


def inputs_key(series: Series, pin: WheelPin) -> str:
    """Return the sha256 over everything a lock of ``pin`` is resolved from."""
    inputs = {
        "requirements": requirements(series),
        "wheel_requires": list(series.pins.wheel_requirements()),
        "series": series.digest,
        "base_wheel": [pin.file, pin.sha256],
        "tool": [TOOL, REPACK_FORMAT],
        "target": list(uv_target(series, pin)),
    }
    return sha256_bytes(json.dumps(inputs, sort_keys=True).encode())


def uv_target(series: Series, pin: WheelPin) -> tuple[str, str, str]:
    """Return (python version, uv ``--python-platform``, macOS deployment target) of a pin.

    Example: ``manylinux_2_28_x86_64`` gives ``x86_64-manylinux_2_28``;
    ``macosx_12_0_arm64`` gives ``aarch64-apple-darwin`` (macOS from the pins'
    ``macos_deployment_target``).
    """
    tag = pin.platform
    if tag.startswith("manylinux_"):
        glibc, _, arch = tag.removeprefix("manylinux_").partition("_")
        minor, _, arch = arch.partition("_")
        return pin.python, f"{arch}-manylinux_{glibc}_{minor}", ""
    if tag.startswith("macosx_"):
        arch = "aarch64" if tag.endswith("arm64") else "x86_64"
        return pin.python, f"{arch}-apple-darwin", series.pins.macos_deployment_target
    raise LockfileError(
        f"no lock target for the platform {tag}",
        expected="a manylinux_X_Y_<arch> or macosx_X_Y_<arch> wheel",
        found=tag,
        hint="lock that wheel by hand, or drop it from [[wheels]] in pins.toml",
    )


def generate(series: Series, pin: WheelPin, wheel: Path, *, upgrade: bool = False) -> Lock:
    """Resolve and write the lock of ``pin``, with ``wheel`` (the patched one) as executorch,
    from the existing lock's versions (uv keeps what an output file pins) unless ``upgrade``."""
    path = lock_path(series, pin)
    python, platform, macos = uv_target(series, pin)
    with tempfile.TemporaryDirectory(prefix="overlay-lock-") as tmp:
        folder = Path(tmp)
        links = folder / "links"
        links.mkdir()
        shutil.copyfile(wheel, links / wheel.name)  # only this wheel: no stale candidate
        (folder / _INPUT_NAME).write_text("\n".join(requirements(series)) + "\n")
        if path.is_file() and not upgrade:
            shutil.copyfile(path, folder / "lock.txt")
        compile_ = [
            "pip", "compile", _INPUT_NAME, "--quiet", "--generate-hashes",
            "--python-version", python, "--python-platform", platform,
            "--find-links", "links", "--custom-compile-command", REFRESH, "-o", "lock.txt",
        ]  # fmt: skip

        def refuse(found: str) -> LockfileError:
            return LockfileError(
                f"uv could not resolve the lock for {pin.tag}",
                expected="every runtime pin and the patched executorch resolvable together",
                found=found,
                hint="check the pins in pins.toml (and network access to the index)",
            )

        macos_env = {"MACOSX_DEPLOYMENT_TARGET": macos} if macos else {}
        run_uv(find_uv(), compile_, refuse, cwd=folder, env=macos_env)
        body = (folder / "lock.txt").read_text(encoding="utf-8")
    header = (
        f"# Lock of the ready venv for {pin.tag} (Python {python}, {platform}"
        f"{f', macOS {macos}' if macos else ''}).\n"
        f"# Refresh: `{REFRESH}`. Install: `uv pip sync --require-hashes --find-links"
        f" dist/{series.pins.executorch}`.\n"
        f"{KEY_PREFIX}{inputs_key(series, pin)}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, header + body)
    return read(path)


def _unreadable(path: Path, found: str) -> LockfileError:
    return LockfileError(
        f"{path} is not a lock this overlay wrote",
        expected="name==version lines, each with --hash=sha256:..., and an inputs-key line",
        found=found,
        hint=f"regenerate it: `{REFRESH}`",
    )


def read(path: Path) -> Lock:
    """Read a lock file: its key line and every ``name==version --hash=...`` entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockfileError(
            f"no lock at {path}",
            expected="a lock for every pinned wheel, beside pins.toml",
            found="nothing",
            hint=f"generate it: `{REFRESH}`",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, str(exc)) from exc
    key = ""
    packages: list[LockedPackage] = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith(KEY_PREFIX):
            key = line.removeprefix(KEY_PREFIX).strip()
        content = line.split("#", 1)[0].strip() if not line.startswith("#") else ""
        if not content:
            continue
        spec, *options = content.split()
        try:
            requirement = Requirement(spec)
        except InvalidRequirement as exc:
            raise _unreadable(path, f"{spec}: {exc}") from exc
        pinned = [s.version for s in requirement.specifier if s.operator == "=="]
        hashes = tuple(o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash"))
        if len(pinned) != 1 or not hashes:
            raise _unreadable(path, content)
        packages.append(LockedPackage(canonicalize_name(requirement.name), pinned[0], hashes))
    if not key:
        raise _unreadable(path, f"no '{KEY_PREFIX.strip()}' line")
    return Lock(path, key, tuple(packages))


def check_current(series: Series, pin: WheelPin) -> Lock:
    """Return the lock of ``pin``; refuse one resolved from other pins, patches or tool."""
    lock = read(lock_path(series, pin))
    wanted = inputs_key(series, pin)
    if lock.key != wanted:
        raise LockfileError(
            f"{lock.path} is stale: pins.toml, the patches or the tool changed since it was made",
            expected=f"inputs-key {wanted}",
            found=f"inputs-key {lock.key}",
            hint=f"regenerate the locks: `{REFRESH}`",
        )
    executorch = lock.get("executorch")
    if executorch.version != local_version(series):
        raise _unreadable(lock.path, f"executorch=={executorch.version}")
    return lock


def check_wheel(lock: Lock, wheel: Path, sha256: str) -> None:
    """Refuse a patched wheel whose sha256 is not the one the lock pins."""
    locked = lock.get("executorch").hashes
    if sha256 not in locked:
        raise LockfileError(
            f"{wheel.name} is not the wheel {lock.path.name} pins",
            expected=f"sha256 {', '.join(locked)}",
            found=f"sha256 {sha256}",
            hint=f"the repack wrote other bytes (a code change, or another zlib): `{REFRESH}`",
        )


def stock_text(lock: Lock, sha256: str, version: str) -> str:
    """Return the lock's text with its executorch entry replaced by the stock wheel's."""
    entry = f"executorch=={version} \\\n    --hash=sha256:{sha256}\n"
    text, replaced = _EXECUTORCH_ENTRY.subn(entry, lock.path.read_text(encoding="utf-8"))
    if replaced != 1:
        raise _unreadable(lock.path, f"{replaced} executorch entries (one expected)")
    return text
