"""Behaviour of the candidate, merged into each patch's verdict.

First the trigger cases on stock of the new release (and, for the moving report, stock of
the pinned release): is each patch still needed there? Then the kept series as a patched
wheel in its own env: the same cases, and the tests each kept patch adds, on stock and
patched (:mod:`overlay.upstream.upstream_tests`); the pinned release's patched build runs
the cases too. :mod:`overlay.upstream.verdicts` decides what the results mean.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import fixes, lines
from overlay.dist.wheels import build_patched_wheel, fetch_wheel
from overlay.envs import release_venvs
from overlay.equivalence import corpus
from overlay.errors import UnsupportedReleaseError
from overlay.fixes import Fix
from overlay.text.applier import encode
from overlay.text.series import Series
from overlay.upstream import behaviour, upstream_tests
from overlay.upstream.behaviour import ReleaseRun, Side
from overlay.upstream.facts import CaseMove, TextPlan
from overlay.upstream.retarget.moves import case_moves
from overlay.upstream.retarget.result import Clock, Request
from overlay.upstream.upstream_pins import UpstreamPins
from overlay.upstream.verdicts import PatchBehaviour, decide_patch

Progress = Callable[[str], None]


def cases_for(fast: bool, versions: Sequence[str]) -> list[str]:
    """Return the corpus cases to run: the fast subset plus every trigger, or all."""
    triggers = set(behaviour.trigger_cases(versions))
    return [c.name for c in corpus.CASES if not fast or c.fast or c.name in triggers]


@dataclass(frozen=True)
class StockSide:
    """The cases on stock of the new (and pinned) release, and what each patch needs."""

    sides: dict[str, Side]  # "new stock", "old stock"
    old_envs: tuple[Path, Path] | None  # pythons of the pinned release's stock and patched
    found: dict[str, PatchBehaviour]  # patch -> behaviour on stock of the new release


@dataclass(frozen=True)
class PatchedSide:
    """The kept series measured: runs per release, the moving report, each patch's word."""

    runs: dict[str, ReleaseRun]  # "new", and "old" with the pinned release
    moves: list[CaseMove]
    found: dict[str, PatchBehaviour]


def _versions(series: Series, version: str) -> list[str]:
    return [str(series.pins.executorch), version]


def measure_stock(
    series: Series,
    plans: Sequence[TextPlan],
    *,
    request: Request,
    shared: UpstreamPins,
    stock_python: Path,
    clock: Clock,
    progress: Progress,
) -> StockSide:
    """Run the trigger cases on stock; decide, per patch, whether the release needs it."""
    version = request.version
    jobs = {"new stock": str(stock_python)}
    old_envs = None
    if request.equivalence:
        with clock.step("envs and pin checks"):
            old_envs = pinned_envs(series, shared, request, progress)
        jobs["old stock"] = str(old_envs[0])
    cases = cases_for(request.fast, _versions(series, version))
    with clock.step("trigger cases on stock"):
        sides = behaviour.run_envs(jobs, cases, out_dir=request.out_dir / "logs", progress=progress)
    run = behaviour.assemble(version, sides["new stock"], None)
    found = {}
    for plan in plans:
        fix = fixes.by_patch(plan.name)
        if fix is not None:
            bug, other = behaviour.triggers(fix, _versions(series, version), target=version)
            found[plan.name] = decide_patch(
                plan.name, version, behaviour.judged(run, bug), behaviour.judged(run, other),
                kept=False,
            )  # fmt: skip
    return StockSide(sides, old_envs, found)


def pinned_envs(
    series: Series, shared: UpstreamPins, request: Request, progress: Progress
) -> tuple[Path, Path]:
    """Return the pythons of stock and patched envs of the pinned release."""
    pins = series.pins
    pin = shared.matrix_pin(str(pins.executorch))
    wheel = build_patched_wheel(series, fetch_wheel(pin), pin, request.out_dir / "dist").path
    stock = release_venvs.ensure(
        release_venvs.release_spec(pins, "stock"), request.envs_root, progress=progress
    )
    patched = release_venvs.ensure(
        release_venvs.release_spec(pins, "patched", executorch=wheel),
        request.envs_root,
        progress=progress,
    )
    return stock.python, patched.python


