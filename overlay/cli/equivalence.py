"""The equivalence commands: `equivalence`, `merge-reports` and `report-schema` (a failing run
writes its reports, then exits 10 naming what to do); its progress on stderr."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress

from overlay import codec, fixes
from overlay.cli import common
from overlay.cli.output import out, progress, show, wrote
from overlay.equivalence.controller import options as run_options
from overlay.equivalence.controller import orchestrator, outcome, result_cache
from overlay.equivalence.controller.scheduler import Event, EventKind, Progress, no_progress
from overlay.equivalence.protocol import PathId
from overlay.equivalence.render import html, layout
from overlay.equivalence.render.cells import item_label
from overlay.equivalence.verdict import EXECUTABLE


class BarProgress:
    """Per-path progress bars on stderr (rich): items done, elapsed, ETA, current item."""

    def __init__(self, console: Console) -> None:
        self.bars = RichProgress(
            TextColumn("{task.description:<30}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}"),
            console=console,
        )
        self.tasks: dict[PathId, TaskID] = {}

    def __enter__(self) -> BarProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def __call__(self, event: Event) -> None:
        """Show one event."""
        kind, path = event.kind, event.path
        if kind is EventKind.PLAN:
            current = "all cached" if event.done == event.total else ""
            self.tasks[path] = self.bars.add_task(
                f"({path.value}) {path.label}",
                total=event.total,
                completed=event.done,
                current=current,
            )
            return
        task = self.tasks.get(path)
        if task is None:  # a worker starting before the plan (listing a models file)
            return
        if kind is EventKind.START:
            self.bars.update(task, current="starting a worker (torch import)")
        elif kind is EventKind.RUN and event.item is not None:
            self.bars.update(task, current=item_label(event.item))
        elif kind is EventKind.DONE:
            self.bars.update(task, advance=1, current="")
        elif kind is EventKind.MORE:
            total = self.bars.tasks[self.tasks[path]].total or 0
            self.bars.update(task, total=total + 1)


class LineProgress:
    """One stderr line per finished item (--verbose when stderr is not a terminal)."""

    def __init__(self) -> None:
        self.done: dict[PathId, int] = {}
        self.total: dict[PathId, int] = {}

    def __call__(self, event: Event) -> None:
        """Print one line for a plan, a worker start or a finished item."""
        path = event.path
        if event.kind is EventKind.PLAN:
            self.done[path], self.total[path] = event.done, event.total
            progress(f"({path.value}) {event.total} items, {event.done} from the cache")
        elif event.kind is EventKind.START:
            progress(f"({path.value}) starting a worker")
        elif event.kind is EventKind.MORE:
            self.total[path] = self.total.get(path, 0) + 1
        elif event.kind is EventKind.DONE and event.item is not None:
            self.done[path] = self.done.get(path, 0) + 1
            progress(
                f"({path.value}) {self.done[path]}/{self.total.get(path, 0)} {event.item} done"
            )


def display(*, quiet: bool, verbose: bool) -> contextlib.AbstractContextManager[Progress]:
    """Return the progress display: bars on a terminal, lines with --verbose, else none."""
    console = Console(stderr=True)
    if quiet:
        return contextlib.nullcontext(no_progress)
    if console.is_terminal and not verbose:
        return BarProgress(console)
    if verbose:
        return contextlib.nullcontext(LineProgress())
    return contextlib.nullcontext(no_progress)


def _options(args: argparse.Namespace) -> run_options.Options:
    return run_options.options_from_env(
        args.stock_python,
        args.patched_python,
        runtime_patch=args.runtime_patch,
        models=args.models,
        with_corpus=args.with_corpus,
        fast=args.fast,
        only=tuple(args.case or ()),
        group=args.group,
        probes=not args.no_probes,
        parallel=not args.serial,
        attribute=not args.no_attribution,
        keep_bytes=args.keep_bytes,
        out_dir=Path(args.out),
        timeout=args.timeout,
        patches_dir=common.patches_dir(args),
        shard=run_options.Shard.parse(args.shard) if args.shard else None,
        cache_dir=Path(args.cache_dir),
        use_cache=not args.no_cache,
        jobs=args.jobs,
        require_executed=tuple(dict.fromkeys(args.require_executed or ())),
    )


def _finish(result: outcome.Report, folder: Path) -> int:
    """Print the report, write the reports, then raise the run's failure (0: it passed)."""
    show(layout.blocks(result))
    written = wrote(layout.write_reports(result, folder, drawings=html.drawings))
    error = outcome.failure_error(result, written[1])  # the Markdown report
    if error is not None:
        raise error
    return 0


