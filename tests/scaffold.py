"""Build synthetic executorch trees, wheels and patch series for the tests (no torch)."""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from overlay import pins
from overlay._hashing import record_digest
from overlay.applier import split_lines, transform
from overlay.pins import PINS_FILE
from overlay.series import Patch, Series, format_checksums, load_series, parse_patch

HEADER = "Description: {subject}\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
FAKE_WHEEL_SHA = "0" * 64


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


def pins_toml(
    pristine: Mapping[str, bytes], *, version: str = "1.2.0", wheel_sha: str = FAKE_WHEEL_SHA
) -> str:
    """Return a pins.toml pinning ``pristine`` (repo path -> bytes) for a synthetic release."""
    lines = [
        "[executorch]",
        f'version = "{version}"',
        f'git_tag = "v{version}"',
        'upstream_repo = "pytorch/executorch"',
        'package_dir = "executorch"',
        "",
        "[runtime]",
        'torch = "2.11.0"',
        "",
        "[[wheels]]",
        f'file = "executorch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"',
        f'sha256 = "{wheel_sha}"',
        'python = "3.11"',
        'platform = "manylinux_2_28_x86_64"',
        "",
        "[pristine]",
        *(f'"{path}" = "{sha(data)}"' for path, data in pristine.items()),
        "",
        "[matrix]",
        f'versions = ["{version}"]',
        'python = "3.11"',
        'platform = "manylinux_2_28_x86_64"',
        "",
        "[matrix.sha256]",
    ]
    return "\n".join(lines) + "\n"


def write_series(
    folder: Path,
    patches: dict[str, str],
    pristine: Mapping[str, bytes],
    *,
    pinned: Mapping[str, bytes] | None = None,
    wheel_sha: str = FAKE_WHEEL_SHA,
) -> Series:
    """Write a series folder (SHA256SUMS from ``pristine``, pins.toml) and return it loaded.

    ``pinned`` overrides what pins.toml records as pristine (default: ``pristine``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "series").write_text("".join(f"{name}\n" for name in patches), encoding="utf-8")
    for name, text in patches.items():
        (folder / name).write_bytes(text.encode())
    (folder / PINS_FILE).write_text(
        pins_toml(pristine if pinned is None else pinned, wheel_sha=wheel_sha), encoding="utf-8"
    )
    parsed: list[Patch] = [parse_patch(n, t) for n, t in patches.items()]
    hashes = {}
    for patch in parsed:
        for path in patch.targets:
            hashes[path] = sha(transform(parsed, path, pristine[path]))
    digest_source = Series(folder, tuple(parsed), pins.load(folder))
    (folder / "SHA256SUMS").write_text(format_checksums(digest_source, hashes), encoding="utf-8")
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
        record.append(f"executorch/{repo_path},sha256={record_digest(data)},{len(data)}")
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
