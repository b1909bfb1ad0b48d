"""Benchmark the build: cold build in a new clone vs the runtime-patch peer, warm re-run, apply.

Run: ``nox -s bench`` (or ``python benchmarks/bench_build.py``). Every number comes from
this run on this machine; the cold/peer ratio is the median of the ratios of pairs run
one after the other (one first import varies by a fifth run to run), all with the same
warm uv cache. The peer path is what users of the runtime monkey-patch do: a bare
``uv pip sync`` of the same lock with stock executorch, then one import of the Arm
backend with the monkey-patch applied. The cold build runs the real
``nox -s build_patched_executorch`` in a fresh ``git clone`` (new tool venv, new ready
venv, new dist/; the patched wheel comes from the overlay's content-keyed cache).
``--pip`` adds a bare pip install of the pins; ``--seed FILE.py:FUNCTION`` picks the
monkey-patch (default: ``overlay.runtime:apply_all``, the runtime form of the default line).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from overlay import lines
from overlay.distribution import wheels, wheelzip
from overlay.envs import lockfiles
from overlay.envs.verify_install import ARM_MODULES
from overlay.equivalence.controller.processes import worker_library
from overlay.in_place import transaction
from overlay.text.series import Series, load_series
from overlay.tree import journal, locate

ROOT = Path(__file__).resolve().parent.parent
SERIES_DIR = lines.default_line(ROOT / "patches").directory
SERIES: Series = load_series(SERIES_DIR)
PYTHON = SERIES.pins.pythons[0]
PEER_IMPORT = """
import importlib, importlib.util, sys
path, _, function = sys.argv[1].rpartition(":")
if path.endswith(".py"):
    spec = importlib.util.spec_from_file_location("runtime_patch", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["runtime_patch"] = module
    spec.loader.exec_module(module)
else:
    module = importlib.import_module(path)
getattr(module, function)()
for name in sys.argv[2:]:
    importlib.import_module(name)
"""
T = TypeVar("T")


def timed(command: list[str], **kwargs: object) -> float:
    """Run a command quietly and return its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - start


def uv() -> str:
    """Return the uv executable."""
    found = shutil.which("uv")
    if found is None:
        raise SystemExit("uv is not on PATH: pip install uv")
    return found


def stock_lock(scratch: Path) -> Path:
    """Return the ready venv's lock with stock executorch (its pinned sha256) in its place."""
    pin = SERIES.pins.host_wheel(PYTHON)
    locked = lockfiles.check_current(SERIES, pin)
    path = scratch / "stock-lockfiles.txt"
    path.write_text(lockfiles.stock_text(locked, pin.sha256, str(SERIES.pins.executorch)))
    return path


def peer(scratch: Path, runtime_patch: str) -> float:
    """Bare `uv pip sync` of the lock (stock executorch) + one Arm import with the patch."""
    venv = scratch / "peer"
    requirements = stock_lock(scratch)
    start = time.perf_counter()
    subprocess.run([uv(), "venv", "-q", "-p", PYTHON, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [uv(), "pip", "sync", "-q", "--python", python, "--require-hashes", str(requirements)],
        check=True,
    )
    library = worker_library(scratch / "peer-library")  # overlay.runtime, as a worker has it
    # The first import writes bytecode, as a user's does and as the build's import check
    # does (the noxfile clears PYTHONDONTWRITEBYTECODE for the overlay and its children).
    env = {
        **os.environ,
        "PYTHONPATH": str(library),
        "PYTHONDONTWRITEBYTECODE": "",
        lines.PATCHES_ENV: str(SERIES_DIR),
    }
    subprocess.run([python, "-c", PEER_IMPORT, runtime_patch, *ARM_MODULES], check=True, env=env)
    return time.perf_counter() - start


def pip_install(scratch: Path) -> float:
    """The same bare install with venv + pip (for reference)."""
    venv = scratch / "pip"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    requirements = [*SERIES.pins.runtime_requirements(), SERIES.pins.executorch_requirement()]
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *requirements], check=True)
    return time.perf_counter() - start


def clone(scratch: Path) -> Path:
    """Return a fresh clone of this checkout's HEAD (what a new user starts from)."""
    folder = scratch / "clone"
    scratch.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(folder)], check=True)
    return folder


def nox_build(checkout: Path, scratch: Path) -> float:
    """Run the real `nox -s build_patched_executorch` of ``checkout`` with its own dist."""
    env = {**os.environ, "OVERLAY_DIST": str(scratch / "dist")}
    command = ["nox", "-f", str(checkout / "noxfile.py"), "--envdir", str(scratch / "nox")]
    return timed([*command, "-s", f"build_patched_executorch-{PYTHON}"], env=env, cwd=checkout)


@dataclass(frozen=True)
class ApplyTimes:
    """Medians over the rounds, in seconds (fsyncs: a count)."""

    apply: float
    revert: float
    plan: float  # of apply: checks, new bytes, the new dist-info (no write)
    transaction: float  # of apply: stage, keep, journal, renames, fsyncs
    fsyncs: float  # of apply
    fsync_s: float  # of apply: time in fsync
    repack: float


