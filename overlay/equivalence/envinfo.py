"""What a path's environment is made of: ``python -m overlay.equivalence.envinfo`` (stdlib only).

The orchestrator runs this with a path's Python and exactly the sys.path its worker gets,
before any worker starts (a fraction of a second, no torch import). It prints one JSON
line, an :class:`EnvInfo`: the interpreter, every installed distribution (name, version,
sha256 of its RECORD), a digest of the sources the series touches as this interpreter
would import them (so an in-place patched install or a package copy earlier on the path is
told apart from the wheel its RECORD describes) and, for a ``module:FUNCTION`` runtime
patch, that module's file digest, found without importing anything, and the software
Vulkan driver executed VGF files run on (Mesa's lavapipe is a system package, outside the
env). The result cache keys results by it: nothing in it is an absolute path, so CI
runners share cache entries.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.machinery
import importlib.metadata
import json
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from overlay import codec
from overlay.envs.stamp import SyncState, read_stamp
from overlay.equivalence.protocol import from_json
from overlay.equivalence.vgf_run import ICD_GLOBS


@dataclass(frozen=True)
class Distribution:
    """One installed distribution."""

    name: str
    version: str
    record_sha256: str  # "" when it has no RECORD


@dataclass(frozen=True)
class EnvInfo:
    """The parts of an environment that decide what a worker observes."""

    python: str  # sys.version
    platform: str
    distributions: tuple[Distribution, ...]  # sorted
    sources_sha256: str  # the watched source tree as imported here; "" when it is absent
    module_sha256: str | None = None  # the runtime patch module's file; None: not asked
    module_error: str = ""  # why the module was not found
    vulkan_drivers: tuple[str, ...] = ()  # "name sha256" of each lavapipe driver manifest
    lock: str | None = None  # the committed lock the venv was synced from; None: not synced

    @property
    def digest(self) -> str:
        """Return the sha256 of everything above (the cache key part of this env)."""
        text = json.dumps(codec.encode(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _distributions() -> tuple[Distribution, ...]:
    found = set()
    for dist in importlib.metadata.distributions():
        record = dist.read_text("RECORD")
        digest = hashlib.sha256(record.encode()).hexdigest() if record else ""
        found.add(Distribution(str(dist.metadata["Name"]), dist.version, digest))
    return tuple(sorted(found, key=lambda d: (d.name.lower(), d.version, d.record_sha256)))


def _find(name: str) -> importlib.machinery.ModuleSpec | None:
    """Find a module's spec by walking its package path, without importing any package."""
    spec = None
    search: list[str] | None = None
    parts = name.split(".")
    for index in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: index + 1]), search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    return spec


def sources_digest(package: str, subtree: str) -> str:
    """Return a sha256 over the ``.py`` files of ``package/subtree`` as found on sys.path."""
    spec = _find(package)
    if spec is None or not spec.submodule_search_locations:
        return ""
    root = Path(next(iter(spec.submodule_search_locations))) / subtree
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def vulkan_drivers() -> tuple[str, ...]:
    """Return the lavapipe manifests VGF files would run on, as "file name sha256" lines."""
    found = sorted({path for pattern in ICD_GLOBS for path in glob.glob(pattern)})
    return tuple(
        f"{Path(path).name} {hashlib.sha256(Path(path).read_bytes()).hexdigest()}" for path in found
    )


def collect(package: str, subtree: str, module: str | None) -> EnvInfo:
    """Describe this interpreter's environment."""
    module_sha256, module_error = None, ""
    if module:
        spec = _find(module)
        origin = spec.origin if spec is not None else None
        if origin and Path(origin).is_file():
            module_sha256 = hashlib.sha256(Path(origin).read_bytes()).hexdigest()
        else:
            module_sha256, module_error = "", f"no module named {module!r} on {sys.path}"
    stamp = read_stamp(Path(sys.prefix))  # a venv the overlay synced says from which lock
    synced = stamp.origin if stamp is not None and stamp.state is SyncState.READY else None
    return EnvInfo(
        python=sys.version,
        platform=sysconfig.get_platform(),
        distributions=_distributions(),
        sources_sha256=sources_digest(package, subtree),
        module_sha256=module_sha256,
        module_error=module_error,
        vulkan_drivers=vulkan_drivers(),
        lock=synced.describe() if synced else None,
    )


def decode(line: str) -> EnvInfo:
    """Parse the line :func:`main` prints."""
    return from_json(EnvInfo, json.loads(line), "envinfo")


def main(argv: list[str]) -> None:
    """Print the EnvInfo of this interpreter: ``PACKAGE SUBTREE [MODULE]``."""
    package, subtree, *module = argv
    info = collect(package, subtree, module[0] if module else None)
    sys.stdout.write(json.dumps(codec.encode(info), sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
