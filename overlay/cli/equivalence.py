"""The equivalence commands: `equivalence`, `merge-reports` and `report-schema`.

A failing run writes its reports first, then exits 10 naming what to do.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from overlay import codec, fixes
from overlay.cli import common
from overlay.cli.output import out, show, wrote
from overlay.cli.progress_display import display
from overlay.equivalence.controller import inputs, orchestrator, outcome, result_cache
from overlay.equivalence.controller import options as run_options
from overlay.equivalence.render import document, html, layout
from overlay.equivalence.verdict import EXECUTABLE


def _options(args: argparse.Namespace) -> run_options.Options:
    return inputs.options_from_env(
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
    listed = inputs.options_from_env(stock, stock, models=args.models, out_dir=Path(args.out))
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
    base = inputs.caller_dir()
    merged = outcome.merge([document.load(base / name) for name in args.reports])
    return _finish(merged, base / args.out)


def cmd_report_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of equivalence.json."""
    out(codec.dumps(document.schema(), indent=2))
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
        choices=inputs.GROUPS,
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
