"""The parts of a report every form shows: verdict lines, details, findings, paths."""

from __future__ import annotations

import json
from collections import Counter

from overlay.equivalence.controller.outcome import Report, declare_broken, user_file
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import PATHS, TargetState
from overlay.equivalence.render.cells import (
    bc_text,
    failure_text,
    interest,
    max_error,
    status_text,
    targets_text,
    vgf_bytes,
)
from overlay.equivalence.verdict import (
    AB,
    BC,
    NOT_RUN,
    TOSA,
    VGF,
    Observation,
    Verdict,
    exact_text,
    expected_broken,
    not_run_reason,
    target_numerics,
)


def ordered(report: Report) -> list[Verdict]:
    """Return the verdicts problems first, then differences from stock, then the rest."""
    return sorted(report.verdicts, key=interest)


def counts(report: Report) -> tuple[Counter[str], Counter[str]]:
    """Return how many items got each (a) vs (b) and each (b) vs (c) verdict."""
    return (
        Counter(v.ab.value for v in report.verdicts),
        Counter(v.bc.value for v in report.verdicts),
    )


def cache_line(report: Report) -> str:
    """Say how many results ran and how many the cache answered."""
    ran = sum(s.ran + s.attribution_runs for s in report.stats.values())
    cached = sum(s.cached + s.attribution_cached for s in report.stats.values())
    workers = sum(s.workers for s in report.stats.values())
    return f"{ran + cached} results: {ran} ran, {cached} from cache; {workers} worker(s) started"


def headline(report: Report) -> list[str]:
    """Return the verdict lines that open every form of the report (its failures aside)."""
    ab, bc = counts(report)
    items = len(report.verdicts)
    if report.failures:
        lines = [f"FAIL: {len(report.failures)} problem(s) in {items} items"]
    else:
        declared = bc["declared"] + bc["improved"]
        noted = f" ({declared} declared difference(s))" if declared else ""
        lines = [
            f"PASS: (b) stock + runtime patch and (c) the diff-patched build agree on"
            f" all {items} items{noted}"
        ]
    order = [AB.FIXED, AB.CHANGED, AB.REGRESSION, AB.STILL_BROKEN, AB.UNCHECKED, AB.SAME]
    lines.append("vs stock (a): " + ", ".join(f"{ab[a.value]} {a.value}" for a in order))
    part = ""
    if report.shards:
        part = f"shard(s) {', '.join(str(s) for s in report.shards)} of"
        part = f"{part} {len(report.selection)} selected items; "
    lines.append(f"{part}{cache_line(report)}; {report.wall_seconds:.1f} s")
    return lines + not_executed_lines(report)


def not_executed_lines(report: Report) -> list[str]:
    """Say once what could not run here, on how many cases, and how to make it run.

    Example: a run without Mesa's lavapipe.
    Becomes: "VGF lowered, not executed here (5 cases): not installed: lavapipe (apt-get
    install mesa-vulkan-drivers); nothing is called right or wrong there".
    """
    found: dict[tuple[str, str], set[str]] = {}
    for verdict in report.verdicts:
        for path, judged in verdict.targets.items():
            result = verdict.results[path]
            vgf = result.vgf
            if vgf is not None and vgf.state is TargetState.SKIPPED:
                found.setdefault(("VGF not lowered", vgf.reason), set()).add(verdict.item.name)
            for target, quality in judged.items():
                if quality in NOT_RUN:
                    name = {TOSA: "TOSA", VGF: "VGF"}.get(target, "Ethos-U")
                    what = f"{name} {quality.value}, not executed here"
                    reason = not_run_reason(result, target) or "no reason given"
                    found.setdefault((what, reason), set()).add(verdict.item.name)
    return [
        f"{what} ({len(cases)} case(s)): {reason}; nothing is called right or wrong there"
        for (what, reason), cases in sorted(found.items())
    ]


def path_lines(report: Report) -> list[str]:
    """Return one line per path: its Python, executorch, lock, runtime patch, cache use."""
    lines = []
    for path in PATHS:
        info = report.workers[path]
        init, stats = info.init, report.stats.get(path, PathStats())
        lines.append(
            f"({path.value}) {path.label}: {info.python}, executorch"
            f" {init.executorch if init else '?'},"
            f" {f'synced from {info.lock}' if info.lock else 'not synced from a lock'},"
            f" runtime patch {info.runtime_patch or 'none'};"
            f" {stats.ran} ran, {stats.cached} cached, {stats.workers} worker(s)"
        )
    return lines


def declared_lines(report: Report) -> list[str]:
    """Return each divergence rule of the line: its fix, condition, what it matched, why."""
    lines = []
    for rule in report.declared:
        matched = [v.item.name for v in report.verdicts if v.rule == rule]
        seen = f"matched {', '.join(matched)}" if matched else "matched nothing in this run"
        lines.append(
            f"fix {rule.fix}: {rule.name} ({rule.direction.value} where {rule.condition};"
            f" {seen}): {rule.reason}"
        )
    return lines


