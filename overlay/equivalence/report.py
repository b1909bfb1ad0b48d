"""Render an equivalence Report as text, Markdown and JSON; read JSON back; merge shards.

The text report is read top-down in seconds: the verdict and its counts first, then one
table row per item (it fits 100 columns; problems first, then what the fixes change),
a legend for every column, then details, the findings (a target wrong on every path), the
numbers of every target per path (TOSA, executed VGF) and the Ethos-U command streams.
JSON (``REPORT_SCHEMA``) carries every path's full typed result; :func:`json_schema`
derives its JSON Schema from the protocol's dataclasses, so a field added there is
described (and validated) without editing this module. :func:`load` reads a report back
and :func:`merge` joins shard reports: verdicts are decided again from the stored results
by :func:`overlay.equivalence.verdict.decide`.
The HTML form lives in :mod:`overlay.equivalence.htmlreport`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import textwrap
import types
import typing
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import overlay
from overlay import codec
from overlay._table import markdown_cell, markdown_table, text_table
from overlay.codec import JsonValue
from overlay.equivalence import corpus
from overlay.equivalence.cache import Keys
from overlay.equivalence.orchestrator import (
    PATHS,
    Options,
    PathStats,
    Report,
    Shard,
    WorkerInfo,
    patch_name,
)
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    EthosUResult,
    ItemId,
    ItemKind,
    ItemResult,
    Numerics,
    PathId,
    Payload,
    ProbeInfo,
    ProtocolError,
    Stage,
    TargetState,
    from_json,
)
from overlay.equivalence.verdict import (
    AB,
    BC,
    Finding,
    Observation,
    Quality,
    Verdict,
    decide,
    expected_broken,
    fractions,
    sqnr_text,
    tolerance,
    worst,
)
from overlay.errors import EquivalenceError
from overlay.fixes import DECLARED_DIVERGENCES, DeclaredDivergence

REPORT_SCHEMA = 3  # 3: targets, findings, expectation problems, --group
WIDTH = 100  # the text report fits this many columns
TOOL = "executorch-arm-overlay"
HEADER = ["item", "a", "b", "c", "err(c)", "a vs b", "b vs c"]
LEGEND = (
    (
        "a, b, c",
        "the three paths: (a) stock executorch, (b) stock + the runtime patch,"
        " (c) the diff-patched build",
    ),
    (
        "ok",
        "lowered and ran; FAIL: raised (details below); num!: lowered, running it failed;"
        " TIME / DIED: the worker timed out / crashed on it",
    ),
    (
        "err(c)",
        "(c)'s largest output error against the fake-quantised reference, in % of"
        " that output's range; ! above the case's tolerance; '-' no outputs (failed, probe)",
    ),
    (
        "a vs b",
        "what the fixes change against stock: same, fixed, changed (both right),"
        " regression, broken (still wrong); #N: the one patch that alone causes it,"
        " #?: no single patch",
    ),
    (
        "b vs c",
        "agree; declared (a known difference, listed below); UNDECLARED or INCOMPLETE fail the run",
    ),
)


# --- cells ---------------------------------------------------------------------------------


def status_code(result: ItemResult) -> str:
    """Return the table code of one path's result (see LEGEND)."""
    if result.ok:
        return "num!" if result.numerics_error is not None else "ok"
    if result.error is not None and result.error.stage is Stage.HARNESS:
        return "TIME" if result.error.type == "WorkerTimeout" else "DIED"
    return "FAIL"


def status_text(result: ItemResult, *, limit: int = 160) -> str:
    """Return 'OK' or 'FAIL: Type: first line of message' for one path's result."""
    if result.ok:
        if result.numerics_error is not None:
            return f"OK (numerics FAIL: {result.numerics_error.type})"
        return "OK"
    text = "FAIL: " + (result.error.first_line if result.error else "?")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_text(result: ItemResult) -> str:
    """Return the failure of a result as ``Type: first line``, or '' when it ran."""
    return result.error.first_line if result.error is not None else ""


def relative_errors(result: ItemResult) -> list[float | None]:
    """Return each TOSA output's error as a fraction of its range (see :func:`fractions`)."""
    return fractions(result.numerics)


def error_cell(result: ItemResult, info: CaseInfo | ProbeInfo) -> str:
    """Return the err(c) cell: the largest relative error in %, '!' above tolerance."""
    errors = relative_errors(result)
    if not errors:
        return "-"
    if any(e is None for e in errors):
        return "shape!"
    worst = max(e for e in errors if e is not None)
    mark = "!" if worst > tolerance(info) else ""
    if 0 < worst < 1e-4:
        return "<0.01%"
    return f"{worst * 100:.2g}%{mark}"


def max_error(result: ItemResult) -> str:
    """Return the max abs error vs the float model, over all outputs, as text."""
    values = result.numerics.max_abs_err_vs_float if result.numerics else ()
    known = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(known) != len(values):
        return "shape!"
    return f"{max(known):.3g}"


