"""The retarget run: the steps in order, each done by its own module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay import fixes
from overlay._hashing import sha256_file
from overlay.dist.wheels import fetch_wheel
from overlay.errors import OverlayError, UpstreamError, WheelError
from overlay.text.series import load_series
from overlay.upstream import releases, upstream_pins
from overlay.upstream.facts import parse_applied_upstream
from overlay.upstream.retarget import candidate as cand
from overlay.upstream.retarget import conflicts, measure, pin_check, text_plan
from overlay.upstream.retarget.moves import runtime_form_note
from overlay.upstream.retarget.promote import REPORT_STEM
from overlay.upstream.retarget.result import Clock, Request, Retarget
from overlay.upstream.verdicts import apply_behaviour, final_verdict, flag_stale_header, readiness

Progress = Callable[[str], None]


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


def _release_wheel(shared: upstream_pins.UpstreamPins, version: str) -> Path:
    """Return the release's matrix wheel; one the index does not have is refused at once."""
    try:
        return fetch_wheel(shared.matrix_pin(version))
    except WheelError as exc:
        raise WheelError(
            exc.message,
            expected=exc.expected,
            found=exc.found,
            hint=f"{exc.hint}, then `executorch-arm-overlay retarget VERSION`",
        ) from exc


def retarget(request: Request, progress: Progress = lambda _: None) -> Retarget:
    """Build and check the candidate series for ``request.version`` (the lines stay)."""
    clock = Clock()
    series = load_series(request.patches_dir)
    shared = upstream_pins.for_series(request.patches_dir)
    old, version = series.pins, request.version
    _check_version(version, old.executorch)
    layout = cand.Layout(request.out_dir, version)
    with clock.step("wheels"):
        progress(f"fetching executorch {version} wheels")
        release_wheel = _release_wheel(shared, version)  # first: a version not there stops here
        wheels = releases.fetch_release_wheels(old, shared, version, progress)
        new_files = releases.read_release(old, release_wheel, version)
        old_wheel = fetch_wheel(shared.matrix_pin(str(old.executorch)))
        old_files = releases.read_release(old, old_wheel, "pinned")
        release_tests = releases.read_release(
            old, release_wheel, version, prefix="backends/arm/test/"
        )
        requirements, commit = releases.release_metadata(release_wheel)
    ports = releases.load_ports(request.patches_dir, series)
    left = conflicts.resume_worktree(series, layout.work, new_files) if request.resume else []
    plans = text_plan.plan_series(series, ports, old_files, new_files, version)
    if request.resume:
        plans = [conflicts.resolved(p, layout.work, left) for p in plans]
    clone_pin, where = pin_check.upstream_torch_pin(request.upstream_clone, commit, version)
    if where:
        progress(f"upstream's torch pin for {version}: {clone_pin} ({where})")
    torches = pin_check.torch_candidates(
        version, given=request.torch, requirements=requirements, clone_pin=clone_pin, shared=shared
    )
    candidates = pin_check.runtime_candidates(old, requirements, list(torches), torches)
    runtime, attempts = dict(candidates[0].runtime), list[pin_check.PinAttempt]()
    stock, stock_python = None, Path()
    if request.behaviour:
        with clock.step("envs and pin checks"):
            runtime, attempts, env = pin_check.confirm_runtime(
                shared, version, candidates, envs_root=request.envs_root,
                log_dir=request.out_dir / "logs" / "pin-check", progress=progress,
            )  # fmt: skip
        stock_python = env.python
        stock = measure.measure_stock(
            series, plans, request=request, shared=shared, stock_python=stock_python,
            clock=clock, progress=progress,
        )  # fmt: skip
    found = dict(stock.found) if stock else {}
    final_plans = [apply_behaviour(p, found.get(p.name)) for p in plans]
    upstream_text = upstream_pins.with_release(
        shared.source.read_text(encoding="utf-8"), version,
        sha256=sha256_file(release_wheel), torch=clone_pin,
    )  # fmt: skip
    with clock.step("series"):
        resume = cand.write_candidate(
            series, final_plans, new_files, layout=layout, resume=request.resume,
            today=request.today, upstream_text=upstream_text,
            pins_text=cand.render_pins(
                old, version=version, runtime=runtime, wheels=wheels, attempts=attempts,
                pristine=text_plan.candidate_pristine(final_plans, new_files),
            ),
        )  # fmt: skip
    new_series = load_series(layout.candidate)  # with a conflict: the patches before it
    patched = None
    if stock is not None:
        patched = measure.measure_patched(
            new_series, final_plans, stock, old_version=str(old.executorch), request=request,
            shared=shared, stock_python=stock_python, release_wheel=release_wheel,
            release_tests=release_tests, clock=clock, progress=progress,
        )  # fmt: skip
        found.update(patched.found)
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
    verdicts = [
        flag_stale_header(
            final_verdict(
                p, found.get(p.name), version, registered=fixes.by_patch(p.name) is not None
            ),
            parse_applied_upstream(headers.get(p.name, "")),
            version,
        )
        for p in plans
    ]
    moves = patched.moves if patched else []
    return Retarget(
        old_version=str(old.executorch),
        version=version,
        candidate=layout.candidate,
        wheels=tuple(wheels),
        runtime=dict(runtime),
        attempts=tuple(attempts),
        verdicts=tuple(verdicts),
        runtime_form=runtime_form_note(verdicts, version),
        moves=tuple(moves),
        runs=patched.runs if patched else {},
        timings=clock.done(),
        worktree=layout.work if (layout.work / ".git").exists() else None,
        resume=resume,
        fast=request.fast,
        problems=readiness(
            verdicts, moves, behaviour_checked=request.behaviour, other=lock_problems
        ),
        wheel=release_wheel,
        release_tests=release_tests,
        locks=tuple(locks),
    )


def write_report(result: Retarget, out_dir: Path, texts: Mapping[str, str]) -> list[Path]:
    """Write ``retarget.{txt,md,json}`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in texts.items():
        path = out_dir / f"{REPORT_STEM}.{suffix}"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
