"""Build synthetic executorch trees, wheels and patch series for the tests (no torch)."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from overlay._hashing import record_digest
from overlay.distribution.distinfo import parse_record
from overlay.distribution.wheelzip import WheelWriter, read_members
from overlay.lines import pins
from overlay.lines.pins import PINS_FILE
from overlay.text.applier import split_lines, transform
from overlay.text.series import Patch, Series, format_checksums, load_series, parse_patch

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


def created_diff(path: str, text: str) -> str:
    """Return git's diff creating ``path`` with ``text`` (``new file mode 100644``)."""
    body = make_diff(path, "", text).split("\n", 2)[2]  # the hunk, after the file header
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{path}\n{body}"
    )


def write_files(path: Path, files: Mapping[str, bytes]) -> Path:
    """Write a wheel holding ``files`` (name -> bytes), each dated at the zip epoch."""
    with WheelWriter(path) as archive:
        for name, data in files.items():
            archive.add(name, data)
    return path


def unpack(wheel: Path, dest: Path) -> Path:
    """Write every member of a wheel (each checked against its RECORD) below ``dest``."""
    for name, data in read_members(wheel).items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest


def patch_text(subject: str, diff: str) -> str:
    """Return a patch file: DEP-3 header, separator, diff."""
    return HEADER.format(subject=subject) + diff


def pins_toml(
    pristine: Mapping[str, bytes], *, version: str = "1.2.0", wheel_sha: str = FAKE_WHEEL_SHA
) -> str:
    """Return a pins.toml pinning ``pristine`` (repo path -> bytes) for a synthetic release."""
    lines = [
        f'executorch = "{version}"',
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
    ]
    return "\n".join(lines) + "\n"


def write_series(
    folder: Path,
    patches: dict[str, str],
    pristine: Mapping[str, bytes],
    *,
    pinned: Mapping[str, bytes] | None = None,
    wheel_sha: str = FAKE_WHEEL_SHA,
    version: str = "1.2.0",
) -> Series:
    """Write a series folder (SHA256SUMS from ``pristine``, pins.toml) and return it loaded.

    ``pinned`` overrides what pins.toml records as pristine (default: ``pristine``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "series").write_text("".join(f"{name}\n" for name in patches), encoding="utf-8")
    for name, text in patches.items():
        (folder / name).write_bytes(text.encode())
    (folder / PINS_FILE).write_text(
        pins_toml(pristine if pinned is None else pinned, wheel_sha=wheel_sha, version=version),
        encoding="utf-8",
    )
    parsed: list[Patch] = [parse_patch(n, t) for n, t in patches.items()]
    digest_source = Series(folder, tuple(parsed), pins.load(folder))  # checks the creations
    hashes = {}
    for path in digest_source.targets():
        after = transform(parsed, path, pristine.get(path))  # absent: a file it creates
        assert after is not None
        hashes[path] = sha(after)
    (folder / "SHA256SUMS").write_text(format_checksums(digest_source, hashes), encoding="utf-8")
    return load_series(folder)


def make_tree(
    root: Path, files: dict[str, bytes], *, version: str = "1.2.0", metadata: str = ""
) -> Path:
    """Create an unpacked-wheel-like tree: executorch/<repo path> plus a dist-info.

    ``metadata``: more METADATA header lines (``Requires-Dist: ...``) after the version.
    """
    dist = root / f"executorch-{version}.dist-info"
    dist.mkdir(parents=True)
    head = f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n{metadata}"
    metadata_bytes = head.encode()
    (dist / "METADATA").write_bytes(metadata_bytes)
    record = [f"{dist.name}/METADATA,sha256={record_digest(metadata_bytes)},{len(metadata_bytes)}"]
    for repo_path, data in files.items():
        path = root / "executorch" / repo_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"executorch/{repo_path},sha256={record_digest(data)},{len(data)}")
    record.append(f"{dist.name}/RECORD,,")
    (dist / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Return every file (bytes), symlink (target) and folder under ``root`` (identity checks)."""
    state: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):  # os.path: a journal matrix calls this
        folder = os.path.relpath(dirpath, root)  # hundreds of times over a thousand files
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = name if folder == "." else f"{folder}/{name}"
            if os.path.islink(path):
                state[rel] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as file:
                    state[rel] = file.read()
            else:
                state[rel + "/"] = "<dir>"
    return state


@contextlib.contextmanager
def fast_tmp(fallback: Path) -> Iterator[Path]:
    """Yield a scratch folder on tmpfs (fsync is free, any user may enter), removed after.

    Without a writable /dev/shm, yield ``fallback``.
    """
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        yield fallback
        return
    folder = Path(tempfile.mkdtemp(prefix="overlay-test-", dir=shm))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def unowned(site: Path) -> list[str]:
    """Return what `pip uninstall executorch` would leave in ``site``: every file that is not
    in RECORD (or the bytecode of a listed source, which pip adds), and every folder that
    would not become empty. An empty list means the uninstall leaves nothing behind."""
    infos = sorted(site.glob("executorch-*.dist-info"))
    owned: set[str] = set()
    for info in infos:
        rows = parse_record((info / "RECORD").read_text(encoding="utf-8"), where=info.name)
        owned.update(row.path for row in rows)
    left = []
    for dirpath, _, filenames in os.walk(site):
        folder = os.path.relpath(dirpath, site)
        for name in filenames:
            rel = name if folder == "." else f"{folder}/{name}"
            if rel not in owned and not rel.endswith(".pyc"):
                left.append(rel)
            elif rel.endswith(".pyc") and rel not in owned and "/__pycache__/" in rel:
                source = importlib.util.source_from_cache(rel)
                if source not in owned:
                    left.append(rel)
    return sorted(left)


@dataclass(frozen=True)
class Child:
    """How a forked run ended: exit code (negative: killed by that signal) and its output."""

    code: int
    output: str


def run_forked(function: Callable[[], int], env: Mapping[str, str] | None = None) -> Child:
    """Run ``function`` in a forked child (fault env set there only); return how it ended.

    A fork is a real process (SIGKILL kills it, SIGINT reaches its handlers) without the
    cost of starting an interpreter.
    """
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads alive (3.12)
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.close(read_end)
            stream = open(write_end, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = sys.stderr = stream
            os.environ.update(env or {})
            code = function()
        except BaseException as exc:
            print(f"child raised {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            with contextlib.suppress(BaseException):
                sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return Child(code, output)