def ab_cell(verdict: Verdict) -> str:
    """Return the (a) vs (b) cell: the verdict and the patch that alone causes it."""
    if verdict.ab is AB.SAME:
        return "same"
    word = "broken" if verdict.ab is AB.STILL_BROKEN else verdict.ab.value
    return f"{word} #{verdict.fix if verdict.fix is not None else '?'}"


def bc_cell(verdict: Verdict) -> str:
    """Return the (b) vs (c) cell."""
    if verdict.bc in (BC.AGREE, BC.DECLARED):
        return verdict.bc.value
    return verdict.bc.value.upper()


def ab_text(verdict: Verdict) -> str:
    """Return the (a) vs (b) verdict as words."""
    if verdict.ab is AB.SAME:
        return "same as stock"
    cause = f"patch {verdict.fix}" if verdict.fix is not None else "no single fix alone"
    if verdict.ab is AB.REGRESSION:
        return f"regression vs stock ({cause})"
    if verdict.ab is AB.FIXED:
        return f"fixed by {cause}"
    if verdict.ab is AB.STILL_BROKEN:
        return f"still broken, changed by {cause}"
    return f"changed by {cause}"


def bc_text(verdict: Verdict) -> str:
    """Return the (b) vs (c) verdict as words."""
    if verdict.bc is BC.AGREE:
        return "agree"
    if verdict.bc is BC.DECLARED:
        return f"declared: {verdict.declared}"
    if verdict.bc is BC.INCOMPLETE:
        return "INCOMPLETE"
    return "UNDECLARED: " + ", ".join(d.value for d in verdict.bc_diffs)


def spec_text(info: CaseInfo | ProbeInfo) -> str:
    """Return a case's spec and quantisation, or 'probe'."""
    if isinstance(info, CaseInfo):
        return f"{info.spec} {info.quantize or 'fp'}"
    return "probe"


def item_label(item: ItemId) -> str:
    """Return a case's name, or ``probe:name``."""
    return item.name if item.kind is ItemKind.CASE else str(item)


def interest(verdict: Verdict) -> int:
    """Return the row group: 0 problems, 1 differs from stock, 2 the rest."""
    if verdict.failures:
        return 0
    return 1 if verdict.ab is not AB.SAME or verdict.bc is BC.DECLARED else 2


def ordered(report: Report) -> list[Verdict]:
    """Return the verdicts problems first, then differences from stock, then the rest."""
    return sorted(report.verdicts, key=interest)


# --- summary -------------------------------------------------------------------------------


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
    """Return the verdict lines that open every form of the report."""
    ab, bc = counts(report)
    items = len(report.verdicts)
    failures = report.failures
    if failures:
        lines = [f"FAIL: {len(failures)} problem(s) in {items} items"]
        for failure in failures:
            lines.extend(wrapped("  - ", failure, 4))
    else:
        declared = f" ({bc['declared']} declared difference)" if bc["declared"] else ""
        lines = [
            f"PASS: (b) stock + runtime patch and (c) the diff-patched build agree on"
            f" all {items} items{declared}"
        ]
    order = [AB.FIXED, AB.CHANGED, AB.REGRESSION, AB.STILL_BROKEN, AB.SAME]
    lines.append("vs stock (a): " + ", ".join(f"{ab[a.value]} {a.value}" for a in order))
    part = ""
    if report.shards:
        part = f"shard(s) {', '.join(str(s) for s in report.shards)} of"
        part = f"{part} {len(report.selection)} selected items; "
    lines.append(f"{part}{cache_line(report)}; {report.wall_seconds:.1f} s")
    return lines


def vgf_line(report: Report) -> str:
    """Say on how many cases VGF payloads were compared, and why the others were not."""
    compared, failed, executed = 0, 0, 0
    skipped: set[str] = set()
    not_run: set[str] = set()
    for verdict in report.verdicts:
        vgf = verdict.results[PathId.PATCHED].vgf
        if vgf is None:
            continue
        if vgf.state is TargetState.COMPARED:
            compared += 1
            if vgf.numerics is not None or vgf.numerics_error is not None:
                executed += 1
            elif vgf.run_reason:
                not_run.add(vgf.run_reason)
        elif vgf.state is TargetState.FAILED:
            failed += 1
        else:
            skipped.add(vgf.reason)
    text = f"VGF: payloads compared on {compared} case(s), lowering failed on {failed}"
    text += f", executed on {executed}"
    text += f" (not run: {'; '.join(sorted(not_run))})" if not_run else ""
    return text + (f"; skipped: {'; '.join(sorted(skipped))}" if skipped else "")


