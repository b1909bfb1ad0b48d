"""Where the overlay keeps what it downloads and computes (``$OVERLAY_CACHE_DIR``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Return the cache root (``$OVERLAY_CACHE_DIR``, else the XDG cache folder)."""
    explicit = os.environ.get("OVERLAY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "executorch-arm-overlay"
