"""The sha256 helpers every layer shares (files, bytes, RECORD's urlsafe form)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    """Return the hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def tree_digest(root: Path, files: Iterable[Path] | None = None) -> str:
    """Return a sha256 over ``files`` (default: every ``.py`` under ``root``): names and bytes.

    Names are relative to ``root``, so the digest does not depend on where the tree is.
    """
    chosen = sorted(root.rglob("*.py")) if files is None else sorted(files)
    total = hashlib.sha256()
    for path in chosen:
        total.update(path.relative_to(root).as_posix().encode() + b"\0")
        total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def record_digest(data: bytes) -> str:
    """Return the RECORD form of a sha256: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode("ascii").rstrip("=")
