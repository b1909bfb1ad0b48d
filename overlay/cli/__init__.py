"""Command-line interface: the one place that prints and exits.

Size: the parser and every command's handler in one module while the CLI's help and hint
texts are being reworked on another branch; to split (parser, upstream and equivalence
commands) once that lands.

Every command maps OverlayError to its message on stderr and its exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version
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

from overlay import __version__, fixes, lines, worktree
from overlay.cli import in_place, json_output
from overlay.cli.output import out, progress
from overlay.dist import index, wheels
from overlay.envs import lockfiles, ready_venv, venvs
from overlay.envs.stamp import Flavour
from overlay.envs.verify_install import check_installed, current_site
from overlay.equivalence.controller import inputs, merge, orchestrator, outcome, result_cache
from overlay.equivalence.controller import options as run_options
from overlay.equivalence.controller.progress import Event, EventKind, Progress, no_progress
from overlay.equivalence.protocol import PathId
from overlay.equivalence.render import document as report_json
from overlay.equivalence.render import html as report_html
from overlay.equivalence.render import markdown as report_markdown
from overlay.equivalence.render import text as report_text
from overlay.equivalence.render.cells import item_label
from overlay.errors import (
    OverlayError,
    UpstreamError,
    exit_codes,
)
from overlay.lines import pins
from overlay.target import line_choice
from overlay.text.series import CHECKSUMS_FILE, Series, format_checksums, load_series
from overlay.upstream import commit_rules, export, prepare, releases, render, retarget
from overlay.upstream.canary import canary_run
from overlay.upstream.canary import page as canary_page
from overlay.upstream.matrix import Matrix
from overlay.upstream.upstream_pins import for_series

Handler = Callable[[argparse.Namespace], int]


def _patches_dir(args: argparse.Namespace) -> Path:
    return lines.series_directory(Path(args.patches) if args.patches else None)


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
    path = _pinned_source(pin)
    progress(f"verified {path.name}")
    return pin, path


def _build(
    args: argparse.Namespace, series: Series, pin: pins.WheelPin, source: Path, out_dir: Path
) -> wheels.BuildResult:
    """Build (or reuse) the patched wheel into ``out_dir``, publish the index, return it."""
    started = time.perf_counter()
    result = wheels.build_patched_wheel(
        series, source, pin, out_dir, force=args.force, cache=wheels.patched_cache()
    )
    seconds = time.perf_counter() - started
    for path in result.removed:
        progress(f"removed {path} (left by a killed build)")
    if result.note:
        progress(f"note: {result.note}")
    state = f"built in {seconds:.1f} s" if result.built else "up to date, reused"
    progress(f"{result.path.name}: {state}")
    published = index.publish(out_dir, result.version, {result.path.name: result.sha256})
    for name in published.moved:
        progress(f"moved {name} (an earlier series) to {out_dir / index.OLD}/")
    return result


def _line_series(args: argparse.Namespace, installed: str | None = None) -> Series:
    """Return the series of the chosen line (``overlay.target.line_choice``), before any work.

    ``--line``, else the line of the ``installed`` executorch version, else the newest line;
    an unknown line is refused, listing the supported ones.
    """
    try:
        version = Version(installed) if installed else None
    except InvalidVersion:
        version = None  # two copies ("2.1 + 2.2"): the check names them
    patches = Path(args.patches) if args.patches else None
    chosen = line_choice.choose(patches, args.line, version)
    if args.line is None and version is not None:
        progress(f"release line {chosen.name} ({chosen.reason})")
    return load_series(chosen.directory)


def _out_dir(args: argparse.Namespace, series: Series) -> Path:
    """Return ``--out``, by default ``dist/<line>``: each line's wheels beside the others'."""
    return Path(args.out) if args.out else Path("dist") / str(series.pins.executorch)


def _pinned_source(pin: pins.WheelPin) -> Path:
    """Return the verified pinned wheel (downloaded once into the wheel cache)."""
    if not (wheels.wheel_cache() / pin.filename).is_file():
        progress(f"downloading {pin.filename} (pinned sha256 {pin.sha256[:12]}...)")
    return wheels.fetch_wheel(pin)


def cmd_build_wheel(args: argparse.Namespace) -> int:
    """Download and verify the pinned wheel, apply the series, write the patched wheel."""
    series = _line_series(args)
    pin, source = _source_wheel(args, series)
    out_dir = _out_dir(args, series)
    progress(f"applying {len(series.patches)} patches and repacking into {out_dir}/")
    result = _build(args, series, pin, source, out_dir)
    lock_file = lockfiles.lock_path(series, pin)
    if args.report:
        built = json_output.BuildReport(
            str(result.path),
            result.version,
            result.built,
            result.sha256,
            str(lock_file) if lock_file.is_file() else None,
            str(out_dir / index.SIMPLE),
        )
        Path(args.report).write_text(json_output.to_json(built), encoding="utf-8")
    out(str(result.path))
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    """Resolve (or with --check, only check) the lock of every pinned wheel of one line."""
    series = _line_series(args)
    selected = [series.pins.wheel_for(t) for t in args.tag] if args.tag else series.pins.wheels
    for pin in selected:
        if args.check:
            found = lockfiles.check_current(series, pin)
            out(f"current: {found.path} ({len(found.packages)} packages)")
            continue
        result = _build(args, series, pin, _pinned_source(pin), _out_dir(args, series))
        progress(f"resolving the lock for {pin.tag} with uv")
        written = lockfiles.generate(series, pin, result.path)
        lockfiles.check_wheel(written, result.path, result.sha256)
        out(f"wrote {written.path} ({len(written.packages)} packages)")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Make a venv exactly a line's lock (patched or stock executorch), verified, or skip."""
    series = _line_series(args)
    line = str(series.pins.executorch)
    given = Path(args.venv) if args.venv else None
    python = (
        args.python
        or (given and venvs.python_version(given))
        or "{}.{}".format(*sys.version_info[:2])
    )
    root = given or Path(args.ready_in) / ready_venv.ready_name(line, python)
    pin = series.pins.host_wheel(python)
    locked = lockfiles.check_current(series, pin)
    if args.stock:
        links = ready_venv.stock_links(pin)
    else:
        out_dir = _out_dir(args, series)
        result = _build(args, series, pin, _pinned_source(pin), out_dir)
        lockfiles.check_wheel(locked, result.path, result.sha256)
        links = ready_venv.patched_links(series, pin, out_dir)
    request = ready_venv.EnvRequest(
        series,
        pin,
        locked,
        Flavour.STOCK if args.stock else Flavour.PATCHED,
        links,
        tuple(args.with_ or ()),
    )
    done = ready_venv.sync(request, root, force=args.force, progress=progress)
    label = request.contents().label
    if done.verified is None:
        out(f"up to date: {root} is exactly {label} (stamp and files checked)")
        return 0
    out(f"ok: {root} is exactly {label}; executorch {done.verified.version}")
    for module in done.verified.modules:
        out(f"  imported {module}")
    out(f"activate: source {root}/bin/activate")
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
    """Check an env: every locked package version, provenance, file hashes, then imports."""
    if args.target:
        venv = venvs.find_venv(Path(args.target))
        root, site, python, version = venv.root, venv.site, venv.python, venv.version
    else:
        root, site, python = Path(sys.prefix), current_site(), Path(sys.executable)
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    series = _line_series(args, venvs.installed_versions(site).get("executorch"))
    locked = None
    if args.lock:
        locked = lockfiles.read(Path(args.lock))
    elif not args.no_lock:
        locked = lockfiles.check_current(series, series.pins.host_wheel(version))
    found = check_installed(
        series,
        import_modules=not args.no_import,
        search_path=site,
        lock=locked,
        python=python,
        repair=ready_venv.repair_command(series, locked, root, python),
    )
    if args.json:
        out(json_output.to_json(json_output.verify_report(found)).rstrip("\n"))
        return 0
    if found.lock:
        out(f"{found.locked} packages match {found.lock}")
    for extra in found.unlocked:
        out(f"  not in the lock: {extra}")
    out(f"executorch {found.version} in {found.site}")
    for path, digest in found.files.items():
        out(f"  patched {digest[:12]} {path}")
    for module in found.modules:
        out(f"  imported {module}")
    out("ok: the environment runs the patched executorch")
    return 0


