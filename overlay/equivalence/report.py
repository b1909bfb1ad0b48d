"""Render an equivalence Report as a terminal table, JSON and Markdown (strings only)."""

from __future__ import annotations

import json
import math

from overlay._table import markdown_cell, markdown_table, text_table
from overlay.equivalence.orchestrator import PATHS, Report, patch_name
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    ItemKind,
    ItemResult,
    JsonValue,
    Numerics,
    PathId,
    VgfState,
    to_json,
)
from overlay.equivalence.verdict import AB, BC, Observation, Verdict

REPORT_SCHEMA = 1
HEADER = ["item", "spec", "(a) stock", "(b) runtime", "(c) diffs", "err(c)", "a vs b", "b vs c"]


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


def max_error(result: ItemResult) -> str:
    """Return the max abs error vs the float model, over all outputs, as text."""
    values = result.numerics.max_abs_err_vs_float if result.numerics else ()
    known = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(known) != len(values):
        return "shape!"
    return f"{max(known):.3g}"


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


def _detail_lines(verdict: Verdict) -> list[str]:
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
            lines.append(f"stock-only graph lines: {_only(a.graph, b.graph)}")
            lines.append(f"patched-only graph lines: {_only(b.graph, a.graph)}")
        if Observation.NUMERICS in verdict.ab_diffs:
            lines.append(f"max abs error vs float: stock {max_error(a)}, patched {max_error(b)}")
        if Observation.VGF_PAYLOAD in verdict.ab_diffs:
            lines.append(f"VGF payloads: stock {_vgf_bytes(a)}, patched {_vgf_bytes(b)}")
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
    return lines


def _vgf_bytes(result: ItemResult) -> str:
    if result.vgf is None or not result.vgf.payloads:
        return "none"
    return ", ".join(f"{p.size} B {p.sha256[:12]}" for p in result.vgf.payloads)


def _only(these: tuple[str, ...], others: tuple[str, ...]) -> str:
    return "; ".join(g for g in these if g not in others) or "none"


def _spec(verdict: Verdict) -> str:
    info = verdict.info
    if isinstance(info, CaseInfo):
        return f"{info.spec} {info.quantize or 'fp'}"
    return "probe"


def _rows(report: Report) -> list[list[str]]:
    rows = []
    for verdict in report.verdicts:
        a, b, c = (verdict.results[p] for p in PATHS)
        rows.append(
            [
                verdict.item.name,
                _spec(verdict),
                status_text(a, limit=40),
                status_text(b, limit=40),
                status_text(c, limit=40),
                max_error(c),
                ab_text(verdict),
                bc_text(verdict),
            ]
        )
    return rows


def vgf_line(report: Report) -> str:
    """Say on how many cases VGF payloads were compared, and why the others were not."""
    compared, failed, skipped, executed, not_run = 0, 0, set(), 0, set()
    for verdict in report.verdicts:
        vgf = verdict.results[PathId.PATCHED].vgf
        if vgf is None:
            continue
        if vgf.state is VgfState.COMPARED:
            compared += 1
            if vgf.numerics is not None or vgf.numerics_error is not None:
                executed += 1
            elif vgf.run_reason:
                not_run.add(vgf.run_reason)
        elif vgf.state is VgfState.FAILED:
            failed += 1
        else:
            skipped.add(vgf.reason)
    text = f"VGF: payloads compared on {compared} case(s), lowering failed on {failed}"
    text += f", executed on {executed}"
    text += f" (not run: {'; '.join(sorted(not_run))})" if not_run else ""
    return text + (f"; skipped: {'; '.join(sorted(skipped))}" if skipped else "")


def _summary(report: Report) -> list[str]:
    counts: dict[str, int] = {}
    for verdict in report.verdicts:
        counts[verdict.bc.value] = counts.get(verdict.bc.value, 0) + 1
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
    lines = [
        f"{len(report.verdicts)} items; b vs c: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        f"wall time {report.wall_seconds:.1f} s ({phases})",
        vgf_line(report),
    ]
    failures = report.failures
    lines.append("verdict: " + ("FAIL" if failures else "PASS (b and c equivalent)"))
    lines.extend(f"  - {f}" for f in failures)
    return lines


def _paths(report: Report) -> list[str]:
    lines = []
    for path in PATHS:
        info = report.workers[path]
        init = info.init
        lines.append(
            f"({path.value}) {path.label}: {info.python} executorch"
            f" {init.executorch if init else '?'}, runtime patch {info.runtime_patch or 'none'},"
            f" import {init.import_seconds if init else 0.0:.1f} s"
        )
    return lines


def _declared(report: Report) -> list[str]:
    seen = {v.declared for v in report.verdicts if v.declared}
    return [
        f"{d.id} [{d.item}] ({'observed' if d.id in seen else 'not observed in this run'}):"
        f" {d.reason}"
        for d in report.declared
    ]


