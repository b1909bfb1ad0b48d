"""Venvs for any executorch release (retarget, upstream, canary): pins, no lock."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay._cache import cache_dir
from overlay._hashing import sha256_bytes, sha256_file
from overlay.envs import venvs
from overlay.lines.pins import Pins

ENVS_ENV = "OVERLAY_ENVS_DIR"


def env_contents(name: str, python: str, requirements: Sequence[str]) -> venvs.Contents:
    """Return what a release env holds: exact requirements ("pkg==1.0" or a local wheel path);
    its ``salt`` (which names its folder) keys a local wheel by name and content."""
    parts = [f"python {python}"]
    for requirement in requirements:
        path = Path(requirement)
        is_wheel = path.suffix == ".whl" and path.is_file()
        parts.append(f"{path.name}\0{sha256_file(path)}" if is_wheel else requirement)
    text = "".join(f"{r}\n" for r in requirements)
    salt = sha256_bytes("\0".join(parts).encode())
    return venvs.Contents(name, python, text, salt=salt, quiet=True)


@dataclass(frozen=True)
class Env:
    """A ready environment."""

    folder: Path
    contents: venvs.Contents

    @property
    def python(self) -> Path:
        """Return the environment's interpreter."""
        return self.folder / "bin" / "python"


def envs_root() -> Path:
    """Return where release environments live (``$OVERLAY_ENVS_DIR`` or the cache)."""
    explicit = os.environ.get(ENVS_ENV)
    return Path(explicit) if explicit else cache_dir() / "envs"


def release_spec(
    pins: Pins, kind: str, *, executorch: str | Path | None = None, extra: tuple[str, ...] = ()
) -> venvs.Contents:
    """Return what a release env holds: executorch (a pin or a wheel) beside the runtime pins,
    and ``extra`` requirements (pytest for upstream's tests)."""
    target = executorch if executorch is not None else pins.executorch_requirement()
    requirements = (str(target), *pins.runtime_requirements(), *extra)
    return env_contents(f"executorch-{pins.executorch}-{kind}", pins.pythons[0], requirements)


def folder_for(contents: venvs.Contents, root: Path | None = None) -> Path:
    """Return the folder an env of ``contents`` (made by :func:`env_contents`) lives in."""
    return (root or envs_root()) / f"{contents.label}-{contents.salt[:12]}"


def ensure(
    contents: venvs.Contents,
    root: Path | None = None,
    *,
    uv: str | None = None,
    progress: venvs.Progress = lambda _: None,
) -> Env:
    """Return the env holding ``contents``, built with uv unless its stamp shows it is ready."""
    folder = folder_for(contents, root)  # no check beyond uv's own: the pins are what is asked
    venvs.ensure_venv(contents, folder, verify=lambda _: None, uv=uv, progress=progress)
    return Env(folder, contents)
