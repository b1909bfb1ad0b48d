"""The retarget run: what it is asked, and its steps in order, each done by its own module."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay import fixes, lines
from overlay.distribution.wheels import build_patched_wheel, fetch_wheel
from overlay.envs import release_venvs
from overlay.equivalence import corpus
from overlay.errors import OverlayError, UnsupportedReleaseError, UpstreamError
from overlay.fixes import Fix
from overlay.lines.listing import patch_number
from overlay.text.applier import encode
from overlay.text.series import PATCH_SUFFIX, Series, load_series
from overlay.upstream import behaviour, pin_check, releases, replay, upstream_pins, upstream_tests
from overlay.upstream.behaviour import Side
from overlay.upstream.releases import Release
from overlay.upstream.results import (
    Applied,
    OnBase,
    PatchBehaviour,
    PinAttempt,
    ReleaseRun,
    Status,
    TestRun,
    parse_applied_upstream,
)
from overlay.upstream.retarget import candidate as cand
from overlay.upstream.retarget import conflicts, runtime_pins
from overlay.upstream.retarget.moves import case_moves, runtime_form_note
from overlay.upstream.retarget.retarget_verdict import (
    CaseMove,
    Retarget,
    TextPlan,
    apply_behaviour,
    candidate_pristine,
    final_verdict,
    plan_series,
    readiness,
)
from overlay.upstream.upstream_pins import UpstreamPins

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Request:
    """What to retarget and how."""

    version: str
    patches_dir: Path
    out_dir: Path
    fast: bool = True
    behaviour: bool = True
    equivalence: bool = True
    torch: tuple[str, ...] = ()
    upstream_clone: Path | None = None
    envs_root: Path | None = None
    resume: bool = False  # continue after a conflict was resolved in <out>/worktree
    locks: bool = True  # resolve the candidate's locks (uv, the index) when it is complete
    today: str = field(default_factory=lambda: datetime.date.today().isoformat())


class Clock:
    """Seconds per step of a run, in the order the steps ran."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time one step (added to the step's earlier time)."""
        mark = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - mark

    def done(self) -> dict[str, float]:
        """Return the timings with the total."""
        return {**self.timings, "total": time.perf_counter() - self.started}


@dataclass(frozen=True)
class Stock:
    """The cases on stock of the new (and pinned) release, and what each patch needs."""

    sides: dict[str, Side]  # "new stock", "old stock"
    python: Path  # the new release's stock env
    old_envs: tuple[Path, Path] | None  # pythons of the pinned release's stock and patched
    found: dict[str, PatchBehaviour]  # patch -> behaviour on stock of the new release


@dataclass(frozen=True)
class Measured:
    """The kept series measured: each patch's word, the runs, the moving report."""

    found: dict[str, PatchBehaviour]  # on the new release
    pinned: dict[str, OnBase]  # on the pinned release (its patched build), with behaviour
    runs: dict[str, ReleaseRun]  # "new", and "old" with the pinned release
    moves: list[CaseMove]


def _check_version(version: str, pinned: Version) -> None:
    try:
        newer = Version(version) > pinned
    except InvalidVersion:
        newer = False
    if not newer:
        raise UpstreamError(
            f"executorch {version} is not a release after the pinned {pinned}",
            expected=f"a release after {pinned}",
            found=version,
            hint="list releases with `pip index versions executorch`",
        )


def cases_for(fast: bool, versions: Sequence[str]) -> list[str]:
    """Return the corpus cases to run: the fast subset plus every trigger, or all."""
    triggers = set(behaviour.trigger_cases(versions))
    return [c.name for c in corpus.CASES if not fast or c.fast or c.name in triggers]


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
    ported = {patch_number(name) for name in candidate}
    return [fix for fix in fixes.carried_by(line) if fix.number not in ported]