def _matrix(args: argparse.Namespace, series: Series) -> Matrix:
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    if not versions:
        versions = list(for_series(series.directory).matrix_versions)
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
    signer = commit_rules.signer(args.signoff)  # checked against the rules before any work
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


def _progress_display(
    args: argparse.Namespace,
) -> contextlib.AbstractContextManager[Progress]:
    """Return the progress display: bars on a terminal, lines with --verbose, else none."""
    console = Console(stderr=True)
    if args.quiet:
        return contextlib.nullcontext(no_progress)
    if console.is_terminal and not args.verbose:
        return BarProgress(console)
    if args.verbose:
        return contextlib.nullcontext(LineProgress())
    return contextlib.nullcontext(no_progress)


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
        done = retarget.promote(out_dir, _lines_root(args))
        out(f"promoted executorch {done.version} to a new line: {done.line}")
        if done.previous_default:
            out(
                f"  the default line is now {done.version} (was {done.previous_default}; older"
                f" lines stay: --patches {done.line.parent / done.previous_default})"
            )
        for name in done.written:
            out(f"  wrote {done.line.name}/{name}")
        if done.recorded:
            out(f"  recorded executorch {done.version} in {done.line.parent / 'upstream.toml'}")
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
        locks=not args.no_locks,
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


def _lines_root(args: argparse.Namespace) -> Path:
    folder = Path(args.patches) if args.patches else lines.default_root()
    return folder.parent if lines.is_series_folder(folder) else folder


