"""The report as text, read top-down in seconds (it fits 100 columns).

The verdict and its counts first, then one table row per item (problems first, then what
the fixes change), a legend for every column, then details, the findings (a target wrong
on every path), the numbers of every target per path (TOSA, executed VGF), the Ethos-U
command streams, the declared divergences and the paths.
"""

from __future__ import annotations

from collections.abc import Sequence

from overlay._table import text_table
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.render.cells import (
    ETHOSU_HEADER,
    ETHOSU_NOTE,
    HEADER,
    LEGEND,
    NUMERICS_HEADER,
    NUMERICS_NOTE,
    Row,
    ethos_groups,
    ethos_row,
    numerics_rows,
    spec_text,
)
from overlay.equivalence.render.sections import (
    WIDTH,
    case_verdicts,
    declared_lines,
    detail_lines,
    findings_lines,
    headline,
    ordered,
    path_lines,
    table_rows,
    wrapped,
)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def fitted_table(rows: list[list[str]], width: int = WIDTH) -> list[str]:
    """Return the table as lines of at most ``width`` columns (long item names are cut)."""
    others = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(1, len(HEADER))]
    room = width - sum(others) - 2 * (len(HEADER) - 1)
    names = max(len(r[0]) for r in [HEADER, *rows])
    fitted = [[_cut(r[0], room), *r[1:]] for r in rows]
    return text_table(HEADER, fitted, max_width=max(min(names, room), *others))


def legend_lines() -> list[str]:
    """Return the legend: every column explained, within WIDTH columns."""
    lines = ["legend:"]
    for label, text in LEGEND:
        lines.extend(wrapped(f"  {label:<9}", text, 11))
    return lines


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


def render_table(report: Report) -> str:
    """Return the text report: verdict, table, legend, details, declared, paths."""
    out = [line for text in headline(report) for line in wrapped("", text, 2)]
    out += ["", *fitted_table(table_rows(report)), "", *legend_lines()]
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
    out.extend(wrapped("", f"wall time {report.wall_seconds:.1f} s ({phases})", 2))
    return "\n".join(out) + "\n"