def measure_stock(
    series: Series,
    *,
    request: Request,
    shared: UpstreamPins,
    stock_python: Path,
    clock: Clock,
    progress: Progress,
) -> Stock:
    """Run the trigger cases on stock; decide, per patch, whether the release needs it."""
    version = request.version
    jobs = {"new stock": str(stock_python)}
    old_envs = None
    if request.equivalence:
        with clock.step("envs and pin checks"):
            old_envs = pinned_envs(series, shared, request, progress)
        jobs["old stock"] = str(old_envs[0])
    versions = [str(series.pins.executorch), version]
    cases = cases_for(request.fast, versions)
    with clock.step("trigger cases on stock"):
        sides = behaviour.run_envs(jobs, cases, out_dir=request.out_dir / "logs", progress=progress)
    run = behaviour.assemble(version, sides["new stock"], None)
    names = [p.name for p in series.patches]
    found = behaviour.measure(names, run, versions, target=version, kept=False)
    return Stock(sides, stock_python, old_envs, found)


def measure_patched(
    series: Series,
    candidate: Series,
    plans: Sequence[TextPlan],
    stock: Stock,
    *,
    request: Request,
    shared: UpstreamPins,
    release: Release,
    clock: Clock,
    progress: Progress,
) -> Measured:
    """Build the kept series, run the cases and each kept patch's new tests both ways."""
    version, old_version = request.version, str(series.pins.executorch)
    jobs: dict[str, str] = {}
    patched_python = None
    with clock.step("patched envs"):
        if candidate.patches:
            pin = shared.matrix_pin(version)
            wheel = build_patched_wheel(candidate, release.wheel, pin, request.out_dir / "dist")
            contents = release_venvs.release_spec(
                candidate.pins, "patched", executorch=wheel.path, extra=shared.test_requirements
            )
            env = release_venvs.ensure(contents, request.envs_root, progress=progress)
            patched_python = env.python
            jobs["new patched"] = str(patched_python)
        if stock.old_envs is not None:
            jobs["old patched"] = str(stock.old_envs[1])
    versions = [old_version, version]
    with clock.step("corpus on patched"):
        sides = stock.sides | behaviour.run_envs(
            jobs, cases_for(request.fast, versions), out_dir=request.out_dir / "logs",
            progress=progress,
        )  # fmt: skip
    runs = {"new": behaviour.assemble(version, sides["new stock"], sides.get("new patched"))}
    moves: list[CaseMove] = []
    pinned: dict[str, OnBase] = {}
    if stock.old_envs is not None:
        runs["old"] = behaviour.assemble(old_version, sides["old stock"], sides["old patched"])
        new = (sides["new stock"][1], sides.get("new patched", sides["new stock"])[1])
        old = (sides["old stock"][1], sides["old patched"][1])
        kept = {p.name for p in candidate.patches}
        moves = case_moves(old, new, version, own_fixes(request, kept))
        on_old = behaviour.measure([p.name for p in series.patches], runs["old"], [old_version])
        pinned = {  # the line's own patches on its own release
            name: OnBase(name, Applied(Status.APPLIES), base=old_version, behaviour=found)
            for name, found in on_old.items()
        }
    tests: dict[str, TestRun] = {}
    with clock.step("upstream tests"):
        after = {p.name: p.after for p in plans}
        for patch in candidate.patches:
            added = upstream_tests.new_tests(patch.diff)
            if added and patched_python is not None and fixes.by_patch(patch.name):
                tests[patch.name] = upstream_tests.run_tests_both_ways(
                    str(stock.python),
                    str(patched_python),
                    release_tests=release.tests,
                    patched_files={p: encode(t) for p, t in after[patch.name].items()},
                    pytest_ini=upstream_tests.pytest_ini(request.upstream_clone),
                    selection=added,
                    log_dir=request.out_dir
                    / "logs"
                    / "pytest"
                    / patch.name.removesuffix(PATCH_SUFFIX),
                )
    names = [p.name for p in candidate.patches]
    found = behaviour.measure(names, runs["new"], versions, target=version, tests=tests)
    return Measured({**stock.found, **found}, pinned, runs, moves)