def cmd_retire_line(args: argparse.Namespace) -> int:
    """Remove a release line; say what still names it."""
    done = retarget.retire_line(_lines_root(args), args.version)
    how = "git rm -r (staged)" if done.with_git else "deleted"
    out(f"retired the executorch {done.version} line: {done.removed} ({how})")
    out(f"  the default line is {done.default}")
    if done.references:
        out(f"  still naming {done.version} (runtime forms, tests, docs: update or remove):")
        out("\n".join(f"    {line}" for line in done.references))
    return 0


def _equivalence_options(args: argparse.Namespace) -> run_options.Options:
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
        patches_dir=_patches_dir(args),
        shard=run_options.Shard.parse(args.shard) if args.shard else None,
        cache_dir=Path(args.cache_dir),
        use_cache=not args.no_cache,
        jobs=args.jobs,
    )


def _write_reports(result: outcome.Report, folder: Path) -> Path:
    """Write equivalence.json/.md/.html into ``folder``; return the Markdown file."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (
        ("equivalence.json", report_json.render_json(result)),
        ("equivalence.md", report_markdown.render_markdown(result)),
        ("equivalence.html", report_html.render_html(result)),
    ):
        (folder / name).write_text(content, encoding="utf-8")
        progress(f"wrote {folder / name}")
    return folder / "equivalence.md"


def _verdict(result: outcome.Report, written: Path) -> int:
    error = outcome.failure_error(result, written)
    if error is not None:
        raise error
    return 0


def cmd_equivalence(args: argparse.Namespace) -> int:
    """Compare stock, stock + runtime patch and the diff-patched build, case by case."""
    if args.list:
        stock = args.stock_python or os.environ.get("OVERLAY_STOCK_PYTHON") or sys.executable
        listed = inputs.options_from_env(stock, stock, models=args.models, out_dir=Path(args.out))
        listing = orchestrator.list_items(listed)
        for case in listing.cases:
            claims = "".join(
                f" claims {t.effect.value} by patch {f.number}"
                for f, t in fixes.triggers_of(case.name)
            )
            fast = " [fast]" if case.fast else ""
            group = f" [{case.group}]" if case.group != "core" else ""
            out(f"case  {case.name}: {case.spec} {case.quantize or 'fp'}{group}{fast}{claims}")
        for probe in listing.probes:
            out(f"probe {probe.name}: {probe.description}")
        return 0
    chosen = _equivalence_options(args)
    with _progress_display(args) as shown:
        result = orchestrator.run(chosen, progress=shown)
    out(report_text.render_table(result).rstrip("\n"))
    return _verdict(result, _write_reports(result, chosen.out_dir))


def cmd_merge_reports(args: argparse.Namespace) -> int:
    """Merge the equivalence.json of every shard into one report and one verdict."""
    base = Path(os.environ.get(run_options.CALLER_DIR_ENV) or Path.cwd())
    merged = merge.merge([report_json.load(base / name) for name in args.reports])
    out(report_text.render_table(merged).rstrip("\n"))
    return _verdict(merged, _write_reports(merged, base / args.out))


def cmd_canary(args: argparse.Namespace) -> int:
    """Replay every release line onto upstream main (and newer tags); write the status page."""
    upstream = args.upstream or os.environ.get("OVERLAY_UPSTREAM_CLONE")
    if not upstream:
        raise UpstreamError(
            "no upstream repository to run the canary against",
            expected="--upstream <a pytorch/executorch clone or git URL>",
            found="neither --upstream nor $OVERLAY_UPSTREAM_CLONE",
            hint="pass --upstream https://github.com/pytorch/executorch.git",
        )
    out_dir = Path(args.out)
    request = canary_run.Request(
        upstream=upstream,
        root=Path(args.patches) if args.patches else lines.default_root(),
        out_dir=out_dir,
        lines=tuple(n.strip() for v in args.lines or () for n in v.split(",") if n.strip()),
        tags=args.tags,
        previous=Path(args.previous) if args.previous else None,
        behaviour=not args.no_behaviour,
        gate=not args.no_gate,
    )
    report = canary_run.canary(request, progress=progress)
    for path in canary_page.write_page(report, out_dir):
        progress(f"wrote {path}")
    for line in report.lines:
        if line.error:
            out(f"{line.line}: {line.error}")
        for row in line.rows:
            out(f"{line.line} {row.patch}: {row.main.value}; {row.upstream}; next: {row.next_step}")
    out(f"behaviour on main: {report.behaviour.state.value} {report.behaviour.detail}".rstrip())
    if report.failed:
        raise UpstreamError(
            "the canary failed",
            expected="no patch newly conflicting on main, no export churn",
            found="\n".join(report.failures),
            hint=f"read {out_dir / 'status.md'}",
        )
    return 0


def cmd_report_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of equivalence.json."""
    out(report_json.render_schema().rstrip("\n"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m overlay",
        description="Arm-backend fix series for a pinned executorch release: apply, build,"
        " verify, prove equivalence, prepare upstream pull requests.",
        epilog=exit_code_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--patches",
        help="series folder ('series', patches, SHA256SUMS, pins.toml); default:"
        f" ${lines.PATCHES_ENV}, else the checkout's patches/, else the series in the package",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(handler=handler, command_parser=command)
        return command

    def add_wheel(command: argparse.ArgumentParser) -> None:
        group = command.add_mutually_exclusive_group()
        group.add_argument("--wheel", help="use this local pinned wheel file (sha256-checked)")
        group.add_argument(
            "--wheel-tag", help="pinned wheel by tag, e.g. cp311-manylinux_2_28_x86_64"
        )

    def add_json(command: argparse.ArgumentParser) -> None:
        command.add_argument("--json", action="store_true", help="print a JSON report")

    in_place.add_commands(add)
    build = add("build-wheel", cmd_build_wheel, "build the patched executorch wheel")
    add_wheel(build)
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.add_argument("--report", help="also write a JSON summary to this file")
    lock_cmd = add("lock", cmd_lock, "resolve the lock of every pinned wheel (uv, with hashes)")
    lock_cmd.add_argument("--check", action="store_true", help="only check the locks are current")
    lock_cmd.add_argument("--tag", action="append", help="only this wheel tag (repeatable)")
    sync = add("sync", cmd_sync, "make a venv exactly a line's lock, with the patched executorch")
    where = sync.add_mutually_exclusive_group(required=True)
    where.add_argument("--venv", help="the venv to create or sync")
    where.add_argument(
        "--ready-in", metavar="DIR", help="sync the line's ready venv DIR/ready-<line>-py<X.Y>"
    )
    sync.add_argument("--python", help="its Python version, e.g. 3.12 (default: the venv's)")
    sync.add_argument(
        "--stock",
        action="store_true",
        help="the lock with the pinned stock executorch in place of the patched one",
    )
    sync.add_argument(
        "--with",
        dest="with_",
        action="append",
        metavar="REQ",
        help="also install this on top, held to the lock's versions (repeatable)",
    )
    for command in (build, lock_cmd, sync):
        command.add_argument("--out", help="folder of the patched wheels (default: dist/<line>)")
    for command in (lock_cmd, sync):
        command.add_argument("--force", action="store_true", help="rebuild/recreate regardless")
    add_wheel(add("refresh", cmd_refresh, f"recompute patches/{CHECKSUMS_FILE}"))
    edit = add("edit", cmd_edit, "lay out pristine sources + series as git commits")
    add_wheel(edit)
    edit.add_argument("--dir", required=True, help="new folder for the work tree")
    regen = add("regenerate", cmd_regenerate, "rewrite patches/ from an edit work tree")
    regen.add_argument("--dir", required=True, help="the work tree made by `edit`")
    verify = add(
        "verify-install",
        cmd_verify_install,
        "check an env: locked versions, provenance, patched files, then imports",
    )
    verify.add_argument("--target", help="the venv to check (default: this Python's)")
    for command in (build, lock_cmd, sync, verify):
        command.add_argument(
            "--line", help="the release line, e.g. 1.2.0 (default: the newest in patches/)"
        )
    verify.add_argument("--no-import", action="store_true", help="check files only")
    verify.add_argument("--lock", help="check against this lock file (default: the pinned one)")
    verify.add_argument("--no-lock", action="store_true", help="check executorch only")
    add_json(verify)
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
    ret.add_argument("--no-locks", action="store_true", help="skip the candidate's locks (uv)")
    ret.add_argument("--resume", action="store_true", help="continue after resolving a conflict")
    ret.add_argument(
        "--promote", action="store_true", help="make the checked candidate a new release line"
    )
    retire = add("retire-line", cmd_retire_line, "remove a release line (patches/VERSION/)")
    retire.add_argument("version", help="the line's executorch release, e.g. 1.2.0")
    eq = add("equivalence", cmd_equivalence, "prove stock+runtime patch == diff-patched build")
    eq.add_argument("--stock-python", help="python of the stock env ($OVERLAY_STOCK_PYTHON)")
    eq.add_argument("--patched-python", help="python of the patched env ($OVERLAY_PATCHED_PYTHON)")
    eq.add_argument(
        "--runtime-patch",
        default=run_options.DEFAULT_RUNTIME_PATCH,
        help="FILE.py:FUNCTION or module:FUNCTION for path (b) (default: %(default)s)",
    )
    eq.add_argument(
        "--models", help="FILE.py defining CASES (see README): run these cases (not the corpus)"
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
        choices=("core", "zoo", "all"),
        help="corpus group: core (default; --fast adds one zoo case), zoo (real networks), all",
    )
    eq.add_argument("--list", action="store_true", help="list cases and probes, run nothing")
    eq.add_argument("--no-probes", action="store_true", help="skip the unit-level probes")
    eq.add_argument("--serial", action="store_true", help="run the three paths one by one")
    eq.add_argument("--no-attribution", action="store_true", help="skip per-patch attribution")
    eq.add_argument("--keep-bytes", action="store_true", help="keep delegate bytes in the JSON")
    eq.add_argument("--out", default="reports", help="folder for equivalence.json/.md, logs")
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
    merging.add_argument("--out", default="reports", help="folder for the merged report")
    add("report-schema", cmd_report_schema, "print the JSON Schema of equivalence.json")
    can = add("canary", cmd_canary, "replay every release line onto upstream main: status page")
    can.add_argument(
        "--upstream", help="a pytorch/executorch clone or git URL ($OVERLAY_UPSTREAM_CLONE)"
    )
    can.add_argument("--out", default="build/canary", help="folder (default: %(default)s)")
    can.add_argument("--lines", nargs="+", help="only these lines, e.g. 1.2.0 (default: all)")
    can.add_argument("--tags", action="store_true", help="also onto each newer vX.Y.Z tag")
    can.add_argument("--previous", help="the last status.json: fail on a newly conflicting patch")
    can.add_argument("--no-behaviour", action="store_true", help="text only (no release env)")
    can.add_argument("--no-gate", action="store_true", help="skip the export idempotence gate")
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
    """Leave quietly when stdout's reader went away (``| head``), as pip does; exit 1."""
    with contextlib.suppress(OSError, ValueError):  # no flush at exit into the broken pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    with contextlib.suppress(OSError):
        print("error: stdout was closed before the output ended (broken pipe)", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # a subcommand's own usage, not the top level's (argparse's default)
        command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        command.error(_unrecognized(command, extra))
    handler: Handler = args.handler
    try:
        try:
            return handler(args)
        except OverlayError as exc:
            print(f"error: {exc}", file=sys.stderr)
            if getattr(args, "json", False):
                error = json_output.ErrorReport(
                    type(exc).__name__,
                    exc.exit_code,
                    exc.message,
                    exc.expected,
                    exc.found,
                    exc.hint,
                )
                out(json_output.to_json(error).rstrip("\n"))
            return exc.exit_code
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
    except BrokenPipeError:
        return _closed_stdout()
