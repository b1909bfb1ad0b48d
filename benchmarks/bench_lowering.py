"""Benchmark lowering time against model size: GRU and LSTM by frames, a conv stack by depth.

    nox -s bench_lowering                       # both lines, stock and patched envs
    nox -s bench_lowering -- --models gru --sizes 2,4,8 --repeat 3
    python benchmarks/bench_lowering.py --env 1.5.1-stock=PY --env 1.5.1-patched=PY ...

Each sample is one fresh process of ``lowering_probe.py`` in an env (export, a8w8
quantisation, ``to_edge_transform_and_lower`` with the TOSA partitioner, TOSA-1.0+INT),
run under ``nice``; the envs take turns sample by sample (A B A B), so a drift of the
machine's speed falls on every env alike. Times are CPU seconds of the probe process
(``time.process_time``: what the lowering costs, unlike wall time, hardly moved by other
load on a shared machine); the median of ``--repeat`` runs is quoted.

It prints, per env and model: CPU and wall time of the lowering per size, the slope
(seconds per frame or layer, milliseconds per exported node, a least-squares fit), the
phases (ATen decompositions, edge dialect passes, the Arm pass pipeline), the passes whose
cost grows most per node, and the retraces that changed nothing (work a target pre-check
skips). ``--profile DIR`` writes a cProfile of the largest GRU lowering per env.

Targets (here, never in tests):
- every other env of a line costs at most ``TARGET_PATCHED_RATIO`` of the line's stock
  env's CPU time (the noise floor under load: about 7%, two envs of the same code);
- an env that only speeds lowering up (any ``LINE-NAME`` but ``LINE-patched``, whose fixes
  may change a program: 1.2.0's do change the GRU's) lowers every sample to the same
  delegate payloads as the line's stock env;
- the 49-frame GRU keyword spotter fits its equivalence budget: two lowerings per path
  (TOSA and VGF), three paths on two cores, within ``KWS_BUDGET_S`` wall, extrapolated
  from the fit with ``KWS_FIXED_S`` for the rest of a case (quantise, export, run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from lowering_probe import MODELS, Sample  # noqa: E402

from overlay import codec  # noqa: E402

DEFAULT_SIZES = {"gru": (2, 4, 8, 16), "lstm": (2, 4, 8, 16), "conv": (2, 8, 32)}
KWS_FRAMES = 49
KWS_BUDGET_S = 600.0  # the case's per-path timeout
KWS_FIXED_S = 60.0  # per path beside the two lowerings: export, quantise, reference and VGF runs
PATHS, CORES, LOWERINGS_PER_PATH = 3, 2, 2
TARGET_PATCHED_RATIO = 1.10
TOP_PASSES = 6


@dataclass(frozen=True)
class Env:
    """One Python to lower in: its label (``LINE-stock``, ``LINE-patched``, any ``LINE-NAME``
    compared with ``LINE-stock``) and path."""

    label: str
    python: str

    @property
    def line(self) -> str:
        """Return the line part of the label."""
        return self.label.partition("-")[0]


Results = dict[str, dict[str, dict[int, Sample]]]  # env label -> model -> size -> sample


def probe(env: Env, model: str, size: int, profile: Path | None = None) -> Sample:
    """Lower once in a fresh process of the env; return its sample."""
    command = [env.python, str(HERE / "lowering_probe.py"), "--model", model, "--size", str(size)]
    if profile is not None:
        command += ["--profile", str(profile)]
    done = subprocess.run(
        ["nice", "-n", "10", *command], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return codec.loads(Sample, done.stdout.strip().splitlines()[-1], f"{env.label} {model} {size}")


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Return the least-squares (slope, intercept) of ys against xs."""
    if len(set(xs)) < 2:
        return 0.0, statistics.fmean(ys)
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, intercept


