"""Benchmark the equivalence run: cold, warm, one patch edited; wall time vs bare lowering.

    nox -s bench_equivalence              # makes the envs, then runs this script
    python benchmarks/bench_equivalence.py --stock-python S --patched-python P [--fast]

In one invocation, with a new (empty) result cache:

1. cold: every item on the three paths, attribution included;
2. warm: the same again (answered from the cache; target <= 5 s);
3. one patch edited: a copy of the series with a comment line added to one patch, its
   wheel built and installed into a new patched env (setup, not timed), then the run on
   it (only path (c) runs; target <= 0.4x cold);
4. shards: 1/2 and 2/2 of the warm selection merged, checked against the whole run.

It prints wall time against the sum of the bare lowering times (to_edge_transform_and_lower
only, three paths, cold run; target <= 1.15x) and where the cold run's time went.
Targets live here, not in tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from overlay import codec
from overlay.cli.json_output import BuildReport
from overlay.equivalence.controller import options as run_options
from overlay.equivalence.controller import orchestrator, outcome
from overlay.equivalence.controller.options import Options, Shard
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.protocol import PATHS, PathId
from overlay.equivalence.render import html, layout
from overlay.items import ItemKind
from overlay.lines import pins

TARGET_WARM_S = 5.0
TARGET_EDITED = 0.4  # one-patch-edited wall / cold wall
TARGET_OVERHEAD = 1.15  # cold wall / sum of bare lowering times (3 paths, 2 cores)
TARGET_PATCHED_RATIO = 1.10  # the diffs may not slow lowering down
EDITED_PATCH = "0002-skip-factory-op-annotation.patch"
ROOT = Path(__file__).resolve().parent.parent


def lower_sum(result: Report, path: PathId) -> float:
    """Return the sum of the bare lowering times of a path's cases."""
    return sum(
        v.results[path].lower_seconds or 0.0
        for v in result.verdicts
        if v.item.kind is ItemKind.CASE
    )


def edit_one_patch(series: Path, name: str) -> None:
    """Add a comment line after the first added line of the patch's last hunk."""
    path = series / name
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = max(i for i, line in enumerate(lines) if line.startswith("@@ "))
    added = next(
        i
        for i in range(header + 1, len(lines))
        if lines[i].startswith("+") and lines[i][1:].strip()
    )
    indent = re.match(r"\+(\s*)", lines[added])
    lines.insert(added + 1, f"+{indent.group(1) if indent else ''}# edited by the benchmark\n")
    lines[header] = re.sub(
        r"\+(\d+),(\d+)", lambda m: f"+{m[1]},{int(m[2]) + 1}", lines[header], count=1
    )
    path.write_text("".join(lines), encoding="utf-8")


