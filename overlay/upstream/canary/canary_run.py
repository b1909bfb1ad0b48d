"""The canary: every release line replayed onto upstream main (and newer tags), in one report.

Per line: the series committed on ``v<line>``; replayed onto main and, with ``tags``, onto
each newer ``vX.Y.Z`` (:mod:`.rebase`, with range-diffs); its ports tried on the same
targets; each ``Forwarded:`` tracked on main (:mod:`.forwarded`); the commit that made a
patch redundant or broke it (:mod:`.bisect`); the export gate (:mod:`.gate`). Then
behaviour on main where the newest wheel can host it (:mod:`.host`), and the rows of the
status page (:mod:`.rows`), compared with the previous page: a patch that newly conflicts
on main, and export churn, are failures.

Bad input (an unknown line, an unreadable previous page) is refused before any git work.
"""

from __future__ import annotations

import datetime
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from overlay import __version__, codec
from overlay.errors import OverlayError, UpstreamError
from overlay.lines import Line, all_lines
from overlay.text.applier import apply_patch, decode, encode
from overlay.text.series import Patch, Series, load_series
from overlay.upstream import behaviour as behaviour_tests
from overlay.upstream.canary import bisect, forwarded, gate, host, rebase, rows
from overlay.upstream.canary.gitrepo import MAIN_REF, Scratch, open_upstream
from overlay.upstream.canary.rebase import commit_series, replay, try_port
from overlay.upstream.canary.results import (
    SCHEMA_VERSION,
    Behaviour,
    BisectResult,
    CanaryReport,
    Forwarded,
    HostState,
    LineResult,
    PatchOnTarget,
    Row,
    TargetResult,
    TextStatus,
    UpstreamEvidence,
)
from overlay.upstream.matrix import port_for
from overlay.upstream.releases import load_ports

Progress = Callable[[str], None]
MAIN = "main"
PORT_APPLIES = frozenset({TextStatus.UNCHANGED, TextStatus.OFFSET})
NEWEST = "9999"  # main is newer than every release: every port qualifies


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


def select_lines(root: Path, names: Sequence[str]) -> tuple[Line, ...]:
    """Return the lines to run (all when ``names`` is empty); refuse unknown names."""
    found = all_lines(root)
    if not found:
        raise UpstreamError(
            f"no release line under {root}",
            expected="folders named after executorch releases holding a series",
            found="none",
            hint="run from a checkout, or pass --patches DIR",
        )
    unknown = [n for n in names if n not in {line.name for line in found}]
    if unknown:
        raise UpstreamError(
            f"no release line {', '.join(unknown)}",
            expected=f"one of {', '.join(line.name for line in found)}",
            found=", ".join(unknown),
            hint="pick lines from patches/ (--line 1.2.0)",
        )
    return tuple(line for line in found if not names or line.name in names)


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


def _with_evidence(found: PatchOnTarget, extra: Sequence[UpstreamEvidence]) -> PatchOnTarget:
    """Add upstream evidence; a patch that no longer applies and is upstream is upstream."""
    if not extra:
        return found
    status = TextStatus.UPSTREAM if found.status in rows.BROKEN else found.status
    return replace(found, status=status, evidence=(*found.evidence, *extra))


def evidence_for(track: Forwarded, patch_id_commit: str) -> list[UpstreamEvidence]:
    """Return the history evidence of one patch: an equal patch-id, a commit naming it."""
    found = []
    if patch_id_commit:
        found.append(UpstreamEvidence("patch-id", patch_id_commit, "the same git patch-id"))
    if track.commit and track.matched_by != "patch-id":
        found.append(UpstreamEvidence("commit names it", track.commit, track.matched_by))
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


@dataclass(frozen=True)
class PatchedMain:
    """main with a line's series replayed (and the ports that carry the rest): for behaviour."""

    files: dict[str, bytes]
    tests: dict[str, tuple[str, ...]]  # patch -> the tests it (or its port) adds


def _ports(  # noqa: PLR0917 - one target's ports, all it needs
    scratch: Scratch,
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    replayed: TargetResult,
    version: str | None,
    target: str,
) -> tuple[tuple[PatchOnTarget, ...], dict[str, Patch]]:
    """Try each patch's newest port for the target; return the results and the carriers.

    A port *carries* its patch when the patch itself conflicts (or lost its file) on the
    target and the port applies there.
    """
    results = []
    carriers: dict[str, Patch] = {}
    own = {p.patch: p for p in replayed.patches}
    for patch in series.patches:
        chosen = port_for(ports, patch.name, version or NEWEST)
        if chosen is None:
            continue
        tried = try_port(scratch, chosen[1], chosen[0], replayed.commit, target)
        results.append(tried)
        if own[patch.name].status in rows.BROKEN and tried.status in PORT_APPLIES:
            carriers[patch.name] = chosen[1]
    return tuple(results), carriers


