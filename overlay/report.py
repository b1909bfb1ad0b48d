"""Render an equivalence Report as a terminal table, JSON and Markdown (strings only)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from overlay.equivalence import PATH_TITLES, PATHS, ItemVerdict, Report, patch_name


def status_text(result: dict[str, Any], *, limit: int = 160) -> str:
    """Return 'OK' or 'FAIL: Type: first line of message' for one path's result."""
    if result.get("status") == "ok":
        numerics = result.get("numerics") or {}
        if "error" in numerics:
            return f"OK (numerics FAIL: {numerics['error'].get('type')})"
        return "OK"
    error = result.get("error") or {}
    message = str(error.get("message", "")).strip().splitlines()
    first = message[0] if message else ""
    text = f"FAIL: {error.get('type')}: {first}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def max_error(result: dict[str, Any]) -> str:
    """Return the max abs error vs the float model, over all outputs, as text."""
    values = (result.get("numerics") or {}).get("max_abs_err_vs_float") or []
    known = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(known) != len(values):
        return "shape!"
    return f"{max(known):.3g}"


def ab_text(verdict: ItemVerdict) -> str:
    """Return the (a) vs (b) verdict as words."""
    if verdict.ab == "same":
        return "same as stock"
    cause = f"patch {verdict.fix}" if verdict.fix is not None else "no single fix alone"
    if verdict.ab == "regression":
        return f"regression vs stock ({cause})"
    if verdict.ab == "fixed":
        return f"fixed by {cause}"
    return f"changed by {cause}"


def bc_text(verdict: ItemVerdict) -> str:
    """Return the (b) vs (c) verdict as words."""
    if verdict.bc == "agree":
        return "agree"
    if verdict.bc == "declared":
        return f"declared: {verdict.declared}"
    return "UNDECLARED: " + ", ".join(verdict.bc_diffs)


def _detail_lines(verdict: ItemVerdict) -> list[str]:
    lines = []
    a, b, c = (verdict.results[p] for p in PATHS)
    if verdict.ab != "same":
        lines.append(
            f"(a) vs (b) differ in: {', '.join(verdict.ab_diffs)}; attributed to"
            f" {patch_name(verdict.fix)}"
        )
        if verdict.ab == "regression" and a.get("status") == "ok" and b.get("status") != "ok":
            lines.append(f"stock OK, patched FAIL: {status_text(b, limit=400)[6:]}")
        elif verdict.ab == "fixed" and a.get("status") != "ok" and b.get("status") == "ok":
            lines.append(f"stock FAIL, patched OK; stock: {status_text(a, limit=400)[6:]}")
        elif "graph" in verdict.ab_diffs:
            stock_only = [g for g in a.get("graph", []) if g not in b.get("graph", [])]
            patched_only = [g for g in b.get("graph", []) if g not in a.get("graph", [])]
            lines.append(f"stock-only graph lines: {stock_only}")
            lines.append(f"patched-only graph lines: {patched_only}")
        if "numerics" in verdict.ab_diffs:
            lines.append(f"max abs error vs float: stock {max_error(a)}, patched {max_error(b)}")
        if "value" in verdict.ab_diffs:
            lines.append(f"stock: {json.dumps(a.get('value'))}")
            lines.append(f"patched: {json.dumps(b.get('value'))}")
    if verdict.bc != "agree":
        lines.append(f"(b) vs (c) differ in: {', '.join(verdict.bc_diffs)}")
        lines.append(f"(b): {status_text(b, limit=400)}")
        lines.append(f"(c): {status_text(c, limit=400)}")
    if verdict.claim_problem:
        lines.append(f"CLAIM NOT REPRODUCED: {verdict.claim_problem}")
    return lines


def _rows(report: Report) -> list[list[str]]:
    rows = []
    for verdict in report.verdicts:
        info = verdict.info
        what = (
            f"{info.get('spec')} {info.get('quantize') or 'fp'}"
            if verdict.item.startswith("case:")
            else "probe"
        )
        a, b, c = (verdict.results[p] for p in PATHS)
        rows.append(
            [
                verdict.name,
                what,
                status_text(a, limit=40),
                status_text(b, limit=40),
                status_text(c, limit=40),
                max_error(c),
                ab_text(verdict),
                bc_text(verdict),
            ]
        )
    return rows


