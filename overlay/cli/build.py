"""The build commands: `build-wheel`, `lock`, `sync` and `verify-install`; each picks its
release line first and refuses an unknown one before any download."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay import render
from overlay.cli import common, json_output
from overlay.cli.output import json_report, out, progress
from overlay.distribution import index, wheels
from overlay.distribution.provenance import local_version
from overlay.envs import lockfiles, ready_venv, venvs
from overlay.envs.verify_install import check_installed, environment
from overlay.lines import pins
from overlay.text.series import Series
from overlay.tree.locate import default_environment


def pin_of(args: argparse.Namespace, series: Series) -> pins.WheelPin:
    """Return the pin of ``--wheel`` (its sha256 checked), ``--tag`` or this host; no download."""
    if args.wheel:
        return wheels.pin_for_file(series, Path(args.wheel))
    return series.pins.wheel_for(args.tag) if args.tag else series.pins.host_wheel()


def downloads(args: argparse.Namespace, pin: pins.WheelPin) -> bool:
    """Return True when the pinned wheel would be downloaded (no --wheel, not in the cache)."""
    return not args.wheel and not (wheels.wheel_cache() / pin.file).is_file()


def pinned_wheel(args: argparse.Namespace, series: Series) -> tuple[pins.WheelPin, Path]:
    """Return the pin and the verified wheel of ``--wheel``, ``--tag`` or this host."""
    pin = pin_of(args, series)
    if args.wheel:
        return pin, Path(args.wheel)
    path = wheels.fetch_pinned(pin, progress)
    progress(f"verified {path.name}")
    return pin, path


def _dist(args: argparse.Namespace, series: Series) -> Path:
    return Path(args.dist) if args.dist else index.default_folder(series)


def _build_dry_run(args: argparse.Namespace, series: Series) -> int:
    """Check the line, the pin and the series' checksums; say what a build would do."""
    series.expected_patched_sha256()  # a stale SHA256SUMS stops here, as it stops the build
    pin = pin_of(args, series)
    fetch = downloads(args, pin)
    dist = _dist(args, series)
    path = dist / wheels.patched_wheel_name(pin, series)
    action = wheels.build_action(series, pin, dist, force=args.force, cache=wheels.patched_cache())
    if args.json:
        plan = json_output.BuildPlanReport(str(path), local_version(series), fetch, action)
        return json_report(plan)
    if fetch:
        out(f"would download {pin.file} (pinned sha256 {pin.sha256[:12]}...)")
    out(f"{path}: up to date" if action == "up to date" else f"would write {path} ({action})")
    return 0


def cmd_build_wheel(args: argparse.Namespace) -> int:
    """Download and verify the pinned wheel, apply the series, write the patched wheel."""
    series = common.line_series(args)
    if args.dry_run:
        return _build_dry_run(args, series)
    pin, source = pinned_wheel(args, series)
    dist = _dist(args, series)
    progress(f"applying {len(series.patches)} patches and repacking into {dist}/")
    result = index.build_into(series, source, pin, dist, force=args.force, progress=progress)
    lock_file = lockfiles.lock_path(series, pin)
    built = json_output.BuildReport(
        str(result.path),
        result.version,
        result.built,
        result.sha256,
        str(lock_file) if lock_file.is_file() else None,
        str(dist / index.SIMPLE),
    )
    if args.report:
        Path(args.report).write_text(render.json_text(built), encoding="utf-8")
    if args.json:
        return json_report(built)
    out(str(result.path))
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    """Resolve (or with --check, only check) the lock of every pinned wheel of one line."""
    series = common.line_series(args, change=None if args.check else "lock")
    tags = args.tag
    selected = [series.pins.wheel_for(t) for t in tags] if tags else series.pins.wheels
    done = []
    for pin in selected:
        if args.check:
            found = lockfiles.check_current(series, pin)
        else:
            source = wheels.fetch_pinned(pin, progress)
            dist = _dist(args, series)
            built = index.build_into(series, source, pin, dist, force=args.force, progress=progress)
            progress(f"resolving the lock for {pin.tag} with uv")
            found = lockfiles.generate(series, pin, built.path, upgrade=args.upgrade)
            lockfiles.check_wheel(found, built.path, built.sha256)
        done.append(
            json_output.LockEntry(pin.tag, str(found.path), len(found.packages), not args.check)
        )
        if not args.json:
            what = "wrote" if not args.check else "current:"
            out(f"{what} {found.path} ({len(found.packages)} packages)")
    if args.json:
        return json_report(json_output.LockReport(str(series.pins.executorch), tuple(done)))
    return 0


