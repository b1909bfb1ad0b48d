"""Command-line interface: the one place that prints and exits."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from overlay import __version__, lines
from overlay.cli import (
    build,
    common,
    editing,
    equivalence,
    in_place,
    invocation,
    json_output,
    upstream,
)
from overlay.cli.common import Handler
from overlay.cli.output import json_report
from overlay.errors import EXIT_CLOSED_PIPE, OverlayError, exit_codes


class CommandLineError(SystemExit):
    """argparse's refusal of a command line (exit 2), after it printed the usage and message."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(2)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal :func:`main` also reports as JSON under ``--json``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise CommandLineError(self, message)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand (usage lines name ``prog``)."""
    parser = _Parser(
        prog=prog or invocation.usage(),
        description="Arm-backend fix series for pinned executorch releases: apply, build,"
        " verify, prove equivalence, prepare upstream pull requests.",
        epilog=exit_code_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{invocation.NAME} {__version__}")
    parser.add_argument(
        "--patches",
        metavar="DIR",
        help="series folder ('series', patches, SHA256SUMS, pins.toml) or lines root; default:"
        f" ${lines.PATCHES_ENV}, else the lines shipped with this tool (run from a checkout:"
        " its patches/)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler, command_parser=command)
        return command

    for group in (in_place, build, editing, equivalence, upstream):
        group.add_commands(add)
    return parser


def exit_code_table() -> str:
    """Return the exit codes as `--help` lists them (from overlay/errors.py)."""
    return "exit codes:\n" + "\n".join(f"  {c:>3}  {d}" for c, d in exit_codes())


def _unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """Return argparse's message for ``extra``, with the nearest option of the command."""
    options = [o for action in parser._actions for o in action.option_strings]
    message = f"unrecognized arguments: {' '.join(extra)}"
    for arg in extra:
        near = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1, cutoff=0.6)
        if arg.startswith("-") and near:
            message += f" (did you mean {near[0]}?)"
            break
    return message


def _closed_stdout() -> int:
    """Stop silently when stdout's reader went away (``| head``), as ``cat`` does; exit 141."""
    with contextlib.suppress(OSError, ValueError):  # no flush at exit into the broken pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CLOSED_PIPE


def _report(exc: OverlayError, *, as_json: bool) -> None:
    """Print the error on stderr (and its JSON report on stdout), next steps as run here."""
    here = invocation.prefix()
    exc.message = invocation.localise(exc.message, here)
    if exc.hint is not None:
        exc.hint = invocation.localise(exc.hint, here)
    print(f"error: {exc}", file=sys.stderr)
    if as_json:
        error = json_output.ErrorReport(
            type(exc).__name__, exc.exit_code, exc.message, exc.expected, exc.found, exc.hint
        )
        json_report(error)


def _tolerant_streams() -> None:
    """Let stdout and stderr write any path, whatever their encoding (``PYTHONIOENCODING=ascii``
    and a folder named in another script): a character they cannot encode is escaped."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None, *, process: bool = False) -> int:
    """Run the CLI; return the process exit code.

    ``process``: this call is the whole process (the console script, ``python -m overlay``):
    an apply or revert that committed and said so then ignores SIGINT and SIGTERM until exit.
    """
    _tolerant_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # a subcommand's own usage, not the top level's (argparse's default)
            command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
            command.error(_unrecognized(command, extra))
    except CommandLineError as exc:  # printed already; under --json, the report too
        if "--json" in argv:
            error = json_output.ErrorReport(
                "UsageError", 2, exc.message, None, None, f"`{exc.parser.prog} --help`"
            )
            json_report(error)
        return 2
    args.process = process
    handler: Handler = args.handler
    try:
        try:
            common.check_line(args)  # a command-line mistake, before anything is looked at
            return handler(args)
        except OverlayError as exc:
            _report(exc, as_json=getattr(args, "json", False))
            return exc.exit_code
    except BrokenPipeError:
        return _closed_stdout()
