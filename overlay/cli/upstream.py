"""The upstream commands: `matrix`, `export-upstream`, `retarget`, `retire-line` and `canary`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from overlay import lines, render
from overlay.cli import common
from overlay.cli.invocation import command
from overlay.cli.output import json_report, out, progress, show, wrote
from overlay.errors import UpstreamError, UsageError
from overlay.lines import selection
from overlay.lines.evidence import EVIDENCE_FILE
from overlay.text.series import load_series
from overlay.upstream import commit_rules, export, prepare, reports, suite
from overlay.upstream.canary import canary_report, canary_run
from overlay.upstream.gitrepo import GITHUB
from overlay.upstream.releases import matrix_of
from overlay.upstream.retarget import promote, retarget_verdict, run

UPSTREAM_ENV = "OVERLAY_UPSTREAM_CLONE"
REPORTS = ("md", "json")  # the matrix, export, retarget and suite reports


def _versions(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _upstream_clone(value: str | None) -> Path | None:
    clone = value or os.environ.get(UPSTREAM_ENV)
    return Path(clone) if clone else None


def cmd_matrix(args: argparse.Namespace) -> int:
    """Show how every patch (and port) fares on each executorch release."""
    series = load_series(common.patches_dir(args))
    matrix = matrix_of(series, _versions(args.versions), progress)
    blocks = reports.matrix_blocks(matrix)
    if args.format == "json":
        json_report(matrix)
    else:
        show(blocks)
    if args.out:
        wrote(render.write(Path(args.out), "matrix", blocks, matrix, REPORTS))
    return 0


def cmd_export_upstream(args: argparse.Namespace) -> int:
    """Send each fix of a line against the newest release and main: mboxes, PR texts, gate."""
    signer = commit_rules.signer(args.signoff)  # checked against the rules before any work
    series = common.line_series(args)
    folder = Path(args.out)
    request = prepare.Request(
        patches_dir=series.directory,
        out_dir=folder,
        signer=signer,
        upstream=args.upstream or os.environ.get(UPSTREAM_ENV) or GITHUB,
        fixes=selection.select(series, args.fix) if args.fix else None,
    )
    done = prepare.prepare(request, progress=progress)
    blocks = reports.sending_blocks(done.report)
    show(blocks)
    written = export.write_exports(done.exports, folder)
    wrote([*written, *render.write(folder, "upstream", blocks, done.report, REPORTS)])
    for name, (repo, branch) in done.branches.items():
        out(f"{name}: branch {branch} in {repo} (push it to your fork)")
    held = [f"{s.patch}: {p}" for s in done.report.submissions for p in s.flags]
    if held:
        raise UpstreamError(
            f"{len({h.split(':')[0] for h in held})} fix(es) not ready to send upstream",
            expected="git am on both bases, upstream's linters and hook rules clean, the"
            " tests it adds failing before and passing after, no test broken",
            found="\n".join(held),
            hint=f"read {folder}/upstream.md and each <patch>.checklist.md",
        )
    return 0


def _promote(args: argparse.Namespace, out_dir: Path) -> int:
    done = promote.promote(out_dir, common.lines_root(args, change="retarget --promote"))
    if done.written == (EVIDENCE_FILE,):
        out(f"the line {done.line} holds these patches already: wrote {EVIDENCE_FILE} only")
        return 0
    out(f"promoted executorch {done.version} to a new line: {done.line}")
    if done.previous_default:
        out(
            f"  the default line is now {done.version} (was {done.previous_default}; older"
            f" lines stay: --line {done.previous_default})"
        )
    for name in done.written:
        out(f"  wrote {done.line.name}/{name}")
    if done.recorded:
        out(f"  recorded executorch {done.version} in {done.line.parent / 'upstream.toml'}")
    return 0


def _retarget_from(args: argparse.Namespace) -> Path:
    """Return the series a retarget starts from: ``--patches`` when it names a series
    folder, else the newest line older than the target release."""
    if args.patches and lines.is_series_folder(Path(args.patches)):
        return Path(args.patches)
    line = lines.line_before(common.lines_root(args), args.version)
    progress(f"retargeting the {line.name} line to executorch {args.version}")
    return line.directory


def cmd_retarget(args: argparse.Namespace) -> int:
    """Write a checked candidate series for a new executorch release (or promote one)."""
    out_dir = Path(args.out or f"build/retarget/{args.version}")
    if args.promote:
        return _promote(args, out_dir)
    request = run.Request(
        version=args.version,
        patches_dir=_retarget_from(args),
        out_dir=out_dir,
        fast=not args.full,
        behaviour=not args.no_behaviour,
        equivalence=not args.no_equivalence,
        torch=tuple(args.torch or ()),
        upstream_clone=_upstream_clone(args.upstream),
        resume=args.resume,
        locks=not args.no_locks,
    )
    result = run.retarget(request, progress=progress)
    blocks = retarget_verdict.retarget_blocks(result)
    show(blocks)
    wrote(render.write(out_dir, promote.REPORT_STEM, blocks, result, REPORTS))
    if result.ready:
        promote_it = command(f"retarget {args.version} --promote")
        out(f"next: review {out_dir}/retarget.md, then `{promote_it}`")
        return 0
    if result.resume:
        return UpstreamError.exit_code
    raise UpstreamError(
        f"the executorch {args.version} candidate is not ready",
        expected="every kept patch fails before and passes after, nothing regresses",
        found="\n".join(result.problems),
        hint=f"read {out_dir}/retarget.md",
    )


def cmd_retire_line(args: argparse.Namespace) -> int:
    """Remove a release line (with --yes); say what it deletes and what still names it."""
    root = common.lines_root(args, change="retire-line")
    done = promote.retire_line(root, args.version, dry_run=not args.yes)
    how = "git rm -r, staged" if done.with_git else "deleted"
    if args.yes:
        out(f"retired the executorch {done.version} line: {done.removed} ({how})")
        out(f"  the default line is {done.default}")
    else:
        files = sorted(p for p in done.removed.rglob("*") if p.is_file())
        out(f"would retire the executorch {done.version} line, {len(files)} files ({how}):")
        out("\n".join(f"  {p.relative_to(done.removed.parent)}" for p in files))
        out(f"  the default line would be {done.default}")
    if done.references:
        out(f"  still naming {done.version} (runtime forms, tests, docs: update or remove):")
        out("\n".join(f"    {line}" for line in done.references))
    if not args.yes and not args.dry_run:
        raise UsageError(
            f"retire-line deletes {done.removed}: nothing was removed without --yes",
            expected="--yes (delete the files listed above) or --dry-run (only list them)",
            found="neither",
            hint=f"`{command(f'retire-line {done.version} --yes')}`",
        )
    return 0


def cmd_canary(args: argparse.Namespace) -> int:
    """Replay every release line onto upstream main (and newer tags); write the status page."""
    if args.schema:
        out(canary_report.json_schema().rstrip("\n"))
        return 0
    upstream = args.upstream or os.environ.get(UPSTREAM_ENV)
    if not upstream:
        raise UpstreamError(
            "no upstream repository to run the canary against",
            expected="--upstream <a pytorch/executorch clone or git URL>",
            found=f"neither --upstream nor ${UPSTREAM_ENV}",
            hint="pass --upstream https://github.com/pytorch/executorch.git",
        )
    out_dir = Path(args.out)
    request = canary_run.Request(
        upstream=upstream,
        root=common.given_patches(args) or lines.default_root(),
        out_dir=out_dir,
        lines=tuple(n for given in args.lines or () for n in _versions(given)),
        tags=args.tags,
        previous=Path(args.previous) if args.previous else None,
        behaviour=not args.no_behaviour,
        gate=not args.no_gate,
    )
    report = canary_run.canary(request, progress=progress)
    wrote(canary_report.write_page(report, out_dir))
    for line in report.lines:
        if line.error:
            out(f"{line.line}: {line.error}")
        for row in line.rows:
            status = row.on.own.status.value
            out(f"{line.line} {row.patch}: {status}; {row.upstream}; next: {row.text}")
    out(f"behaviour on main: {report.behaviour.state.value} {report.behaviour.detail}".rstrip())
    if report.failed:
        raise UpstreamError(
            "the canary failed",
            expected="no patch newly conflicting on main, no export churn",
            found="\n".join(report.failures),
            hint=f"read {out_dir / 'status.md'}",
        )
    return 0


def cmd_upstream_suite(args: argparse.Namespace) -> int:
    """Run upstream's Arm tests on each line's stock and patched builds; none may break."""
    root = common.given_patches(args) or lines.default_root()
    chosen = canary_run.select_lines(root, [n for g in args.lines or () for n in _versions(g)])
    broken: list[str] = []
    unrun: list[str] = []
    for line in chosen:
        done = suite.run_suite(line, out_dir=Path(args.out), progress=progress)
        blocks = reports.suite_blocks(done)
        show(blocks)
        wrote(render.write(Path(args.out) / line.name, "suite", blocks, done, REPORTS))
        broken += [f"{line.name}: {node}" for node in done.broken]
        unrun += [
            f"{line.name} {c.problem}" for c in (done.run.stock, done.run.patched) if c.problem
        ]
    if broken or unrun:
        raise UpstreamError(
            "the patches break upstream tests that pass on stock" if broken else
            "pytest wrote no report for a part of the suite",
            expected="every part run, no test passing on stock and failing with the patches",
            found="\n".join([*broken, *unrun]),
            hint=f"read {Path(args.out)}/<line>/suite.md and the pytest logs in <line>/part-N/"
            " (the same command runs the parts without a report again, and keeps the others)",
        )  # fmt: skip
    return 0


def add_commands(add: common.Adder) -> None:
    """Add matrix, export-upstream, retarget, retire-line and canary to the parser."""
    matrix = add("matrix", cmd_matrix, "how each patch fares on each executorch release")
    export_cmd = add("export-upstream", cmd_export_upstream, "write upstream PR mboxes + bodies")
    matrix.add_argument(
        "--versions", default="", help="releases, comma-separated (default: upstream.toml)"
    )
    matrix.add_argument(
        "--format",
        choices=("markdown", "json"),
        default="markdown",
        type=lambda given: "markdown" if given == "table" else given,  # the old name, accepted
        help="markdown (rendered on a terminal) or json (default: %(default)s)",
    )
    matrix.add_argument("--out", metavar="DIR", help="also write matrix.md/.json to DIR")
    export_cmd.add_argument(
        "--out", metavar="DIR", default="build/upstream", help="folder (default: %(default)s)"
    )
    export_cmd.add_argument("--signoff", help="'Name <email>' (default: git config user.*)")
    common.add_fix(export_cmd, "export")
    common.add_line(export_cmd, "the newest line")
    export_cmd.add_argument(
        "--upstream",
        help=f"a pytorch/executorch clone or git URL (${UPSTREAM_ENV}; default: GitHub)",
    )

    ret = add("retarget", cmd_retarget, "candidate series for a new executorch release")
    ret.add_argument("version", help="the executorch release, e.g. 1.5.1")
    ret.add_argument("--out", metavar="DIR", help="folder (default: build/retarget/VERSION)")
    ret.add_argument("--full", action="store_true", help="whole corpus (default: fast subset)")
    ret.add_argument("--torch", action="append", help="torch version to try first (repeatable)")
    ret.add_argument(
        "--upstream", help=f"a pytorch/executorch clone (${UPSTREAM_ENV}): torch_pin.py, pytest.ini"
    )
    ret.add_argument("--no-behaviour", action="store_true", help="text only (not promotable)")
    ret.add_argument("--no-equivalence", action="store_true", help="skip the pinned-release runs")
    ret.add_argument("--no-locks", action="store_true", help="skip the candidate's locks (uv)")
    ret.add_argument("--resume", action="store_true", help="continue after resolving a conflict")
    ret.add_argument(
        "--promote", action="store_true", help="make the checked candidate a new release line"
    )
    retire = add("retire-line", cmd_retire_line, "remove a release line (patches/VERSION/)")
    retire.add_argument("version", help="the line's executorch release, e.g. 1.2.0")
    retire_how = retire.add_mutually_exclusive_group()
    retire_how.add_argument("--yes", action="store_true", help="delete the line's files")
    common.add_dry_run(retire_how, "every check, the files and what names the line")

    tests = add("upstream-suite", cmd_upstream_suite, "upstream's Arm tests, stock vs patched")
    tests.add_argument(
        "--line", dest="lines", action="append", help="only this line (default: every line)"
    )
    tests.add_argument(
        "--out", metavar="DIR", default="build/upstream-suite", help="folder (default: %(default)s)"
    )

    can = add("canary", cmd_canary, "replay every release line onto upstream main: status page")
    can.add_argument("--upstream", help=f"a pytorch/executorch clone or git URL (${UPSTREAM_ENV})")
    can.add_argument(
        "--out", metavar="DIR", default="build/canary", help="folder (default: %(default)s)"
    )
    can.add_argument(
        "--line",
        dest="lines",
        action="append",
        help="only this line, e.g. 1.2.0 (repeatable or comma-separated; default: all)",
    )
    can.add_argument("--tags", action="store_true", help="also onto each newer vX.Y.Z tag")
    can.add_argument("--previous", help="the last status.json: fail on a newly conflicting patch")
    can.add_argument("--no-behaviour", action="store_true", help="text only (no release env)")
    can.add_argument("--no-gate", action="store_true", help="skip the export idempotence gate")
    can.add_argument("--schema", action="store_true", help="print the JSON Schema of status.json")
