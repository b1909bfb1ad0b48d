"""Sessions: build the patched executorch, lock, lint, test, prove equivalence, benchmark, upstream.

``nox`` alone runs the fast offline pair (``lint`` and ``unit``: seconds, no torch). The
heavy sessions are asked for by name. Every session uses uv as the venv backend: torch with
its CUDA libraries is ~4 GB, and uv installs it from its cache by hardlinks in seconds after
the first time (uv's own progress is shown). Interpreters come from the pinned wheels
(``patches/<line>/pins.toml``): the sessions run on those found (on PATH or in pyenv), so a
machine with only Python 3.11 or only 3.12 builds and tests with it; with none of them, or
one asked for by name that is missing, nox stops with an error.

Release lines: ``build_patched_executorch``, ``lock`` and ``equivalence`` take
``-- --line X.Y.Z`` (default: the newest line); every other argument after ``--`` goes to
the overlay command they run (``-- --force``). The venvs the proof and the tests run in are
synced from the same committed locks as the ready venv, by the overlay (``python -m
overlay sync``, run from its tool venv): one stamped venv builder, ``overlay/envs/venvs.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # the overlay's line finder and cache rule (stdlib + packaging)

from overlay import lines  # noqa: E402
from overlay._cache import cache_dir  # noqa: E402
from overlay._hashing import sha256_bytes, tree_digest  # noqa: E402
from overlay.errors import OverlayError  # noqa: E402

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "unit"]

PATCHES = ROOT / lines.LINES_DIR
LINES = lines.all_lines(PATCHES)
DEFAULT = lines.default_line(PATCHES)
# Every line's interpreters: `build_patched_executorch -- --line X` skips those X does not pin.
ALL_PYTHONS = sorted(
    {p for line in LINES for p in line.pins.pythons}, key=lambda v: tuple(map(int, v.split(".")))
)
PROJECT = "executorch-arm-overlay"


def _find_interpreters(versions: list[str]) -> list[str]:
    """Return the versions this machine has; put pyenv-installed ones that are not on PATH
    onto it (uv then finds them).

    A ``pythonX.Y`` on PATH that is not a pyenv shim is used as it is; otherwise (a shim
    fails when its version is not enabled) the newest ``$(pyenv root)/versions/X.Y.*/bin``
    goes first on PATH. Nothing is run, so listing sessions stays fast.
    """
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    present = []
    for version in versions:
        found = shutil.which(f"python{version}")
        candidates = sorted(root.glob(f"versions/{version}.*/bin"), key=lambda p: p.parent.name)
        if found and Path(found).parent != root / "shims":
            present.append(version)
        elif candidates:
            os.environ["PATH"] = f"{candidates[-1]}{os.pathsep}{os.environ.get('PATH', '')}"
            present.append(version)
    return present


PRESENT = _find_interpreters(ALL_PYTHONS)


def _present(versions: tuple[str, ...] | list[str]) -> list[str]:
    """Return those of ``versions`` this machine has; all of them when it has none (nox then
    stops, naming the missing interpreter)."""
    return [v for v in versions if v in PRESENT] or list(versions)


PYTHONS = _present(DEFAULT.pins.pythons)
PYTHON = PYTHONS[0]
DIST = Path(os.environ.get("OVERLAY_DIST", ROOT / "dist"))  # each line's wheels in DIST/<line>
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: without it every process
# that imports torch and the Arm backend compiles them again (about 10 s of CPU each here).
BYTECODE_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
# The overlay runs from this checkout in its tool venv, and caches its bytecode here
# (gitignored __pycache__): a warm re-run stays under a second.
TOOL_ENV = {"PYTHONPATH": str(ROOT), **BYTECODE_ENV}
# `nox -s tests` also keeps torch to one thread a process: the two test workers and the
# equivalence runs' own workers (one per CPU) already fill the cores. Not for a proof: its
# results are cached across runs, and a run with other threads must not meet them there.
TESTS_ENV = {**BYTECODE_ENV, "OMP_NUM_THREADS": "1"}
PY_SOURCES = ("overlay", "tests", "benchmarks", "noxfile.py")


def _install_overlay(session: nox.Session, extras: str = "") -> None:
    """Install this checkout as a regular (non-editable) package, rebuilt every run."""
    session.install("--reinstall-package", PROJECT, f".{extras}")


def _tool(session: nox.Session) -> str:
    """Return the python of the overlay's tool venv: its dependencies only, shared by checkouts.

    Kept in the overlay cache (``overlay/_cache.py``), keyed by the interpreter and
    pyproject's dependency list; the overlay itself runs from this checkout
    (``TOOL_ENV``). The ready venv never holds the overlay, and a new clone creates no venv
    for it.
    """
    deps: list[str] = PYPROJECT["project"]["dependencies"]
    key = sha256_bytes(json.dumps([PYTHON, deps]).encode())[:16]
    venv = cache_dir() / "tool" / key
    python = venv / "bin" / "python"
    if not python.is_file():
        tmp = venv.with_name(f".{key}-{os.getpid()}")
        session.run_install(  # run_install: `nox --install-only` makes it too
            "uv", "venv", "--clear", "--quiet", "--relocatable", "--python", PYTHON, str(tmp)
        )
        session.run_install("uv", "pip", "install", "--python", str(tmp / "bin" / "python"), *deps)
        try:
            tmp.rename(venv)
        except OSError:  # another run made it first
            shutil.rmtree(tmp)
    return str(python)


def _overlay(session: nox.Session, *args: str | Path, install: bool = False) -> None:
    """Run ``python -m overlay ARGS`` from the tool venv (this checkout's code); ``install``:
    an install step (a synced env), which `nox --install-only` runs too."""
    run = session.run_install if install else session.run
    run(_tool(session), "-m", "overlay", *map(str, args), external=True, env=TOOL_ENV)


def _line(session: nox.Session) -> tuple[lines.Line | None, list[str]]:
    """Return the line ``--line`` in the session's arguments names (None: not given) and the
    other arguments; an unknown line stops the session, naming the supported ones."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--line")
    known, rest = parser.parse_known_args(session.posargs)
    try:
        line = lines.line_named(PATCHES, known.line) if known.line else None
    except OverlayError as exc:
        session.error(str(exc))
    return line, rest