def path_lines(report: Report) -> list[str]:
    """Return one line per path: its Python, executorch, runtime patch, cache use."""
    lines = []
    for path in PATHS:
        info = report.workers[path]
        init, stats = info.init, report.stats.get(path, PathStats())
        lines.append(
            f"({path.value}) {path.label}: {info.python}, executorch"
            f" {init.executorch if init else '?'}, runtime patch {info.runtime_patch or 'none'};"
            f" {stats.ran} ran, {stats.cached} cached, {stats.workers} worker(s)"
        )
    return lines


def declared_lines(report: Report) -> list[str]:
    """Return each declared divergence, observed or not, with its reason."""
    seen = {v.declared for v in report.verdicts if v.declared}
    return [
        f"{d.id} [{d.item}] ({'observed' if d.id in seen else 'not observed in this run'}):"
        f" {d.reason}"
        for d in report.declared
    ]


def graph_changes(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Return the graph lines only ``before`` has and only ``after`` has."""
    return [g for g in before if g not in after], [g for g in after if g not in before]


def detail_lines(verdict: Verdict) -> list[str]:
    """Return what a reader needs to see about one item beyond its table row."""
    lines = []
    a, b, c = (verdict.results[p] for p in PATHS)
    if verdict.ab is not AB.SAME:
        diffs = ", ".join(d.value for d in verdict.ab_diffs)
        lines.append(f"(a) vs (b) differ in: {diffs}; attributed to {patch_name(verdict.fix)}")
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
        lines.append(f"(b) vs (c) differ in: {', '.join(d.value for d in verdict.bc_diffs)}")
        lines.append(f"(b): {status_text(b, limit=400)}")
        lines.append(f"(c): {status_text(c, limit=400)}")
    if verdict.claim_problem:
        lines.append(f"CLAIM NOT REPRODUCED: {verdict.claim_problem}")
    if Observation.VGF_NUMERICS in verdict.ab_diffs + verdict.bc_diffs:
        lines.append("executed VGF outputs differ between paths")
    if verdict.expectation_problem:
        lines.append(f"FINDING: {verdict.expectation_problem}")
    elif verdict.findings:
        targets = ", ".join(f.target for f in verdict.findings)
        lines.append(f"not right on any path ({targets}), as the case declares (see findings)")
    return lines


def payloads_text(payloads: Sequence[Payload]) -> str:
    """Return payloads as 'size B digest, ...' ('' for none)."""
    return ", ".join(f"{p.size} B {p.sha256[:12]}" for p in payloads)


def vgf_bytes(result: ItemResult) -> str:
    """Return a result's VGF payloads as 'size B digest', or 'none'."""
    return (payloads_text(result.vgf.payloads) if result.vgf else "") or "none"


# --- text ----------------------------------------------------------------------------------


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def table_rows(report: Report) -> list[list[str]]:
    """Return the table's rows (see HEADER), in reading order."""
    rows = []
    for verdict in ordered(report):
        a, b, c = (verdict.results[p] for p in PATHS)
        rows.append(
            [
                item_label(verdict.item),
                status_code(a),
                status_code(b),
                status_code(c),
                error_cell(c, verdict.info),
                ab_cell(verdict),
                bc_cell(verdict),
            ]
        )
    return rows


def fitted_table(rows: list[list[str]], width: int = WIDTH) -> list[str]:
    """Return the table as lines of at most ``width`` columns (long item names are cut)."""
    others = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(1, len(HEADER))]
    room = width - sum(others) - 2 * (len(HEADER) - 1)
    names = max(len(r[0]) for r in [HEADER, *rows])
    fitted = [[_cut(r[0], room), *r[1:]] for r in rows]
    return text_table(HEADER, fitted, max_width=max(min(names, room), *others))


def wrapped(first: str, text: str, indent: int) -> list[str]:
    """Return ``first + text`` wrapped to WIDTH columns, continuation lines indented."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    )


def legend_lines() -> list[str]:
    """Return the legend: every column explained, within WIDTH columns."""
    lines = ["legend:"]
    for label, text in LEGEND:
        lines.extend(wrapped(f"  {label:<9}", text, 11))
    return lines


# --- per target: findings, TOSA and executed VGF numbers per path, Ethos-U ----------------

NUMERICS_HEADER = ["path", "TOSA s", "err", "SQNR dB", "VGF s", "run s", "err", "SQNR dB"]
NUMERICS_NOTE = (
    "err: the largest output error against the fake-quantised reference, in % of that"
    " output's range; SQNR: the lowest output's, in dB; TOSA s / VGF s: lowering time,"
    " run s: running the VGF program on the emulation layer"
)
ETHOSU_HEADER = [
    "target",
    "paths",
    "stream KiB",
    "cycles",
    "NPU cycles",
    "SRAM KiB",
    "flash KiB",
    "CPU ops",
]
ETHOSU_NOTE = (
    "paths with the same outcome share a row; stream: the Vela command streams' size;"
    " cycles and memory: Vela's estimates; CPU ops: ops left outside the delegates"
)
Row = tuple[list[str], str]  # the cells, and a note printed under them ("" for none)


def seconds_cell(value: float | None) -> str:
    """Return seconds with one decimal, or '-'."""
    return "-" if value is None else f"{value:.1f}"


def _fail(error: ErrorInfo | None, short: bool) -> str:
    return "FAIL" if short or error is None else f"FAIL: {error.type}"


def numbers_cells(numerics: Numerics | None, error: ErrorInfo | None, short: bool) -> list[str]:
    """Return [err, SQNR] of one run: the worst output's error (% of range) and SQNR."""
    if error is not None:
        return [_fail(error, short), "-"]
    if numerics is None:
        return ["-", "-"]
    found = worst(numerics)
    if found is None:
        return ["shape!", "-"]
    fraction, sqnr = found
    return [f"{100 * fraction:.2f}%", "-" if sqnr is None else sqnr_text(sqnr)]


