"""Write a report's three forms into its folder: ``equivalence.json``, ``.md`` and ``.html``."""

from __future__ import annotations

from pathlib import Path

from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.render import document, html, markdown

NAMES = ("equivalence.json", "equivalence.md", "equivalence.html")


def write_reports(report: Report, folder: Path) -> list[Path]:
    """Write the JSON, Markdown and HTML report into ``folder``; return the files, JSON first."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = (
        document.render_json(report),
        markdown.render_markdown(report),
        html.render_html(report),
    )
    written = []
    for name, text in zip(NAMES, texts, strict=True):
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written
