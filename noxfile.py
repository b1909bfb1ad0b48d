"""Sessions: build the patched executorch, lock, lint, test, prove equivalence, benchmark, upstream.

``nox`` alone runs the fast offline pair (``lint`` and ``unit``: seconds, no torch). The
heavy sessions are asked for by name. Every session uses uv as the venv backend: torch with
its CUDA libraries is ~4 GB, and uv installs it from its cache by hardlinks in seconds after
the first time (uv's own progress is shown). Interpreters come from the pinned wheels
(the default line's ``patches/<version>/pins.toml``); a missing one is an error, not a skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import nox
from packaging.version import Version

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "unit"]

ROOT = Path(__file__).resolve().parent


def _default_line() -> Path:
    """Return the newest release line folder under patches/ (the default line)."""
    lines = [p for p in (ROOT / "patches").iterdir() if (p / "series").is_file()]
    return max(lines, key=lambda p: Version(p.name))


PINS = tomllib.loads((_default_line() / "pins.toml").read_text(encoding="utf-8"))
PYTHONS = sorted(
    {str(w["python"]) for w in PINS["wheels"]}, key=lambda v: tuple(map(int, v.split(".")))
)
PYTHON = PYTHONS[0]
RUNTIME = [f"{name}=={version}" for name, version in PINS["runtime"].items()]
EXECUTORCH = f"executorch=={PINS['executorch']['version']}"
PROJECT = "executorch-arm-overlay"


def _find_interpreters(versions: list[str]) -> None:
    """Put pyenv-installed interpreters that are not on PATH onto it (uv then finds them).

    A ``pythonX.Y`` on PATH that is not a pyenv shim is used as it is; otherwise (a shim
    fails when its version is not enabled) the newest ``$(pyenv root)/versions/X.Y.*/bin``
    goes first on PATH. Nothing is run, so listing sessions stays fast.
    """
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for version in versions:
        found = shutil.which(f"python{version}")
        if found and Path(found).parent != root / "shims":
            continue
        candidates = sorted(root.glob(f"versions/{version}.*/bin"), key=lambda p: p.parent.name)
        if candidates:
            os.environ["PATH"] = f"{candidates[-1]}{os.pathsep}{os.environ.get('PATH', '')}"


_find_interpreters(PYTHONS)
DIST = Path(os.environ.get("OVERLAY_DIST", ROOT / "dist"))
STAMP = "overlay-install.json"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# The overlay runs from this checkout in its tool venv, and caches its bytecode here
# (gitignored __pycache__) even where PYTHONDONTWRITEBYTECODE is set: a warm re-run stays
# under a second.
TOOL_ENV = {"PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": ""}
PY_SOURCES = ("overlay", "tests", "benchmarks", "noxfile.py")


def _install_overlay(session: nox.Session, extras: str = "") -> None:
    """Install this checkout as a regular (non-editable) package, rebuilt every run."""
    session.install("--reinstall-package", PROJECT, f".{extras}")


def _installed(venv: Path) -> str:
    """Return ``uv pip freeze`` of a venv ("" when it has no interpreter yet)."""
    python = venv / "bin" / "python"
    if not python.is_file():
        return ""
    command = ["uv", "pip", "freeze", "--python", str(python)]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout


def _install_once(session: nox.Session, *requirements: str, folder: Path | None = None) -> bool:
    """Install requirements unless the venv's stamp shows the same set is in; True if it did.

    The stamp keys the requirement texts, the content of any local file among them, and
    what the venv holds (``uv pip freeze``), so a package changed by hand re-installs.
    """
    venv = folder or Path(str(session.virtualenv.location))
    stamp = venv / STAMP
    key = hashlib.sha256()
    for requirement in requirements:
        key.update(requirement.encode() + b"\0")
        if Path(requirement).is_file():
            key.update(hashlib.sha256(Path(requirement).read_bytes()).digest())
    wanted = {"key": key.hexdigest(), "requirements": list(requirements)}
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == {
        **wanted,
        "installed": hashlib.sha256(_installed(venv).encode()).hexdigest(),
    }:
        session.log(f"{venv.name}: up to date (same requirements and packages), skipping install")
        return False
    if folder is None:
        session.install(*requirements, silent=False)  # a cold torch install takes minutes
    else:
        python = str(folder / "bin" / "python")
        session.run("uv", "venv", "--clear", "--python", PYTHON, str(folder))
        session.run("uv", "pip", "install", "--python", python, *requirements)
    wanted["installed"] = hashlib.sha256(_installed(venv).encode()).hexdigest()
    stamp.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
    return True


def _tool(session: nox.Session) -> str:
    """Return the python of the overlay's tool venv: its dependencies only, shared by checkouts.

    Kept in the overlay cache (same folder rule as ``overlay/_cache.py``), keyed by the
    interpreter and pyproject's dependency list; the overlay itself runs from this checkout
    (``TOOL_ENV``). The ready venv never holds the overlay, and a new clone creates no venv
    for it.
    """
    deps: list[str] = PYPROJECT["project"]["dependencies"]
    key = hashlib.sha256(json.dumps([PYTHON, deps]).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    cache = Path(os.environ.get("OVERLAY_CACHE_DIR") or Path(base) / "executorch-arm-overlay")
    venv = cache / "tool" / key
    python = venv / "bin" / "python"
    if not python.is_file():
        tmp = venv.with_name(f".{key}-{os.getpid()}")
        session.run(
            "uv", "venv", "--clear", "--quiet", "--relocatable", "--python", PYTHON, str(tmp)
        )
        session.run("uv", "pip", "install", "--python", str(tmp / "bin" / "python"), *deps)
        try:
            tmp.rename(venv)
        except OSError:  # another run made it first
            shutil.rmtree(tmp)
    return str(python)


def _built_wheel(session: nox.Session) -> Path:
    """Build (or reuse) the patched wheel and return its path."""
    report = Path(session.create_tmp()) / "build-wheel.json"
    session.run(
        "python", "-m", "overlay", "build-wheel", "--out", str(DIST), "--report", str(report)
    )
    return Path(json.loads(report.read_text(encoding="utf-8"))["wheel"])


@nox.session(python=PYTHONS)
def build_patched_executorch(session: nox.Session) -> None:
    """Build dist/executorch-<pin>+armfix.* and make this venv exactly its lock (verified)."""
    venv = str(session.virtualenv.location)
    overlay = [_tool(session), "-m", "overlay"]
    session.run(*overlay, "sync", "--venv", venv, "--out", str(DIST), external=True, env=TOOL_ENV)
    session.log(f"ready: {venv} (activate: source <it>/bin/activate)")


@nox.session(python=False, default=False)
def lock(session: nox.Session) -> None:
    """Resolve patches/<line>/locks/<wheel tag>.txt for every pinned wheel (uv, with hashes)."""
    overlay = [_tool(session), "-m", "overlay"]
    session.run(*overlay, "lock", "--out", str(DIST), *session.posargs, external=True, env=TOOL_ENV)


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", *PY_SOURCES)
    session.run("ruff", "format", "--check", *PY_SOURCES)
    session.run("mypy")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Run ruff (lint and format check) and mypy --strict."""
    _install_overlay(session, "[dev]")
    _lint(session)