def _envdir(session: nox.Session) -> Path:
    """Return nox's env folder (``.nox``, or ``--envdir``): the synced venvs live there."""
    return Path(session.cache_dir).resolve().parent


@nox.session(python=_present(ALL_PYTHONS))
def build_patched_executorch(session: nox.Session) -> None:
    """Build dist/<line>/executorch-<pin>+armfix.* and its ready venv (`-- --line X.Y.Z`)."""
    given, rest = _line(session)
    line = given or DEFAULT
    if session.python not in line.pins.pythons:
        session.skip(f"line {line.name} pins no wheel for Python {session.python}")
    _overlay(
        session, "sync", "--line", line.name, "--python", str(session.python),
        "--ready-in", _envdir(session), "--dist", DIST / line.name, *rest,
    )  # fmt: skip


@nox.session(python=False, default=False)
def lock(session: nox.Session) -> None:
    """Resolve patches/<line>/locks/<wheel tag>.txt of every line (`-- --line X.Y.Z`: one)."""
    given, rest = _line(session)
    for each in [given] if given else LINES:
        _overlay(session, "lock", "--line", each.name, "--dist", DIST / each.name, *rest)


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


def _test_tools() -> list[str]:
    """Return what the test env holds beside the lock: the overlay's dependencies, dev tools,
    and the overlay itself (reinstalled from this checkout every run)."""
    project = PYPROJECT["project"]
    tools = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    return [*tools, f"{PROJECT} @ {ROOT.as_uri()}"]


