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


def _stamp(requirements: tuple[str, ...]) -> dict[str, object]:
    """Key a set of requirements by their text and the content of any local file among them."""
    key = hashlib.sha256()
    for requirement in requirements:
        key.update(requirement.encode() + b"\0")
        if Path(requirement).is_file():
            key.update(hashlib.sha256(Path(requirement).read_bytes()).digest())
    return {"key": key.hexdigest(), "requirements": list(requirements)}


def _is_current(stamp: Path, wanted: dict[str, object]) -> bool:
    return stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == wanted


def _install_once(session: nox.Session, *requirements: str) -> bool:
    """Install requirements unless the venv's stamp shows the same set is in; True if it did."""
    stamp = Path(str(session.virtualenv.location)) / STAMP
    wanted = _stamp(requirements)
    if _is_current(stamp, wanted):
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


PY_SOURCES = ("overlay", "tests", "benchmarks", "noxfile.py")


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", *PY_SOURCES)
    session.run("ruff", "format", "--check", *PY_SOURCES)
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


def _uv_env(session: nox.Session, name: str, *requirements: str) -> str:
    """Create (or reuse, by stamp) a uv venv under .nox/ and return its python."""
    folder = ROOT / ".nox" / f"equivalence-{name}"
    python = folder / "bin" / "python"
    stamp = folder / STAMP
    wanted = _stamp(requirements)
    if _is_current(stamp, wanted):
        return str(python)
    session.run("uv", "venv", "--clear", "--python", PYTHON, str(folder))
    session.run("uv", "pip", "install", "--python", str(python), *requirements)
    stamp.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
    return str(python)


@nox.session(python=PYTHON)
def equivalence(session: nox.Session) -> None:
    """Stock vs stock+runtime patch vs diff-patched build, per model (`-- --fast` for CI)."""
    session.install("-e", ".", "uv")  # uv in the session venv makes the two test envs
    stock = os.environ.get("OVERLAY_STOCK_PYTHON") or _uv_env(
        session, "stock", *pins.runtime_requirements(), _executorch()
    )
    patched = os.environ.get("OVERLAY_PATCHED_PYTHON") or _uv_env(
        session, "patched", *pins.runtime_requirements(), str(_built_wheel(session))
    )
    session.run(
        "python", "-m", "overlay", "equivalence",
        "--stock-python", stock, "--patched-python", patched, *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmark: cold build vs a bare install of the same pins, warm re-run, apply time."""
    session.install("-e", ".", "uv", "nox")
    session.run("python", "benchmarks/bench_build.py", *session.posargs)


@nox.session(python=PYTHON)
def upstream(session: nox.Session) -> None:
    """Print the executorch version matrix; write mboxes + PR bodies to build/upstream/."""
    session.install("-e", ".")
    out = str(ROOT / "build" / "upstream")
    session.run("python", "-m", "overlay", "export-upstream", "--out", out, *session.posargs)
