"""What the command groups share: one spelling per option (one flag means one thing in every
command), the line and series a command uses."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay import lines
from overlay.cli.output import progress
from overlay.in_place import line_choice
from overlay.lines import selection
from overlay.text.series import Series, load_series

Handler = Callable[[argparse.Namespace], int]
Adder = Callable[[str, Handler, str], argparse.ArgumentParser]


def add_line(command: argparse.ArgumentParser, default: str) -> None:
    """Add ``--line`` (a release line, e.g. 1.2.0)."""
    command.add_argument("--line", help=f"the release line, e.g. 1.2.0 (default: {default})")


def add_dist(command: argparse.ArgumentParser) -> None:
    """Add ``--dist DIR``, the folder of patched wheels."""
    command.add_argument(
        "--dist", metavar="DIR", help="folder of the patched wheels (default: dist/<line>)"
    )


def add_wheel(command: argparse.ArgumentParser) -> None:
    """Add ``--wheel FILE`` or ``--tag TAG``: which pinned wheel to start from."""
    group = command.add_mutually_exclusive_group()
    group.add_argument("--wheel", help="use this local pinned wheel file (sha256-checked)")
    group.add_argument(
        "--tag",
        metavar="TAG",
        help="the pinned wheel of this tag, e.g. cp311-manylinux_2_28_x86_64",
    )


def add_fix(command: argparse.ArgumentParser, verb: str) -> None:
    """Add ``--fix``: fixes by number (7 or 0007) or name, as `apply --fix` takes them."""
    command.add_argument(
        "--fix",
        action="append",
        metavar="N,NAME",
        help=f"{verb} only these fixes: numbers (7 or 0007: patch 0007) or names as"
        " `status` lists them, comma-separated or repeated (default: all)",
    )


def add_dry_run(command: argparse._ActionsContainer, help_text: str) -> None:
    """Add ``--dry-run``: every check, nothing written (``help_text`` says what it shows)."""
    command.add_argument("--dry-run", action="store_true", help=help_text)


def add_json(command: argparse.ArgumentParser) -> None:
    """Add ``--json``: print a typed report on stdout."""
    command.add_argument("--json", action="store_true", help="print a JSON report")


def given_patches(args: argparse.Namespace) -> Path | None:
    """Return ``--patches`` as given (None: not given)."""
    return Path(args.patches) if args.patches else None


def _given(args: argparse.Namespace, change: str | None) -> Path | None:
    """Return ``--patches``; for a command that changes the lines (``change``: its name),
    the lines of a checkout, refusing the installed package's (:func:`lines.root_to_change`)."""
    given = given_patches(args)
    return lines.root_to_change(given, change) if change else given


def patches_dir(args: argparse.Namespace, change: str | None = None) -> Path:
    """Return the series folder of ``--patches`` (default: the newest line)."""
    return lines.series_directory(_given(args, change))


def lines_root(args: argparse.Namespace, change: str | None = None) -> Path:
    """Return the lines root of ``--patches`` (a series folder's parent), else the default."""
    folder = _given(args, change) or lines.default_root()
    return folder.parent if lines.is_series_folder(folder) else folder


def check_line(args: argparse.Namespace) -> None:
    """Refuse a ``--line`` that names no line and a ``--fix`` that names no fix of it (of any
    line, without ``--line``): exit 2, before the command looks at anything."""
    patches = given_patches(args)
    wanted = getattr(args, "fix", None)
    if getattr(args, "line", None) is not None:
        chosen = line_choice.choose(patches, args.line, None)
        if wanted:
            selection.select(load_series(chosen.directory), wanted)
    elif wanted:
        folder = patches if patches is not None and lines.is_series_folder(patches) else None
        every = [folder] if folder else [line.directory for line in line_choice.every_line(patches)]
        selection.refuse_unknown([load_series(f) for f in every], wanted)


def line_series(
    args: argparse.Namespace, installed: str | None = None, change: str | None = None
) -> Series:
    """Return the series of the chosen line (``overlay.in_place.line_choice``), before any work.

    ``--line``, else the line of the ``installed`` executorch version, else the newest line;
    an unknown line is refused, listing the supported ones. ``change``: the command changes
    the line (it must be a checkout's).
    """
    try:
        version = Version(installed) if installed else None
    except InvalidVersion:
        version = None  # two copies ("2.1 + 2.2"): the check names them
    patches = _given(args, change)
    chosen = line_choice.choose(patches, args.line, version)
    if args.line is None and version is not None:
        progress(f"release line {chosen.name} ({chosen.reason})")
    return load_series(chosen.directory)
