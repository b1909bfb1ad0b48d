"""Sessions: build the patched executorch, test, benchmark.

Every session uses uv as the venv backend: torch 2.11 with its CUDA libraries is
~4 GB, and uv installs it from its cache by hardlinks in seconds after the first time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from overlay import pins  # noqa: E402

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

PYTHON = "3.11"
DIST = Path(os.environ.get("OVERLAY_DIST", ROOT / "dist"))
STAMP = "overlay-install.json"


def _built_wheel(session: nox.Session) -> Path:
    """Build (or reuse) the patched wheel and return its path."""
    report = Path(session.create_tmp()) / "build-wheel.json"
    session.run(
        "python", "-m", "overlay", "build-wheel", "--out", str(DIST), "--report", str(report)
    )
    return Path(json.loads(report.read_text(encoding="utf-8"))["wheel"])


def _install_once(session: nox.Session, *requirements: str) -> bool:
    """Install requirements unless the venv's stamp shows the same set is in; True if it did."""
    key = hashlib.sha256()
    for requirement in requirements:
        path = Path(requirement)
        key.update(requirement.encode() + b"\0")
        if path.is_file():
            key.update(hashlib.sha256(path.read_bytes()).digest())
    stamp = Path(str(session.virtualenv.location)) / STAMP
    wanted = {"key": key.hexdigest(), "requirements": list(requirements)}
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == wanted:
        session.log("environment up to date (same wheel and pins): skipping install")
        return False
    session.install(*requirements)
    stamp.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
    return True


@nox.session(python=PYTHON)
def build_patched_executorch(session: nox.Session) -> None:
    """Build dist/executorch-1.2.0+armfix.* and a venv with it, torch and tosa-tools."""
    session.install("-e", ".")
    wheel = _built_wheel(session)
    installed = _install_once(session, *pins.runtime_requirements(), str(wheel))
    # After an install, prove the Arm backend imports (~9 s of torch/executorch imports);
    # on a warm re-run the file hashes and provenance are enough.
    session.run(
        "python", "-m", "overlay", "verify-install", *([] if installed else ["--no-import"])
    )
    session.log(f"ready: {session.virtualenv.location} (activate: source <it>/bin/activate)")


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Run ruff (lint and format check) and mypy --strict."""
    session.install("-e", ".[dev]")
    _lint(session)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Lint, then run every test: unit, pinned-wheel integration and torch tests."""
    session.install("-e", ".[dev]")
    _lint(session)
    _install_once(session, "-e", ".[dev]", *pins.runtime_requirements(), _executorch())
    session.run("pytest", *session.posargs)


def _executorch() -> str:
    return f"executorch=={pins.EXECUTORCH_VERSION}"


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmark: cold build vs a bare install of the same pins, warm re-run, apply time."""
    session.install("-e", ".")
    session.run("python", "benchmarks/bench_build.py", *session.posargs)


@nox.session(python=PYTHON)
def upstream(session: nox.Session) -> None:
    """Print the executorch version matrix; write mboxes + PR bodies to build/upstream/."""
    session.install("-e", ".")
    out = str(ROOT / "build" / "upstream")
    session.run("python", "-m", "overlay", "export-upstream", "--out", out, *session.posargs)
