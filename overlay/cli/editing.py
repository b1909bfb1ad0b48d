"""The series commands: `edit`, `regenerate` and `refresh` (docs/fixes.md: adding a fix)."""

from __future__ import annotations

import argparse
from pathlib import Path

from overlay import worktree
from overlay.cli import common, json_output
from overlay.cli.build import downloads, pin_of, pinned_wheel
from overlay.cli.invocation import command
from overlay.cli.output import json_report, out
from overlay.distribution import wheels
from overlay.text.series import CHECKSUMS_FILE, format_checksums, load_series


def cmd_refresh(args: argparse.Namespace) -> int:
    """Recompute the line's SHA256SUMS from the pinned wheel and the current patches."""
    series = load_series(common.patches_dir(args, change="refresh"))
    _, source = pinned_wheel(args, series)
    hashes = wheels.patched_checksums(series, source)
    path = series.directory / CHECKSUMS_FILE
    text = format_checksums(series, hashes)
    current = path.is_file() and path.read_text(encoding="utf-8") == text
    if not args.dry_run and not current:
        path.write_text(text, encoding="utf-8")
    if args.json:
        found = json_output.RefreshReport(str(path), series.short_digest, args.dry_run, not current)
        return json_report(found)
    if args.dry_run:
        state = "up to date" if current else "would be rewritten"
        out(f"{path}: {state} (series {series.short_digest}); nothing written")
        return 0
    out(f"{'unchanged' if current else 'wrote'} {path} for series {series.short_digest}")
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    """Lay out the pristine sources and the series as git commits for editing.

    A checkout's line only: `regenerate`, which writes the edit back, works on no other.
    """
    series = load_series(common.patches_dir(args, change="edit"))
    worktree.check_dest(Path(args.dir))  # before the download
    if args.dry_run:
        pin = pin_of(args, series)
        if downloads(args, pin):
            out(f"would download {pin.file} (pinned sha256 {pin.sha256[:12]}...)")
        out(f"would lay out {len(series.patches)} patches as commits in {args.dir}")
        return 0
    _, source = pinned_wheel(args, series)
    sources = wheels.read_wheel_sources(source, series)
    worktree.create(series, sources, Path(args.dir))
    out(f"work tree ready in {args.dir}: one commit per patch on top of {worktree.BASE_TAG}")
    out("edit with git (commit --amend, rebase -i, new commits), then run:")
    out(f"  {command(f'regenerate --dir {args.dir}')}")
    return 0


def cmd_regenerate(args: argparse.Namespace) -> int:
    """Rewrite the line's patches from the commits of an edit work tree."""
    folder = common.patches_dir(args, change="regenerate")
    result = worktree.regenerate(Path(args.dir), folder, dry_run=args.dry_run)
    if args.json:
        return json_report(result)
    would = "would be " if args.dry_run else ""
    for name in result.written:
        out(f"  {'would write' if args.dry_run else 'wrote'} {name}")
    for name in result.removed:
        out(f"  {'would remove' if args.dry_run else 'removed'} {name}")
    out(f"{len(result.written)} {would}written, {len(result.unchanged)} unchanged")
    return 0


def add_commands(add: common.Adder) -> None:
    """Add refresh, edit and regenerate to the parser."""
    refresh = add("refresh", cmd_refresh, f"recompute the line's {CHECKSUMS_FILE}")
    common.add_wheel(refresh)
    common.add_dry_run(refresh, f"say whether {CHECKSUMS_FILE} would change")
    common.add_json(refresh)
    edit = add("edit", cmd_edit, "lay out pristine sources + series as git commits")
    common.add_wheel(edit)
    edit.add_argument("--dir", required=True, help="new folder for the work tree")
    common.add_dry_run(edit, "check the line and the folder; write nothing")
    regen = add("regenerate", cmd_regenerate, "rewrite the line's patches from an edit work tree")
    regen.add_argument("--dir", required=True, help="the work tree made by `edit`")
    common.add_dry_run(regen, "every check; say what would change, write nothing")
    common.add_json(regen)
