"""The one place that runs git: commands, raw blob reads and the configured identity."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from overlay._files import write_files
from overlay.errors import GitError

# Used for commits in scratch repositories when the machine has no git identity.
FALLBACK_IDENTITY = ("executorch-arm-overlay", "overlay@localhost")
# git's defaults for every setting that changes what diff, log and add write, pinned so a
# user's ~/.gitconfig cannot change a regenerated patch or an exported mbox (checked by
# the canary's export gate with a hostile config).
OUTPUT_CONFIG = (
    "diff.context=3", "diff.interHunkContext=0", "diff.noprefix=false",
    "diff.mnemonicPrefix=false", "diff.algorithm=myers", "diff.indentHeuristic=true",
    "diff.suppressBlankEmpty=false", "diff.relative=false", "diff.statGraphWidth=0",
    "color.ui=false",
    "core.autocrlf=false", "core.safecrlf=false", "core.quotePath=true",
)  # fmt: skip
_PINNED = tuple(arg for setting in OUTPUT_CONFIG for arg in ("-c", setting))


def _run(
    repo: Path | None,
    args: list[str],
    stdin: bytes | None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *_PINNED, *args],
            cwd=repo,
            input=stdin,
            capture_output=True,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", **(extra_env or {})},
            check=False,
        )
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}", hint="install git") from exc


def identity(repo: Path | None = None) -> tuple[str, str]:
    """Return (user.name, user.email) from git config; empty strings where unset."""
    found = (_run(repo, ["config", key], None) for key in ("user.name", "user.email"))
    name, email = (
        p.stdout.decode("utf-8", "replace").strip() if p.returncode == 0 else "" for p in found
    )
    return name, email


def git_bytes(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git in ``repo`` and return raw stdout; raise GitError with stderr on failure.

    Commits in a repository without an identity use :data:`FALLBACK_IDENTITY`.
    """
    extra: list[str] = []
    if not identity(repo)[1]:
        name, email = FALLBACK_IDENTITY
        extra = ["-c", f"user.name={name}", "-c", f"user.email={email}"]
    return _stdout(repo, args, _run(repo, [*extra, *args], stdin))


def git_with_env(repo: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Run git in ``repo`` with extra environment variables (author, dates)."""
    proc = _run(repo, list(args), None if stdin is None else stdin.encode("utf-8"), env)
    return _stdout(repo, args, proc).decode("utf-8", errors="surrogateescape")


def _stdout(repo: Path, args: tuple[str, ...], proc: subprocess.CompletedProcess[bytes]) -> bytes:
    if proc.returncode != 0:
        raise GitError(
            f"git {' '.join(args[:2])} failed in {repo}",
            found=proc.stderr.decode("utf-8", errors="replace").strip()[-1500:],
            hint="resolve the git state of the work tree and retry",
        )
    return proc.stdout


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    """Run git in ``repo`` and return stdout as text."""
    data = git_bytes(repo, *args, stdin=None if stdin is None else stdin.encode("utf-8"))
    return data.decode("utf-8", errors="surrogateescape")


def show(repo: Path, spec: str) -> bytes:
    """Return the raw bytes of ``git show SPEC`` (a blob)."""
    return git_bytes(repo, "show", spec)


def merge_file(
    current: bytes, base: bytes, other: bytes, labels: tuple[str, str, str]
) -> tuple[bytes, int]:
    """3-way merge one file (``git merge-file``); return (merged bytes, conflict count)."""
    with tempfile.TemporaryDirectory(prefix="overlay-merge-") as tmp:
        paths = []
        for name, data in zip(("current", "base", "other"), (current, base, other), strict=True):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        args = ["merge-file", "--stdout"]
        for label in labels:
            args += ["-L", label]
        proc = _run(None, [*args, *paths], None)
    if proc.returncode < 0 or proc.returncode > 127:
        raise GitError(
            "git merge-file failed",
            found=proc.stderr.decode("utf-8", errors="replace").strip()[-1500:],
            hint="check the git installation",
        )
    return proc.stdout, proc.returncode


def diff_files(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> tuple[str, str]:
    """Return (diffstat, full-index diff) of ``before`` -> ``after``, computed by git.

    A path only ``after`` holds is a new file (``new file mode 100644``); renames and copies
    are never detected, whatever the user's git configuration.
    """
    with tempfile.TemporaryDirectory(prefix="overlay-diff-") as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q")
        write_files(repo, before)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        write_files(repo, after)
        git(repo, "add", "-A")
        stat = git(repo, "diff", "--cached", "--no-renames", "--stat=72", "--summary")
        diff = git(repo, "diff", "--cached", "--no-renames", "--full-index", "-U3")
    return stat, diff