def run_tool(*args: str) -> str:
    """Run a command (the overlay CLI, uv); return its stdout or exit with its stderr."""
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def edited_env(stock_python: str, folder: Path) -> str:
    """Build the series with one patch edited into a new patched env; return its python."""
    series = folder / "patches"
    shutil.copytree(ROOT / "patches" / "1.2.0", series)
    edit_one_patch(series, EDITED_PATCH)
    overlay = [sys.executable, "-m", "overlay", "--patches", str(series)]
    run_tool(*overlay, "refresh")
    summary = folder / "wheel.json"
    run_tool(*overlay, "build-wheel", "--dist", str(folder / "dist"), "--report", str(summary))
    wheel = codec.loads(BuildReport, summary.read_text(encoding="utf-8"), summary.name).wheel
    version = run_tool(stock_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
    uv = shutil.which("uv") or sys.exit("uv is needed to make the edited env (pip install uv)")
    venv = folder / "venv"
    run_tool(uv, "venv", "--quiet", "--python", version.strip(), str(venv))
    requirements = [f"{n}=={v}" for n, v in pins.load(series).runtime.items()]
    run_tool(
        uv, "pip", "install", "--quiet", "--python", str(venv / "bin/python"), *requirements, wheel
    )
    return str(venv / "bin" / "python")


def timed(options: Options) -> tuple[Report, float]:
    """Run once; return the report and its wall time."""
    started = time.perf_counter()
    result = orchestrator.run(options)
    return result, time.perf_counter() - started


def decided(result: Report) -> dict[str, tuple[object, ...]]:
    """Return the verdicts without timings."""
    return {str(v.item): (v.bc, v.ab, v.fix, v.bc_diffs, v.ab_diffs) for v in result.verdicts}


def where_the_time_went(result: Report) -> None:
    """Print a run's time by phase, path and kind of work (paths that ran items)."""
    bare = sum(lower_sum(result, p) for p in PATHS if result.stats[p].ran)
    for phase, seconds in result.phase_seconds.items():
        print(f"  {phase}: {seconds:.1f} s")
    items = 0.0
    for path in PATHS:
        stats = result.stats[path]
        items += stats.busy_seconds
        if not stats.ran:
            print(f"  ({path.value}) no worker: {stats.cached} items from the cache")
            continue
        print(
            f"  ({path.value}) {stats.workers} worker(s), start {stats.start_seconds:.1f} s,"
            f" busy {stats.busy_seconds:.1f} s ({stats.ran} items,"
            f" {stats.attribution_runs} attribution runs), lowering {lower_sum(result, path):.1f} s"
        )
    print(
        f"  worker busy time: {items:.1f} s = bare TOSA lowering {bare:.1f} s + export, quantise,"
        f" reference-model run, VGF lowering, attribution {items - bare:.1f} s"
    )


def main() -> int:
    """Run the benchmark; return 1 when a target is missed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--stock-python", default=os.environ.get("OVERLAY_STOCK_PYTHON"))
    parser.add_argument("--patched-python", default=os.environ.get("OVERLAY_PATCHED_PYTHON"))
    parser.add_argument("--fast", action="store_true", help="the CI subset only")
    parser.add_argument("--keep", help="keep the work folder (cache, envs) here")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-equivalence-"))
    options = run_options.options_from_env(
        args.stock_python,
        args.patched_python,
        fast=args.fast,
        cache_dir=work / "cache",
        out_dir=work / "out",
    )
    load_before = os.getloadavg()[0]
    cold, cold_s = timed(options)
    if args.keep:  # the cold run's report, for a look (JSON, Markdown, HTML)
        layout.write_reports(cold, work / "report", drawings=html.drawings)
    warm, warm_s = timed(options)
    print(f"setup of the edited env ({EDITED_PATCH} + 1 line): ", end="", flush=True)
    mark = time.perf_counter()
    edited_python = edited_env(options.stock_python, work / "edited")
    print(f"{time.perf_counter() - mark:.1f} s (build wheel, uv install; not timed below)")
    edited, edited_s = timed(replace(options, patched_python=edited_python))
    shards = [orchestrator.run(replace(options, shard=Shard(k, 2))) for k in (1, 2)]
    merged = outcome.merge(shards)

    lowering = {p: lower_sum(cold, p) for p in PATHS}
    bare = sum(lowering.values())
    cases = sum(1 for v in cold.verdicts if v.item.kind is ItemKind.CASE)
    ran = {p: edited.stats[p].ran for p in PATHS}
    print(
        f"cases: {cases}, probes: {len(cold.verdicts) - cases}, CPUs: {os.cpu_count()}, load"
        f" average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f}"
    )
    verdict = "FAIL" if cold.failures else "PASS"
    print(f"cold run (empty cache):            {cold_s:7.1f} s  (verdict {verdict})")
    print(f"warm re-run (nothing changed):     {warm_s:7.1f} s  (target <= {TARGET_WARM_S} s)")
    print(
        f"one patch edited:                  {edited_s:7.1f} s  = {edited_s / cold_s:.2f}x cold"
        f" (target <= {TARGET_EDITED}x); ran a/b/c: {ran[PathId.STOCK]}/{ran[PathId.RUNTIME]}/"
        f"{ran[PathId.PATCHED]}"
    )
    print(f"sum of bare lowering times, 3 paths: {bare:.1f} s")
    print(
        f"cold wall / bare lowering: {cold_s / bare:.2f}x (target <= {TARGET_OVERHEAD}x)"
        if bare
        else "no lowering measured"
    )
    both_ok = [
        v
        for v in cold.verdicts
        if v.item.kind is ItemKind.CASE
        and all(v.results[p].ok for p in (PathId.STOCK, PathId.PATCHED))
    ]
    stock = sum(v.results[PathId.STOCK].lower_seconds or 0.0 for v in both_ok)
    patched = sum(v.results[PathId.PATCHED].lower_seconds or 0.0 for v in both_ok)
    ratio = patched / stock if stock else float("nan")
    print(
        f"patched vs stock lowering (cases OK on both, same run): {patched:.2f} s / {stock:.2f} s"
        f" = {ratio:.3f} (target <= {TARGET_PATCHED_RATIO})"
    )
    runtime = sum(v.results[PathId.RUNTIME].lower_seconds or 0.0 for v in both_ok)
    print(
        f"  noise floor: (b) lowers with the same stock code as (a): {runtime:.2f} s /"
        f" {stock:.2f} s = {runtime / stock if stock else float('nan'):.3f}"
    )
    same = decided(merged) == decided(warm) == decided(cold) == decided(edited)
    print(f"shards 1/2 + 2/2 merged: {len(merged.verdicts)} items, verdicts equal: {same}")
    print("where the cold run's time went:")
    where_the_time_went(cold)
    print("where the one-patch-edited run's time went:")
    where_the_time_went(edited)
    missed = (
        warm_s > TARGET_WARM_S
        or edited_s > TARGET_EDITED * cold_s
        or (bare and cold_s / bare > TARGET_OVERHEAD)
        or ratio > TARGET_PATCHED_RATIO
        or not same
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
