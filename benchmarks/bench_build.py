"""Benchmark the build: cold vs bare install of the same pins, warm re-run, apply and repack.

Run: ``nox -s bench`` (or ``python benchmarks/bench_build.py``). Every number comes from
this run on this machine; ratios compare steps measured in the same run. Both the
cold build and the bare install use uv and the same uv cache, so the ratio shows
what the patching adds, not download speed. ``--pip`` adds a bare pip install.
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

from overlay import install, journal, wheels
from overlay.series import Series, load_series

ROOT = Path(__file__).resolve().parent.parent
SERIES: Series = load_series(ROOT / "patches")
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


def bare_install(scratch: Path) -> float:
    """Create a venv and install the pins with stock executorch (no patching)."""
    venv = scratch / "bare"
    start = time.perf_counter()
    subprocess.run([uv(), "venv", "-q", "-p", "3.11", str(venv)], check=True)
    requirements = [*SERIES.pins.runtime_requirements(), SERIES.pins.executorch_requirement()]
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    subprocess.run([uv(), "pip", "install", "-q", *requirements], check=True, env=env)
    return time.perf_counter() - start


def pip_install(scratch: Path) -> float:
    """The same bare install with venv + pip (for reference)."""
    venv = scratch / "pip"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    requirements = [*SERIES.pins.runtime_requirements(), SERIES.pins.executorch_requirement()]
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *requirements], check=True)
    return time.perf_counter() - start


def nox_build(scratch: Path) -> float:
    """Run the real `nox -s build_patched_executorch` with its own envdir and dist folder."""
    env = {**os.environ, "OVERLAY_DIST": str(scratch / "dist")}
    command = ["nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(scratch / "nox")]
    return timed([*command, "-s", "build_patched_executorch"], env=env, cwd=ROOT)


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
    root = wheels.unpack_wheel(source, scratch / "unpacked")
    spent: dict[str, list[float]] = {"plan": [], "commit": [], "fsync": [], "fsyncs": []}
    real_fsync, real_plan, real_commit = os.fsync, install.plan, journal.commit

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
    install.plan = timed("plan", real_plan)
    journal.commit = timed("commit", real_commit)
    try:
        for _ in range(rounds):
            for values in spent.values():
                values.append(0.0)
            start = time.perf_counter()
            install.apply(series, install.find_target(root))
            applies.append(time.perf_counter() - start)
            for values in spent.values():
                values.append(0.0)  # the revert's share: dropped below
            start = time.perf_counter()
            install.apply(series, install.find_target(root), reverse=True)
            reverts.append(time.perf_counter() - start)
            for values in spent.values():
                values.pop()
    finally:
        os.fsync, install.plan, journal.commit = real_fsync, real_plan, real_commit
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
        "--apply-only", action="store_true", help="only the in-place apply/revert rows"
    )
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="overlay-bench-") as tmp:
        scratch = Path(tmp)
        if not args.apply_only:
            bare = bare_install(scratch)
            cold = nox_build(scratch)
            warm = nox_build(scratch)
            rows += [
                ("bare uv install of the pins (stock executorch)", bare),
                ("cold `nox -s build_patched_executorch` (new venv, new dist)", cold),
                ("warm re-run (nothing changed)", warm),
            ]
            if args.pip:
                rows.insert(
                    1, ("bare pip install of the pins (stock executorch)", pip_install(scratch))
                )
        times = apply_times(scratch, args.rounds)
        rows += [
            (f"in-place apply on an unpacked wheel (median of {args.rounds})", times.apply),
            ("  planning: checks, new sources, new dist-info (no write)", times.plan),
            (f"  journaled transaction ({times.fsyncs:.0f} fsyncs)", times.transaction),
            ("    of which fsync", times.fsync_s),
            (f"in-place revert (median of {args.rounds})", times.revert),
            ("patched wheel repack (download cached)", times.repack),
        ]
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f} s")
    if not args.apply_only:
        print(f"{'cold build / bare uv install':<{width}}  {cold / bare:8.2f} x")
        print(f"{'warm re-run / cold build':<{width}}  {warm / cold:8.2f} x")


if __name__ == "__main__":
    main()