@nox.session(python=PYTHON, default=False)
def tests(session: nox.Session) -> None:
    """Lint, then every test: unit, pinned-wheel integration and torch tests.

    The env is the default line's lock with stock executorch (what the equivalence run's
    stock env holds), the overlay and its dev tools on top, held to the lock's versions.
    """
    venv = session.virtualenv.location
    _overlay(
        session, "sync", "--target", venv, "--line", DEFAULT.name, "--stock",
        *(f"--with={tool}" for tool in _test_tools()), install=True,
    )  # fmt: skip
    session.install("--no-deps", "--reinstall-package", PROJECT, ".")
    _lint(session)
    # two workers, each test file on one (module fixtures run once): 11 min 35 s where one
    # worker took 18-23 min (docs/notes/measurements.md); files in the order
    # tests/conftest.py gives them, slowest first, not xdist's (most tests first)
    session.run(
        "pytest", "-m", "not release", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
        "--durations=10", *session.posargs,
        env=TESTS_ENV,
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def release_tests(session: nox.Session) -> None:
    """Tests on real release envs (uv): retarget 1.5.1 on the fast subset, its export."""
    _install_overlay(session, "[dev]")
    session.run("pytest", "-m", "release", *session.posargs, env=BYTECODE_ENV)


def _equivalence_envs(session: nox.Session, line: lines.Line) -> tuple[str, str]:
    """Return the stock and patched Pythons: $OVERLAY_*_PYTHON, else venvs synced from the
    line's lock (stock: its executorch entry replaced by the pinned stock wheel)."""
    found = []
    for kind, variable in (
        ("stock", "OVERLAY_STOCK_PYTHON"),
        ("patched", "OVERLAY_PATCHED_PYTHON"),
    ):
        python = os.environ.get(variable)
        if not python:
            folder = _envdir(session) / f"equivalence-{line.name}-{kind}"
            flavour = ["--stock"] if kind == "stock" else ["--dist", str(DIST / line.name)]
            _overlay(
                session, "sync", "--target", folder, "--line", line.name,
                "--python", _present(line.pins.pythons)[0], *flavour, install=True,
            )  # fmt: skip
            python = str(folder / "bin" / "python")
        found.append(python)
    return found[0], found[1]


@nox.session(python=PYTHON, default=False)
def equivalence(session: nox.Session) -> None:
    """Stock vs stock+runtime patch vs diff-patched build, per model (`-- --fast` for CI)."""
    given, rest = _line(session)
    line = given or DEFAULT
    _install_overlay(session)
    stock, patched = _equivalence_envs(session, line)
    session.run(
        "python", "-m", "overlay", "--patches", str(line.directory), "equivalence",
        "--stock-python", stock, "--patched-python", patched, *rest,
        env={"OVERLAY_CALLER_DIR": session.invoked_from, **BYTECODE_ENV},
    )  # fmt: skip


def _sources_digest() -> str:
    """Return a sha256 over every file of overlay/ and tests/ (names and bytes)."""
    files = [
        path
        for folder in ("overlay", "tests")
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    return tree_digest(ROOT, files)


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
    stock, patched = _equivalence_envs(session, DEFAULT)
    session.run(
        "python", "benchmarks/bench_equivalence.py",
        "--stock-python", stock, "--patched-python", patched, *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def bench_lowering(session: nox.Session) -> None:
    """Benchmark lowering time against frames and depth, every line, stock and patched."""
    _install_overlay(session)
    given, rest = _line(session)
    envs = []
    for line in [given] if given else LINES:
        stock, patched = _equivalence_envs(session, line)
        envs += ["--env", f"{line.name}-stock={stock}", "--env", f"{line.name}-patched={patched}"]
    session.run("python", "benchmarks/bench_lowering.py", *envs, *rest)


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
def upstream_suite(session: nox.Session) -> None:
    """Upstream's Arm tests on each line's stock and patched builds: `-- --line 1.5.1` (hours)."""
    _install_overlay(session)
    session.install("uv")  # builds the release envs
    out = str(ROOT / "build" / "upstream-suite")
    session.run("python", "-m", "overlay", "upstream-suite", "--out", out, *session.posargs)


@nox.session(python=PYTHON, default=False)
def retarget(session: nox.Session) -> None:
    """Candidate series for a new release: `-- 1.5.1` (`-- 1.5.1 --promote` after review)."""
    _install_overlay(session)
    session.install("uv")  # builds the release envs
    session.run("python", "-m", "overlay", "retarget", *session.posargs)


@nox.session(python=PYTHON, default=False)
def canary(session: nox.Session) -> None:
    """Every release line against upstream main: `-- --upstream CLONE_OR_URL [--tags]`."""
    _install_overlay(session)
    session.install("uv")  # builds the release env that hosts main's backends/arm
    args = list(session.posargs)
    if "--upstream" not in args and not os.environ.get("OVERLAY_UPSTREAM_CLONE"):
        args += ["--upstream", "https://github.com/pytorch/executorch.git"]
    session.run(
        "python", "-m", "overlay", "canary", "--out", str(ROOT / "build" / "canary"), *args,
        env={"OVERLAY_CALLER_DIR": session.invoked_from},
    )  # fmt: skip