def own_fixes(request: Request, candidate: Collection[str]) -> list[Fix]:
    """Return the fixes the new release's existing line carries beyond the ``candidate`` patches.

    Example: retargeting 1.2.0 to 1.5.1 while ``patches/1.5.1`` carries fixes 1, 3 and 7.
    Becomes: ``[fix 7]`` (1 and 3 are ported from 1.2.0); no line for the release: ``[]``.
    """
    root = request.patches_dir.parent
    try:
        line = lines.line_for_version(root, request.version)
    except UnsupportedReleaseError:  # no line pinned to the release yet
        return []
    return [fix for fix in fixes.carried_by(line) if fix.patch not in candidate]


def measure_patched(
    candidate: Series,
    plans: Sequence[TextPlan],
    stock: StockSide,
    *,
    old_version: str,
    request: Request,
    shared: UpstreamPins,
    stock_python: Path,
    release_wheel: Path,
    release_tests: Mapping[str, bytes],
    clock: Clock,
    progress: Progress,
) -> PatchedSide:
    """Build the kept series, run the cases and each kept patch's new tests both ways."""
    version = request.version
    jobs: dict[str, str] = {}
    patched_python = None
    with clock.step("patched envs"):
        if candidate.patches:
            pin = shared.matrix_pin(version)
            wheel = build_patched_wheel(candidate, release_wheel, pin, request.out_dir / "dist")
            spec = release_venvs.release_spec(candidate.pins, "patched", executorch=wheel.path)
            spec = replace(spec, requirements=(*spec.requirements, *shared.test_requirements))
            patched_python = release_venvs.ensure(spec, request.envs_root, progress=progress).python
            jobs["new patched"] = str(patched_python)
        if stock.old_envs is not None:
            jobs["old patched"] = str(stock.old_envs[1])
    versions = [old_version, version]
    cases = cases_for(request.fast, versions)
    with clock.step("corpus on patched"):
        patched = behaviour.run_envs(
            jobs, cases, out_dir=request.out_dir / "logs", progress=progress
        )
    runs = {
        "new": behaviour.assemble(version, stock.sides["new stock"], patched.get("new patched"))
    }
    moves: list[CaseMove] = []
    if stock.old_envs is not None:
        runs["old"] = behaviour.assemble(
            old_version, stock.sides["old stock"], patched["old patched"]
        )
        moves = case_moves(
            runs["old"], runs["new"], own_fixes(request, {p.name for p in candidate.patches})
        )
    regressions = behaviour.regressions_of(runs["new"])
    found = dict(stock.found)
    with clock.step("upstream tests"):
        for patch in candidate.patches:
            fix = fixes.by_patch(patch.name)
            if fix is None:
                continue
            test = None
            added = upstream_tests.new_tests(patch.diff)
            if added and patched_python is not None:
                after = next(p for p in plans if p.name == patch.name).after
                test = upstream_tests.run_tests_both_ways(
                    str(stock_python),
                    str(patched_python),
                    release_tests=release_tests,
                    patched_files={p: encode(t) for p, t in after.items()},
                    pytest_ini=upstream_tests.pytest_ini(request.upstream_clone),
                    selection=added,
                    log_dir=request.out_dir / "logs" / "pytest" / patch.name.removesuffix(".patch"),
                )
            bug, other = behaviour.triggers(fix, versions, target=version)
            found[patch.name] = decide_patch(
                patch.name,
                version,
                behaviour.judged(runs["new"], bug),
                behaviour.judged(runs["new"], other),
                kept=True,
                regressions=regressions,
                test=test,
            )
    return PatchedSide(runs, moves, found)
