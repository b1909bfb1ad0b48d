"""The canary: every release line replayed onto upstream main (and newer tags), in one report.

Bad input is refused before any git work; compared with the previous page, a patch newly
conflicting on main, or export churn, fails it (docs/canary.md)."""

from __future__ import annotations

import datetime
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from overlay import __version__, codec
from overlay.errors import OverlayError, UpstreamError
from overlay.lines import Line, all_lines, default_line, line_named
from overlay.text.series import Series, load_series
from overlay.upstream import releases, replay, upstream_tests
from overlay.upstream.canary import forwarded, gate, main_behaviour
from overlay.upstream.canary.canary_report import (
    MERGED,
    NEWLY_CONFLICTING,
    BisectResult,
    CanaryReport,
    Forwarded,
    ForwardState,
    HostState,
    LineResult,
    MainBehaviour,
    Replay,
    result_text,
)
from overlay.upstream.canary.rebase import (
    BROKEN_BY,
    SUPERSEDED,
    bisect,
    commit_series,
    fixed_date,
    replay_onto,
)
from overlay.upstream.gitrepo import MAIN_REF, Scratch, open_upstream
from overlay.upstream.results import (
    BROKEN,
    REPORT_SCHEMA,
    Action,
    Evidence,
    OnBase,
    Outcome,
    PatchVerdict,
    Status,
)
from overlay.upstream.upstream_pins import for_series

Progress = Callable[[str], None]
MAIN = "main"


@dataclass(frozen=True)
class Request:
    """What the canary runs on."""

    upstream: str  # a local clone or mirror, or a git URL
    root: Path  # the lines root (patches/)
    out_dir: Path
    lines: tuple[str, ...] = ()  # line names; empty: every line
    tags: bool = False  # also replay onto each newer release tag
    previous: Path | None = None  # the last status.json
    behaviour: bool = True
    gate: bool = True
    scratch_root: Path | None = None  # where scratch repositories live (default: cache)


@dataclass(frozen=True)
class PatchedMain:
    """main with a line's series replayed (ports carrying the rest): for behaviour."""

    files: dict[str, bytes]
    tests: dict[str, tuple[str, ...]]  # each patch main carries -> the tests it (or a port) adds


def select_lines(root: Path, names: Sequence[str]) -> tuple[Line, ...]:
    """Return the lines to run (all when ``names`` is empty); refuse unknown names."""
    for name in names:
        line_named(root, name)  # refuses a name no line has
    chosen = tuple(line for line in all_lines(root) if not names or line.name in names)
    return chosen or (default_line(root),)  # refuses a root without lines


