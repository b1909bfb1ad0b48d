"""The content-addressed result cache: one typed file per result, named by its key, written
atomically; an entry of another schema, type or shape reads as a miss."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from overlay import codec
from overlay._cache import cache_dir
from overlay._files import write_text_atomic
from overlay.codec import JsonValue
from overlay.equivalence import protocol
from overlay.equivalence.protocol import PathId
from overlay.items import CaseInfo, ProbeInfo

CACHE_SCHEMA = 1
T = TypeVar("T")


def default_directory() -> Path:
    """Return the default cache folder (under ``$OVERLAY_CACHE_DIR`` or the XDG cache)."""
    return cache_dir() / "equivalence"


def key(*parts: JsonValue) -> str:
    """Return the sha256 of ``parts`` (JSON values, order significant)."""
    text = json.dumps(
        [CACHE_SCHEMA, protocol.SCHEMA_VERSION, *parts], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """One cache file: its header and the value, encoded by the codec."""

    cache: int  # CACHE_SCHEMA
    protocol: int  # the protocol's SCHEMA_VERSION
    type: str  # the value's class name
    key: str
    value: JsonValue

    @property
    def header(self) -> tuple[int, int, str, str]:
        """Return what must match for the entry to be a hit."""
        return (self.cache, self.protocol, self.type, self.key)


class ResultCache:
    """Typed values by key in a folder (None: every read misses, nothing is written);
    ``read=False`` ignores entries but still writes them."""

    def __init__(self, root: Path | None, *, read: bool = True) -> None:
        self.root = root
        self.read = read

    def _file(self, digest: str) -> Path | None:
        return None if self.root is None else self.root / digest[:2] / f"{digest}.json"

    def get(self, digest: str, cls: type[T]) -> T | None:
        """Return the value stored under ``digest`` as a ``cls``, or None (miss)."""
        path = self._file(digest)
        if not self.read or path is None:
            return None
        try:
            entry = codec.loads(CacheEntry, path.read_text(encoding="utf-8"))
            if entry.header != (CACHE_SCHEMA, protocol.SCHEMA_VERSION, cls.__name__, digest):
                raise ValueError(f"entry header {entry.header}")
            return protocol.from_json(cls, entry.value, "cache entry")
        except (OSError, ValueError, codec.CodecError, protocol.ProtocolError):
            return None

    def put(self, digest: str, value: object) -> None:
        """Store ``value`` under ``digest`` atomically (temporary file, then rename)."""
        target = self._file(digest)
        if target is None:
            return
        entry = CacheEntry(
            CACHE_SCHEMA, protocol.SCHEMA_VERSION, type(value).__name__, digest, codec.encode(value)
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, codec.dumps(entry))


@dataclass(frozen=True)
class Keys:
    """Builds every cache key of one run from the digests of what decides a result.
    What goes into each key: docs/equivalence.md, "The result cache"."""

    base: str
    paths: dict[PathId, str]
    models: str | None  # sha256 of the user's models file
    corpus: str  # digest of the corpus package (cases, zoo, probes)

    def result(
        self,
        path: PathId,
        info: CaseInfo | ProbeInfo,
        fixes: tuple[int, ...] = (),
        keep_bytes: bool = False,
    ) -> str:
        """Return the key of one item's result on one path (with single runtime fixes)."""
        user = isinstance(info, CaseInfo) and info.source != "corpus"
        source = (self.models or "") if user else self.corpus
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


@dataclass(frozen=True)
class RunCache:
    """One run's view of the cache: its keys and requests."""

    store: ResultCache
    keys: Keys
    keep_bytes: bool = False

    def result(
        self, path: PathId, info: CaseInfo | ProbeInfo, fixes: tuple[int, ...] = ()
    ) -> protocol.ItemResult | None:
        """Return an item's cached result on a path (with single runtime fixes), or None."""
        return self.store.get(
            self.keys.result(path, info, fixes, self.keep_bytes), protocol.ItemResult
        )

    def put_result(
        self,
        path: PathId,
        info: CaseInfo | ProbeInfo,
        fixes: tuple[int, ...],
        result: protocol.ItemResult,
    ) -> None:
        """Store a result; harness failures (timeouts, crashes) are never cached."""
        if result.error is None or result.error.stage is not protocol.Stage.HARNESS:
            self.store.put(self.keys.result(path, info, fixes, self.keep_bytes), result)

    def init(self, path: PathId) -> protocol.InitReply | None:
        """Return what a path's worker said at its last start, or None."""
        return self.store.get(self.keys.init(path), protocol.InitReply)

    def put_init(self, path: PathId, init: protocol.InitReply) -> None:
        """Store what a path's worker said at start."""
        self.store.put(self.keys.init(path), init)

    def listing(self) -> protocol.ListReply | None:
        """Return the cached case listing of a models file, or None."""
        return self.store.get(self.keys.listing(), protocol.ListReply)

    def put_listing(self, reply: protocol.ListReply) -> None:
        """Store the case listing."""
        self.store.put(self.keys.listing(), reply)
