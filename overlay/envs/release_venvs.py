"""Virtual environments for one executorch release, built with uv and keyed by what is in them.

An :class:`EnvSpec` names an interpreter version and the exact requirements (pins or local
wheel files). :func:`ensure` builds the venv once under ``<root>/<name>-<key>`` and stamps
it; a later call with the same spec finds the stamp and returns at once. The key covers
the requirement texts and the content of every local file among them, so a rebuilt
patched wheel gives a new env and never a stale one. A crash before the stamp is written
leaves a folder the next call rebuilds; a file lock serialises builders of one env.

torch with its CUDA libraries is ~4 GB: uv downloads it once into its shared cache and
links it into every env after that (seconds). pip is never used here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from overlay._cache import cache_dir
from overlay.errors import EnvError
from overlay.lines.pins import Pins

STAMP = "overlay-env.json"
ENVS_ENV = "OVERLAY_ENVS_DIR"
LOCK_TIMEOUT_S = 1800.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class EnvSpec:
    """What one environment holds: an interpreter version and exact requirements."""

    name: str  # e.g. "executorch-1.5.1-stock"
    python: str  # "3.11"
    requirements: tuple[str, ...]  # "pkg==1.0" or a local wheel path

    @property
    def key(self) -> str:
        """Return a sha256 over the interpreter, the requirements and local files' contents."""
        digest = hashlib.sha256(f"python {self.python}\0".encode())
        for requirement in self.requirements:
            path = Path(requirement)
            if path.suffix == ".whl" and path.is_file():
                # A local wheel by name and content: the same wheel built elsewhere is equal.
                digest.update(path.name.encode() + b"\0" + _file_digest(path).encode())
            else:
                digest.update(requirement.encode() + b"\0")
        return digest.hexdigest()

    def as_dict(self) -> dict[str, object]:
        """Return the stamp form (local wheels by file name; the key covers their content)."""
        return {
            "name": self.name,
            "python": self.python,
            "requirements": [Path(r).name if r.endswith(".whl") else r for r in self.requirements],
            "key": self.key,
        }


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


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def envs_root() -> Path:
    """Return where release environments live (``$OVERLAY_ENVS_DIR`` or the cache)."""
    explicit = os.environ.get(ENVS_ENV)
    return Path(explicit) if explicit else cache_dir() / "envs"


def find_uv() -> str:
    """Return the uv executable: the ``uv`` package's binary, else ``uv`` on PATH."""
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        found: str = uv.find_uv_bin()
        return found
    except (ImportError, FileNotFoundError):
        pass
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise EnvError(
        "uv is not available",
        expected="the uv package in this Python, or uv on PATH",
        found="neither",
        hint="pip install uv (torch envs are built with uv only: it links from its cache)",
    )


def release_spec(pins: Pins, kind: str, *, executorch: str | Path | None = None) -> EnvSpec:
    """Return the spec of a release env: executorch (a pin or a wheel) beside the runtime pins."""
    target = executorch if executorch is not None else pins.executorch_requirement()
    return EnvSpec(
        name=f"executorch-{pins.executorch}-{kind}",
        python=pins.pythons[0],
        requirements=(str(target), *pins.runtime_requirements()),
    )


def folder_for(spec: EnvSpec, root: Path | None = None) -> Path:
    """Return the folder an env of ``spec`` lives in."""
    return (root or envs_root()) / f"{spec.name}-{spec.key[:12]}"


def read_stamp(folder: Path) -> dict[str, object] | None:
    """Return the stamp of an env folder, or None when it is absent or unreadable."""
    try:
        data = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def ensure(
    spec: EnvSpec,
    root: Path | None = None,
    *,
    uv: str | None = None,
    progress: Progress = lambda _: None,
) -> Env:
    """Return the env for ``spec``, building it with uv unless its stamp shows it is ready."""
    started = time.perf_counter()
    folder = folder_for(spec, root)
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder) + ".lock")
    try:
        with lock.acquire(timeout=LOCK_TIMEOUT_S):
            if read_stamp(folder) == spec.as_dict() and (folder / "bin" / "python").exists():
                return Env(folder, spec, False, time.perf_counter() - started)
            progress(f"building {folder.name} with uv ({len(spec.requirements)} requirements)")
            _build(spec, folder, uv or find_uv())
    except Timeout as exc:
        raise EnvError(
            f"another process is building {folder.name}",
            expected=f"the lock {lock.lock_file} free within {LOCK_TIMEOUT_S:.0f} s",
            found="still held",
            hint="wait for the other build, or delete the .lock file if no build runs",
        ) from exc
    return Env(folder, spec, True, time.perf_counter() - started)


def _build(spec: EnvSpec, folder: Path, uv: str) -> None:
    (folder / STAMP).unlink(missing_ok=True)
    _uv(uv, ["venv", "--quiet", "--clear", "--python", spec.python, str(folder)], spec)
    python = str(folder / "bin" / "python")
    _uv(uv, ["pip", "install", "--quiet", "--python", python, *spec.requirements], spec)
    (folder / STAMP).write_text(json.dumps(spec.as_dict(), indent=2) + "\n", encoding="utf-8")


def _uv(uv: str, args: Sequence[str], spec: EnvSpec) -> None:
    try:
        proc = subprocess.run([uv, *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise EnvError(f"cannot run uv: {exc}", hint="pip install uv") from exc
    if proc.returncode != 0:
        raise EnvError(
            f"uv {args[0]} failed for {spec.name}",
            expected=f"an env with {', '.join(spec.requirements)}",
            found=(proc.stderr or proc.stdout).strip()[-2000:],
            hint="check the pins (a version may not exist for this interpreter), then retry",
        )