def numerics_rows(verdict: Verdict, *, short: bool = True) -> list[list[str]]:
    """Return one row per path (see NUMERICS_HEADER): TOSA and the executed VGF program."""
    rows = []
    for path in PATHS:
        result = verdict.results[path]
        vgf = result.vgf
        if vgf is None or vgf.state is TargetState.SKIPPED:
            vgf_cells = ["-", "-", "-", "-"]
        elif vgf.state is TargetState.FAILED:
            vgf_cells = [_fail(vgf.error, short), "-", "-", "-"]
        elif vgf.numerics is None and vgf.numerics_error is None:
            vgf_cells = [seconds_cell(vgf.lower_seconds), "-", "not run", "-"]
        else:
            vgf_cells = [
                seconds_cell(vgf.lower_seconds),
                seconds_cell(vgf.run_seconds),
                *numbers_cells(vgf.numerics, vgf.numerics_error, short),
            ]
        lowered = seconds_cell(result.lower_seconds) if result.ok else _fail(result.error, short)
        tosa = numbers_cells(result.numerics, result.numerics_error, short)
        rows.append([f"({path.value})", lowered, *tosa, *vgf_cells])
    return rows


def _ethos_outcome(result: EthosUResult) -> object:
    """Return what makes two paths' Ethos-U results the same row (timings left out)."""
    return dataclasses.replace(result, lower_seconds=None)


def ethos_groups(verdict: Verdict) -> list[tuple[str, EthosUResult]]:
    """Return (paths, result) per Ethos-U target and distinct outcome, e.g. ('abc', ...)."""
    found: dict[tuple[str, object], list[tuple[PathId, EthosUResult]]] = {}
    for path in PATHS:
        for result in verdict.results[path].ethos_u:
            found.setdefault((result.target, _ethos_outcome(result)), []).append((path, result))
    return [("".join(p.value for p, _ in group), group[0][1]) for group in found.values()]


def ethos_row(paths: str, result: EthosUResult) -> Row:
    """Return one Ethos-U row (see ETHOSU_HEADER) and its note (the failure or skip reason)."""
    if result.state is not TargetState.COMPARED:
        failed = result.state is TargetState.FAILED
        note = (result.error.first_line if result.error else "?") if failed else result.reason
        cells = [result.target, paths, "FAIL" if failed else "skipped"]
        return cells + ["-"] * (len(ETHOSU_HEADER) - len(cells)), note
    est = result.estimates
    return [
        result.target,
        paths,
        f"{sum(p.size for p in result.payloads) / 1024:.1f}" if result.payloads else "none",
        str(sum(e.cycles_total for e in est)),
        str(sum(e.cycles_npu for e in est)),
        f"{sum(e.sram_bytes for e in est) / 1024:.1f}",
        f"{sum(e.off_chip_flash_bytes for e in est) / 1024:.1f}",
        str(result.cpu_ops),
    ], ""


def findings_lines(report: Report) -> list[str]:
    """Return one line per item with findings: each target wrong (or failing) on every path."""
    lines = []
    for verdict in report.verdicts:
        if not verdict.findings:
            continue
        expected = expected_broken(verdict.info, report.executorch or None)
        known = f" (expected: {expected})" if expected else " (NOT EXPECTED)"
        lines.append(f"{verdict.item}: {'; '.join(f.text for f in verdict.findings)}{known}")
    return lines


def case_verdicts(report: Report) -> list[Verdict]:
    """Return the verdicts of the report's cases (not its probes)."""
    return [v for v in report.verdicts if v.item.kind is ItemKind.CASE]


def grouped_table(header: list[str], groups: Sequence[tuple[str, Sequence[Row]]]) -> list[str]:
    """Return a text table whose rows come in named groups, each name on a line of its own.

    The names (case names, often long) stay out of the columns, so the table fits WIDTH.
    """
    lines = text_table(header, [cells for _, rows in groups for cells, _ in rows])
    out, body = lines[:2], iter(lines[2:])
    for name, rows in groups:
        out.append(_cut(name, WIDTH))
        for _, note in rows:
            out.append(next(body))
            if note:
                out.extend(wrapped("    ", note, 6))
    return out


