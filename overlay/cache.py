"""Where the overlay keeps downloads and locks, and the hashing helpers everything shares."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20


def cache_dir() -> Path:
    """Return the cache root (``$OVERLAY_CACHE_DIR``, else the XDG cache folder)."""
    explicit = os.environ.get("OVERLAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "executorch-arm-overlay"


def sha256_bytes(data: bytes) -> str:
    """Return the hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
