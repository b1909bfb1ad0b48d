"""The equivalence report laid out once, as blocks, for every form (Markdown, HTML): its
verdict lines, rows, details, findings and paths."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import overlay
from overlay import render
from overlay.equivalence.controller import outcome
from overlay.equivalence.controller.outcome import Report, declare_broken, user_file
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import PATHS, TargetState
from overlay.equivalence.render import cells
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
    target_runs,
)
from overlay.items import ItemKind
from overlay.render import Badge, Block, Heading, Inline, Items, Link, Para, Raw, Table, item

TITLE = "Equivalence: diff-patched build vs stock + runtime patch"
TONES = {"FAIL": "bad", "TIME": "bad", "DIED": "bad", "num!": "warn"}  # "ok": plain


def _anchor(verdict: Verdict) -> str:
    return "item-" + "".join(c if c.isalnum() else "-" for c in str(verdict.item))


def _row(verdict: Verdict, linked: bool) -> tuple[Inline, ...]:
    """Return an item's row (see HEADER); its name links to its section when it has one."""
    a, b, c = (verdict.results[p] for p in PATHS)
    name = cells.item_label(verdict.item)
    bc = cells.bc_cell(verdict)
    return (
        Link(name, _anchor(verdict)) if linked else name,
        *(
            Badge(code, TONES[code]) if code in TONES else code
            for code in map(cells.status_code, (a, b, c))
        ),
        cells.error_cell(c, verdict.info),
        cells.ab_cell(verdict),
        Badge(bc, "bad") if verdict.failures else bc,
    )


def _targets(report: Report) -> list[Block]:
    """Return the findings, the numbers per path and target, and the Ethos-U estimates."""
    cases = [
        (f"{cells.item_label(v.item)} ({cells.spec_text(v.info)})", v)
        for v in report.verdicts
        if v.item.kind is ItemKind.CASE
    ]
    numbers = tuple((name, *row) for name, v in cases for row in cells.numerics_rows(v))
    ethos = tuple((name, *cells.ethos_row(*g)) for name, v in cases for g in cells.ethos_groups(v))
    findings = []  # one line per item with a target wrong (or failing) on every path
    for v in (v for v in report.verdicts if v.findings):
        expected = expected_broken(v.info, report.executorch or None)
        known = f" (expected: {expected})" if expected else " (NOT EXPECTED)"
        if not expected and (where := user_file(v.info)):
            known = f" (NOT EXPECTED: if it is known, {declare_broken(where)})"
        findings.append(f"{v.item}: {'; '.join(f.text for f in v.findings)}{known}")
    out: list[Block] = [
        Heading("Findings (a target wrong or failing on every path)", 2),
        render.listing(findings),
    ]
    if numbers:
        out += [
            Heading("Numbers per path (TOSA reference model, executed VGF)", 2),
            Table(("case", *cells.NUMERICS_HEADER), numbers),
            Para(cells.NUMERICS_NOTE),
        ]
    if ethos:
        out += [
            Heading("Ethos-U (Vela command streams and estimates)", 2),
            Table(("case", *cells.ETHOSU_HEADER), ethos),
            Para(cells.ETHOSU_NOTE),
        ]
    return out


Drawings = Callable[[Verdict], list[str]]  # a differing item's HTML drawings


def blocks(report: Report, drawings: Drawings = lambda _: []) -> list[Block]:
    """Lay out the whole report (verdict first); ``drawings``: each differing item's HTML
    drawings (the HTML page's own blocks; :func:`overlay.equivalence.render.html.drawings`)."""
    verdicts = ordered(report)
    details = {v.item: detail_lines(v) for v in verdicts}
    verdict, *counts = headline(report)
    written = f"executorch-arm-overlay {overlay.__version__}" + (
        f", {report.created}" if report.created else ""
    )
    out: list[Block] = [
        Heading(TITLE),
        Para(verdict, "fail" if report.failures else "pass"),
        Items(tuple(map(item, [*report.failures, *counts, written]))),
        Table(tuple(cells.HEADER), tuple(_row(v, bool(details[v.item])) for v in verdicts)),
        Heading("Legend", 2),
        Items(tuple(item(f"{label}: {text}") for label, text in cells.LEGEND)),
    ]
    if any(details.values()):
        out.append(Heading("Differences", 2))
    for v in (v for v in verdicts if details[v.item]):
        out += [
            Heading(f"{cells.item_label(v.item)} ({cells.spec_text(v.info)})", 3, _anchor(v)),
            Items(tuple(map(item, details[v.item]))),
            *map(Raw, drawings(v)),
        ]
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
    declared = []  # each divergence rule of the line: its fix, condition, what it matched, why
    for rule in report.declared:
        matched = [v.item.name for v in report.verdicts if v.rule == rule]
        seen = f"matched {', '.join(matched)}" if matched else "matched nothing in this run"
        declared.append(
            f"fix {rule.fix}: {rule.name} ({rule.direction.value} where {rule.condition};"
            f" {seen}): {rule.reason}"
        )
    return [
        *out,
        *_targets(report),
        Heading("Declared divergences (b vs c)", 2),
        Items(tuple(map(item, declared))),
        Heading("Paths", 2),
        Items(tuple(map(item, path_lines(report)))),
        Para(f"wall time {report.wall_seconds:.1f} s ({phases})"),
    ]


