"""The ready venv: exactly the lock, installed by ``uv pip sync``, stamped, re-synced on drift.

The stamp (``overlay-install.json`` in the venv) keys the lock's bytes and what is
installed (every distribution's name and version, read with importlib.metadata), so a
package added, removed or moved by hand makes the next run sync again instead of
skipping. ``uv pip sync`` removes what the lock does not list; its own progress output
is left visible (a cold torch install downloads ~3 GB).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from overlay.envs.lockfiles import Lock, uv_executable
from overlay.envs.verify_install import installed_versions
from overlay.errors import TargetError

STAMP = "overlay-install.json"


@dataclass(frozen=True)
class Venv:
    """A virtual environment on disk."""

    root: Path
    python: Path
    site: Path
    version: str  # "3.11"


def find_venv(root: Path) -> Venv:
    """Read a venv's interpreter version and site-packages from its ``pyvenv.cfg``."""
    cfg = root / "pyvenv.cfg"
    values: dict[str, str] = {}
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip()
    full = values.get("version_info") or values.get("version") or ""
    version = ".".join(full.split(".")[:2])
    site = root / "lib" / f"python{version}" / "site-packages"
    if not version or not site.is_dir():
        raise TargetError(
            f"{root} is not a virtual environment",
            expected="a folder with pyvenv.cfg and lib/pythonX.Y/site-packages",
            found=f"pyvenv.cfg version {full!r}" if cfg.is_file() else "no pyvenv.cfg",
            hint="pass the venv's root folder (the one holding bin/ and pyvenv.cfg)",
        )
    return Venv(root, root / "bin" / "python", site, version)


def stamp_key(lock: Lock, venv: Venv) -> str:
    """Return the key of a venv's state: the lock's bytes and every installed version."""
    digest = hashlib.sha256(lock.path.read_bytes())
    for name, version in sorted(installed_versions(venv.site).items()):
        digest.update(f"\0{name}=={version}".encode())
    return digest.hexdigest()


def is_current(lock: Lock, venv: Venv) -> bool:
    """Return True when the venv's stamp matches the lock and what is installed now."""
    stamp = venv.root / STAMP
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8")).get("key")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(recorded == stamp_key(lock, venv))


def write_stamp(lock: Lock, venv: Venv) -> None:
    """Record that the venv is exactly the lock (call after it was verified)."""
    text = json.dumps({"key": stamp_key(lock, venv), "lock": str(lock.path)}, indent=2)
    (venv.root / STAMP).write_text(text + "\n", encoding="utf-8")


def sync(lock: Lock, root: Path, *, python: str, find_links: Path, reinstall: bool) -> Venv:
    """Make ``root`` a venv holding exactly the lock (created if missing); uv prints progress.

    ``reinstall`` re-installs executorch from its wheel (its files drifted in place).
    """
    uv = uv_executable()
    if not (root / "pyvenv.cfg").is_file():
        _run([uv, "venv", "--quiet", "--python", python, str(root)])
    venv = find_venv(root)
    (venv.root / STAMP).unlink(missing_ok=True)  # a crash mid-sync leaves no stale stamp
    command = [
        uv, "pip", "sync", "--python", str(venv.python), "--require-hashes",
        "--find-links", str(find_links), str(lock.path),
    ]  # fmt: skip
    if reinstall:
        command += ["--reinstall-package", "executorch"]
    _run(command)
    return venv


def _run(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    proc = subprocess.run(command, env=env, check=False)
    if proc.returncode != 0:
        raise TargetError(
            f"`{' '.join(command[1:3])}` failed (exit code {proc.returncode})",
            expected="uv installs every locked package from the index and dist/",
            found="the uv output above",
            hint="check network access to the index; a hash mismatch means a stale lock: "
            "`nox -s lock`",
        )
