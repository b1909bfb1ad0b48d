"""Where the CLI writes: results on stdout, progress and notes on stderr."""

from __future__ import annotations

import sys


def out(text: str = "") -> None:
    """Print to stdout."""
    print(text, flush=True)


def progress(text: str) -> None:
    """Print a progress line to stderr."""
    print(f"[overlay] {text}", file=sys.stderr, flush=True)