def write_reports(
    report: Report,
    folder: Path,
    suffixes: Sequence[str] = ("json", "md", "html"),
    drawings: Drawings = lambda _: [],
) -> list[Path]:
    """Write ``equivalence.json``, ``.md`` and ``.html`` (or ``suffixes``) into ``folder``."""
    verdict = "FAIL" if report.failures else "PASS"
    return render.write(
        folder,
        "equivalence",
        blocks(report, drawings),
        outcome.to_document(report),
        suffixes,
        title=f"Equivalence report: {verdict}",
    )


def ordered(report: Report) -> list[Verdict]:
    """Return the verdicts problems first, then differences from stock, then the rest."""

    def interest(v: Verdict) -> int:
        return 0 if v.failures else 1 if v.ab is not AB.SAME or v.rule is not None else 2

    return sorted(report.verdicts, key=interest)


def headline(report: Report) -> list[str]:
    """Return the verdict lines that open every form of the report (its failures aside)."""
    ab, bc = outcome.counts(report)
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
    shards = ", ".join(str(s) for s in report.shards)
    part = f"shard(s) {shards} of {len(report.selection)} selected items; " if shards else ""
    stats = report.stats.values()
    ran = sum(s.ran + s.attribution_runs for s in stats)
    cached = sum(s.cached + s.attribution_cached for s in stats)
    workers = sum(s.workers for s in stats)
    lines.append(
        f"{part}{ran + cached} results: {ran} ran, {cached} from cache;"
        f" {workers} worker(s) started; {report.wall_seconds:.1f} s"
    )
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
            runs = target_runs(result)
            for target, quality in judged.items():
                if quality in NOT_RUN:
                    name = {TOSA: "TOSA", VGF: "VGF"}.get(target, "Ethos-U")
                    what = f"{name} {quality.value}, not executed here"
                    reason = runs[target].run_reason or "no reason given"
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


def detail_lines(verdict: Verdict) -> list[str]:
    """Return what a reader needs to see about one item beyond its table row."""
    lines = []
    a, b, c = (verdict.results[p] for p in PATHS)
    if verdict.ab is not AB.SAME:
        diffs = ", ".join(d.value for d in verdict.ab_diffs)
        cause = f"fix {verdict.fix}" if verdict.fix is not None else "no single fix"
        lines.append(f"(a) vs (b): {verdict.ab.value}, attributed to {cause}; differ in: {diffs}")
        if a.ok and not b.ok:
            lines.append(f"stock OK, patched {cells.status_text(b)}")
        elif b.ok and not a.ok:
            lines.append(f"patched OK, stock {cells.status_text(a)}")
        elif Observation.GRAPH in verdict.ab_diffs:
            gone = [g for g in a.graph if g not in b.graph]
            new = [g for g in b.graph if g not in a.graph]
            lines.append(f"graph, stock only: {'; '.join(gone) or 'none'}")
            lines.append(f"graph, patched only: {'; '.join(new) or 'none'}")
        if Observation.NUMERICS in verdict.ab_diffs:
            errors = f"stock {cells.max_error(a)}, patched {cells.max_error(b)}"
            lines.append(f"max abs error vs float: {errors}")
        if Observation.VGF_PAYLOAD in verdict.ab_diffs:
            lines.append(f"VGF payloads: stock {cells.vgf_bytes(a)}, patched {cells.vgf_bytes(b)}")
            if Observation.VGF_NUMERICS not in verdict.ab_diffs and a.vgf and a.vgf.numerics:
                lines.append("executed VGF outputs: bit-identical on stock and patched")
        if Observation.VALUE in verdict.ab_diffs:
            lines.append(f"stock: {json.dumps(a.value)}")
            lines.append(f"patched: {json.dumps(b.value)}")
    if verdict.bc is not BC.AGREE:
        diffs = ", ".join(d.value for d in verdict.bc_diffs)
        lines.append(f"(b) vs (c): {cells.bc_text(verdict)}; differ in: {diffs}")
        if verdict.bc_fix is not None:
            lines.append(
                f"the line's runtime form of fix {verdict.bc_fix}, in place of the runtime"
                " patch's, makes (b) agree with (c): the difference comes from that fix"
            )
        if verdict.rule is not None:
            lines.append(f"declared: {verdict.rule.reason}")
        lines.append(f"(b): {cells.status_text(b)}")
        lines.append(f"(c): {cells.status_text(c)}")
    if verdict.ab is not AB.SAME or verdict.bc is not BC.AGREE:
        lines.append(f"targets: {cells.targets_text(verdict)}")
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
    reasons = sorted({verdict.results[p].exact_reason for p in PATHS} - {""})
    lines = [f"no exact reference: {reason}" for reason in reasons]
    by_path = {p: target_runs(verdict.results[p]) for p in PATHS}
    for target in (TOSA, VGF):
        found = [(p, runs[target].numerics) for p, runs in by_path.items() if target in runs]
        texts = [f"({p.value}) {exact_text(n)}" for p, n in found if n and n.exact]
        if texts:
            lines.append(f"{target} against the exact reference: {'; '.join(texts)}")
    return lines
