"""Benchmark the equivalence run: corpus wall time vs the sum of bare lowerings; patched/stock.

    python benchmarks/bench_equivalence.py --stock-python S --patched-python P [--fast]

Prints (1) the parallel run's wall time, (2) the same run serial, (3) the sum of the bare
per-case lowering times (to_edge_transform_and_lower only) over the three paths, and (4)
the patched vs stock lowering time ratio from the same run. Targets live here, not in tests.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from overlay.equivalence import orchestrator
from overlay.equivalence.orchestrator import PATHS, Report
from overlay.equivalence.protocol import ItemKind, PathId

# Targets: the harness (3 imports + export/quantise + reference-model runs + attribution)
# may cost at most this multiple of the bare lowering sum; the diffs may not slow lowering.
TARGET_OVERHEAD = 4.0
TARGET_PATCHED_RATIO = 1.10


def _lower_sum(report: Report, path: PathId) -> float:
    return sum(
        v.results[path].lower_seconds or 0.0
        for v in report.verdicts
        if v.item.kind is ItemKind.CASE
    )


def main() -> int:
    """Run the benchmark; return 1 when a target is missed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--stock-python", default=os.environ.get("OVERLAY_STOCK_PYTHON"))
    parser.add_argument("--patched-python", default=os.environ.get("OVERLAY_PATCHED_PYTHON"))
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial run")
    args = parser.parse_args()
    options = orchestrator.options_from_env(args.stock_python, args.patched_python, fast=args.fast)
    parallel = orchestrator.run(options)
    lowering = {p: _lower_sum(parallel, p) for p in PATHS}
    bare = sum(lowering.values())
    cases = sum(1 for v in parallel.verdicts if v.item.kind is ItemKind.CASE)
    print(f"cases: {cases}, probes: {len(parallel.verdicts) - cases}")
    print(f"equivalence wall time (3 paths parallel): {parallel.wall_seconds:.1f} s")
    for phase, seconds in parallel.phase_seconds.items():
        print(f"  {phase}: {seconds:.1f} s")
    print(f"sum of bare lowering times, 3 paths: {bare:.1f} s")
    for path in PATHS:
        print(f"  ({path.value}) {path.label}: {lowering[path]:.1f} s")
    overhead = parallel.wall_seconds / bare if bare else float("inf")
    print(f"wall / bare lowering: {overhead:.2f}x (target <= {TARGET_OVERHEAD}x)")
    both_ok = [
        v
        for v in parallel.verdicts
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
    missed = overhead > TARGET_OVERHEAD or ratio > TARGET_PATCHED_RATIO
    if not args.no_serial:
        serial = orchestrator.run(replace(options, parallel=False))
        print(
            f"serial wall time: {serial.wall_seconds:.1f} s"
            f" (parallel saves {serial.wall_seconds - parallel.wall_seconds:.1f} s on"
            f" {os.cpu_count()} cores)"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