@nox.session(python=PYTHONS)
def unit(session: nox.Session) -> None:
    """Run the fast tests: no torch, no network (integration and torch tests deselected)."""
    _install_overlay(session, "[dev]")
    session.run("pytest", "-m", "not integration and not torch and not release", *session.posargs)


@nox.session(python=PYTHON, default=False)
def tests(session: nox.Session) -> None:
    """Lint, then every test: unit, pinned-wheel integration and torch tests."""
    _install_overlay(session, "[dev]")
    _lint(session)
    _install_once(session, *RUNTIME, EXECUTORCH)
    session.run("pytest", "-m", "not release", *session.posargs)


@nox.session(python=PYTHON, default=False)
def release_tests(session: nox.Session) -> None:
    """Tests on real release envs (uv): retarget 1.5.1 on the fast subset, its export."""
    _install_overlay(session, "[dev]")
    session.run("pytest", "-m", "release", *session.posargs)


def _equivalence_envs(session: nox.Session) -> tuple[str, str]:
    """Return the stock and patched Pythons: $OVERLAY_*_PYTHON, else venvs made with uv."""
    session.install("uv")  # makes the two test envs
    stock = os.environ.get("OVERLAY_STOCK_PYTHON")
    if not stock:
        folder = ROOT / ".nox" / "equivalence-stock"
        _install_once(session, *RUNTIME, EXECUTORCH, folder=folder)
        stock = str(folder / "bin" / "python")
    patched = os.environ.get("OVERLAY_PATCHED_PYTHON")
    if not patched:
        folder = ROOT / ".nox" / "equivalence-patched"
        _install_once(session, *RUNTIME, str(_built_wheel(session)), folder=folder)
        patched = str(folder / "bin" / "python")
    return stock, patched