def _sync_dry_run(
    args: argparse.Namespace, series: Series, root: Path, seen: ready_venv.SyncPreview
) -> int:
    """Say what the sync would do; nothing was built or written."""
    label = seen.request.contents().label
    if args.json:
        report = json_output.SyncReport(
            str(root), seen.request.line, label, True, not seen.reason, seen.reason, seen.builds,
            None, (),
        )  # fmt: skip
        return json_report(report)
    if seen.builds:
        out(f"would build the patched executorch wheel into {_dist(args, series)}/")
    if seen.reason:
        out(f"would sync {root} to {label}: {seen.reason}")
    else:
        out(f"up to date: {root} is exactly {label} (nothing would change)")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Make a venv exactly a line's lock (patched or stock executorch), verified, or skip."""
    series = common.line_series(args)
    line = str(series.pins.executorch)
    given = Path(args.target) if args.target else None
    root, python = ready_venv.place(given, Path(args.ready_in or "."), line, args.python)
    on_top = tuple(args.with_ or ())
    seen = ready_venv.preview(  # every check (lock, folder) before any download or build
        series, series.pins.host_wheel(python), root, stock=args.stock, on_top=on_top,
        force=args.force,
    )  # fmt: skip
    if args.dry_run:
        return _sync_dry_run(args, series, root, seen)
    request = ready_venv.with_wheel(
        seen.request, dist=_dist(args, series), force=args.force, progress=progress
    )
    verified = ready_venv.sync(request, root, force=args.force, progress=progress)
    label = request.contents().label
    if args.json:
        report = json_output.SyncReport(
            str(root), line, label, False, verified is None, seen.reason, seen.builds,
            verified.version if verified else None, verified.modules if verified else (),
        )  # fmt: skip
        return json_report(report)
    if verified is None:
        out(f"up to date: {root} is exactly {label} (stamped by its last sync)")
        return 0
    out(f"ok: {root} is exactly {label}; executorch {verified.version}")
    for module in verified.modules:
        out(f"  imported {module}")
    out(f"activate: source {root}/bin/activate")
    return 0


def cmd_verify_install(args: argparse.Namespace) -> int:
    """Check an env: every locked package version, provenance, file hashes, then imports."""
    if args.target:
        env = environment(Path(args.target))
    else:
        active = default_environment()
        progress(f"target: {active.path} ({active.how})")
        env = environment(active.path)
    series = common.line_series(args, venvs.installed_versions(env.site).get("executorch"))
    locked = None
    if args.lock:
        locked = lockfiles.read(Path(args.lock))
    elif not args.no_lock:
        locked = lockfiles.check_current(series, series.pins.host_wheel(env.version))
    found = check_installed(
        series,
        import_modules=not args.no_import,
        search_path=env.site,
        lock=locked,
        python=env.python,
        repair=ready_venv.repair_command(series, locked, env.root, env.python),
    )
    if args.json:
        return json_report(found)
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


def add_commands(add: common.Adder) -> None:
    """Add build-wheel, lock, sync and verify-install to the parser."""
    build = add("build-wheel", cmd_build_wheel, "build the patched executorch wheel")
    common.add_wheel(build)
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.add_argument("--report", metavar="FILE", help="also write a JSON summary to FILE")
    common.add_dry_run(build, "every check; say what a build would do")
    common.add_json(build)

    lock = add("lock", cmd_lock, "resolve the lock of every pinned wheel (uv, with hashes)")
    lock.add_argument(
        "--check",
        "--dry-run",
        dest="check",
        action="store_true",
        help="only check the locks are current (write nothing)",
    )
    lock.add_argument(
        "--upgrade",
        action="store_true",
        help="resolve every package anew (default: keep the locked versions, change executorch)",
    )
    common.add_json(lock)
    lock.add_argument(
        "--tag", metavar="TAG", action="append", help="only this pinned wheel's lock (repeatable)"
    )

    sync = add("sync", cmd_sync, "make a venv exactly a line's lock, with the patched executorch")
    where = sync.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", metavar="VENV", help="the venv to create or sync")
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
    common.add_dry_run(sync, "every check and the plan; build and write nothing")
    common.add_json(sync)
    for command in (build, lock, sync):
        common.add_dist(command)
    for command in (lock, sync):
        command.add_argument("--force", action="store_true", help="rebuild/recreate regardless")

    verify = add(
        "verify-install",
        cmd_verify_install,
        "check an env: locked versions, provenance, patched files, then imports",
    )
    verify.add_argument(
        "--target", metavar="VENV", help="the venv to check (default: the active venv)"
    )
    verify.add_argument("--no-import", action="store_true", help="check files only")
    verify.add_argument("--lock", metavar="FILE", help="check against this lock file")
    verify.add_argument("--no-lock", action="store_true", help="check executorch only")
    common.add_json(verify)
    for command in (build, lock, sync):
        common.add_line(command, "the newest in patches/")
    common.add_line(verify, "the installed executorch's")