def render_table(report: Report) -> str:
    """Return the terminal table with paths, verdicts, details and declared divergences."""
    out = [*_paths(report), "", *text_table(HEADER, _rows(report))]
    details = [(v, _detail_lines(v)) for v in report.verdicts]
    if any(lines for _, lines in details):
        out += ["", "details:"]
        for verdict, lines in details:
            if lines:
                out.append(f"  {verdict.item}")
                out.extend(f"    {text}" for text in lines)
    out += target_sections_text(report)
    out += ["", "declared divergences (b vs c):"]
    out.extend(f"  - {text}" for text in _declared(report))
    out += ["", *_summary(report)]
    return "\n".join(out) + "\n"


def render_markdown(report: Report) -> str:
    """Return the report as Markdown."""
    out = ["# Equivalence report", ""]
    out.extend(f"- {markdown_cell(text)}" for text in _paths(report))
    out += ["", *markdown_table(HEADER, _rows(report)), "", "## Differences", ""]
    for verdict in report.verdicts:
        lines = _detail_lines(verdict)
        if lines:
            out.append(f"### `{verdict.item}`")
            out.extend(f"- {markdown_cell(text)}" for text in lines)
            out.append("")
    out += target_sections_markdown(report)
    out += ["## Declared divergences", ""]
    out.extend(f"- {markdown_cell(text)}" for text in _declared(report))
    out += ["", "## Verdict", ""]
    out.extend(f"{text}  " for text in _summary(report))
    return "\n".join(out) + "\n"


def to_data(report: Report) -> dict[str, JsonValue]:
    """Return the whole report as JSON data (results of every path included)."""
    options = report.options
    return {
        "schema": REPORT_SCHEMA,
        "verdict": "fail" if report.failures else "pass",
        "failures": list(report.failures),
        "options": {
            "stock_python": options.stock_python,
            "patched_python": options.patched_python,
            "runtime_patch": options.runtime_patch,
            "models": options.models,
            "fast": options.fast,
            "only": list(options.only),
            "group": options.group,
            "parallel": options.parallel,
        },
        "workers": {p.value: to_json(info) for p, info in report.workers.items()},
        "declared_divergences": [to_json(d) for d in report.declared],
        "wall_seconds": report.wall_seconds,
        "phase_seconds": dict(report.phase_seconds),
        "items": [
            {
                "item": str(v.item),
                "kind": v.item.kind.value,
                "info": to_json(v.info),
                "a_vs_b": {
                    "verdict": v.ab.value,
                    "fix": v.fix,
                    "differs_in": [d.value for d in v.ab_diffs],
                },
                "b_vs_c": {
                    "verdict": v.bc.value,
                    "declared": v.declared,
                    "differs_in": [d.value for d in v.bc_diffs],
                },
                "quality": {p.value: q.value for p, q in v.quality.items()},
                "targets": {
                    p.value: {t: q.value for t, q in judged.items()}
                    for p, judged in v.targets.items()
                },
                "findings": [to_json(f) for f in v.findings],
                "expectation_problem": v.expectation_problem,
                "claim_problem": v.claim_problem,
                "results": {p.value: to_json(r) for p, r in v.results.items()},
            }
            for v in report.verdicts
        ],
    }


def render_json(report: Report) -> str:
    """Return the JSON text of the report."""
    return json.dumps(to_data(report), indent=2, sort_keys=True) + "\n"


def count_cases(report: Report) -> int:
    """Return how many items of the report are cases."""
    return sum(1 for v in report.verdicts if v.item.kind is ItemKind.CASE)


# --- per-target numbers (added with the zoo: executed VGF, Ethos-U, SQNR) -----------------

NUMERICS_HEADER = [
    "case",
    "path",
    "TOSA lower s",
    "TOSA err/range",
    "TOSA SQNR dB",
    "VGF lower s",
    "VGF run s",
    "VGF err/range",
    "VGF SQNR dB",
]
ETHOSU_HEADER = [
    "case",
    "target",
    "path",
    "command stream",
    "cycles",
    "NPU cycles",
    "SRAM KiB",
    "flash KiB",
    "CPU ops",
    "lower s",
]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _fraction_and_sqnr(numerics: Numerics | None, error: ErrorInfo | None) -> tuple[str, str]:
    if error is not None:
        return f"FAIL: {error.type}", "-"
    if numerics is None:
        return "-", "-"
    scales = numerics.reference_range or numerics.reference_max_abs
    fractions = [
        (e / s if s else 0.0) if e is not None else None
        for e, s in zip(numerics.max_abs_err_vs_fake_quant, scales, strict=False)
    ]
    if any(f is None for f in fractions):
        return "shape!", "-"
    known = [s for s in numerics.sqnr_db if s is not None]
    sqnr = min(known) if known else None
    sqnr_text = "-" if sqnr is None else ("inf" if math.isinf(sqnr) and sqnr > 0 else f"{sqnr:.1f}")
    return f"{100 * max(f for f in fractions if f is not None):.2f}%", sqnr_text