def _list(args: argparse.Namespace) -> int:
    stock = args.stock_python or os.environ.get("OVERLAY_STOCK_PYTHON") or sys.executable
    listed = run_options.options_from_env(stock, stock, models=args.models, out_dir=Path(args.out))
    listing = orchestrator.list_items(listed)
    for case in listing.cases:
        claims = "".join(
            f" claims {t.effect.value} by patch {f.number}" for f, t in fixes.triggers_of(case.name)
        )
        fast = " [fast]" if case.fast else ""
        group = f" [{case.group}]" if case.group != "core" else ""
        out(f"case  {case.name}: {case.spec} {case.quantize or 'fp'}{group}{fast}{claims}")
    for probe in listing.probes:
        out(f"probe {probe.name}: {probe.description}")
    return 0


def cmd_equivalence(args: argparse.Namespace) -> int:
    """Compare stock, stock + runtime patch and the diff-patched build, case by case."""
    if args.list:
        return _list(args)
    chosen = _options(args)
    with display(quiet=args.quiet, verbose=args.verbose) as shown:
        result = orchestrator.run(chosen, progress=shown)
    return _finish(result, chosen.out_dir)


def cmd_merge_reports(args: argparse.Namespace) -> int:
    """Merge the equivalence.json of every shard into one report and one verdict."""
    base = run_options.caller_dir()
    merged = outcome.merge([outcome.load(base / name) for name in args.reports])
    return _finish(merged, base / args.out)


def cmd_report_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of equivalence.json."""
    out(codec.dumps(outcome.schema(), indent=2))
    return 0


def add_commands(add: common.Adder) -> None:
    """Add equivalence, merge-reports and report-schema to the parser."""
    eq = add("equivalence", cmd_equivalence, "prove stock+runtime patch == diff-patched build")
    eq.add_argument("--stock-python", help="python of the stock env ($OVERLAY_STOCK_PYTHON)")
    eq.add_argument("--patched-python", help="python of the patched env ($OVERLAY_PATCHED_PYTHON)")
    eq.add_argument(
        "--runtime-patch",
        default=run_options.DEFAULT_RUNTIME_PATCH,
        help="FILE.py:FUNCTION or module:FUNCTION for path (b) (default: %(default)s)",
    )
    eq.add_argument(
        "--models", help="FILE.py defining CASES (docs/equivalence.md): run these cases"
    )
    eq.add_argument(
        "--with-corpus", action="store_true", help="with --models: the corpus and probes too"
    )
    eq.add_argument(
        "--fast", action="store_true", help="the CI subset: the fast cases of the group(s)"
    )
    eq.add_argument("--case", action="append", help="run only this case (repeatable)")
    eq.add_argument(
        "--group",
        choices=run_options.GROUPS,
        help="corpus group: core (default; --fast adds one zoo case), zoo (real networks), all",
    )
    eq.add_argument(
        "--require-executed",
        action="append",
        choices=EXECUTABLE,
        metavar="TARGET",
        help="fail an item whose TARGET (tosa, vgf) lowered but did not run here (repeatable)",
    )
    eq.add_argument("--list", action="store_true", help="list cases and probes, run nothing")
    eq.add_argument("--no-probes", action="store_true", help="skip the unit-level probes")
    eq.add_argument("--serial", action="store_true", help="run the three paths one by one")
    eq.add_argument("--no-attribution", action="store_true", help="skip per-patch attribution")
    eq.add_argument("--keep-bytes", action="store_true", help="keep delegate bytes in the JSON")
    eq.add_argument(
        "--out", metavar="DIR", default="reports", help="folder for equivalence.json/.md, logs"
    )
    eq.add_argument(
        "--timeout",
        type=float,
        default=run_options.DEFAULT_TIMEOUT_S,
        help="seconds one item (or a worker's start) may take, unless the case sets its own"
        " (default: %(default)s)",
    )
    eq.add_argument(
        "--shard", metavar="K/N", help="run only part K of N (stable by item id; see merge-reports)"
    )
    eq.add_argument(
        "--cache-dir",
        default=str(result_cache.default_directory()),
        help="result cache folder, shareable between runs and CI runners (default: %(default)s)",
    )
    eq.add_argument(
        "--no-cache", action="store_true", help="ignore cached results (fresh ones are stored)"
    )
    eq.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="worker processes to aim for (default: one per CPU; never fewer than needed)",
    )
    eq.add_argument("--verbose", action="store_true", help="one progress line per item on stderr")
    eq.add_argument("--quiet", action="store_true", help="no progress display")
    merging = add("merge-reports", cmd_merge_reports, "merge shard reports into one verdict")
    merging.add_argument("reports", nargs="+", help="the equivalence.json of every shard")
    merging.add_argument(
        "--out", metavar="DIR", default="reports", help="folder for the merged report"
    )
    add("report-schema", cmd_report_schema, "print the JSON Schema of equivalence.json")
