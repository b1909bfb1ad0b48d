"""Plain-text and Markdown tables, the one renderer every report uses."""

from __future__ import annotations

from collections.abc import Sequence


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, max_width: int = 60
) -> list[str]:
    """Return aligned lines: header, a rule, one line per row (cells cut at ``max_width``)."""
    widths = [
        min(max(len(row[i]) for row in [header, *rows]), max_width) for i in range(len(header))
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def markdown_cell(text: str) -> str:
    """Escape a cell for a Markdown table."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Return the lines of a Markdown table."""
    out = ["| " + " | ".join(markdown_cell(h) for h in header) + " |"]
    out.append("|" + "---|" * len(header))
    out.extend("| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows)
    return out