def numerics_rows(report: Report) -> list[list[str]]:
    """Return one row per case and path: lowering time, error/range and SQNR per target."""
    rows = []
    for verdict in report.verdicts:
        if verdict.item.kind is not ItemKind.CASE:
            continue
        for path in PATHS:
            result = verdict.results[path]
            tosa = _fraction_and_sqnr(result.numerics, result.numerics_error)
            vgf = result.vgf
            if vgf is None or vgf.state is VgfState.SKIPPED:
                vgf_cells = ["-", "-", "-", "-"]
            elif vgf.state is VgfState.FAILED:
                vgf_cells = [f"FAIL: {vgf.error.type if vgf.error else '?'}", "-", "-", "-"]
            else:
                run = _fraction_and_sqnr(vgf.numerics, vgf.numerics_error)
                if vgf.numerics is None and vgf.numerics_error is None:
                    run = ("not run", "-")
                vgf_cells = [_seconds(vgf.lower_seconds), _seconds(vgf.run_seconds), *run]
            status = "" if result.ok else f"FAIL: {result.error.type if result.error else '?'}"
            rows.append(
                [
                    verdict.item.name,
                    f"({path.value})",
                    _seconds(result.lower_seconds) if result.ok else status,
                    *tosa,
                    *vgf_cells,
                ]
            )
    return rows


def ethos_rows(report: Report) -> list[list[str]]:
    """Return one row per case, Ethos-U target and path: bytes and Vela's estimates."""
    rows = []
    for verdict in report.verdicts:
        for path in PATHS:
            for ethos in verdict.results[path].ethos_u:
                if ethos.state is not VgfState.COMPARED:
                    text = (
                        ethos.reason
                        if ethos.state is VgfState.SKIPPED
                        else "FAIL: " + (ethos.error.first_line if ethos.error else "?")
                    )
                    rows.append([verdict.item.name, ethos.target, f"({path.value})", text])
                    continue
                stream = ", ".join(f"{p.size} B {p.sha256[:8]}" for p in ethos.payloads)
                est = ethos.estimates
                rows.append(
                    [
                        verdict.item.name,
                        ethos.target,
                        f"({path.value})",
                        stream or "no delegate",
                        str(sum(e.cycles_total for e in est)),
                        str(sum(e.cycles_npu for e in est)),
                        f"{sum(e.sram_bytes for e in est) / 1024:.1f}",
                        f"{sum(e.off_chip_flash_bytes for e in est) / 1024:.1f}",
                        str(ethos.cpu_ops),
                        _seconds(ethos.lower_seconds),
                    ]
                )
    return rows


def findings_lines(report: Report) -> list[str]:
    """Return one line per finding: a target wrong (or failing) on every path."""
    lines = []
    for verdict in report.verdicts:
        info = verdict.info
        expected = info.expect_broken if isinstance(info, CaseInfo) else ""
        for finding in verdict.findings:
            known = f" (expected: {expected})" if expected else " (NOT EXPECTED)"
            lines.append(f"{verdict.item}: {finding.text}{known}")
    return lines


def _padded(rows: list[list[str]], width: int) -> list[list[str]]:
    return [row + [""] * (width - len(row)) for row in rows]


def target_sections_text(report: Report) -> list[str]:
    """Return the findings, the per-target numerics and the Ethos-U table as text lines."""
    out = ["", "findings (wrong or failing on every path):"]
    out.extend(f"  - {line}" for line in findings_lines(report) or ["none"])
    rows = numerics_rows(report)
    if rows:
        out += ["", "numerics per path (vs the fake-quantised model):"]
        out += text_table(NUMERICS_HEADER, rows)
    ethos = ethos_rows(report)
    if ethos:
        out += ["", "Ethos-U (Vela command streams and estimates):"]
        out += text_table(ETHOSU_HEADER, _padded(ethos, len(ETHOSU_HEADER)))
    return out


def target_sections_markdown(report: Report) -> list[str]:
    """Return the same sections as Markdown."""
    out = ["## Findings (wrong or failing on every path)", ""]
    out.extend(f"- {markdown_cell(line)}" for line in findings_lines(report) or ["none"])
    rows = numerics_rows(report)
    if rows:
        out += ["", "## Numerics per path", "", *markdown_table(NUMERICS_HEADER, rows)]
    ethos = ethos_rows(report)
    if ethos:
        out += ["", "## Ethos-U", ""]
        out += markdown_table(ETHOSU_HEADER, _padded(ethos, len(ETHOSU_HEADER)))
    return [*out, ""]
