"""Virtual environments for any executorch release (retarget, upstream): pins, no lock.

An :class:`EnvSpec` names an interpreter version and the exact requirements (pins or local
wheel files). :func:`ensure` has :mod:`overlay.envs.venvs` build the venv under
``<root>/<name>-<key>``; a later call with the same spec and an untouched venv returns at
once. The key covers the requirement texts and the content of every local file among
them, so a rebuilt patched wheel gives a new env and never a stale one; an interrupted
build is finished by the next call.

torch with its CUDA libraries is ~4 GB: uv downloads it once into its shared cache and
links it into every env after that (seconds). pip is never used here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from overlay._cache import cache_dir
from overlay._hashing import sha256_bytes, sha256_file
from overlay.envs import venvs
from overlay.lines.pins import Pins

ENVS_ENV = "OVERLAY_ENVS_DIR"


@dataclass(frozen=True)
class EnvSpec:
    """What one environment holds: an interpreter version and exact requirements."""

    name: str  # e.g. "executorch-1.5.1-stock"
    python: str  # "3.11"
    requirements: tuple[str, ...]  # "pkg==1.0" or a local wheel path

    @property
    def key(self) -> str:
        """Return a sha256 over the interpreter, the requirements and local files' contents."""
        parts = [f"python {self.python}"]
        for requirement in self.requirements:
            path = Path(requirement)
            if path.suffix == ".whl" and path.is_file():
                # A local wheel by name and content: the same wheel built elsewhere is equal.
                parts.append(f"{path.name}\0{sha256_file(path)}")
            else:
                parts.append(requirement)
        return sha256_bytes("\0".join(parts).encode())

    def contents(self) -> venvs.Contents:
        """Return what the builder installs: the requirements, keyed by :attr:`key`."""
        text = "".join(f"{r}\n" for r in self.requirements)
        return venvs.Contents(self.name, self.python, text, salt=self.key, quiet=True)


@dataclass(frozen=True)
class Env:
    """A ready environment."""

    folder: Path
    spec: EnvSpec
    created: bool  # False: the stamp matched, nothing was installed
    seconds: float

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
) -> EnvSpec:
    """Return the spec of a release env: executorch (a pin or a wheel) beside the runtime pins.

    ``extra``: more requirements (pytest for upstream's tests).
    """
    target = executorch if executorch is not None else pins.executorch_requirement()
    return EnvSpec(
        name=f"executorch-{pins.executorch}-{kind}",
        python=pins.pythons[0],
        requirements=(str(target), *pins.runtime_requirements(), *extra),
    )


def folder_for(spec: EnvSpec, root: Path | None = None) -> Path:
    """Return the folder an env of ``spec`` lives in."""
    return (root or envs_root()) / f"{spec.name}-{spec.key[:12]}"


def ensure(
    spec: EnvSpec,
    root: Path | None = None,
    *,
    uv: str | None = None,
    progress: venvs.Progress = lambda _: None,
) -> Env:
    """Return the env for ``spec``, building it with uv unless its stamp shows it is ready."""
    folder = folder_for(spec, root)
    # no check beyond uv's own: the pins are what is asked
    done = venvs.ensure_venv(
        spec.contents(), folder, verify=lambda _: None, uv=uv, progress=progress
    )
    return Env(folder, spec, done.changed, done.seconds)