def load_previous(path: Path | None) -> CanaryReport | None:
    """Return the previous page's report (None without one; a missing file is an error)."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UpstreamError(
            f"cannot read the previous status page {path}",
            expected="the status.json of an earlier canary run",
            found=str(exc),
            hint="drop --previous for a first run",
        ) from exc
    return codec.loads(CanaryReport, text, where=str(path))


def _with_evidence(found: OnBase, extra: Sequence[Evidence]) -> OnBase:
    """Add upstream evidence; a patch that no longer applies and is upstream is upstream."""
    if not extra:
        return found
    status = Status.CONTAINED if found.own.status in BROKEN else found.own.status
    own = replace(found.own, status=status, evidence=(*found.own.evidence, *extra))
    return replace(found, own=own)


def evidence_for(track: Forwarded, patch_id_commit: str) -> list[Evidence]:
    """Return the history evidence of one patch: an equal patch-id, a commit naming it."""
    found = []
    if patch_id_commit:
        found.append(Evidence("patch-id", patch_id_commit, "the same git patch-id"))
    if track.commit and track.matched_by != "patch-id":
        found.append(Evidence("commit names it", track.commit, track.matched_by))
    return found


def _targets(scratch: Scratch, line: Line, tags: bool) -> list[tuple[str, str, str | None]]:
    """Return (name, commit, release version or None) of main and the newer release tags."""
    found: list[tuple[str, str, str | None]] = [(MAIN, scratch.rev(MAIN_REF), None)]
    if tags:
        newer = sorted(
            ((t, v) for t, v in scratch.release_tags().items() if Version(v) > line.version),
            key=lambda item: Version(item[1]),
        )
        found += [(t, scratch.rev(f"refs/tags/{t}"), v) for t, v in newer]
    return found


def run_line(
    scratch: Scratch, line: Line, series: Series, request: Request, progress: Progress
) -> tuple[LineResult, PatchedMain]:
    """Run the canary for one line; also return main with its series, for behaviour."""
    tag = f"v{line.name}"
    nothing = PatchedMain({}, {})
    try:
        base, base_note = (
            (scratch.rev(f"refs/tags/{tag}"), "")
            if scratch.has(f"refs/tags/{tag}")
            else wheel_base(scratch, line, series)
        )
    except OverlayError as exc:
        error = f"upstream has no tag {tag}, and its wheel cannot stand in: {exc.message}"
        return LineResult(line.name, "", (), (), (), None, (), error), nothing
    try:
        committed = commit_series(scratch, series, base)
    except OverlayError as exc:
        where = f"the {line.name} wheel's sources" if base_note else tag
        error = f"the series does not apply on {where}: {exc.message}"
        return LineResult(line.name, base, (), (), (), None, (), error), nothing
    ports = replay.ports_of(series)
    main = scratch.rev(MAIN_REF)
    history = scratch.log(f"{base}..{main}")
    ids = scratch.patch_ids(f"{base}..{main}", series.targets())
    tracks = {p.name: forwarded.track(scratch, p, history, ids) for p in series.patches}
    own_ids = {p.name: scratch.patch_id(p.diff) for p in series.patches}
    targets: list[Replay] = []
    patched_main, text_only = nothing, {}
    for name, commit, version in _targets(scratch, line, request.tags):
        progress(f"{line.name}: replaying the series onto {name} ({commit[:12]})")
        found, carries, tip = replay_onto(
            scratch, committed, (name, commit), line_name=line.name,
            ports=replay.ports_for(ports, version),
        )  # fmt: skip
        evidence = {
            p.name: [
                e
                for e in evidence_for(tracks[p.name], ids.get(own_ids[p.name], ""))
                if scratch.is_ancestor(e.commit, commit)
            ]
            for p in series.patches
        }
        patches = tuple(_with_evidence(p, evidence[p.patch]) for p in found.patches)
        targets.append(replace(found, patches=patches))
        if name == MAIN:
            text_only = {p.patch: p.own.status for p in found.patches}
            carried = {c.replayed.patch: c.carrier for c in carries if c.carrier is not None}
            touched = {p for patch in carried.values() for p in patch.targets}
            tests = {n: tuple(upstream_tests.new_tests(p.diff)) for n, p in carried.items()}
            patched_main = PatchedMain(scratch.files(tip, sorted(touched)), tests)
    wanted = {
        p: SUPERSEDED if s is Status.CONTAINED else BROKEN_BY
        for p, s in text_only.items()
        if s is Status.CONTAINED or s in BROKEN
    }
    bisects = bisect(
        scratch, committed, wanted, main, lambda said: progress(f"{line.name}: {said}")
    )
    checks = None
    if request.gate:
        progress(f"{line.name}: export gate (regenerate, export twice, hostile git config)")
        sources = scratch.files(base, series.targets())
        with tempfile.TemporaryDirectory(prefix="canary-gate-") as tmp:
            checks = gate.run_gate(line.directory, sources, base, Path(tmp))
    result = LineResult(
        line.name,
        base,
        tuple(targets),
        tuple(tracks[p.name] for p in series.patches),
        tuple(bisects),
        checks,
        (),
        base_note=base_note,
    )
    return result, patched_main


def release_sources(line: Line) -> tuple[dict[str, bytes], str]:
    """Return the line's release sources of ``backends/arm`` (from its wheel), and the
    upstream commit the wheel says it was built from ("" when it names none)."""
    release = releases.load_release(line.pins, for_series(line.directory), line.name)
    return release.files, releases.release_metadata(release.wheel)[1] or ""


def wheel_base(scratch: Scratch, line: Line, series: Series) -> tuple[str, str]:
    """Return a base for a line whose tag upstream lacks, and the sentence that says so: the
    wheel's sources of the series' files on main's fork point from the commit the wheel was built
    from (else the newest older tag, else main), as docs/canary.md describes."""
    files, built_from = release_sources(line)
    wanted = {p: files[p] for p in series.targets() if p in files}
    older = [
        (Version(v), t) for t, v in scratch.release_tags().items() if Version(v) < line.version
    ]
    anchor = built_from if built_from and scratch.has(built_from) else ""
    anchor = anchor or (max(older)[1] if older else "")
    main = scratch.rev(MAIN_REF)
    fork = scratch.run("merge-base", main, anchor).strip() if anchor else main
    message = f"executorch {line.name}'s sources of the series' files, from its wheel"
    base = scratch.commit(fork, wanted, message, date=fixed_date(""))
    label = anchor[:12] if anchor == built_from else anchor
    since = f" (main's fork point from {label})" if anchor else " (main)"
    missing = sorted(set(series.targets()) - set(files) - series.created)
    note = (
        f"no tag v{line.name} upstream: the base is the {line.name} wheel's"
        f" {len(wanted)} files on {fork[:12]}{since}"
        + (f"; not in the wheel: {', '.join(missing)}" if missing else "")
    )
    return base, note


def upstream_text(found: Forwarded) -> str:
    """Return the Upstream column: the forwarded state, the commit and its first release."""
    if found.state in MERGED:
        release = found.release or "not yet in a release"
        return f"{found.state.value} in {found.commit[:12]} ({release}; by {found.matched_by})"
    if found.state is ForwardState.OPEN and found.number is not None:
        return f"{found.state.value}: {found.kind} #{found.number}"
    return found.state.value


def next_step(  # noqa: C901 (one next step per verdict, in the order they are decided)
    line: str, on_main: OnBase, found: Forwarded, bisected: BisectResult | None
) -> tuple[Action, str]:
    """Return what to do with a patch, and why, given everything the canary found on main
    (its text there, its behaviour when measured, its ``Forwarded:`` target, the bisect)."""
    behaviour = on_main.behaviour
    needed = behaviour is not None and behaviour.outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    port = on_main.port if on_main.port is not None and on_main.port.status not in BROKEN else None
    fixed = Outcome.FAILS_BEFORE_PASSES_AFTER.value
    if found.state in MERGED and needed and port is not None:
        return Action.KEEP, (
            f"keep the port {on_main.port_version}: main still fails without it ({fixed});"
            f" the line's own patch is upstream in {found.commit[:12]}"
            f" ({found.release or 'not yet in a release'})"
        )
    if found.state in MERGED:
        how = "as sent" if found.state is ForwardState.MERGED_AS_SENT else "modified"
        where = f"merged upstream in {found.commit[:12]} ({how})"
        if not found.release:
            return Action.KEEP, f"keep until a release carries it: {where}, not yet in a release"
        if Version(found.release.removeprefix("v")) > Version(line):
            return Action.KEEP, f"keep on {line}; drop on lines from {found.release} on: {where}"
        return Action.DROP, f"drop: {where}, first released in {found.release}"
    by = f" ({bisected.kind}: {bisected.commit[:12]})" if bisected else ""
    if on_main.own.status is Status.CONTAINED:
        return Action.DROP, f"drop: already upstream{by}; record it in Applied-Upstream"
    if behaviour is not None and behaviour.outcome is Outcome.FIXED_ON_STOCK:
        text = f"possibly fixed upstream{by}: its trigger passes on stock main; verify, then drop"
        return Action.KEEP, text
    if on_main.own.status in BROKEN:
        if port is not None:
            how = f"{on_main.port_version} carries it to main ({port.status.value})"
            return Action.KEEP, f"keep: the port {how}"
        by = f", broken by {bisected.commit[:12]}" if bisected else ""
        return Action.CONFLICT, (
            f"port: resolve the conflict{by} (`executorch-arm-overlay edit`, or retarget the"
            " line: a newer line's patch of the same number is its port)"
        )
    if found.applied_upstream:
        return Action.KEEP, (
            f"drop? Applied-Upstream says '{found.applied_upstream}', yet it still"
            f" {on_main.own.status.value} on main: confirm with its trigger cases"
        )
    if found.state is ForwardState.OPEN:
        return Action.KEEP, f"keep; upstream review pending ({found.raw})"
    if found.state is ForwardState.NOT_FORWARDED:
        return Action.KEEP, "keep; forward it upstream (`nox -s upstream`)"
    if found.state is ForwardState.NOT_FOUND:
        return Action.KEEP, f"keep; check where it was forwarded ({found.raw}) by hand"
    return Action.KEEP, "keep"


def build_row(
    line: str,
    *,
    subject: str,
    on_main: OnBase,
    found: Forwarded,
    bisect_found: BisectResult | None,
    today: str,
    previous: Mapping[tuple[str, str], PatchVerdict] | None,
) -> PatchVerdict:
    """Return one page row; ``previous`` (rows of the last page) gives ``since`` and newness."""
    status = on_main.own.status
    before = (previous or {}).get((line, on_main.patch))
    since = before.since if before is not None and before.on.own.status is status else today
    newly = (
        previous is not None
        and status in BROKEN
        and found.state not in MERGED
        and (before is None or before.on.own.status not in BROKEN)
    )
    action, step = next_step(line, on_main, found, bisect_found)
    flags = ((NEWLY_CONFLICTING,) if newly else ()) + (
        (f"{bisect_found.kind}: {bisect_found.commit}",) if bisect_found else ()
    )
    return PatchVerdict(
        on_main.patch, subject, (on_main,), action, step, upstream_text(found), flags=flags,
        since=since,
    )  # fmt: skip


def page_rows(
    result: LineResult,
    series: Series,
    behaviour: MainBehaviour,
    *,
    today: str,
    previous: CanaryReport | None,
) -> tuple[PatchVerdict, ...]:
    """Return the page rows of one line: each patch on main, with its behaviour there."""
    if not result.targets:
        return ()
    before: Mapping[tuple[str, str], PatchVerdict] | None = None
    if previous is not None:
        before = {(line.line, r.patch): r for line in previous.lines for r in line.rows}
    tracks = {f.patch: f for f in result.forwarded}
    found_by = {b.patch: b for b in result.bisects}
    measured = {b.patch: b for b in behaviour.patches}
    return tuple(
        build_row(
            result.line,
            subject=series.get(on_main.patch).subject,
            on_main=replace(on_main, behaviour=measured.get(on_main.patch)),
            found=tracks[on_main.patch],
            bisect_found=found_by.get(on_main.patch),
            today=today,
            previous=before,
        )
        for on_main in result.targets[0].patches
    )


def failures_of(result: LineResult) -> list[str]:
    """Return what makes the canary fail for one line."""
    found = [f"{result.line}: {result.error}"] if result.error else []
    found += [
        f"{result.line}/{row.patch}: {NEWLY_CONFLICTING} ({result_text(row.on)})"
        for row in result.rows
        if NEWLY_CONFLICTING in row.flags
    ]
    if result.gate is not None:
        found += [
            f"{result.line}: export gate: {check.name}: {check.detail}"
            for check in result.gate.checks
            if not check.ok
        ]
    return found


def canary(request: Request, progress: Progress = lambda _: None) -> CanaryReport:
    """Run the canary over the requested lines; return the report (nothing written)."""
    started = time.perf_counter()
    chosen = select_lines(request.root, request.lines)
    previous = load_previous(request.previous)
    series = {line.name: load_series(line.directory) for line in chosen}
    progress(f"fetching main and the release tags of {request.upstream}")
    scratch = open_upstream(request.upstream, request.scratch_root)
    main = scratch.rev(MAIN_REF)
    results = []
    for line in chosen:
        result, patched = run_line(scratch, line, series[line.name], request, progress)
        results.append(result)
    # the newest line's patches are measured on main with that line's series, or not at all
    behaviour = MainBehaviour(HostState.NOT_RUN, detail="not asked for (--no-behaviour)")
    if request.behaviour and not patched.files:
        newest_line = results[-1]
        why = newest_line.error or "its series put nothing on main"
        behaviour = MainBehaviour(HostState.NOT_RUN, detail=f"{newest_line.line}: {why}")
    elif request.behaviour:
        newest = series[chosen[-1].name]
        progress("behaviour: hosting main's backends/arm on the newest executorch wheel")
        behaviour = main_behaviour.measure(
            scratch,
            main,
            lines=all_lines(request.root),
            patched=patched.files,
            patches=[p for p in newest.patches if p.name in patched.tests],  # those on main
            tests=patched.tests,
            out_dir=request.out_dir / "behaviour",
            progress=progress,
        )
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    results = [_possibly_fixed(scratch, r, series[r.line], main, behaviour) for r in results]
    results = [
        replace(r, rows=page_rows(r, series[r.line], behaviour, today=today, previous=previous))
        for r in results
    ]
    return CanaryReport(
        schema=REPORT_SCHEMA,
        created=datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        tool=f"executorch-arm-overlay {__version__}",
        upstream=request.upstream,
        main=main,
        main_date=scratch.date(main),
        lines=tuple(results),
        behaviour=behaviour,
        seconds=round(time.perf_counter() - started, 1),
        failures=tuple(f for r in results for f in failures_of(r)),
    )


def _possibly_fixed(
    scratch: Scratch, result: LineResult, series: Series, main: str, behaviour: MainBehaviour
) -> LineResult:
    """Bisect (text) the patches whose trigger passes on stock main, where not done yet."""
    fixed = {b.patch for b in behaviour.patches if b.outcome is Outcome.FIXED_ON_STOCK}
    done = {b.patch for b in result.bisects}
    wanted = {p.name: SUPERSEDED for p in series.patches if p.name in fixed - done}
    if not wanted or not result.targets:
        return result
    found = bisect(scratch, commit_series(scratch, series, result.base), wanted, main)
    return replace(result, bisects=(*result.bisects, *found))
