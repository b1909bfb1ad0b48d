"""What a path's environment is made of: ``python -m overlay.equivalence.worker.envinfo``.

Stdlib only: run with a path's Python before any worker starts; cached results are keyed by
the :class:`EnvInfo` it prints, which holds no absolute path.
"""

from __future__ import annotations

import ast
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
from overlay._hashing import tree_digest
from overlay.envs.stamp import read_stamp
from overlay.equivalence import sources
from overlay.equivalence.worker.vgf_run import ICD_GLOBS


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
    module_error: str = ""  # why the module was not found, or lacks the function
    module_functions: tuple[str, ...] = ()  # the module's public top-level functions
    vulkan_drivers: tuple[str, ...] = ()  # "name sha256" of each lavapipe driver manifest
    lock: str | None = None  # the committed lock the venv was synced from; None: not synced

    @property
    def digest(self) -> str:
        """Return the sha256 of everything above (the cache key part of this env)."""
        text = json.dumps(codec.encode(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


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
    """Return the digest of the ``.py`` files of ``package/subtree`` as found on sys.path."""
    spec = _find(package)
    if spec is None or not spec.submodule_search_locations:
        return ""
    return tree_digest(Path(next(iter(spec.submodule_search_locations))) / subtree)


def vulkan_drivers() -> tuple[str, ...]:
    """Return the lavapipe manifests VGF files would run on, as "file name sha256" lines."""
    found = sorted({path for pattern in ICD_GLOBS for path in glob.glob(pattern)})
    return tuple(
        f"{Path(path).name} {hashlib.sha256(Path(path).read_bytes()).hexdigest()}" for path in found
    )


def _read_module(runtime_patch: str | None) -> tuple[str | None, str, tuple[str, ...]]:
    """Return (file digest, problem, public functions) of a ``module:FUNCTION`` runtime
    patch's module, without running it (None, "", () when there is none to read).

    The digest is "" when the module is not found; a module that is not Python source
    (an extension) cannot be read and is not checked for the function.
    """
    if not runtime_patch:
        return None, "", ()
    name, _, function = runtime_patch.partition(":")
    function = function or "apply_all"
    spec = _find(name)
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or not origin.is_file():
        return "", f"no module named {name!r} on {sys.path}", ()
    data = origin.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    try:
        body = ast.parse(data, filename=str(origin)).body
    except (SyntaxError, ValueError):
        return digest, "", ()
    if origin.suffix != ".py" or function in set(sources.bound_names(body)) | {"*"}:
        return digest, "", tuple(sources.functions(body))
    return digest, f"{name} ({origin.name}) defines no {function}", tuple(sources.functions(body))


def collect(package: str, subtree: str, runtime_patch: str | None) -> EnvInfo:
    """Describe this interpreter's environment (``runtime_patch``: ``module:FUNCTION``)."""
    module_sha256, module_error, functions = _read_module(runtime_patch)
    stamp = read_stamp(Path(sys.prefix))  # a venv the overlay synced says from which lock
    synced = stamp.origin if stamp is not None else None
    found = set()
    for dist in importlib.metadata.distributions():
        record = dist.read_text("RECORD")
        digest = hashlib.sha256(record.encode()).hexdigest() if record else ""
        found.add(Distribution(str(dist.metadata["Name"]), dist.version, digest))
    order = sorted(found, key=lambda d: (d.name.lower(), d.version, d.record_sha256))
    return EnvInfo(
        python=sys.version,
        platform=sysconfig.get_platform(),
        distributions=tuple(order),
        sources_sha256=sources_digest(package, subtree),
        module_sha256=module_sha256,
        module_error=module_error,
        module_functions=functions,
        vulkan_drivers=vulkan_drivers(),
        lock=synced.describe() if synced else None,
    )


def main(argv: list[str]) -> None:
    """Print the EnvInfo of this interpreter: ``PACKAGE SUBTREE [MODULE:FUNCTION]``."""
    package, subtree, *patch = argv
    info = collect(package, subtree, patch[0] if patch else None)
    sys.stdout.write(codec.dumps(info) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
