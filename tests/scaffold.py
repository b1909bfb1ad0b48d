"""Build synthetic executorch trees and patch series for the applier tests (no torch)."""

from __future__ import annotations

import difflib
import hashlib
import os
from pathlib import Path

from overlay.applier import split_lines
from overlay.series import Series, format_checksums, load_series, parse_patch
from overlay.tree import transform

HEADER = "Description: {subject}\nForwarded: no\nLast-Update: 2026-12-02\n---\n"


def sha(data: bytes) -> str:
    """Return the hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def make_diff(path: str, old: str, new: str, *, context: int = 3) -> str:
    """Return a -p1 unified diff of ``old`` -> ``new``, with no-newline markers."""
    lines = difflib.unified_diff(
        split_lines(old),
        split_lines(new),
        f"a/{path}",
        f"b/{path}",
        n=context,
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def patch_text(subject: str, diff: str) -> str:
    """Return a patch file: DEP-3 header, separator, diff."""
    return HEADER.format(subject=subject) + diff


def write_series(folder: Path, patches: dict[str, str], pristine: dict[str, bytes]) -> Series:
    """Write a series folder with SHA256SUMS computed from ``pristine`` and return it loaded."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "series").write_text("".join(f"{name}\n" for name in patches), encoding="utf-8")
    for name, text in patches.items():
        (folder / name).write_bytes(text.encode())
    parsed = Series(folder, tuple(parse_patch(n, t) for n, t in patches.items()))
    hashes = {p: sha(transform(parsed, p, pristine[p])) for p in parsed.targets()}
    (folder / "SHA256SUMS").write_text(format_checksums(parsed, hashes), encoding="utf-8")
    return load_series(folder)


def make_tree(root: Path, files: dict[str, bytes], *, version: str = "1.2.0") -> Path:
    """Create an unpacked-wheel-like tree: executorch/<repo path> plus a dist-info."""
    dist = root / f"executorch-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n", encoding="utf-8"
    )
    record = []
    for repo_path, data in files.items():
        path = root / "executorch" / repo_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"executorch/{repo_path},sha256={sha(data)},{len(data)}")
    record.append(f"{dist.name}/RECORD,,")
    (dist / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Return every file (bytes) and symlink (target) under ``root``, for identity checks."""
    state: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                state[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                state[rel] = path.read_bytes()
    return state
