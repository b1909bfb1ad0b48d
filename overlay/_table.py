"""Markdown tables (every report's, the docs' generated ones) and the markers around one."""

from __future__ import annotations

from collections.abc import Sequence

from overlay.errors import OverlayError


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Return the lines of a Markdown table (a ``|`` in a cell escaped, a line break a space)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *map(line, rows)]


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
