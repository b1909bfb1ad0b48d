"""The report as Markdown (verdict first; wide tables: one row per case and path)."""

from __future__ import annotations

from overlay._table import markdown_cell, markdown_table
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.protocol import EthosUResult
from overlay.equivalence.render.cells import (
    ETHOSU_HEADER,
    ETHOSU_NOTE,
    HEADER,
    LEGEND,
    NUMERICS_HEADER,
    NUMERICS_NOTE,
    ethos_groups,
    ethos_row,
    item_label,
    numerics_rows,
    payloads_text,
    seconds_cell,
    spec_text,
)
from overlay.equivalence.render.sections import (
    case_verdicts,
    declared_lines,
    detail_lines,
    findings_lines,
    headline,
    ordered,
    path_lines,
    table_rows,
)


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
    out += ["", f"wall time {report.wall_seconds:.1f} s"]
    return "\n".join(out) + "\n"