def target_sections_text(report: Report) -> list[str]:
    """Return the findings, the numbers per path and target, and Ethos-U, as text lines."""
    out = ["", "findings (a target wrong or failing on every path):"]
    for line in findings_lines(report) or ["none"]:
        out.extend(wrapped("  - ", line, 4))
    cases = case_verdicts(report)
    if cases:
        out += ["", "numbers per path (TOSA reference model, executed VGF):"]
        groups = [
            (f"{v.item} ({spec_text(v.info)})", [(r, "") for r in numerics_rows(v)]) for v in cases
        ]
        out += grouped_table(NUMERICS_HEADER, groups)
        out.extend(wrapped("", NUMERICS_NOTE, 0))
    ethos = [(str(v.item), [ethos_row(*g) for g in ethos_groups(v)]) for v in cases]
    ethos = [(name, rows) for name, rows in ethos if rows]
    if ethos:
        out += ["", "Ethos-U (Vela command streams and estimates):"]
        out += grouped_table(ETHOSU_HEADER, ethos)
        out.extend(wrapped("", ETHOSU_NOTE, 0))
    return out


def target_sections_markdown(report: Report) -> list[str]:
    """Return the same sections as Markdown (wide tables: one row per case and path)."""
    out = ["## Findings (wrong or failing on every path)", ""]
    out.extend(f"- {markdown_cell(line)}" for line in findings_lines(report) or ["none"])
    cases = case_verdicts(report)
    rows = [[item_label(v.item), *row] for v in cases for row in numerics_rows(v, short=False)]
    if rows:
        out += ["", "## Numbers per path", "", *markdown_table(["case", *NUMERICS_HEADER], rows)]
        out += ["", NUMERICS_NOTE]
    ethos = [
        [item_label(v.item), *ethos_markdown(paths, result)]
        for v in cases
        for paths, result in ethos_groups(v)
    ]
    if ethos:
        header = ["case", *ETHOSU_HEADER, "lower s", "command streams / why not"]
        out += ["", "## Ethos-U", "", *markdown_table(header, ethos), "", ETHOSU_NOTE]
    return [*out, ""]


def ethos_markdown(paths: str, result: EthosUResult) -> list[str]:
    """Return an Ethos-U row with the lowering time and the streams' digests (or the why)."""
    cells, note = ethos_row(paths, result)
    streams = payloads_text(result.payloads)
    return [*cells, seconds_cell(result.lower_seconds), note or streams or "no delegate"]


def render_table(report: Report) -> str:
    """Return the text report: verdict, table, legend, details, declared, paths."""
    out = [*headline(report), "", *fitted_table(table_rows(report)), "", *legend_lines()]
    details = [(v, detail_lines(v)) for v in ordered(report)]
    if any(lines for _, lines in details):
        out += ["", "details:"]
        for verdict, lines in details:
            if lines:
                out.extend(wrapped("  ", f"{verdict.item} ({spec_text(verdict.info)})", 4))
                for text in lines:
                    out.extend(wrapped("    ", text, 6))
    out += target_sections_text(report)
    out += ["", "declared divergences (b vs c):"]
    for text in declared_lines(report):
        out.extend(wrapped("  - ", text, 4))
    out += ["", "paths:"]
    for text in path_lines(report):
        out.extend(wrapped("  ", text, 4))
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
    out.extend(wrapped("", vgf_line(report), 2))
    out.extend(wrapped("", f"wall time {report.wall_seconds:.1f} s ({phases})", 2))
    return "\n".join(out) + "\n"


def render_markdown(report: Report) -> str:
    """Return the report as Markdown (verdict first)."""
    out = ["# Equivalence report", ""]
    out.extend(f"{markdown_cell(line)}  " for line in headline(report))
    header = [HEADER[0], "spec", *HEADER[1:]]
    rows = [
        [r[0], spec_text(v.info), *r[1:]]
        for r, v in zip(table_rows(report), ordered(report), strict=True)
    ]
    out += ["", *markdown_table(header, rows), ""]
    out.extend(f"- **{markdown_cell(label)}**: {markdown_cell(text)}" for label, text in LEGEND)
    out += ["", "## Differences", ""]
    for verdict in ordered(report):
        lines = detail_lines(verdict)
        if lines:
            out.append(f"### `{verdict.item}` ({spec_text(verdict.info)})")
            out.extend(f"- {markdown_cell(text)}" for text in lines)
            out.append("")
    out += target_sections_markdown(report)
    out += ["## Declared divergences", ""]
    out.extend(f"- {markdown_cell(text)}" for text in declared_lines(report))
    out += ["", "## Paths", ""]
    out.extend(f"- {markdown_cell(text)}" for text in path_lines(report))
    out += ["", f"{vgf_line(report)}  ", f"wall time {report.wall_seconds:.1f} s"]
    return "\n".join(out) + "\n"


