"""Pick the release line an in-place command works with, and say why and from where: ``--patches``
naming one series folder, ``--line NAME``, the line of the target's installed executorch (read
from its dist-info), else the newest line (docs/in-place.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay import lines
from overlay.errors import SeriesError, TargetError, UnsupportedReleaseError, UsageError
from overlay.lines.pins import SERIES_FILE
from overlay.lines.pins import load as load_pins


@dataclass(frozen=True)
class Chosen:
    """The line a command uses."""

    name: str  # the executorch release the line is pinned to
    directory: Path  # its series folder
    reason: str  # why this one
    source: str = ""  # where the lines come from (--patches, $OVERLAY_PATCHES, the tool's)


def source(patches: Path | None) -> str:
    """Return where the lines of ``--patches`` (None: the default) come from, as said."""
    return _root(patches).source


def every_line(patches: Path | None) -> tuple[lines.Line, ...]:
    """Return the lines of ``--patches`` (a series folder: its parent's), else the default;
    a root holding none is refused, naming who named it."""
    root = _root(patches)
    folder = root.path.parent if lines.is_series_folder(root.path) else root.path
    found = lines.all_lines(folder)
    if not found:
        raise _no_lines(root, patches)
    return found


def _root(patches: Path | None) -> lines.Root:
    if patches is not None:
        return lines.Root(patches, f"--patches {patches}")
    return lines.default_source()


def choose(patches: Path | None, line: str | None, version: Version | None) -> Chosen:
    """Return the line for ``--patches``, ``--line`` and the installed ``version``."""
    root = _root(patches)
    found = lines.all_lines(root.path)
    if not found:  # one series folder (a bad folder: loading the series says what is wrong)
        if not (root.path / SERIES_FILE).exists():
            raise _no_lines(root, patches)
        if not lines.is_series_folder(root.path):
            return Chosen(root.path.name, root.path, root.source, root.source)
        name = str(load_pins(root.path).executorch)
        if line is not None and line != name:
            raise UsageError(
                f"there is no release line {line} in {root.path}",
                expected=f"the line of that series folder: {name}",
                found=line,
                hint="drop --line, or pass --patches a lines root (a folder of line folders)",
            )
        _refuse_another_release(root, name, version, given=root.source)
        return Chosen(name, root.path, root.source, root.source)
    if line is not None:
        chosen = lines.line_named(root.path, line)
        _refuse_another_release(root, chosen.name, version, given=f"--line {line}")
        return Chosen(chosen.name, chosen.directory, f"--line {line}", root.source)
    if version is not None:
        chosen = lines.line_for_version(root.path, str(version))
        return Chosen(
            chosen.name, chosen.directory, f"the installed executorch {version}", root.source
        )
    chosen = lines.default_line(root.path)
    return Chosen(
        chosen.name,
        chosen.directory,
        "the newest line: no executorch to choose by",
        root.source,
    )


def _no_lines(root: lines.Root, patches: Path | None) -> SeriesError:
    """The error for a root that holds no line and no series, naming who named it."""
    what = "nothing" if not root.path.exists() else "no line folder and no series file"
    if patches is not None:
        hint = "pass --patches a lines root or one series folder, or drop it"
    else:
        hint = (
            f"point ${lines.PATCHES_ENV} at a lines root or one series folder, or unset it"
            " (this tool's own lines are then used)"
        )
    return SeriesError(
        f"no release line in {root.path}",
        expected="a lines root (folders named after executorch releases, e.g. 1.5.1/, each"
        " holding a series) or one series folder",
        found=f"{what} at {root.path}, named by {root.source}",
        hint=hint,
    )


def _refuse_another_release(
    root: lines.Root, name: str, version: Version | None, *, given: str
) -> None:
    """Refuse a line (named by ``given``) pinned to another release than the target holds."""
    if version is None or Version(version.public) == Version(name):
        return
    try:
        own = lines.line_for_version(root.path, str(version)).name
    except UnsupportedReleaseError:
        own = None
    flag = given.split(" ", maxsplit=1)[0]
    drop = f"unset {flag}" if flag.startswith("$") else f"drop {flag}"
    raise TargetError(
        f"line {name} is for executorch {name}; the target holds executorch {version}",
        expected=f"executorch {name} ({given})",
        found=f"executorch {version}",
        hint=f"{drop}: the installed executorch has its own line, {own}"
        if own
        else f"install executorch=={name} to use line {name}, or {drop}",
    )
