"""Plain-text and Markdown tables, the one renderer every report uses."""

from __future__ import annotations

from collections.abc import Sequence

from overlay.errors import OverlayError


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


def replace_between(text: str, begin: str, end: str, body: str, *, what: str, doc: str) -> str:
    """Return ``text`` with ``body`` between the marker lines ``begin`` and ``end``."""
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise OverlayError(
            f"no generated table of {what} to update",
            expected=f"the markers {begin} and {end}",
            found="neither" if not found_begin else "only the first",
            hint=f"put both markers on lines of their own in {doc}",
        )
    return f"{head}{begin}\n{body}{end}{tail}"
