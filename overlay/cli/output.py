"""Where the CLI writes: results on stdout, progress and notes on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from overlay import render


def out(text: str = "") -> None:
    """Print to stdout."""
    print(text, flush=True)


def json_report(report: object, code: int = 0) -> int:
    """Print a report (a result dataclass) as JSON on stdout, through the codec; return ``code``."""
    out(render.json_text(report).rstrip("\n"))
    return code


def show(blocks: Sequence[render.Block]) -> None:
    """Print a report as Markdown: rendered by rich on a terminal, plain anywhere else
    (a pipe, a file, a CI log), so what a user saves or pastes is the Markdown itself."""
    text = render.markdown(blocks)
    if sys.stdout.isatty():
        # imported here: rich.markdown would add 0.2 s to the start of every command
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        out(text.rstrip("\n"))


def progress(text: str) -> None:
    """Print a progress line to stderr."""
    print(f"[overlay] {text}", file=sys.stderr, flush=True)


def wrote(paths: Iterable[Path]) -> list[Path]:
    """Say each written file on stderr; return them."""
    written = list(paths)
    for path in written:
        progress(f"wrote {path}")
    return written