def run_line(
    scratch: Scratch, line: Line, series: Series, request: Request, progress: Progress
) -> tuple[LineResult, PatchedMain]:
    """Run the canary for one line; also return main with its series, for behaviour."""
    tag = f"v{line.name}"
    if not scratch.has(f"refs/tags/{tag}"):
        error = f"upstream has no tag {tag} to take the line's base from"
        return LineResult(line.name, "", (), (), (), None, (), error), PatchedMain({}, {})
    base = scratch.rev(f"refs/tags/{tag}")
    try:
        committed = commit_series(scratch, series, base)
    except OverlayError as exc:
        error = f"the series does not apply on {tag}: {exc.message}"
        return LineResult(line.name, base, (), (), (), None, (), error), PatchedMain({}, {})
    ports = load_ports(line.directory, series)
    main = scratch.rev(MAIN_REF)
    history = scratch.log(f"{base}..{main}")
    ids = scratch.patch_ids(f"{base}..{main}", series.targets())
    tracks = {p.name: forwarded.track(scratch, p, history, ids) for p in series.patches}
    own_ids = {p.name: scratch.patch_id(p.diff) for p in series.patches}
    targets = []
    patched_main = PatchedMain({}, {})
    text_only: dict[str, TextStatus] = {}
    for name, commit, version in _targets(scratch, line, request.tags):
        progress(f"{line.name}: replaying the series onto {name} ({commit[:12]})")
        replayed, tip = replay(scratch, committed, name, commit, line_name=line.name)
        evidence = {
            p.name: [
                e
                for e in evidence_for(tracks[p.name], ids.get(own_ids[p.name], ""))
                if scratch.is_ancestor(e.commit, commit)
            ]
            for p in series.patches
        }
        patches = tuple(_with_evidence(p, evidence[p.patch]) for p in replayed.patches)
        port_results, carriers = _ports(scratch, series, ports, replayed, version, name)
        targets.append(TargetResult(name, commit, patches, port_results, replayed.range_diff))
        if name == MAIN:
            text_only = {p.patch: p.status for p in replayed.patches}
            applied = {p.name: p for p in series.patches if text_only[p.name] in rebase.APPLIED}
            patched_main = PatchedMain(
                with_ports(scratch.files(tip, series.targets()), scratch, tip, carriers.values()),
                {
                    n: tuple(behaviour_tests.new_tests(p.diff))
                    for n, p in {**applied, **carriers}.items()
                },
            )
    bisects = []
    for patch in series.patches:
        status = text_only[patch.name]
        kind = {TextStatus.UPSTREAM: bisect.SUPERSEDED}.get(status)
        kind = kind or (bisect.BROKEN if status in rows.BROKEN else None)
        if kind is not None:
            progress(f"{line.name}: bisecting {patch.name} ({kind})")
            found_commit = bisect.bisect(scratch, committed, patch.name, main, kind)
            if found_commit is not None:
                bisects.append(found_commit)
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
    )
    return result, patched_main


def with_ports(
    files: Mapping[str, bytes], scratch: Scratch, tip: str, ports: Iterable[Patch]
) -> dict[str, bytes]:
    """Return main's files after the replayed series and the ports that carry the rest."""
    chosen = list(ports)
    paths = {p for port in chosen for p in port.targets}
    texts = {p: decode(d) for p, d in {**scratch.files(tip, paths), **files}.items()}
    for port in chosen:
        texts = apply_patch(port, texts, allow_offset=True)
    return {p: encode(t) for p, t in texts.items()}


def page_rows(
    result: LineResult,
    series: Series,
    behaviour: Behaviour,
    *,
    today: str,
    previous: CanaryReport | None,
) -> tuple[Row, ...]:
    """Return the page rows of one line."""
    if not result.targets:
        return ()
    before: Mapping[tuple[str, str], Row] | None = None
    if previous is not None:
        before = {(r.line, r.patch): r for line in previous.lines for r in line.rows}
    main = result.targets[0]
    ports = {p.patch: p for p in main.ports}
    tracks = {f.patch: f for f in result.forwarded}
    found_by = {b.patch: b for b in result.bisects}
    measured = {b.patch: b for b in behaviour.patches}
    return tuple(
        rows.build_row(
            result.line,
            subject=series.get(on_main.patch).subject,
            on_main=on_main,
            found=tracks[on_main.patch],
            port=ports.get(on_main.patch),
            behaviour=measured.get(on_main.patch),
            bisect=found_by.get(on_main.patch),
            today=today,
            previous=before,
        )
        for on_main in main.patches
    )


def failures_of(result: LineResult) -> list[str]:
    """Return what makes the canary fail for one line."""
    found = [f"{result.line}: {result.error}"] if result.error else []
    found += [
        f"{result.line}/{row.patch}: newly conflicting on main ({row.result})"
        for row in result.rows
        if row.newly_conflicting
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
    patched = PatchedMain({}, {})
    for line in chosen:
        result, found = run_line(scratch, line, series[line.name], request, progress)
        results.append(result)
        patched = found if found.files else patched  # the newest line's series on main
    behaviour = Behaviour(HostState.NOT_RUN, detail="not asked for (--no-behaviour)")
    if request.behaviour:
        newest = series[chosen[-1].name]
        progress("behaviour: hosting main's backends/arm on the newest executorch wheel")
        behaviour = host.measure(
            scratch,
            main,
            lines=all_lines(request.root),
            patched=patched.files,
            patches=newest.patches,
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
    failures = tuple(f for r in results for f in failures_of(r))
    return CanaryReport(
        schema=SCHEMA_VERSION,
        created=datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        tool=f"executorch-arm-overlay {__version__}",
        upstream=request.upstream,
        main=main,
        main_date=scratch.date(main),
        lines=tuple(results),
        behaviour=behaviour,
        seconds=round(time.perf_counter() - started, 1),
        failures=failures,
    )


def _possibly_fixed(
    scratch: Scratch, result: LineResult, series: Series, main: str, behaviour: Behaviour
) -> LineResult:
    """Bisect (text) the patches whose trigger passes on stock main, where not done yet."""
    fixed = {b.patch for b in behaviour.patches if b.outcome == rows.FIXED_ON_STOCK}
    done = {b.patch for b in result.bisects}
    wanted = [p for p in series.patches if p.name in fixed and p.name not in done]
    if not wanted or not result.targets:
        return result
    committed = commit_series(scratch, series, result.base)
    found: list[BisectResult] = []
    for patch in wanted:
        hit = bisect.bisect(scratch, committed, patch.name, main, bisect.SUPERSEDED)
        if hit is not None:
            found.append(hit)
    return replace(result, bisects=(*result.bisects, *found))