def retarget(request: Request, progress: Progress = lambda _: None) -> Retarget:
    """Build and check the candidate series for ``request.version`` (the lines stay)."""
    clock = Clock()
    series = load_series(request.patches_dir)
    shared = upstream_pins.for_series(request.patches_dir)
    old, version = series.pins, request.version
    _check_version(version, old.version)
    layout = cand.Layout(request.out_dir, version)
    with clock.step("wheels"):
        progress(f"fetching executorch {version} wheels")
        release = releases.load_release(old, shared, version)  # first: a version not there stops
        wheels = cand.fetch_release_wheels(old, shared, version, progress)
        pinned_release = releases.load_release(old, shared, str(old.executorch))
        requirements, commit = releases.release_metadata(release.wheel)
    held: dict[str, conflicts.WorkCommit] = {}
    if request.resume:
        conflicts.commit_resolution(layout.work)
        held = conflicts.work_commits(layout.work)
    plans = plan_series(
        series, replay.ports_of(series), pinned_release.files, release.files, version=version,
        taken={name: c.after for name, c in held.items()},
    )  # fmt: skip
    plans = [conflicts.resolved(p, held[p.name]) if p.name in held else p for p in plans]
    clone_pin, where = pin_check.upstream_torch_pin(request.upstream_clone, commit, version)
    if where:
        progress(f"upstream's torch pin for {version}: {clone_pin} ({where})")
    torches = runtime_pins.torch_candidates(
        version, given=request.torch, requirements=requirements, clone_pin=clone_pin, shared=shared
    )
    candidates = runtime_pins.runtime_candidates(old, requirements, list(torches), torches)
    runtime, attempts = dict(candidates[0].runtime), list[PinAttempt]()
    stock = None
    if request.behaviour:
        with clock.step("envs and pin checks"):
            runtime, attempts, env = pin_check.confirm_runtime(
                shared, version, candidates, envs_root=request.envs_root,
                log_dir=request.out_dir / "logs" / "pin-check", progress=progress,
            )  # fmt: skip
        stock = measure_stock(
            series, request=request, shared=shared, stock_python=env.python, clock=clock,
            progress=progress,
        )  # fmt: skip
    found = dict(stock.found) if stock else {}
    final_plans = [
        replace(p, action=a, source=s)
        for p in plans
        for a, s in [apply_behaviour(p.action, p.source, p.replayed.own, found.get(p.name))]
    ]
    upstream_text = upstream_pins.with_release(
        shared.source.read_text(encoding="utf-8"), version, sha256=release.sha256, torch=clone_pin,
    )  # fmt: skip
    with clock.step("series"):
        resume = cand.write_candidate(
            final_plans, release.files, layout=layout, resume=request.resume,
            today=request.today, upstream_text=upstream_text,
            pins_text=cand.render_pins(
                old, version=version, runtime=runtime, wheels=wheels, attempts=attempts,
                pristine=candidate_pristine(final_plans, release.files),
            ),
        )  # fmt: skip
    new_series = load_series(layout.candidate)  # with a conflict: the patches before it
    measured = None
    if stock is not None:
        measured = measure_patched(
            series, new_series, final_plans, stock, request=request, shared=shared,
            release=release, clock=clock, progress=progress,
        )  # fmt: skip
        found = measured.found
    lock_problems: list[str] = []
    locks: list[Path] = []
    if request.locks and not resume and new_series.patches:
        with clock.step("locks"):
            try:
                locks = cand.write_locks(new_series, request.out_dir / "dist", progress)
            except OverlayError as exc:
                lock_problems.append(
                    f"locks: {exc.message}" + (f": {exc.found}" if exc.found else "")
                )
    headers = {p.name: p.header.get("Applied-Upstream", "") for p in new_series.patches}
    subjects = {p.name: p.subject for p in series.patches}
    verdicts = [
        final_verdict(
            p.replayed,
            p.action,
            p.source,
            found.get(p.name),
            version,
            registered=fixes.by_patch(p.name) is not None,
            subject=subjects[p.name],
            pinned=measured.pinned.get(p.name) if measured else None,
            header=parse_applied_upstream(headers.get(p.name, "")),
        )
        for p in plans
    ]
    moves = measured.moves if measured else []
    return Retarget(
        old_version=str(old.executorch),
        version=version,
        candidate=str(layout.candidate),
        fast=request.fast,
        problems=readiness(
            verdicts, moves, behaviour_checked=request.behaviour, other=lock_problems
        ),
        wheels=tuple(wheels),
        runtime=dict(runtime),
        attempts=tuple(attempts),
        patches=tuple(verdicts),
        runtime_form=runtime_form_note(final_plans, version),
        moves=tuple(moves),
        runs=measured.runs if measured else {},
        timings=clock.done(),
        worktree=str(layout.work) if (layout.work / ".git").exists() else "",
        resume=resume,
        locks=tuple(str(path) for path in locks),
    )
