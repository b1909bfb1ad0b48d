"""Where to find uv, and uv run as a child that never outlives the overlay."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from overlay import _process
from overlay._process import Refuse
from overlay.errors import EnvError


def find_uv() -> str:
    """Return the uv executable: the ``uv`` package's binary, else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        pass
    else:
        try:
            return str(find_uv_bin())
        except FileNotFoundError:
            pass
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise EnvError(
        "uv is not available",
        expected="the uv package in this Python, or uv on PATH",
        found="neither",
        hint=f"{sys.executable} -m pip install uv",
    )


def run_uv(
    uv: str,
    args: list[str],
    refuse: Refuse,
    *,
    quiet: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``uv ARGS`` (its output shown unless ``quiet``) as a child that dies with us.

    VIRTUAL_ENV is dropped, so uv acts only on the venv or files it is given; ``env`` adds
    variables. A failure is ``refuse(what was found)``.
    """
    kept = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    _process.run(
        [uv, *args], lambda found: refuse(_said(found)), env={**kept, **(env or {})}, cwd=cwd,
        quiet=quiet,
    )  # fmt: skip


def _said(found: str) -> str:
    """Return what uv said, without its ``Using Python ... environment at: ...`` lines."""
    return re.sub(r"Using Python [^\n]*environment at[^\n]*\n?", "", found)
