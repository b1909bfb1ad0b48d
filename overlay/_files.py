"""Files written whole or not at all (a unique temporary file, a rename); a tree of files."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` as UTF-8 so that a reader sees the old file or the new one, never a part.

    The temporary file is unique, so concurrent writers of one path never share it; it is
    removed when writing fails.
    """
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_files(root: Path, files: Mapping[str, bytes | None]) -> None:
    """Write ``files`` under ``root`` by relative path (None: remove the file)."""
    for relative, data in sorted(files.items()):
        path = root / relative
        if data is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
