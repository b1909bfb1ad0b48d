"""The content-addressed result cache: one typed file per result, named by its key.

A key is the sha256 of everything that decides a result (see :func:`key`); the orchestrator
builds keys from the environment of each path (:mod:`overlay.equivalence.envinfo`), the
overlay's own sources, the runtime patch, the case and the request. Nothing in a key is an
absolute path, so a cache folder can be shared between machines (a CI cache).

An entry is ``{"cache": CACHE_SCHEMA, "protocol": SCHEMA_VERSION, "type": ..., "key": ...,
"value": ...}`` with the value encoded and decoded by the protocol's strict codec: an entry
of another schema, type or shape reads as a miss and is rewritten. Writes go to a temporary
file beside the entry and are renamed into place, so concurrent runs (and a run killed
mid-write) never leave a torn entry; two runs writing one key write the same result.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from overlay import codec
from overlay._cache import cache_dir
from overlay._files import write_text_atomic
from overlay.codec import JsonValue
from overlay.equivalence.protocol import (
    SCHEMA_VERSION,
    CaseInfo,
    PathId,
    ProbeInfo,
    ProtocolError,
    from_json,
)

CACHE_SCHEMA = 1
T = TypeVar("T")


def default_directory() -> Path:
    """Return the default cache folder (under ``$OVERLAY_CACHE_DIR`` or the XDG cache)."""
    return cache_dir() / "equivalence"


def key(*parts: JsonValue) -> str:
    """Return the sha256 of ``parts`` (JSON values, order significant)."""
    text = json.dumps([CACHE_SCHEMA, SCHEMA_VERSION, *parts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ResultCache:
    """Typed values by key in a folder; ``read=False`` ignores entries but still writes them."""

    def __init__(self, root: Path, *, read: bool = True) -> None:
        self.root = root
        self.read = read
        self.hits = 0
        self.misses = 0

    def _file(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.json"

    def get(self, digest: str, cls: type[T]) -> T | None:
        """Return the value stored under ``digest`` as a ``cls``, or None (miss)."""
        if not self.read:
            self.misses += 1
            return None
        try:
            data = json.loads(self._file(digest).read_text(encoding="utf-8"))
            header = (data["cache"], data["protocol"], data["type"], data["key"])
            if header != (CACHE_SCHEMA, SCHEMA_VERSION, cls.__name__, digest):
                raise ValueError(f"entry header {header}")
            value = from_json(cls, data["value"], "cache entry")
        except (OSError, ValueError, KeyError, TypeError, ProtocolError):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, digest: str, value: object) -> None:
        """Store ``value`` under ``digest`` atomically (temporary file, then rename)."""
        entry = {
            "cache": CACHE_SCHEMA,
            "protocol": SCHEMA_VERSION,
            "type": type(value).__name__,
            "key": digest,
            "value": codec.encode(value),
        }
        target = self._file(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, json.dumps(entry, sort_keys=True))


WORKER_ENTRY_POINTS = ("overlay.equivalence.worker", "overlay.equivalence.envinfo")


def _module_file(root: Path, name: str) -> Path | None:
    """Return the file of module ``name`` inside package folder ``root`` (named like it)."""
    parts = name.split(".")
    if parts[0] != root.name:
        return None
    base = root.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def worker_sources(root: Path, entries: Sequence[str] = WORKER_ENTRY_POINTS) -> list[Path]:
    """Return the package's files a worker can import: every module ``entries`` reach.

    Every import statement counts, function-level ones included, so the closure holds
    whatever a worker may run; controller-only modules (report, orchestrator, CLI) are
    outside it, and editing them keeps cached results. A package ``__init__`` that imports
    ``pkgutil`` discovers its modules (the fix registry): all of them count.
    """
    found: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        path = _module_file(root, name)
        if name in found or path is None:
            continue
        found[name] = path
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parents run first
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.Import):
                todo.extend(alias.name for alias in node.names)
                if path.name == "__init__.py" and any(a.name == "pkgutil" for a in node.names):
                    found_here = path.parent.glob("*.py")
                    todo.extend(f"{name}.{p.stem}" for p in found_here if p.stem != "__init__")
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo.append(node.module)
                todo.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return sorted(found.values())


def sources_digest(root: Path, files: Sequence[Path]) -> str:
    """Return a sha256 over ``files`` (names relative to ``root``, and contents)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class Keys:
    """Builds every cache key of one run from the digests of what decides a result.

    ``base`` covers the overlay version, the package sources a worker can import (worker,
    corpus, probes, runtime fixes, protocol: :func:`worker_sources`) and the series' pins;
    ``paths`` adds each path's environment and, for (b), the runtime patch's source. A
    result key adds the item, its case description, the case's source (the corpus or probe
    module, or the user's models file) and the request.
    """

    base: str
    paths: dict[PathId, str]
    models: str | None  # sha256 of the user's models file
    corpus: str
    probes: str

    def result(
        self,
        path: PathId,
        info: CaseInfo | ProbeInfo,
        fixes: tuple[int, ...] = (),
        keep_bytes: bool = False,
    ) -> str:
        """Return the key of one item's result on one path (with single runtime fixes)."""
        if isinstance(info, ProbeInfo):
            source = self.probes
        else:
            source = self.corpus if info.source == "corpus" else (self.models or "")
        return key(
            "result",
            self.paths[path],
            codec.encode(info.item),
            codec.encode(info),
            source,
            list(fixes),
            keep_bytes,
        )

    def init(self, path: PathId) -> str:
        """Return the key of a path's worker description (InitReply)."""
        return key("init", self.paths[path], self.models)

    def listing(self) -> str:
        """Return the key of the case listing (needed only with a models file)."""
        return key("list", self.paths[PathId.STOCK], self.models)