# --- JSON ----------------------------------------------------------------------------------


def _options_data(options: Options) -> dict[str, JsonValue]:
    return {
        "stock_python": options.stock_python,
        "patched_python": options.patched_python,
        "runtime_patch": options.runtime_patch,
        "models": options.models,
        "with_corpus": options.with_corpus,
        "fast": options.fast,
        "only": list(options.only),
        "group": options.group,
        "probes": options.probes,
        "attribute": options.attribute,
        "parallel": options.parallel,
        "keep_bytes": options.keep_bytes,
        "shard": str(options.shard) if options.shard else None,
    }


def _item_data(verdict: Verdict) -> dict[str, JsonValue]:
    return {
        "item": str(verdict.item),
        "kind": verdict.item.kind.value,
        "name": verdict.item.name,
        "info": codec.encode(verdict.info),
        "a_vs_b": {
            "verdict": verdict.ab.value,
            "fix": verdict.fix,
            "differs_in": [d.value for d in verdict.ab_diffs],
        },
        "b_vs_c": {
            "verdict": verdict.bc.value,
            "declared": verdict.declared,
            "differs_in": [d.value for d in verdict.bc_diffs],
        },
        "quality": {p.value: q.value for p, q in verdict.quality.items()},
        "targets": {
            p.value: {target: q.value for target, q in judged.items()}
            for p, judged in verdict.targets.items()
        },
        "findings": [codec.encode(f) for f in verdict.findings],
        "expectation_problem": verdict.expectation_problem,
        "claim_problem": verdict.claim_problem,
        "results": {p.value: codec.encode(r) for p, r in verdict.results.items()},
    }


def to_data(report: Report) -> dict[str, JsonValue]:
    """Return the whole report as JSON data (every path's full result included)."""
    ab, bc = counts(report)
    return {
        "schema": REPORT_SCHEMA,
        "tool": {"name": TOOL, "version": overlay.__version__},
        "created": report.created or datetime.now(UTC).isoformat(timespec="seconds"),
        "verdict": "fail" if report.failures else "pass",
        "failures": list(report.failures),
        "summary": {
            "items": len(report.verdicts),
            "selected": len(report.selection),
            "a_vs_b": {a.value: ab[a.value] for a in AB},
            "b_vs_c": {b.value: bc[b.value] for b in BC},
        },
        "selection": [str(item) for item in report.selection],
        "shards": [codec.encode(s) for s in report.shards],
        "merged": report.merged,
        "executorch": report.executorch,
        "keys": codec.encode(report.keys) if report.keys else None,
        "options": _options_data(report.options),
        "workers": {p.value: codec.encode(info) for p, info in report.workers.items()},
        "stats": {p.value: codec.encode(s) for p, s in report.stats.items()},
        "declared_divergences": [codec.encode(d) for d in report.declared],
        "wall_seconds": report.wall_seconds,
        "phase_seconds": dict(report.phase_seconds),
        "items": [_item_data(v) for v in report.verdicts],
    }


def render_json(report: Report) -> str:
    """Return the JSON text of the report."""
    return json.dumps(to_data(report), indent=2, sort_keys=True) + "\n"


def _item_id(text: str) -> ItemId:
    kind, _, name = text.partition(":")
    return ItemId(ItemKind(kind), name)


