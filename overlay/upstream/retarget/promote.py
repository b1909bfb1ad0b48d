"""Release lines from retargets: promote a checked candidate to a new line (never touching the
existing ones; the newest line is the default), retire a line (naming what still refers to it)."""

from __future__ import annotations

import datetime
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from overlay import codec, lines
from overlay._files import write_text_atomic
from overlay._git import git
from overlay.codec import CodecError
from overlay.envs import lockfiles
from overlay.errors import OverlayError, SeriesError, UpstreamError
from overlay.lines import evidence
from overlay.lines.pins import LOCKS_DIR, PINS_FILE, SERIES_FILE
from overlay.text.series import CHECKSUMS_FILE, load_series
from overlay.upstream import upstream_pins
from overlay.upstream.results import Action
from overlay.upstream.retarget.retarget_verdict import Retarget
from overlay.upstream.upstream_pins import UPSTREAM_FILE

REPORT_STEM = "retarget"
STAGING = ".promoting-"  # a half-copied line is built here, then renamed into place


@dataclass(frozen=True)
class Promotion:
    """What ``promote`` wrote."""

    version: str
    line: Path  # the new line folder
    written: tuple[str, ...]  # files of the line, relative to it
    previous_default: str  # the default line before (now one of the older lines)
    recorded: bool  # the release was added to upstream.toml


def promote(out_dir: Path, root: Path, *, today: str = "") -> Promotion:
    """Make a checked candidate the new line ``<root>/<version>/``; leave the others alone.

    A candidate whose every patch is the line's own, byte for byte (the line measured again
    after its patches changed; the line may carry more, fixes no older line has) writes only
    the line's ``evidence.toml``.
    """
    report_path = out_dir / f"{REPORT_STEM}.json"
    try:
        report = codec.loads(Retarget, report_path.read_text(encoding="utf-8"), "retarget")
    except (OSError, CodecError) as exc:
        found = f"{exc.message} ({exc.found})" if isinstance(exc, CodecError) else str(exc)
        raise UpstreamError(
            f"no retarget report in {out_dir}",
            expected=str(report_path),
            found=found,
            hint="run `executorch-arm-overlay retarget VERSION --out DIR` first",
        ) from exc
    if not report.ready:
        raise UpstreamError(
            "the candidate is not ready to promote",
            expected="a retarget report with no problems",
            found="; ".join(report.problems) or "ready = false",
            hint="fix what the report says (or re-run retarget without --no-behaviour)",
        )
    today = today or datetime.date.today().isoformat()
    candidate = out_dir / "patches"
    series = load_series(candidate)
    version = str(series.pins.executorch)
    line = root / version
    if line.exists() and _holds_patches(line, candidate):  # measured again: new evidence only
        evidence.write(line, line_evidence(report, _headers(root, report), measured=today))
        return Promotion(version, line, (evidence.EVIDENCE_FILE,), "", False)
    if line.exists():
        raise UpstreamError(
            f"the line {line} exists already",
            expected=f"no line for executorch {version} yet",
            found=str(line),
            hint=f"it was promoted already with other patches (`git log {line}`); to replace"
            f" it, retire it first: executorch-arm-overlay retire-line {version}",
        )
    try:
        for pin in series.pins.wheels:
            lockfiles.check_current(series, pin)
    except OverlayError as exc:
        raise UpstreamError(
            "the candidate has no current lock for every wheel it pins",
            expected=f"{candidate / LOCKS_DIR}/<tag>.txt for each [[wheels]] entry",
            found=exc.message,
            hint=f"run `executorch-arm-overlay --patches {candidate} lock`, or the retarget again"
            " without --no-locks",
        ) from exc
    previous = lines.default_line(root).name if lines.all_lines(root) else ""
    staging = root / f"{STAGING}{version}"
    if staging.exists():  # left by an interrupted promote: start again
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    written = [SERIES_FILE, PINS_FILE, CHECKSUMS_FILE, *(p.name for p in series.patches)]
    for name in written:
        shutil.copy2(candidate / name, staging / name)
    shutil.copytree(candidate / LOCKS_DIR, staging / LOCKS_DIR)
    written += [f"{LOCKS_DIR}/{p.name}" for p in sorted((staging / "locks").iterdir())]
    evidence.write(staging, line_evidence(report, _headers(root, report), measured=today))
    written.append(evidence.EVIDENCE_FILE)
    load_series(staging)  # the line must load on its own before it is one
    staging.rename(line)
    recorded = _record_release(root, candidate, version)
    return Promotion(version, line, tuple(written), previous, recorded)


