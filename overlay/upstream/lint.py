"""Upstream's linters on the files a patch changes, at upstream's pinned versions.

lintrunner runs every linter of the upstream checkout's ``.lintrunner.toml`` that applies
to the files, as the pre-push hook does (for Python: FLAKE8, UFMT = black + usort,
DOCFORMATTER, MYPY, RUFF_DOCS, BANDIT and upstream's custom checks), with the checkout's
settings, in a throwaway tool venv built with uv from ``lint_requirements`` (upstream.toml)
(the versions of upstream's ``requirements-lintrunner.txt``). The files are linted before
and after the commit; only what the commit adds is reported, so old findings in a touched
file are not blamed on the patch.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay import lines
from overlay._git import git
from overlay.envs import release_venvs
from overlay.errors import UpstreamError
from overlay.upstream import upstream_pins

LINTERS = "every linter of .lintrunner.toml for these files"
_LINE_NUMBERS = re.compile(r":\d+(:\d+)?")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class LintReport:
    """What the linters said about the commit's changes."""

    linters: str
    new: tuple[str, ...]  # findings the commit adds
    old: int  # findings already there before the commit
    seconds: float

    @property
    def summary(self) -> str:
        """Return a one-line result for the PR's Test plan."""
        if not self.new:
            return f"clean ({self.linters})"
        return f"{len(self.new)} new finding(s) ({self.linters}): " + "; ".join(self.new)


def lint_env(progress: Progress) -> release_venvs.Env:
    """Return the tool venv with lintrunner and upstream's linter pins."""
    shared = upstream_pins.for_series(lines.series_directory())
    if not shared.lint_requirements:
        raise UpstreamError(
            "no linter pins",
            expected=f"lint_requirements in {shared.source}",
            found="none",
            hint="copy them from upstream's requirements-lintrunner.txt",
        )
    spec = release_venvs.EnvSpec("upstream-lint", shared.python, shared.lint_requirements)
    return release_venvs.ensure(spec, progress=progress)


def _findings(repo: Path, env: release_venvs.Env, paths: Sequence[str]) -> list[str]:
    environment = dict(os.environ)
    environment["PATH"] = str(env.python.parent) + os.pathsep + environment.get("PATH", "")
    environment.pop("PYTHONPATH", None)
    environment["MYPYPATH"] = "./src/"  # as the pre-push hook runs it
    command = [
        str(env.python.parent / "lintrunner"),
        "--output",
        "oneline",
        *paths,
    ]
    proc = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, env=environment, check=False
    )
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    found = [line for line in lines if not line.startswith(("ok", "Warning:", "WARNING"))]
    broken = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode not in (0, 1) or broken:
        raise UpstreamError(
            "lintrunner failed to run",
            expected="findings or a clean run",
            found=(proc.stderr or proc.stdout).strip()[-1500:],
            hint=f"run it by hand in {repo}: {' '.join(command)}",
        )
    return [line for line in found if "No lint issues" not in line]


def run_lint(repo: Path, paths: Sequence[str], *, progress: Progress) -> LintReport:
    """Lint ``paths`` at HEAD and at HEAD~1 of ``repo``; report what HEAD adds."""
    started = time.perf_counter()
    env = lint_env(progress)
    progress(f"lintrunner ({LINTERS}) on {len(paths)} file(s)")
    after = _findings(repo, env, paths)
    git(repo, "checkout", "-q", "HEAD~1", "--", *paths)
    try:
        before = _findings(repo, env, paths)
    finally:
        git(repo, "checkout", "-q", "HEAD", "--", *paths)
    known = {_LINE_NUMBERS.sub("", line) for line in before}
    new = tuple(line for line in after if _LINE_NUMBERS.sub("", line) not in known)
    return LintReport(LINTERS, new, len(before), time.perf_counter() - started)