@nox.session(python=PYTHON, default=False)
def equivalence(session: nox.Session) -> None:
    """Stock vs stock+runtime patch vs diff-patched build, per model (`-- --fast` for CI)."""
    _install_overlay(session)
    stock, patched = _equivalence_envs(session)
    session.run(
        "python", "-m", "overlay", "equivalence",
        "--stock-python", stock, "--patched-python", patched, *session.posargs,
        env={"OVERLAY_CALLER_DIR": session.invoked_from},
    )  # fmt: skip


def _sources_digest() -> str:
    """Return a sha256 over every file of overlay/ and tests/ (names and bytes)."""
    digest = hashlib.sha256()
    for folder in ("overlay", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@nox.session(python=PYTHON, default=False)
def mutants(session: nox.Session) -> None:
    """Mutation testing of the core with mutmut ([tool.mutmut], docs/mutation.md).

    The selected tests run once unmutated (red: stop), then mutmut runs them against each
    mutant in a fresh ./mutants/ copy; tests/mutation_survivors.py fails the session when a
    survivor is not reviewed or the score is under its floor. ``-- --max-children 1`` is
    passed to ``mutmut run``. The checkout's sources are checked unchanged afterwards.
    """
    _install_overlay(session, "[dev]")
    settings = PYPROJECT["tool"]["mutmut"]
    selection = [*settings["pytest_add_cli_args"], *settings["pytest_add_cli_args_test_selection"]]
    session.run("pytest", *selection)  # the baseline: mutants of a red suite mean nothing
    before = _sources_digest()
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)  # no stale results or test copies
    try:
        session.run("mutmut", "run", *session.posargs)
    finally:
        if _sources_digest() != before:
            session.error("overlay/ or tests/ changed during the mutation run")
    session.run("python", "tests/mutation_survivors.py")


@nox.session(python=PYTHON, default=False)
def bench_equivalence(session: nox.Session) -> None:
    """Benchmark equivalence: cold, warm, one patch edited; wall vs bare lowering."""
    _install_overlay(session)
    stock, patched = _equivalence_envs(session)
    session.run(
        "python", "benchmarks/bench_equivalence.py",
        "--stock-python", stock, "--patched-python", patched, *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmark: cold build vs a bare install of the same pins, warm re-run, apply time."""
    _install_overlay(session)
    session.install("uv", "nox")
    session.run("python", "benchmarks/bench_build.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def upstream(session: nox.Session) -> None:
    """Behaviour matrix; mboxes, PR bodies and branches in build/upstream/ for what to send."""
    _install_overlay(session)
    session.install("uv")  # builds the release envs
    out = str(ROOT / "build" / "upstream")
    session.run(
        "python", "-m", "overlay", "export-upstream", "--out", out, *session.posargs,
        env={"OVERLAY_CALLER_DIR": session.invoked_from},
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def retarget(session: nox.Session) -> None:
    """Candidate series for a new release: `-- 1.5.1` (`-- 1.5.1 --promote` after review)."""
    _install_overlay(session)
    session.install("uv")  # builds the release envs
    session.run("python", "-m", "overlay", "retarget", *session.posargs)
