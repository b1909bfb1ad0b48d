"""Command-line interface: the one place that prints and exits.

Every command maps OverlayError to its message on stderr and its exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from overlay import __version__, fixes, install, pins, wheels, worktree
from overlay.equivalence import orchestrator, report
from overlay.errors import EquivalenceError, OverlayError, TargetError, UpstreamError
from overlay.install_check import check_installed
from overlay.series import CHECKSUMS_FILE, Series, format_checksums, load_series
from overlay.upstream import export, prepare, releases, render, retarget
from overlay.upstream.matrix import Matrix

Handler = Callable[[argparse.Namespace], int]


def out(text: str = "") -> None:
    """Print to stdout."""
    print(text, flush=True)


def progress(text: str) -> None:
    """Print a progress line to stderr."""
    print(f"[overlay] {text}", file=sys.stderr, flush=True)


def _patches_dir(args: argparse.Namespace) -> Path:
    return Path(args.patches) if args.patches else pins.default_directory()


def _series(args: argparse.Namespace) -> Series:
    return load_series(_patches_dir(args))


def _pin(args: argparse.Namespace, series: Series) -> pins.WheelPin:
    if getattr(args, "wheel", None):
        return wheels.pin_for_file(series, Path(args.wheel))
    if getattr(args, "wheel_tag", None):
        return series.pins.wheel_for(args.wheel_tag)
    return series.pins.host_wheel()


def _source_wheel(args: argparse.Namespace, series: Series) -> tuple[pins.WheelPin, Path]:
    pin = _pin(args, series)
    if getattr(args, "wheel", None):
        return pin, Path(args.wheel)
    cached = wheels.wheel_cache() / pin.filename
    if not cached.is_file():
        progress(f"downloading {pin.filename} (pinned sha256 {pin.sha256[:12]}...)")
    path = wheels.fetch_wheel(pin)
    progress(f"verified {path.name}")
    return pin, path


def _target(args: argparse.Namespace) -> install.Target:
    if args.target:
        return install.find_target(Path(args.target))
    return install.find_target(Path(sysconfig.get_paths()["purelib"]))


def cmd_status(args: argparse.Namespace) -> int:
    """Show the series and, with a target, the state of every file."""
    series = _series(args)
    out(f"series {series.short_digest} against executorch {series.pins.executorch}")
    out(f"patched wheel version: {wheels.local_version(series)}")
    for number, patch in enumerate(series.patches, start=1):
        out(f"  {number}. {patch.name}: {patch.subject}")
        upstream = patch.header.get("Applied-Upstream")
        if upstream:
            out(f"       upstream: {upstream}")
    if args.target or not args.series_only:
        try:
            target = _target(args)
        except TargetError:
            if args.target:
                raise
            return 0
        states = install.file_states(series, target)
        out(f"target {target.root} (executorch {target.version})")
        for repo_path, state in states.items():
            out(f"  {state.value:<9} {repo_path}")
    return 0


def _describe_plan(plan: install.Plan, verb: str) -> None:
    for change in plan.changes:
        out(f"  {verb}: {change.repo_path}")
    for repo_path in plan.unchanged:
        out(f"  already {'pristine' if plan.reverse else 'patched'}: {repo_path}")


def cmd_check(args: argparse.Namespace) -> int:
    """Dry run: check everything apply (or revert) would check, and write nothing."""
    series = _series(args)
    plan = install.plan(series, _target(args), reverse=args.reverse)
    _describe_plan(plan, "would revert" if args.reverse else "would patch")
    out("nothing to do" if plan.is_noop else f"ok: {len(plan.changes)} file(s) would change")
    return 0


def cmd_apply(args: argparse.Namespace, *, reverse: bool = False) -> int:
    """Apply (or revert) the series on an installed or unpacked executorch, atomically."""
    series = _series(args)
    target = _target(args)
    plan = install.apply(series, target, reverse=reverse)
    _describe_plan(plan, "reverted" if reverse else "patched")
    if plan.is_noop:
        out(f"nothing to do: {target.root} is already {'pristine' if reverse else 'patched'}")
    return 0


def cmd_build_wheel(args: argparse.Namespace) -> int:
    """Download and verify the pinned wheel, apply the series, write the patched wheel."""
    series = _series(args)
    pin, source = _source_wheel(args, series)
    started = time.perf_counter()
    progress(f"applying {len(series.patches)} patches and repacking into {args.out}/")
    result = wheels.build_patched_wheel(series, source, pin, Path(args.out), force=args.force)
    seconds = time.perf_counter() - started
    state = f"built in {seconds:.1f} s" if result.built else "up to date, reused"
    progress(f"{result.path.name}: {state}")
    if args.report:
        report = {"wheel": str(result.path), "version": result.version, "built": result.built}
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out(str(result.path))
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    """Recompute patches/SHA256SUMS from the pinned wheel and the current patches."""
    series = _series(args)
    _, source = _source_wheel(args, series)
    hashes = wheels.patched_checksums(series, source)
    path = series.directory / CHECKSUMS_FILE
    path.write_text(format_checksums(series, hashes), encoding="utf-8")
    out(f"wrote {path} for series {series.short_digest}")
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    """Lay out the pristine sources and the series as git commits for editing."""
    series = _series(args)
    _, source = _source_wheel(args, series)
    sources = wheels.read_wheel_sources(source, series)
    worktree.create(series, sources, Path(args.dir))
    out(f"work tree ready in {args.dir}: one commit per patch on top of {worktree.BASE_TAG}")
    out("edit with git (commit --amend, rebase -i, new commits), then run:")
    out(f"  python -m overlay regenerate --dir {args.dir}")
    return 0


def cmd_regenerate(args: argparse.Namespace) -> int:
    """Rewrite patches/ from the commits of an edit work tree."""
    result = worktree.regenerate(Path(args.dir), _patches_dir(args))
    for name in result.written:
        out(f"  wrote {name}")
    for name in result.removed:
        out(f"  removed {name}")
    out(f"{len(result.written)} written, {len(result.unchanged)} unchanged")
    return 0


def cmd_verify_install(args: argparse.Namespace) -> int:
    """Check this environment runs the patched executorch of this series."""
    report = check_installed(_series(args), import_modules=not args.no_import)
    out(f"executorch {report.version} in {report.site}")
    for path, digest in report.files.items():
        out(f"  patched {digest[:12]} {path}")
    for module in report.modules:
        out(f"  imported {module}")
    out("ok: the environment runs the patched executorch")
    return 0


def _matrix(args: argparse.Namespace, series: Series) -> Matrix:
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    if not versions:
        versions = list(series.pins.matrix_versions)
    progress(f"version matrix over executorch {', '.join(versions)} (wheels fetched once, cached)")
    return releases.run_matrix(series, series.directory, versions)


def _write_matrix(matrix: Matrix, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "matrix.txt": render.render_table(matrix),
        "matrix.json": render.render_json(matrix),
        "matrix.md": render.render_markdown(matrix),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files]


def cmd_matrix(args: argparse.Namespace) -> int:
    """Show how every patch (and port) fares on each executorch release."""
    matrix = _matrix(args, _series(args))
    renderer = {
        "table": render.render_table,
        "json": render.render_json,
        "markdown": render.render_markdown,
    }[args.format]
    out(renderer(matrix).rstrip("\n"))
    if args.out:
        for path in _write_matrix(matrix, Path(args.out)):
            progress(f"wrote {path}")
    return 0


def cmd_export_upstream(args: argparse.Namespace) -> int:
    """Measure behaviour per release, then write mboxes, PR bodies and branches to send."""
    signer = export.parse_identity(args.signoff) if args.signoff else export.git_identity()
    versions = tuple(v.strip() for v in args.versions.split(",") if v.strip())
    request = prepare.Request(
        patches_dir=_patches_dir(args),
        out_dir=Path(args.out),
        versions=versions,
        signer=signer,
        upstream_clone=_upstream_clone(args.upstream),
        affected=args.affected,
        torch=tuple(args.torch or ()),
        names=tuple(args.patch or ()),
    )
    # Refuse a bad identity before minutes of work (it would be refused at the mbox).
    problems = export.check_message(f"{export.PREFIX}Fix it\n\nSigned-off-by: {signer}\n")
    if problems:
        raise UpstreamError(
            f"the sign-off identity {signer} breaks the Arm backend commit rules",
            expected=f"'Signed-off-by: Name <email>' within {export.MAX_LINE} characters",
            found="; ".join(problems),
            hint="pass one explicitly: --signoff 'Full Name <user@example.org>'",
        )
    done = prepare.prepare(request, progress=progress)
    out(render.render_table(done.matrix).rstrip("\n"))
    folder = Path(args.out)
    written = _write_matrix(done.matrix, folder) + export.write_exports(done.exports, folder)
    written += retarget.write_report(
        done.retarget, done.retarget.candidate.parent, _retarget_texts(done.retarget)
    )
    out("")
    for item in done.exports:
        repo, branch = done.branches[item.name]
        out(f"exported {item.name} ({item.source}) against executorch {item.base_version}:")
        out(f"  {item.subject}")
        out(f"  base-commit: {item.base_commit or 'unknown'}")
        out(f"  branch {branch} in {repo} (git am of the mbox; push it to your fork)")
        if item.name in done.lint:
            out(f"  lintrunner: {done.lint[item.name].summary}")
    for path in written:
        out(f"  wrote {path}")
    if not done.exports:
        out("no patch needs sending upstream")
    return 0


def _upstream_clone(value: str | None) -> Path | None:
    clone = value or os.environ.get("OVERLAY_UPSTREAM_CLONE")
    return Path(clone) if clone else None


def _retarget_texts(result: retarget.Retarget) -> dict[str, str]:
    return {
        "txt": render.render_retarget(result),
        "md": render.render_retarget_markdown(result),
        "json": render.render_retarget_json(result),
    }


def cmd_retarget(args: argparse.Namespace) -> int:
    """Write a checked candidate series for a new executorch release (or promote one)."""
    out_dir = Path(args.out or f"build/retarget/{args.version}")
    if args.promote:
        done = retarget.promote(out_dir, _patches_dir(args))
        out(f"promoted executorch {done.old_version} -> {done.version}")
        out(f"  the {done.old_version} series is kept in {done.archive} (--patches it to use it)")
        for name in done.written:
            out(f"  wrote {name}")
        return 0
    request = retarget.Request(
        version=args.version,
        patches_dir=_patches_dir(args),
        out_dir=out_dir,
        fast=not args.full,
        behaviour=not args.no_behaviour,
        equivalence=not args.no_equivalence,
        torch=tuple(args.torch or ()),
        upstream_clone=_upstream_clone(args.upstream),
        resume=args.resume,
    )
    result = retarget.retarget(request, progress=progress)
    texts = _retarget_texts(result)
    out(texts["txt"].rstrip("\n"))
    for path in retarget.write_report(result, out_dir, texts):
        progress(f"wrote {path}")
    if result.ready:
        out(
            f"next: review {out_dir}/retarget.md, then"
            f" `python -m overlay retarget {args.version} --promote`"
        )
        return 0
    if result.resume:
        return UpstreamError.exit_code
    raise UpstreamError(
        f"the executorch {args.version} candidate is not ready",
        expected="every kept patch fails before and passes after, nothing regresses",
        found="\n".join(result.problems),
        hint=f"read {out_dir}/retarget.md",
    )


def _equivalence_options(args: argparse.Namespace) -> orchestrator.Options:
    return orchestrator.options_from_env(
        args.stock_python,
        args.patched_python,
        runtime_patch=args.runtime_patch,
        models=args.models,
        fast=args.fast,
        only=tuple(args.case or ()),
        probes=not args.no_probes,
        parallel=not args.serial,
        attribute=not args.no_attribution,
        keep_bytes=args.keep_bytes,
        out_dir=Path(args.out),
        timeout=args.timeout,
        patches_dir=_patches_dir(args),
    )


def cmd_equivalence(args: argparse.Namespace) -> int:
    """Compare stock, stock + runtime patch and the diff-patched build, case by case."""
    if args.list:
        stock = args.stock_python or os.environ.get("OVERLAY_STOCK_PYTHON") or sys.executable
        options = orchestrator.options_from_env(
            stock, stock, models=args.models, out_dir=Path(args.out)
        )
        listing = orchestrator.list_items(options)
        for case in listing.cases:
            claims = "".join(
                f" claims {t.effect.value} by patch {f.number}"
                for f, t in fixes.triggers_of(case.name)
            )
            fast = " [fast]" if case.fast else ""
            out(f"case  {case.name}: {case.spec} {case.quantize or 'fp'}{fast}{claims}")
        for probe in listing.probes:
            out(f"probe {probe.name}: {probe.description}")
        return 0
    options = _equivalence_options(args)
    result = orchestrator.run(options, progress=progress if args.verbose else lambda _: None)
    out(report.render_table(result).rstrip("\n"))
    folder = options.out_dir
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("equivalence.json", report.render_json(result)),
        ("equivalence.md", report.render_markdown(result)),
    ):
        (folder / name).write_text(text, encoding="utf-8")
        progress(f"wrote {folder / name}")
    if result.failures:
        raise EquivalenceError(
            f"{len(result.failures)} undeclared divergence(s) or unreproduced claim(s)",
            expected="(b) stock + runtime patch and (c) the diff-patched build agree",
            found="\n".join(result.failures),
            hint=f"read {folder / 'equivalence.md'}; fix the patch, or declare the divergence"
            " in overlay/equivalence/verdict.py DECLARED_DIVERGENCES with its reason",
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m overlay",
        description="Arm-backend fix series for a pinned executorch release: apply, build,"
        " verify, prove equivalence, prepare upstream pull requests.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--patches",
        help="series folder ('series', patches, SHA256SUMS, pins.toml); default:"
        f" ${pins.PATCHES_ENV}, else the checkout's patches/, else the series in the package",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler)
        return command

    def add_target(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--target",
            help="site-packages, venv or unpacked wheel holding executorch "
            "(default: this Python's site-packages)",
        )

    def add_wheel(command: argparse.ArgumentParser) -> None:
        group = command.add_mutually_exclusive_group()
        group.add_argument("--wheel", help="use this local pinned wheel file (sha256-checked)")
        group.add_argument(
            "--wheel-tag", help="pinned wheel by tag, e.g. cp311-manylinux_2_28_x86_64"
        )

    status = add("status", cmd_status, "show the series and the state of a target's files")
    add_target(status)
    status.add_argument("--series-only", action="store_true", help="do not look for a target")
    check = add("check", cmd_check, "dry run: verify a target could be patched (writes nothing)")
    add_target(check)
    check.add_argument("--reverse", action="store_true", help="check a revert instead")
    add_target(add("apply", cmd_apply, "apply the series to a target, atomically"))
    add_target(
        add("revert", lambda a: cmd_apply(a, reverse=True), "restore a target's pristine files")
    )
    build = add("build-wheel", cmd_build_wheel, "build the patched executorch wheel")
    add_wheel(build)
    build.add_argument("--out", default="dist", help="output folder (default: %(default)s)")
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.add_argument("--report", help="also write a JSON summary to this file")
    add_wheel(add("refresh", cmd_refresh, f"recompute patches/{CHECKSUMS_FILE}"))
    edit = add("edit", cmd_edit, "lay out pristine sources + series as git commits")
    add_wheel(edit)
    edit.add_argument("--dir", required=True, help="new folder for the work tree")
    regen = add("regenerate", cmd_regenerate, "rewrite patches/ from an edit work tree")
    regen.add_argument("--dir", required=True, help="the work tree made by `edit`")
    verify = add("verify-install", cmd_verify_install, "check this env runs the patched wheel")
    verify.add_argument("--no-import", action="store_true", help="check files only")
    matrix = add("matrix", cmd_matrix, "how each patch fares on each executorch release")
    export = add("export-upstream", cmd_export_upstream, "write upstream PR mboxes + bodies")
    for command in (matrix, export):
        command.add_argument(
            "--versions", default="", help="releases, comma-separated (default: pins.toml)"
        )
    matrix.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    matrix.add_argument("--out", help="also write matrix.txt/.json/.md to this folder")
    export.add_argument("--out", default="build/upstream", help="folder (default: %(default)s)")
    export.add_argument("--signoff", help="'Name <email>' (default: git config user.*)")
    export.add_argument("--patch", action="append", help="export only this patch (repeatable)")
    export.add_argument(
        "--upstream",
        help="a pytorch/executorch clone ($OVERLAY_UPSTREAM_CLONE): base on main, lint, branch",
    )
    export.add_argument(
        "--affected", action="store_true", help="also run the affected upstream tests (minutes)"
    )
    export.add_argument("--torch", action="append", help="torch version to try first")
    ret = add("retarget", cmd_retarget, "candidate series for a new executorch release")
    ret.add_argument("version", help="the executorch release, e.g. 1.5.1")
    ret.add_argument("--out", help="folder (default: build/retarget/VERSION)")
    ret.add_argument("--full", action="store_true", help="whole corpus (default: fast subset)")
    ret.add_argument("--torch", action="append", help="torch version to try first (repeatable)")
    ret.add_argument(
        "--upstream",
        help="a pytorch/executorch clone ($OVERLAY_UPSTREAM_CLONE): torch_pin.py, pytest.ini",
    )
    ret.add_argument("--no-behaviour", action="store_true", help="text only (not promotable)")
    ret.add_argument("--no-equivalence", action="store_true", help="skip the pinned-release runs")
    ret.add_argument("--resume", action="store_true", help="continue after resolving a conflict")
    ret.add_argument("--promote", action="store_true", help="make the checked candidate the pin")
    eq = add("equivalence", cmd_equivalence, "prove stock+runtime patch == diff-patched build")
    eq.add_argument("--stock-python", help="python of the stock env ($OVERLAY_STOCK_PYTHON)")
    eq.add_argument("--patched-python", help="python of the patched env ($OVERLAY_PATCHED_PYTHON)")
    eq.add_argument(
        "--runtime-patch",
        default=orchestrator.DEFAULT_RUNTIME_PATCH,
        help="FILE.py:FUNCTION or module:FUNCTION for path (b) (default: %(default)s)",
    )
    eq.add_argument("--models", help="FILE.py defining CASES (see README) to add to the corpus")
    eq.add_argument("--fast", action="store_true", help="the CI subset: one case per fix")
    eq.add_argument("--case", action="append", help="run only this case (repeatable)")
    eq.add_argument("--list", action="store_true", help="list cases and probes, run nothing")
    eq.add_argument("--no-probes", action="store_true", help="skip the unit-level probes")
    eq.add_argument("--serial", action="store_true", help="run the three paths one by one")
    eq.add_argument("--no-attribution", action="store_true", help="skip per-patch attribution")
    eq.add_argument("--keep-bytes", action="store_true", help="keep delegate bytes in the JSON")
    eq.add_argument("--out", default="reports", help="folder for equivalence.json/.md, logs")
    eq.add_argument(
        "--timeout",
        type=float,
        default=orchestrator.DEFAULT_TIMEOUT_S,
        help="seconds one item (or a worker's start) may take (default: %(default)s)",
    )
    eq.add_argument("--verbose", action="store_true", help="progress lines on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except OverlayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