HEADER = ["item", "spec", "(a) stock", "(b) runtime", "(c) diffs", "err(c)", "a vs b", "b vs c"]


def vgf_line(report: Report) -> str:
    """Say on how many cases VGF payloads were compared, and why the others were not."""
    compared, failed, skipped = 0, 0, set()
    for verdict in report.verdicts:
        vgf = (verdict.results.get("c") or {}).get("vgf") or {}
        if "payloads" in vgf:
            compared += 1
        elif "error" in vgf:
            failed += 1
        elif "skipped" in vgf:
            skipped.add(str(vgf["skipped"]))
    text = f"VGF: payloads compared on {compared} case(s), lowering failed on {failed}"
    return text + (f"; skipped: {'; '.join(sorted(skipped))}" if skipped else "")


def _summary(report: Report) -> list[str]:
    counts: dict[str, int] = {}
    for verdict in report.verdicts:
        counts[verdict.bc] = counts.get(verdict.bc, 0) + 1
    lines = [
        f"{len(report.verdicts)} items; b vs c: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        f"wall time {report.wall_seconds:.1f} s ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
        + ")",
    ]
    lines.append(vgf_line(report))
    failures = report.failures
    lines.append("verdict: " + ("FAIL" if failures else "PASS (b and c equivalent)"))
    lines.extend(f"  - {f}" for f in failures)
    return lines


def _paths(report: Report) -> list[str]:
    lines = []
    for path in PATHS:
        info = report.workers.get(path, {})
        lines.append(
            f"({path}) {PATH_TITLES[path]}: {info.get('python')} executorch"
            f" {info.get('executorch')}, runtime patch {info.get('runtime_patch') or 'none'},"
            f" import {info.get('import_seconds', 0):.1f} s"
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
    rows = _rows(report)
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    widths = [min(w, 60) for w in widths]

    def line(cells: list[str]) -> str:
        return "  ".join(cell[:w].ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    out = [*_paths(report), "", line(HEADER), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    details = [(v, _detail_lines(v)) for v in report.verdicts]
    if any(lines for _, lines in details):
        out += ["", "details:"]
        for verdict, lines in details:
            if lines:
                out.append(f"  {verdict.item}")
                out.extend(f"    {text}" for text in lines)
    out += ["", "declared divergences (b vs c):"]
    out.extend(f"  - {text}" for text in _declared(report))
    out += ["", *_summary(report)]
    return "\n".join(out) + "\n"


def render_markdown(report: Report) -> str:
    """Return the report as Markdown."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["# Equivalence report", ""]
    out.extend(f"- {cell(text)}" for text in _paths(report))
    out += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in _rows(report))
    out += ["", "## Differences", ""]
    for verdict in report.verdicts:
        lines = _detail_lines(verdict)
        if lines:
            out.append(f"### `{verdict.item}`")
            out.extend(f"- {cell(text)}" for text in lines)
            out.append("")
    out += ["## Declared divergences", ""]
    out.extend(f"- {cell(text)}" for text in _declared(report))
    out += ["", "## Verdict", ""]
    out.extend(f"{text}  " for text in _summary(report))
    return "\n".join(out) + "\n"


def to_json(report: Report) -> dict[str, Any]:
    """Return the whole report as JSON-ready data (results of every path included)."""
    return {
        "options": report.options,
        "workers": report.workers,
        "declared_divergences": [asdict(d) for d in report.declared],
        "wall_seconds": report.wall_seconds,
        "phase_seconds": report.phase_seconds,
        "failures": report.failures,
        "items": [
            {
                "item": v.item,
                "info": v.info,
                "a_vs_b": {"verdict": v.ab, "fix": v.fix, "differs_in": v.ab_diffs},
                "b_vs_c": {"verdict": v.bc, "declared": v.declared, "differs_in": v.bc_diffs},
                "claim_problem": v.claim_problem,
                "results": v.results,
            }
            for v in report.verdicts
        ],
    }


def render_json(report: Report) -> str:
    """Return the JSON text of the report."""
    return json.dumps(to_json(report), indent=2, sort_keys=True) + "\n"
