"""How the user started the tool, so usage lines and next steps name a command that works.

:func:`localise` rewrites the console script's name (:data:`NAME`) in a message to what works
where the user is: from a checkout ``uv run executorch-arm-overlay`` (``--project DIR`` added
outside it), even where PATH finds the script (only ``uv run``'s PATH holds it); installed,
the script or ``python -m overlay`` as typed when PATH finds that one, else by its path.

Example: ``localise("run `executorch-arm-overlay refresh`", "uv run executorch-arm-overlay")``
Becomes: ``run `uv run executorch-arm-overlay refresh```; a path such as
``~/.cache/executorch-arm-overlay/tool`` is left alone.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from overlay import lines

NAME = lines.PROJECT_NAME  # the console script (pyproject's [project.scripts])
MODULE = "overlay"
UV_RUN_ENV = "UV_RUN_RECURSION_DEPTH"  # set by `uv run` for the command it starts
# The tool's name as a command word: not inside a path or a longer name, followed by a space.
_COMMAND = re.compile(rf"(?<![\w./~-]){re.escape(NAME)}(?= )")


def _same_file(a: str | None, b: str) -> bool:
    if a is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _started_as_module(argv: Sequence[str]) -> bool:
    return any(a == "-m" and b == MODULE for a, b in itertools.pairwise(argv[1:]))


def prefix(
    *,
    argv: Sequence[str] | None = None,
    package: Path | None = None,
    cwd: Path | None = None,
) -> str:
    """Return the command prefix that runs this tool where the user is (see the module doc).

    ``argv``: the interpreter's command line (default ``sys.orig_argv``); ``package``: the
    folder the overlay was imported from; ``cwd``: the current folder.
    """
    argv = list(sys.orig_argv if argv is None else argv)
    package = package or Path(__file__).resolve().parent.parent
    checkout = lines.find_checkout(package)
    if checkout is not None:
        here = (cwd or Path.cwd()).resolve()
        if here == checkout or checkout in here.parents:
            return f"uv run {NAME}"
        return f"uv run --project {checkout} {NAME}"
    if _started_as_module(argv):
        typed = argv[0]
        if _same_file(shutil.which(typed), sys.executable):
            return f"{typed} -m {MODULE}"
        return f"{sys.executable} -m {MODULE}"
    script = next((a for a in argv if Path(a).name == NAME), None)
    if script is not None and not _same_file(shutil.which(NAME), script):
        return script
    return NAME


def usage() -> str:
    """Return the program as the usage line names it: the command as typed (the interpreter's
    ``sys.orig_argv``), without a path."""
    if _started_as_module(sys.orig_argv):
        return f"{Path(sys.orig_argv[0]).name} -m {MODULE}"
    return f"uv run {NAME}" if os.environ.get(UV_RUN_ENV) else NAME


def localise(text: str, command: str) -> str:
    """Return ``text`` with every mention of the tool as a command replaced by ``command``."""
    return _COMMAND.sub(command, text)


def command(arguments: str) -> str:
    """Return the command line running the tool with ``arguments`` where the user is."""
    return f"{prefix()} {arguments}"