def apply_times(scratch: Path, rounds: int) -> ApplyTimes:
    """Time in-place apply and revert of the real series on an unpacked pinned wheel."""
    series = SERIES
    pin = series.pins.host_wheel()
    source = wheels.fetch_wheel(pin)
    root = scratch / "unpacked"
    for name, data in wheelzip.read_members(source).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    spent: dict[str, list[float]] = {"plan": [], "commit": [], "fsync": [], "fsyncs": []}
    real_fsync, real_plan, real_commit = os.fsync, vars(transaction)["plan"], journal.commit

    def timed(name: str, function: Callable[..., T]) -> Callable[..., T]:
        def wrapper(*args: object, **kwargs: object) -> T:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name][-1] += time.perf_counter() - start
                if name == "fsync":
                    spent["fsyncs"][-1] += 1

        return wrapper

    applies, reverts = [], []
    os.fsync = timed("fsync", real_fsync)
    vars(transaction)["plan"] = timed("plan", real_plan)  # what apply calls
    journal.commit = timed("commit", real_commit)
    try:
        for _ in range(rounds):
            for values in spent.values():
                values.append(0.0)
            start = time.perf_counter()
            transaction.apply(series, locate.find_target(root))
            applies.append(time.perf_counter() - start)
            for values in spent.values():
                values.append(0.0)  # the revert's share: dropped below
            start = time.perf_counter()
            transaction.apply(series, locate.find_target(root), reverse=True)
            reverts.append(time.perf_counter() - start)
            for values in spent.values():
                values.pop()
    finally:
        os.fsync, journal.commit = real_fsync, real_commit
        vars(transaction)["plan"] = real_plan
    start = time.perf_counter()
    wheels.build_patched_wheel(series, source, pin, scratch / "repack", force=True)
    repack = time.perf_counter() - start
    median = statistics.median
    return ApplyTimes(
        median(applies),
        median(reverts),
        median(spent["plan"]),
        median(spent["commit"]),
        median(spent["fsyncs"]),
        median(spent["fsync"]),
        repack,
    )


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="apply/revert rounds")
    parser.add_argument("--pip", action="store_true", help="also time a bare pip install")
    parser.add_argument(
        "--repeat", type=int, default=7, help="peer/cold pairs (alternating; odd: one median)"
    )
    parser.add_argument(
        "--seed",
        default="overlay.runtime:apply_all",
        help="the peer's runtime patch, FILE.py:FUNCTION or module:FUNCTION (default: the"
        " runtime form of the default line's fixes; the seed monkey-patch fits only 1.2.0)",
    )
    parser.add_argument(
        "--apply-only", action="store_true", help="only the in-place apply/revert rows"
    )
    args = parser.parse_args()
    load = os.getloadavg()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="overlay-bench-") as tmp:
        scratch = Path(tmp)
        if not args.apply_only:
            peers, colds = [], []
            for round_ in range(args.repeat):  # alternate, so machine load hits both alike
                folder = scratch / f"round{round_}"
                checkout = clone(folder)
                peers.append(peer(folder, args.seed))
                colds.append(nox_build(checkout, folder))
            peer_s, cold = statistics.median(peers), statistics.median(colds)
            # one first import of torch and the Arm backend is most of both paths, and it
            # varies by +-20 % run to run here: the ratio is taken pair by pair
            ratios = sorted(c / p for c, p in zip(colds, peers, strict=True))
            # a sub-second re-run varies by a quarter between runs here: a median, too
            warms = sorted(nox_build(checkout, folder) for _ in range(args.repeat))
            warm = statistics.median(warms)
            rows += [
                (
                    f"peer: uv pip sync of the lock (stock) + Arm import (median of {args.repeat})",
                    peer_s,
                ),
                (
                    f"cold `nox -s build_patched_executorch`, new clone (median of {args.repeat})",
                    cold,
                ),
                (f"warm re-run (nothing changed; median of {args.repeat})", warm),
            ]
        times = apply_times(scratch, args.rounds)
        rows += [
            (f"in-place apply on an unpacked wheel (median of {args.rounds})", times.apply),
            ("  planning: checks, new sources, new dist-info (no write)", times.plan),
            (f"  journaled transaction ({times.fsyncs:.0f} fsyncs)", times.transaction),
            ("    of which fsync", times.fsync_s),
            (f"in-place revert (median of {args.rounds})", times.revert),
            ("patched wheel repack (download cached, no wheel cache)", times.repack),
        ]
    width = max(len(name) for name, _ in rows)
    print(f"runtime patch of the peer: {args.seed}")
    print(f"load average before/after: {load[0]:.1f} / {os.getloadavg()[0]:.1f} (2 cores)")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f} s")
    if not args.apply_only:
        spread = f"(pairs {ratios[0]:.2f}-{ratios[-1]:.2f})"
        name = f"cold build / peer, median of {len(ratios)} pairs (target <= 1.10)"
        print(f"{name:<{width}}  {statistics.median(ratios):8.2f} x {spread}")
        name = f"warm re-run, median of {len(warms)} (target <= 1 s)"
        print(f"{name:<{width}}  {warm:8.3f} s (runs {warms[0]:.3f}-{warms[-1]:.3f})")


if __name__ == "__main__":
    main()
