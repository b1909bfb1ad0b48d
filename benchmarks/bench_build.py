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
from pathlib import Path

from overlay import install, wheels
from overlay.series import Series, load_series

ROOT = Path(__file__).resolve().parent.parent
SERIES: Series = load_series(ROOT / "patches")


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


def apply_times(scratch: Path, rounds: int) -> tuple[float, float, float]:
    """Return median seconds for: series apply, series revert, patched-wheel repack."""
    series = SERIES
    pin = series.pins.host_wheel()
    source = wheels.fetch_wheel(pin)
    root = wheels.unpack_wheel(source, scratch / "unpacked")
    target = install.find_target(root)
    applies, reverts = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        install.apply(series, target)
        applies.append(time.perf_counter() - start)
        start = time.perf_counter()
        install.apply(series, target, reverse=True)
        reverts.append(time.perf_counter() - start)
    start = time.perf_counter()
    wheels.build_patched_wheel(series, source, pin, scratch / "repack", force=True)
    repack = time.perf_counter() - start
    return statistics.median(applies), statistics.median(reverts), repack


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20, help="apply/revert rounds")
    parser.add_argument("--pip", action="store_true", help="also time a bare pip install")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="overlay-bench-") as tmp:
        scratch = Path(tmp)
        bare = bare_install(scratch)
        cold = nox_build(scratch)
        warm = nox_build(scratch)
        apply_s, revert_s, repack_s = apply_times(scratch, args.rounds)
        rows = [
            ("bare uv install of the pins (stock executorch)", bare),
            ("cold `nox -s build_patched_executorch` (new venv, new dist)", cold),
            ("warm re-run (nothing changed)", warm),
            (f"series apply on an unpacked wheel (median of {args.rounds})", apply_s),
            (f"series revert (median of {args.rounds})", revert_s),
            ("patched wheel repack (download cached)", repack_s),
        ]
        if args.pip:
            rows.insert(
                1, ("bare pip install of the pins (stock executorch)", pip_install(scratch))
            )
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:8.3f} s")
    print(f"{'cold build / bare uv install':<{width}}  {cold / bare:8.2f} x")
    print(f"{'warm re-run / cold build':<{width}}  {warm / cold:8.2f} x")


if __name__ == "__main__":
    main()
