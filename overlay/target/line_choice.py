"""Pick the release line an in-place command works with, and say why.

In order: ``--patches`` naming one series folder (or ``$OVERLAY_PATCHES`` naming one) is
used as it is; ``--line NAME`` picks that line of the lines root; otherwise the line of the
target's installed executorch (read from its dist-info, never imported); with no target,
the newest line. An installed release no line is pinned to is refused, listing the lines.

Example: a lines root holding ``1.2.0/`` and ``1.5.1/``; the target's dist-info says
``Version: 1.2.0+armfix.1b5ee9052a``.
Becomes: the ``1.2.0`` line, "the installed executorch 1.2.0+armfix.1b5ee9052a"; a target
at 1.4.1 is an UnsupportedReleaseError naming 1.2.0 and 1.5.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay import lines
from overlay.errors import UsageError
from overlay.lines.pins import load as load_pins


@dataclass(frozen=True)
class Chosen:
    """The line a command uses."""

    name: str  # the executorch release the line is pinned to
    directory: Path  # its series folder
    reason: str  # why this one


def choose(patches: Path | None, line: str | None, version: Version | None) -> Chosen:
    """Return the line for ``--patches``, ``--line`` and the installed ``version``."""
    root = patches if patches is not None else lines.default_root()
    found = lines.all_lines(root)
    if not found:  # one series folder (a bad folder: loading the series says what is wrong)
        source = f"--patches {root}" if patches is not None else f"${lines.PATCHES_ENV}"
        if not lines.is_series_folder(root):
            return Chosen(root.name, root, source)
        name = str(load_pins(root).executorch)
        if line is not None and line != name:
            raise UsageError(
                f"there is no release line {line} in {root}",
                expected=f"the line of that series folder: {name}",
                found=line,
                hint="drop --line, or pass --patches a lines root (a folder of line folders)",
            )
        return Chosen(name, root, source)
    if line is not None:
        chosen = lines.line_named(root, line)
        return Chosen(chosen.name, chosen.directory, f"--line {line}")
    if version is not None:
        chosen = lines.line_for_version(root, str(version))
        return Chosen(chosen.name, chosen.directory, f"the installed executorch {version}")
    chosen = lines.default_line(root)
    return Chosen(chosen.name, chosen.directory, "the newest line (no executorch to choose by)")