def graph_changes(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Return the graph lines only ``before`` has and only ``after`` has."""
    return [g for g in before if g not in after], [g for g in after if g not in before]


def detail_lines(verdict: Verdict) -> list[str]:
    """Return what a reader needs to see about one item beyond its table row."""
    lines = []
    a, b, c = (verdict.results[p] for p in PATHS)
    if verdict.ab is not AB.SAME:
        diffs = ", ".join(d.value for d in verdict.ab_diffs)
        cause = f"fix {verdict.fix}" if verdict.fix is not None else "no single fix"
        lines.append(f"(a) vs (b): {verdict.ab.value}, attributed to {cause}; differ in: {diffs}")
        if a.ok and not b.ok:
            lines.append(f"stock OK, patched FAIL: {failure_text(b)}")
        elif b.ok and not a.ok:
            lines.append(f"stock FAIL, patched OK; stock: {failure_text(a)}")
        elif Observation.GRAPH in verdict.ab_diffs:
            gone, new = graph_changes(a.graph, b.graph)
            lines.append(f"graph, stock only: {'; '.join(gone) or 'none'}")
            lines.append(f"graph, patched only: {'; '.join(new) or 'none'}")
        if Observation.NUMERICS in verdict.ab_diffs:
            lines.append(f"max abs error vs float: stock {max_error(a)}, patched {max_error(b)}")
        if Observation.VGF_PAYLOAD in verdict.ab_diffs:
            lines.append(f"VGF payloads: stock {vgf_bytes(a)}, patched {vgf_bytes(b)}")
            if Observation.VGF_NUMERICS not in verdict.ab_diffs and a.vgf and a.vgf.numerics:
                lines.append("executed VGF outputs: bit-identical on stock and patched")
        if Observation.VALUE in verdict.ab_diffs:
            lines.append(f"stock: {json.dumps(a.value)}")
            lines.append(f"patched: {json.dumps(b.value)}")
    if verdict.bc is not BC.AGREE:
        diffs = ", ".join(d.value for d in verdict.bc_diffs)
        lines.append(f"(b) vs (c): {bc_text(verdict)}; differ in: {diffs}")
        if verdict.bc_fix is not None:
            lines.append(
                f"the line's runtime form of fix {verdict.bc_fix}, in place of the runtime"
                " patch's, makes (b) agree with (c): the difference comes from that fix"
            )
        if verdict.rule is not None:
            lines.append(f"declared: {verdict.rule.reason}")
        lines.append(f"(b): {status_text(b, limit=400)}")
        lines.append(f"(c): {status_text(c, limit=400)}")
    if verdict.ab is not AB.SAME or verdict.bc is not BC.AGREE:
        lines.append(f"targets: {targets_text(verdict)}")
        lines += exact_lines(verdict)
    if verdict.claim_problem:
        lines.append(f"CLAIM NOT REPRODUCED: {verdict.claim_problem}")
    if verdict.unchecked:
        lines.append(f"NOT CHECKED HERE: {verdict.unchecked}")
    if Observation.VGF_NUMERICS in verdict.ab_diffs + verdict.bc_diffs:
        lines.append("executed VGF outputs differ between paths")
    if verdict.expectation_problem:
        lines.append(f"FINDING: {verdict.expectation_problem}")
    elif verdict.findings:
        targets = ", ".join(f.target for f in verdict.findings)
        lines.append(f"not right on any path ({targets}), as the case declares (see findings)")
    return lines


def exact_lines(verdict: Verdict) -> list[str]:
    """Return each target against the exact reference per path, or why there is none."""
    results = [verdict.results[p] for p in PATHS]
    reasons = sorted({r.exact_reason for r in results if r.exact_reason})
    lines = [f"no exact reference: {reason}" for reason in reasons]
    for target in (TOSA, VGF):
        found = [(p, target_numerics(verdict.results[p], target)) for p in PATHS]
        texts = [f"({p.value}) {exact_text(n)}" for p, n in found if n and n.exact]
        if texts:
            lines.append(f"{target} against the exact reference: {'; '.join(texts)}")
    return lines


def findings_lines(report: Report) -> list[str]:
    """Return one line per item with findings: each target wrong (or failing) on every path."""
    lines = []
    for verdict in report.verdicts:
        if not verdict.findings:
            continue
        expected = expected_broken(verdict.info, report.executorch or None)
        known = f" (expected: {expected})" if expected else " (NOT EXPECTED)"
        where = user_file(verdict.info)
        if not expected and where:
            known = f" (NOT EXPECTED: if it is known, {declare_broken(where)})"
        lines.append(f"{verdict.item}: {'; '.join(f.text for f in verdict.findings)}{known}")
    return lines