def line_evidence(
    report: Retarget, headers: Mapping[str, str], *, measured: str
) -> evidence.LineEvidence:
    """Return the evidence in a ready retarget report (``retarget.json``).

    ``headers`` maps each older patch's file name to its ``Applied-Upstream`` header (a
    DEP-3 header may go on over lines: the evidence holds it on one), kept for a dropped one.
    """
    patches = []
    for row in report.patches:
        status = _STATUS.get(row.action)
        if status is None:
            raise SeriesError(
                f"the retarget report has no verdict to promote for {row.patch}",
                expected="ported, carried or drop",
                found=row.action.value,
                hint="resolve the patch and re-run the retarget before promoting it",
            )
        found = row.on.behaviour
        test = ""  # "stock 1 failed -> patched 1 passed (fails before, passes after)"
        if found is not None and found.test is not None:
            verdict = found.test_verdict
            test = found.test.text + (f" ({verdict.outcome.value})" if verdict else "")
        patches.append(
            evidence.PatchEvidence(
                patch=row.patch,
                status=status,
                reason=row.text,
                cases=tuple(
                    evidence.CaseResult(c.case, c.stock.value, c.patched.value if c.patched else "")
                    for c in (found.cases if found else ())
                ),
                upstream_test=test,
                # the older patch's header names where its own bug was fixed: a port carries
                # another bug, still open
                applied_upstream=" ".join(headers.get(row.patch, "").split())  # one line
                if status is evidence.Status.DROPPED
                else "",
            )
        )
    return evidence.LineEvidence(
        schema=evidence.SCHEMA,
        retargeted_from=report.old_version,
        measured=measured,
        corpus="fast" if report.fast else "full",
        patches=tuple(patches),
    )


_STATUS = {
    Action.PORTED: evidence.Status.PORTED,
    Action.CARRIED: evidence.Status.CARRIED,
    Action.DROP: evidence.Status.DROPPED,
}


def _headers(root: Path, report: Retarget) -> dict[str, str]:
    """Return the Applied-Upstream header of each patch of the line the retarget came from."""
    try:
        series = load_series(lines.line_named(root, report.old_version).directory)
    except OverlayError:  # the older line was retired since: the report's own text remains
        return {}
    return {p.name: p.header.get("Applied-Upstream", "") for p in series.patches}


def _record_release(root: Path, candidate: Path, version: str) -> bool:
    """Add the release (matrix wheel sha256, torch pin) to ``<root>/upstream.toml``."""
    shared_file = root / UPSTREAM_FILE
    own = candidate / UPSTREAM_FILE
    if not shared_file.is_file() or not own.is_file():
        return False
    found = upstream_pins.load(own)
    before = shared_file.read_text(encoding="utf-8")
    after = upstream_pins.with_release(
        before, version, sha256=found.sha256.get(version, ""), torch=found.torch.get(version, "")
    )
    if after != before:
        write_text_atomic(shared_file, after)
    return after != before


@dataclass(frozen=True)
class Retirement:
    """What ``retire_line`` removed and what still refers to the line."""

    version: str
    removed: Path
    with_git: bool  # removed with `git rm -r` (staged), else deleted from disk
    default: str  # the default line now
    references: tuple[str, ...]  # "path:line: text" of checkout files naming the line


def retire_line(root: Path, version: str, *, dry_run: bool = False) -> Retirement:
    """Remove the line ``<root>/<version>/``; refuse the last line; list what names it.

    ``dry_run``: every check and the list; nothing is removed.
    """
    line = lines.line_named(root, version)
    others = [other for other in lines.all_lines(root) if other.name != version]
    if not others:
        raise SeriesError(
            f"{line.directory} is the only release line",
            expected="another line to become the default",
            found=version,
            hint="promote a retarget first (`executorch-arm-overlay retarget VERSION --promote`)",
        )
    checkout = lines.find_checkout(root)
    with_git = checkout is not None and _tracked(checkout, line.directory)
    if with_git and checkout is not None and not dry_run:
        git(checkout, "rm", "-r", "-q", "--", str(line.directory.relative_to(checkout)))
    if line.directory.exists() and not dry_run:  # untracked files (build leftovers), no git
        shutil.rmtree(line.directory)
    references = _references(checkout, version) if checkout is not None else ()
    return Retirement(version, line.directory, with_git, others[-1].name, references)


def _tracked(checkout: Path, folder: Path) -> bool:
    try:
        return bool(git(checkout, "ls-files", "--", str(folder.relative_to(checkout))).strip())
    except (OverlayError, ValueError):
        return False


def _references(checkout: Path, version: str) -> tuple[str, ...]:
    """Return the lines of code, tests and docs that quote the line's version."""
    quoted = re.compile(rf"[\"'/]{re.escape(version)}[\"'/]")
    found = []
    for folder, pattern in (("overlay", "*.py"), ("tests", "*.py"), ("docs", "*.md")):
        for path in sorted((checkout / folder).rglob(pattern)):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if quoted.search(line):
                    found.append(f"{path.relative_to(checkout)}:{number}: {line.strip()[:120]}")
    return tuple(found)


def _holds_patches(line: Path, candidate: Path) -> bool:
    """Return whether ``line`` holds every patch of ``candidate``, byte for byte: the patch of
    the same fix number (a candidate names a port by the older line's patch)."""
    held = {p.number: p.text for p in load_series(line).patches}
    return all(held.get(p.number) == p.text for p in load_series(candidate).patches)
