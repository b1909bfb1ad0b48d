"""Upstream's linters on every file a commit touches, whole files, as upstream's hook runs them.

upstream's CI runs lintrunner on the changed files (every linter but MYPY) and MYPY over
the tree; its pre-push hook runs ``MYPYPATH=./src/ lintrunner --revision <commit>^1``:
every linter of ``.lintrunner.toml`` (FLAKE8 with its plugins and ``.flake8``, UFMT =
black + usort, DOCFORMATTER, MYPY with ``.mypy.ini``, RUFF_DOCS, BANDIT and upstream's
own checks) on the whole of each changed file. So does this module, in a checkout of the
commit (:func:`checkout`), with a tool venv of upstream's linter pins
(``lint_requirements`` of ``patches/upstream.toml``, from its
``requirements-lintrunner.txt``) and what its MYPY job installs beside them
(``mypy_requirements``, and the line's torch and torchao). A finding already in the file
before the commit still fails upstream's CI: it is reported too.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from overlay._git import git
from overlay.envs import release_venvs
from overlay.errors import UpstreamError
from overlay.lines.pins import Pins
from overlay.upstream.results import LintReport
from overlay.upstream.upstream_pins import UpstreamPins

Progress = Callable[[str], None]
TORCH = ("torch", "torchao")  # what MYPY needs from the line's runtime pins
# Not needed to lint backends/arm, and not always whole in a mirror (large files).
SPARSE = ("/*", "!/docs/", "!/examples/")


def lint_env(shared: UpstreamPins, pins: Pins, progress: Progress) -> release_venvs.Env:
    """Return the tool venv: lintrunner, upstream's linter pins and what MYPY imports."""
    if not shared.lint_requirements:
        raise UpstreamError(
            "no linter pins",
            expected=f"lint_requirements in {shared.source}",
            found="none",
            hint="copy them from upstream's requirements-lintrunner.txt",
        )
    torch = tuple(r for r in pins.runtime_requirements() if r.split("==")[0] in TORCH)
    requirements = (*shared.lint_requirements, *shared.mypy_requirements, *torch)
    contents = release_venvs.env_contents("upstream-lint", shared.python, requirements)
    return release_venvs.ensure(contents, progress=progress)


def checkout(source: Path, commit: str, dest: Path, branch: str) -> Path:
    """Check ``commit`` of ``source`` out in ``dest`` on a new ``branch`` (docs, examples aside)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", "--shared", "--no-checkout", str(source), dest.name)
    git(dest, "sparse-checkout", "set", "--no-cone", *SPARSE)
    git(dest, "checkout", "-q", "-b", branch, commit)
    return dest


def run_lint(repo: Path, paths: Sequence[str], env: release_venvs.Env) -> LintReport:
    """Run every linter of ``repo``'s ``.lintrunner.toml`` on the whole of ``paths``."""
    started = time.perf_counter()
    environment = dict(os.environ)
    environment["PATH"] = str(env.python.parent) + os.pathsep + environment.get("PATH", "")
    environment.pop("PYTHONPATH", None)
    environment["MYPYPATH"] = "./src/"  # as the pre-push hook runs it
    command = [str(env.python.parent / "lintrunner"), "--output", "oneline", *paths]
    proc = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, env=environment, check=False
    )
    broken = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode not in (0, 1) or broken:
        raise UpstreamError(
            "lintrunner failed to run",
            expected="findings or a clean run",
            found=(proc.stderr or proc.stdout).strip()[-1500:],
            hint=f"run it by hand in {repo}: {' '.join(command)}",
        )
    found = [line.strip() for line in proc.stdout.splitlines() if line.startswith(tuple(paths))]
    ran = f"lintrunner {', '.join(paths)} (every linter of .lintrunner.toml, whole files)"
    return LintReport(ran, tuple(found), time.perf_counter() - started)
