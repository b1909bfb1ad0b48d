"""The equivalence report laid out once, as blocks, for every form (Markdown, HTML)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import overlay
from overlay import render
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.protocol import PATHS, ItemResult
from overlay.equivalence.render import document
from overlay.equivalence.render.cells import (
    ETHOSU_HEADER,
    ETHOSU_NOTE,
    HEADER,
    LEGEND,
    NUMERICS_HEADER,
    NUMERICS_NOTE,
    ab_cell,
    bc_cell,
    error_cell,
    ethos_groups,
    ethos_row,
    item_label,
    numerics_rows,
    spec_text,
    status_code,
)
from overlay.equivalence.render.sections import (
    declared_lines,
    detail_lines,
    findings_lines,
    headline,
    ordered,
    path_lines,
)
from overlay.equivalence.verdict import Verdict
from overlay.items import ItemKind
from overlay.render import Badge, Block, Heading, Inline, Items, Link, Para, Raw, Table, item

TITLE = "Equivalence: diff-patched build vs stock + runtime patch"
TONES = {"FAIL": "bad", "TIME": "bad", "DIED": "bad", "num!": "warn"}  # "ok": plain


def _status(result: ItemResult) -> Inline:
    code = status_code(result)
    return Badge(code, TONES[code]) if code in TONES else code


def _anchor(verdict: Verdict) -> str:
    return "item-" + "".join(c if c.isalnum() else "-" for c in str(verdict.item))


def _row(verdict: Verdict, linked: bool) -> tuple[Inline, ...]:
    """Return an item's row (see HEADER); its name links to its section when it has one."""
    a, b, c = (verdict.results[p] for p in PATHS)
    name = item_label(verdict.item)
    bc = bc_cell(verdict)
    return (
        Link(name, _anchor(verdict)) if linked else name,
        *(_status(r) for r in (a, b, c)),
        error_cell(c, verdict.info),
        ab_cell(verdict),
        Badge(bc, "bad") if verdict.failures else bc,
    )


def _targets(report: Report) -> list[Block]:
    """Return the findings, the numbers per path and target, and the Ethos-U estimates."""
    cases = [
        (f"{item_label(v.item)} ({spec_text(v.info)})", v)
        for v in report.verdicts
        if v.item.kind is ItemKind.CASE
    ]
    numbers = tuple((name, *row) for name, v in cases for row in numerics_rows(v))
    ethos = tuple((name, *ethos_row(*g)) for name, v in cases for g in ethos_groups(v))
    out: list[Block] = [
        Heading("Findings (a target wrong or failing on every path)", 2),
        render.listing(findings_lines(report)),
    ]
    if numbers:
        out += [
            Heading("Numbers per path (TOSA reference model, executed VGF)", 2),
            Table(("case", *NUMERICS_HEADER), numbers),
            Para(NUMERICS_NOTE),
        ]
    if ethos:
        out += [
            Heading("Ethos-U (Vela command streams and estimates)", 2),
            Table(("case", *ETHOSU_HEADER), ethos),
            Para(ETHOSU_NOTE),
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
        Table(tuple(HEADER), tuple(_row(v, bool(details[v.item])) for v in verdicts)),
        Heading("Legend", 2),
        Items(tuple(item(f"{label}: {text}") for label, text in LEGEND)),
    ]
    if any(details.values()):
        out.append(Heading("Differences", 2))
    for v in (v for v in verdicts if details[v.item]):
        out += [
            Heading(f"{item_label(v.item)} ({spec_text(v.info)})", 3, _anchor(v)),
            Items(tuple(map(item, details[v.item]))),
            *map(Raw, drawings(v)),
        ]
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_seconds.items())
    return [
        *out,
        *_targets(report),
        Heading("Declared divergences (b vs c)", 2),
        Items(tuple(map(item, declared_lines(report)))),
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
        document.to_document(report),
        suffixes,
        title=f"Equivalence report: {verdict}",
    )