def median_sample(samples: Sequence[Sample]) -> Sample:
    """Return the sample whose lowering CPU time is the median one."""
    ranked = sorted(samples, key=lambda s: s.phase("lower").cpu)
    return ranked[len(ranked) // 2]


def per_node_passes(small: Sample, large: Sample) -> list[tuple[str, float, int]]:
    """Return (pass, ms per node added, runs) for the passes whose cost grows the most."""
    before = {p.name: p.seconds for p in small.passes}
    nodes = large.nodes - small.nodes
    growth = [
        (p.name, 1000.0 * (p.seconds - before.get(p.name, 0.0)) / nodes, p.runs)
        for p in large.passes
    ]
    return sorted(growth, key=lambda g: -g[1])[:TOP_PASSES]


def report(env: Env, model: str, samples: dict[int, Sample]) -> list[str]:
    """Return the text lines of one env and model; the slope first."""
    sizes = sorted(samples)
    unit = "layer" if model == "conv" else "frame"
    cpu = [samples[s].phase("lower").cpu for s in sizes]
    per_unit, _ = fit(sizes, cpu)
    per_node, _ = fit([samples[s].nodes for s in sizes], cpu)
    lines = [
        f"{env.label} {model}: {per_unit:.2f} s CPU per {unit}, {1000 * per_node:.1f} ms per"
        f" node ({samples[sizes[-1]].executorch}, torch {samples[sizes[-1]].torch})"
    ]
    for s in sizes:
        sample = samples[s]
        phases = ", ".join(
            f"{name} {sample.phase(name).cpu:.1f}"
            for name in ("decompositions", "edge passes", "arm pipeline")
        )
        lines.append(
            f"  {unit}s {s:3d}: {sample.nodes:5d} nodes, {sample.delegates} delegate(s),"
            f" {sample.cpu_ops} CPU op(s); lower {sample.phase('lower').cpu:6.1f} s CPU"
            f" ({sample.phase('lower').wall:6.1f} s wall): {phases}"
        )
    if len(sizes) > 1 and samples[sizes[-1]].nodes > samples[sizes[0]].nodes:
        growth = per_node_passes(samples[sizes[0]], samples[sizes[-1]])
        lines.append(
            "  per node added: "
            + ", ".join(f"{name} {ms:.2f} ms ({runs}x)" for name, ms, runs in growth)
        )
    idle = [
        f"{p.name} {p.seconds:.2f} s"
        for p in samples[sizes[-1]].passes
        if p.unchanged_retraces and p.unchanged_retraces == p.retraces
    ]
    if idle:
        lines.append("  retraces that changed nothing: " + ", ".join(idle))
    return lines


def markdown(results: Results) -> list[str]:
    """Return the Markdown table of the run: per env and model, the slope and each size."""
    rows = [
        "| env | model | per frame / layer (CPU s) | per node (ms) | sizes: lowering CPU s |",
        "|---|---|---|---|---|",
    ]
    for label, by_model in results.items():
        for model, samples in by_model.items():
            sizes = sorted(samples)
            cpu = [samples[s].phase("lower").cpu for s in sizes]
            per_unit, _ = fit(sizes, cpu)
            per_node, _ = fit([samples[s].nodes for s in sizes], cpu)
            cells = ", ".join(
                f"{s}: {samples[s].phase('lower').cpu:.1f} ({samples[s].nodes} nodes)"
                for s in sizes
            )
            rows.append(f"| {label} | {model} | {per_unit:.2f} | {1000 * per_node:.1f} | {cells} |")
    return rows


def kws_estimate(samples: dict[int, Sample]) -> float:
    """Return the extrapolated wall seconds of the 49-frame GRU case per path."""
    sizes = sorted(samples)
    slope, intercept = fit(sizes, [samples[s].phase("lower").cpu for s in sizes])
    lowering = slope * KWS_FRAMES + intercept
    return (LOWERINGS_PER_PATH * lowering + KWS_FIXED_S) * PATHS / CORES


def parse_env(text: str) -> Env:
    """Parse ``LABEL=PYTHON``."""
    label, _, python = text.partition("=")
    if not python or not Path(python).exists():
        raise argparse.ArgumentTypeError(f"expected LABEL=PYTHON (an existing file), got {text}")
    return Env(label, python)


def run_samples(
    envs: Sequence[Env], models: Sequence[str], sizes: str | None, repeat: int
) -> Results:
    """Lower every model at every size in every env, the envs in turns; keep the medians."""
    results: Results = {e.label: {} for e in envs}
    for model in models:
        chosen = tuple(int(s) for s in sizes.split(",")) if sizes else DEFAULT_SIZES[model]
        for size in chosen:
            runs: dict[str, list[Sample]] = {e.label: [] for e in envs}
            for _ in range(repeat):
                for env in envs:  # the envs take turns: drift falls on each alike
                    sample = probe(env, model, size)
                    runs[env.label].append(sample)
                    print(
                        f"  {env.label} {model} {size}: {sample.phase('lower').cpu:.1f} s CPU",
                        file=sys.stderr,
                        flush=True,
                    )
            for env in envs:
                results[env.label].setdefault(model, {})[size] = median_sample(runs[env.label])
    return results


def missed_targets(envs: Sequence[Env], models: Sequence[str], results: Results) -> list[str]:
    """Print each target's figure; return the targets missed."""
    missed = []
    for env in envs:
        stock = results.get(f"{env.line}-stock")
        if env.label.endswith("-stock") or stock is None:
            continue
        for model in models:
            mine, theirs = results[env.label][model], stock[model]
            same = all(mine[s].payload_sha256 == theirs[s].payload_sha256 for s in mine)
            cost = sum(mine[s].phase("lower").cpu for s in mine)
            base = sum(theirs[s].phase("lower").cpu for s in theirs)
            print(
                f"{env.label} vs {env.line}-stock, {model}: payloads the same: {same};"
                f" lowering CPU {cost:.1f} s / {base:.1f} s = {cost / base:.3f}"
                f" (target <= {TARGET_PATCHED_RATIO})"
            )
            must_match = not env.label.endswith("-patched")
            if (must_match and not same) or cost > TARGET_PATCHED_RATIO * base:
                missed.append(f"{env.label} {model}")
    for env in envs if "gru" in models else ():
        estimate = kws_estimate(results[env.label]["gru"])
        print(
            f"{env.label}: the {KWS_FRAMES}-frame GRU case, extrapolated: {estimate:.0f} s"
            f" per path on {CORES} cores (target <= {KWS_BUDGET_S:.0f} s)"
        )
        if estimate > KWS_BUDGET_S:
            missed.append(f"{env.label} kws")
    return missed


def main() -> int:
    """Run the benchmark; return 1 when a target is missed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", type=parse_env, action="append", required=True)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", help="one list for every model, e.g. 2,4,8")
    parser.add_argument("--repeat", type=int, default=1, help="runs per sample (median)")
    parser.add_argument("--profile", type=Path, help="write cProfiles of the largest GRU here")
    parser.add_argument("--markdown", type=Path, help="write the table here too")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    load = os.getloadavg()
    results = run_samples(args.env, models, args.sizes, args.repeat)
    if args.profile is not None and "gru" in models:
        args.profile.mkdir(parents=True, exist_ok=True)
        for env in args.env:
            largest = max(results[env.label]["gru"])
            probe(env, "gru", largest, args.profile / f"{env.label}-gru-{largest}.pstats")
    for env in args.env:
        for model in models:
            print("\n".join(report(env, model, results[env.label][model])))
    missed = missed_targets(args.env, models, results)
    after = os.getloadavg()
    print(
        f"CPUs: {os.cpu_count()}, load average (1, 5, 15 min) before: {load[0]:.1f} {load[1]:.1f}"
        f" {load[2]:.1f}; after: {after[0]:.1f} {after[1]:.1f} {after[2]:.1f}"
    )
    table = markdown(results)
    print("\n".join(table))
    if args.markdown is not None:
        args.markdown.write_text("\n".join(table) + "\n", encoding="utf-8")
    if missed:
        print("targets missed: " + ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