def load(path: Path) -> Report:
    """Read a report JSON back into a Report (verdicts decided again from its results)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EquivalenceError(
            f"cannot read the report {path}",
            expected="an equivalence.json written by `python -m overlay equivalence`",
            found=str(exc),
            hint="pass the equivalence.json of each shard",
        ) from exc
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise EquivalenceError(
            f"{path} is not an equivalence report of schema {REPORT_SCHEMA}",
            expected=f"schema {REPORT_SCHEMA} ({TOOL} {overlay.__version__})",
            found=f"schema {data.get('schema') if isinstance(data, dict) else None!r}",
            hint="re-run the shards with this version of the overlay",
        )
    try:
        return _from_data(data)
    except (ProtocolError, KeyError, TypeError, ValueError) as exc:
        raise EquivalenceError(
            f"{path} does not hold a valid equivalence report",
            expected=f"the fields of report schema {REPORT_SCHEMA} (see report-schema)",
            found=str(exc)[:300],
            hint="re-run the shard that wrote it",
        ) from exc


def _from_data(data: dict[str, Any]) -> Report:
    given = data["options"]
    options = Options(
        stock_python=given["stock_python"],
        patched_python=given["patched_python"],
        runtime_patch=given["runtime_patch"],
        models=given["models"],
        with_corpus=given["with_corpus"],
        fast=given["fast"],
        only=tuple(given["only"]),
        group=given["group"],
        probes=given["probes"],
        attribute=given["attribute"],
        parallel=given["parallel"],
        keep_bytes=given["keep_bytes"],
        shard=Shard.parse(given["shard"]) if given["shard"] else None,
    )
    verdicts = []
    for entry in data["items"]:
        item = _item_id(entry["item"])
        info: CaseInfo | ProbeInfo = (
            from_json(CaseInfo, entry["info"], f"{item}.info")
            if item.kind is ItemKind.CASE
            else from_json(ProbeInfo, entry["info"], f"{item}.info")
        )
        results = {
            PathId(p): from_json(ItemResult, r, f"{item}.results.{p}")
            for p, r in entry["results"].items()
        }
        version = str(data["executorch"]) or None
        verdicts.append(decide(item, info, results, entry["a_vs_b"]["fix"], version=version))
    declared = {d.id: d for d in DECLARED_DIVERGENCES}
    return Report(
        options=options,
        workers={PathId(p): from_json(WorkerInfo, w) for p, w in data["workers"].items()},
        verdicts=tuple(verdicts),
        declared=tuple(
            declared[d["id"]] for d in data["declared_divergences"] if d["id"] in declared
        ),
        wall_seconds=float(data["wall_seconds"]),
        phase_seconds={str(k): float(v) for k, v in data["phase_seconds"].items()},
        stats={PathId(p): from_json(PathStats, s) for p, s in data["stats"].items()},
        keys=from_json(Keys, data["keys"]) if data["keys"] else None,
        created=str(data["created"]),
        selection=tuple(_item_id(i) for i in data["selection"]),
        shards=tuple(from_json(Shard, s) for s in data["shards"]),
        merged=bool(data["merged"]),
        executorch=str(data["executorch"]),
    )


def _refuse(what: str, expected: str, found: str) -> EquivalenceError:
    return EquivalenceError(
        f"cannot merge these reports: {what}",
        expected=expected,
        found=found,
        hint="merge the equivalence.json of every shard of one run (same --shard N, same"
        " inputs, same overlay version)",
    )


def merge(reports: Sequence[Report]) -> Report:
    """Join shard reports of one run into one report (refusing shards of different runs)."""
    if not reports:
        raise _refuse("no reports", "one equivalence.json per shard", "none")
    first = reports[0]
    for report in reports:
        if not report.shards:
            raise _refuse("a report is not a shard", "reports made with --shard K/N", "a whole run")
        if report.keys != first.keys:
            raise _refuse(
                "the shards ran different inputs",
                "the same environments, runtime patch, models and overlay sources",
                _key_difference(first.keys, report.keys),
            )
        if report.selection != first.selection:
            raise _refuse(
                "the shards selected different items",
                "the same options (--fast, --case, --models) on every shard",
                f"{len(first.selection)} vs {len(report.selection)} selected items",
            )
    shards = sorted(s for r in reports for s in r.shards)
    counts_ = {s.count for s in shards}
    repeated = [str(s) for s, n in Counter(shards).items() if n > 1]
    if len(counts_) != 1 or repeated:
        raise _refuse(
            "shard numbers do not fit together",
            "K/N with one N and every K once",
            ", ".join(str(s) for s in shards),
        )
    by_item: dict[ItemId, Verdict] = {}
    for report in reports:
        for verdict in report.verdicts:
            by_item[verdict.item] = verdict
    order = {item: index for index, item in enumerate(first.selection)}
    stats = {
        p: PathStats(
            **{
                f.name: sum(getattr(r.stats.get(p, PathStats()), f.name) for r in reports)
                for f in dataclasses.fields(PathStats)
            }
        )
        for p in PATHS
    }
    return dataclasses.replace(
        first,
        options=dataclasses.replace(first.options, shard=None),
        verdicts=tuple(sorted(by_item.values(), key=lambda v: order.get(v.item, len(order)))),
        wall_seconds=max(r.wall_seconds for r in reports),
        phase_seconds={f"shard {s}": r.wall_seconds for r in reports for s in r.shards},
        stats=stats,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        shards=tuple(shards),
        merged=True,
    )


def _key_difference(a: Keys | None, b: Keys | None) -> str:
    if a is None or b is None:
        return "a report without cache keys"
    if a.base != b.base:
        return "another overlay version or sources (or pins.toml)"
    for path in PATHS:
        if a.paths.get(path) != b.paths.get(path):
            return f"path ({path.value}) {path.label} ran another environment or runtime patch"
    return "another models file"


# --- JSON Schema ---------------------------------------------------------------------------

_JSON_HINT = typing.get_type_hints(ItemResult)["value"]


def _schema_of(hint: Any, defs: dict[str, JsonValue]) -> JsonValue:
    """Return the JSON Schema of a protocol type (mirrors the protocol's strict decoder)."""
    if hint is JsonValue or hint == _JSON_HINT:
        return {}
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema_of(option, defs) for option in get_args(hint)]}
    if origin is tuple:
        return {"type": "array", "items": _schema_of(get_args(hint)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(get_args(hint)[1], defs)}
    if hint is type(None):
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        name = hint.__name__
        if name not in defs:
            defs[name] = {}  # a placeholder stops recursion
            hints = typing.get_type_hints(hint)
            fields = dataclasses.fields(hint)
            defs[name] = {
                "type": "object",
                "description": (hint.__doc__ or "").strip().splitlines()[0],
                "properties": {f.name: _schema_of(hints[f.name], defs) for f in fields},
                "required": [
                    f.name
                    for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                ],
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    simple = {float: "number", int: "integer", bool: "boolean", str: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON Schema for {hint!r}")


def json_schema() -> dict[str, JsonValue]:
    """Return the JSON Schema of ``equivalence.json`` (derived from the typed results)."""
    defs: dict[str, JsonValue] = {}

    def of(hint: Any) -> JsonValue:
        return _schema_of(hint, defs)

    def obj(properties: dict[str, JsonValue]) -> dict[str, JsonValue]:
        required: list[JsonValue] = [*sorted(properties)]
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    string: JsonValue = {"type": "string"}
    number: JsonValue = {"type": "number"}
    paths: list[JsonValue] = [p.value for p in PATHS]

    def per_path(schema: JsonValue) -> dict[str, JsonValue]:
        return {
            "type": "object",
            "propertyNames": {"enum": paths},
            "additionalProperties": schema,
        }

    def tally(kind: type[enum.Enum]) -> dict[str, JsonValue]:
        return obj({m.value: {"type": "integer", "minimum": 0} for m in kind})

    observations: JsonValue = {"type": "array", "items": of(Observation)}
    item = obj(
        {
            "item": string,
            "kind": of(ItemKind),
            "name": string,
            "info": {"anyOf": [of(CaseInfo), of(ProbeInfo)]},
            "a_vs_b": obj({"verdict": of(AB), "fix": of(int | None), "differs_in": observations}),
            "b_vs_c": obj(
                {"verdict": of(BC), "declared": of(str | None), "differs_in": observations}
            ),
            "quality": per_path(of(Quality)),
            "targets": per_path({"type": "object", "additionalProperties": of(Quality)}),
            "findings": {"type": "array", "items": of(Finding)},
            "expectation_problem": of(str | None),
            "claim_problem": of(str | None),
            "results": per_path(of(ItemResult)),
        }
    )
    options = obj(
        {
            "stock_python": string,
            "patched_python": string,
            "runtime_patch": string,
            "models": of(str | None),
            "with_corpus": of(bool),
            "fast": of(bool),
            "only": {"type": "array", "items": string},
            "group": {"anyOf": [{"enum": [*corpus.GROUPS, "all"]}, {"type": "null"}]},
            "probes": of(bool),
            "attribute": of(bool),
            "parallel": of(bool),
            "keep_bytes": of(bool),
            "shard": {
                "anyOf": [{"type": "string", "pattern": "^[0-9]+/[0-9]+$"}, {"type": "null"}]
            },
        }
    )
    schema: dict[str, JsonValue] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "equivalence.json",
        "description": f"An equivalence report of {TOOL}: verdict first, every path's results.",
        **obj(
            {
                "schema": {"const": REPORT_SCHEMA},
                "tool": obj({"name": {"const": TOOL}, "version": string}),
                "created": {"type": "string", "format": "date-time"},
                "verdict": {"enum": ["pass", "fail"]},
                "failures": {"type": "array", "items": string},
                "summary": obj(
                    {
                        "items": {"type": "integer", "minimum": 0},
                        "selected": {"type": "integer", "minimum": 0},
                        "a_vs_b": tally(AB),
                        "b_vs_c": tally(BC),
                    }
                ),
                "selection": {"type": "array", "items": string},
                "shards": {"type": "array", "items": of(Shard)},
                "merged": of(bool),
                "executorch": string,
                "keys": {"anyOf": [of(Keys), {"type": "null"}]},
                "options": options,
                "workers": per_path(of(WorkerInfo)),
                "stats": per_path(of(PathStats)),
                "declared_divergences": {"type": "array", "items": of(DeclaredDivergence)},
                "wall_seconds": number,
                "phase_seconds": {"type": "object", "additionalProperties": number},
                "items": {"type": "array", "items": item},
            }
        ),
    }
    schema["$defs"] = dict(sorted(defs.items()))
    return schema


def render_schema() -> str:
    """Return the JSON Schema as the text committed beside this module."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


SCHEMA_FILE = Path(__file__).with_name("report.schema.json")
