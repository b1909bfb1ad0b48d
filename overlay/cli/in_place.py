"""The in-place commands: `status`, `check`, `apply`, `revert` of an installed executorch; `lines`.
An apply or revert holds SIGINT and SIGTERM from its transaction to its last line of output:
once committed, it says so."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from overlay import fixes, lines
from overlay.cli import common, json_output
from overlay.cli.output import json_report, out, progress
from overlay.distribution.provenance import local_version
from overlay.errors import EXIT_CHANGES_DUE, InterruptedRunError, TargetError
from overlay.fixes import overview
from overlay.in_place import deps, line_choice, transaction
from overlay.in_place.plan import Plan
from overlay.lines import selection
from overlay.text.series import Series, load_series
from overlay.tree import journal
from overlay.tree.locate import Environment, Target, default_environment, find_target
from overlay.tree.state import Status, inspect


def _target(args: argparse.Namespace, found: Environment | None = None) -> Target:
    """Return the tree of ``--target``, else of the active venv (``found``; saying which)."""
    patches = common.given_patches(args)
    wanted = line_choice.choose(patches, args.line, None).name
    if args.target:
        return find_target(Path(args.target), wanted)
    found = found or default_environment()
    progress(f"target: {found.path} ({found.how})")
    return find_target(found.path, wanted)


def _line(
    args: argparse.Namespace, target: Target | None, *, say: bool = True
) -> tuple[Series, line_choice.Chosen]:
    """Choose the line (before any work on the tree), load its series, say which and whence."""
    patches = common.given_patches(args)
    chosen = line_choice.choose(
        patches, getattr(args, "line", None), target.version if target else None
    )
    series = load_series(chosen.directory)
    if say and not (patches is not None and chosen.directory == patches):  # chosen, not given
        progress(
            f"release line {chosen.name} ({chosen.reason}): series {series.short_digest}"
            f" of {chosen.source}"
        )
        _note_other_checkout(args, chosen.directory.parent)
    return series, chosen


def _note_other_checkout(args: argparse.Namespace, root: Path) -> None:
    """Name the checkout the command runs in when its lines are not the ones used."""
    if args.patches or os.environ.get(lines.PATCHES_ENV):
        return  # named by the user
    other = lines.other_checkout(root)
    if other is not None:
        progress(
            f"note: the checkout {other} holds other release lines than these; `uv run"
            f" executorch-arm-overlay` there (or --patches {other / lines.LINES_DIR}) uses them"
        )


def _fix_state(number: int, status: Status | None) -> str | None:
    if status is None or status.files == {}:
        return None
    if number in status.applied:
        return "applied"
    return "in some files" if number in status.half else "not applied"


def _series_info(series: Series, status: Status | None) -> json_output.SeriesInfo:
    return json_output.SeriesInfo(
        series.digest,
        str(series.pins.executorch),
        local_version(series),
        tuple(
            json_output.PatchInfo(
                patch.number,
                patch.name,
                patch.subject,
                patch.header.get("Applied-Upstream"),
                selection.fix_name(patch.name),
                _fix_state(patch.number, status),
            )
            for patch in series.patches
        ),
    )


def cmd_status(args: argparse.Namespace) -> int:
    """Show the line, its fixes and, with a target, the state of every file."""
    target: Target | None = None
    if args.target:
        target = _target(args)
    elif not args.series_only:
        try:
            found = default_environment()
        except TargetError as exc:
            progress(f"no target ({exc.found}): the series only")
        else:
            target = _target(args, found)
    series, chosen = _line(args, target, say=False)
    status = inspect(series, target) if target else None
    info = _series_info(series, status)
    if args.json:
        recorded = status.record.fixes if status else None
        report = json_output.StatusReport(
            info,
            str(target.root) if target else None,
            str(target.version) if target else None,
            status.state if status else None,
            status.summary if status else None,
            tuple(json_output.FileStatus(p, s) for p, s in status.files.items()) if status else (),
            chosen,
            tuple(sorted(status.applied)) if status else (),
            tuple(sorted(recorded)) if recorded is not None else None,
            status.complete if status else False,
        )
        return json_report(report)
    out(f"series {series.short_digest} against executorch {series.pins.executorch}")
    out(f"release line {chosen.name} ({chosen.reason}), from {chosen.source}")
    _note_other_checkout(args, chosen.directory.parent)
    out(f"patched wheel version: {info.wheel_version}")
    for patch in info.patches:
        held = f" [{patch.state}]" if patch.state else ""
        out(f"  {patch.number}. {patch.name}: {patch.subject}{held}")
        if patch.upstream:
            out(f"       upstream: {patch.upstream}")
    if target is not None and status is not None:
        out(f"target {target.root} (executorch {target.version})")
        out(f"  state: {status.summary}")
        for repo_path, state in status.files.items():
            new = " (a file the series creates)" if repo_path in series.created else ""
            out(f"  {state.value:<9} {repo_path}{new}")
    return 0


def cmd_lines(args: argparse.Namespace) -> int:
    """List every release line: executorch, torch, its fixes by number, its locks."""
    patches = common.given_patches(args)
    every = line_choice.every_line(patches)
    progress(f"release lines: {line_choice.source(patches)}")
    _note_other_checkout(args, every[0].directory.parent)
    found = overview.summaries(fixes.REGISTRY, every)
    if args.json:
        return json_report(found)
    for line in found:
        default = " (the default)" if line.default else ""
        out(f"{line.name}{default}: executorch {line.executorch}, torch {line.torch}")
        for fix in line.fixes:
            out(f"  fix {fix.number} {fix.status.value + ':':<11} {fix.title}")
        out(f"  locks: {', '.join(line.locks) or 'none'}")
    return 0


def _describe_plan(plan: Plan, verb: str, series: Series) -> None:
    if plan.recovery is not None:
        out(f"recovered: {plan.recovery.summary}")
    for change in plan.changes:
        new = " (a new file)" if change.old is None else " (removed)" if change.new is None else ""
        out(f"  {verb}: {change.repo_path}{new}")
    whole = plan.chosen == series.numbers
    done = ("pristine" if whole else "reverted") if plan.reverse else "patched"
    for repo_path in plan.unchanged:  # files the chosen fixes do not touch are not listed
        if whole or series.touching(repo_path) & plan.chosen:
            out(f"  already {done}: {repo_path}")
    for repo_path in plan.left_alone:
        out(f"  left alone: {repo_path} (edited by hand; this run does not write it)")
    if plan.bytecode:
        out(
            f"  stale bytecode: {len(plan.bytecode)} .pyc file(s) of the replaced modules"
            " (deleted; Python compiles them again on import)"
        )
    if plan.not_restored:
        out(
            f"  not restored: {len(plan.not_restored)} .pyc file(s) RECORD lists (apply deleted"
            " them; Python compiles them again on import)"
        )
    meta = plan.metadata
    if meta is not None:
        moved = f" -> {meta.to}" if meta.to != meta.dist_info else ""
        out(f"  dist-info: {meta.dist_info}{moved} (Version {meta.version})")
        for action, names in (
            ("rewrites", [f.name for f in meta.files if f.old_sha256 and f.new is not None]),
            ("adds", [f.name for f in meta.files if f.old_sha256 is None]),
            ("removes", [f.name for f in meta.files if f.new is None]),
        ):
            if names:
                out(f"    {action} {', '.join(names)}")


def _details(
    plan: Plan, chosen: line_choice.Chosen, checked: deps.DepsCheck | None
) -> json_output.PlanDetails:
    meta = plan.metadata
    return json_output.PlanDetails(
        chosen,
        tuple(sorted(plan.chosen)),
        tuple(sorted(plan.before)),
        tuple(sorted(plan.after)),
        len(plan.bytecode),
        json_output.DistInfoChange(meta.dist_info, meta.to, meta.version) if meta else None,
        checked,
    )


def _prepare(
    args: argparse.Namespace, *, reverse: bool
) -> tuple[Target, Series, line_choice.Chosen, frozenset[int] | None, deps.DepsCheck | None]:
    """Every check before planning: target, line, --fix names, dependencies (apply)."""
    target = _target(args)
    series, chosen = _line(args, target)
    fixes = selection.select(series, args.fix) if args.fix else None
    checked = None
    if not reverse and not args.no_deps_check:
        checked = deps.check(series, target)  # skipped on an unpacked wheel (JSON says so)
        if checked.differ:
            progress(
                f"warning: the environment differs from the pins line {chosen.name} was proven"
                f" with (patching anyway): {', '.join(checked.differ)}"
            )
            progress(f"  to match them: {checked.install}")
    return target, series, chosen, fixes, checked


def _dry_run(args: argparse.Namespace, *, reverse: bool, exit_due: bool) -> int:
    """Run every check and plan, write nothing; `check` exits 21 when changes are due."""
    target, series, chosen, fixes, checked = _prepare(args, reverse=reverse)
    plan = transaction.preview(series, target, reverse=reverse, fixes=fixes)
    code = EXIT_CHANGES_DUE if exit_due and not plan.is_noop else 0
    if args.json:
        report = json_output.CheckReport(
            str(plan.target.root),
            reverse,
            not plan.is_noop,
            tuple(c.repo_path for c in plan.changes),
            plan.unchanged,
            _details(plan, chosen, checked),
        )
        return json_report(report, code)
    _describe_plan(plan, "would revert" if reverse else "would patch", series)
    if not plan.is_noop:
        out(f"  would hold: {selection.describe(series, plan.after)}")
    out("nothing to do" if plan.is_noop else f"{len(plan.changes)} file(s) would change")
    return code


def cmd_check(args: argparse.Namespace) -> int:
    """Dry run: check everything apply (or revert) would; exit 21 if files would change."""
    return _dry_run(args, reverse=args.reverse, exit_due=True)


def cmd_apply(args: argparse.Namespace, *, reverse: bool = False) -> int:
    """Apply (or revert) fixes on an installed or unpacked executorch, atomically."""
    if args.dry_run:
        return _dry_run(args, reverse=reverse, exit_due=False)
    target, series, chosen, fixes, checked = _prepare(args, reverse=reverse)
    # from the transaction to the last line said; the whole process: to its exit
    with journal.held_signals(then_ignore=args.process) as pending:
        plan = transaction.apply(series, target, reverse=reverse, fixes=fixes, waiting=progress)
        _say_applied(args, plan, series=series, chosen=chosen, checked=checked, fixes=fixes)
    if pending:  # after the commit: the tree is as the output says
        state = "pristine" if reverse and not plan.after else "patched"
        raise InterruptedRunError(
            f"interrupted by {signal.Signals(pending[0]).name} after the"
            f" {'revert' if reverse else 'apply'} had finished: {plan.target.root} is {state}",
            signum=pending[0],
        )
    return 0


def _say_applied(
    args: argparse.Namespace,
    plan: Plan,
    *,
    series: Series,
    chosen: line_choice.Chosen,
    checked: deps.DepsCheck | None,
    fixes: frozenset[int] | None,
) -> None:
    """Print what a committed apply or revert did (its JSON report with ``--json``)."""
    reverse = plan.reverse
    if args.json:
        report = json_output.ApplyReport(
            str(plan.target.root),
            reverse,
            tuple(c.repo_path for c in plan.changes),
            plan.unchanged,
            plan.recovery.summary if plan.recovery else None,
            _details(plan, chosen, checked),
        )
        json_report(report)
        return
    _describe_plan(plan, "reverted" if reverse else "patched", series)
    holds = selection.describe(series, plan.after)
    root = plan.target.root
    if not plan.is_noop:
        out(f"done: {root} holds {holds} of line {chosen.name}")
    elif fixes is None:
        out(f"nothing to do: {root} is already {'pristine' if reverse else 'patched'}")
    else:
        out(f"nothing to do: {root} already holds {holds}")


def cmd_revert(args: argparse.Namespace) -> int:
    """Revert fixes (all without --fix): sources and dist-info back, byte for byte."""
    return cmd_apply(args, reverse=True)


def add_commands(add: common.Adder) -> None:
    """Add status, check, apply and revert to the parser."""

    def shared(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--target",
            help="a venv (or its python), site-packages or unpacked wheel holding executorch"
            " (default: $VIRTUAL_ENV, else the nearest .venv)",
        )
        command.add_argument(
            "--line",
            help="use this release line (e.g. 1.2.0; default: the line of the installed"
            " executorch)",
        )
        command.add_argument(
            "--patches",
            default=argparse.SUPPRESS,
            help="a series folder, or a lines root to pick the line from (as before the command)",
        )
        common.add_json(command)

    def writer(command: argparse.ArgumentParser, verb: str) -> None:
        common.add_fix(command, verb)
        common.add_dry_run(command, "every check and the plan; write nothing")

    listing = add("lines", cmd_lines, "list the release lines, their fixes and locks")
    common.add_json(listing)
    status = add("status", cmd_status, "show the line, its fixes and the state of a target")
    shared(status)
    status.add_argument("--series-only", action="store_true", help="do not look for a target")
    check = add(
        "check",
        cmd_check,
        f"dry run: verify a target could be patched (writes nothing; exit {EXIT_CHANGES_DUE}"
        " if files would change, 0 if nothing to do)",
    )
    shared(check)
    common.add_fix(check, "check")
    check.add_argument("--reverse", action="store_true", help="check a revert instead")
    apply = add("apply", cmd_apply, "apply fixes (all by default) to a target, atomically")
    shared(apply)
    writer(apply, "apply")
    for command in (check, apply):
        command.add_argument(
            "--no-deps-check",
            action="store_true",
            help="do not compare the environment with the line's pins (no warning)",
        )
    revert = add("revert", cmd_revert, "revert fixes (all by default): pristine files back")
    shared(revert)
    writer(revert, "revert")
    revert.set_defaults(no_deps_check=True)
