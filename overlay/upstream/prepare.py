"""Prepare upstream pull requests: what to send is decided by behaviour, not by text alone.

``prepare`` builds the text matrix over the releases, then runs the retarget on the
newest one (:mod:`overlay.upstream.retarget.run`: stock and patched envs of that release,
trigger cases, the tests a patch adds, both ways, and the same cases on the pinned
release). A patch is sent only when its bug trigger fails on stock of the target release
and passes with the patch, its new test fails before and passes after, and nothing in the
corpus regresses (:func:`overlay.upstream.verdicts.sends`). Each patch sent gets an mbox, a
PR body, a drafted issue when it names none, a checklist, lint results (with an upstream
clone) and a git branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from overlay import fixes
from overlay._git import git, show
from overlay.errors import OverlayError, UpstreamError
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Patch, load_series
from overlay.upstream import commit_rules, export, lint, upstream_tests
from overlay.upstream.matrix import matrix_of
from overlay.upstream.releases import Release, load_release, release_metadata
from overlay.upstream.results import (
    Matrix,
    PatchBehaviour,
    Retarget,
    TestRun,
    parse_applied_upstream,
)
from overlay.upstream.retarget import run
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import sends

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Request:
    """What to prepare."""

    patches_dir: Path
    out_dir: Path
    versions: tuple[str, ...]
    signer: commit_rules.Identity
    upstream_clone: Path | None = None
    affected: bool = False  # also run the affected upstream test subset (minutes)
    torch: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared:
    """The text matrix, the retarget it rests on (behaviour per patch), and the exports."""

    matrix: Matrix
    retarget: Retarget
    exports: list[export.Export]
    branches: dict[str, tuple[Path, str]] = field(default_factory=dict)  # name -> (repo, branch)
    lint: dict[str, lint.LintReport] = field(default_factory=dict)


def base_for(
    patch: Patch, release_files: Mapping[str, bytes], commit: str | None, clone: Path | None
) -> tuple[str, dict[str, bytes], str]:
    """Return (base commit, base files, where) the patch is made against; main preferred.

    The patch may sit at other lines on main (the export regenerates the diff there).
    """
    if clone is not None:
        try:
            main = git(clone, "rev-parse", "main").strip()
            files = {path: show(clone, f"{main}:{path}") for path in patch.targets}
            apply_patch(patch, {p: decode(d) for p, d in files.items()}, allow_offset=True)
        except (OverlayError, HunkMismatchError):
            pass
        else:
            return main, files, f"main of {clone} ({main[:12]})"
    files = {path: release_files[path] for path in patch.targets if path in release_files}
    return commit or "", files, "the release's sources (version.py git_version)"


def prepare(request: Request, progress: Progress = lambda _: None) -> Prepared:
    """Build the matrix, retarget onto its newest release and export every patch to send."""
    commit_rules.check_signer(request.signer)  # before minutes of work, not at the mbox
    series = load_series(request.patches_dir)
    shared = for_series(request.patches_dir)
    matrix = matrix_of(series, request.versions, progress)
    newest = matrix.versions[-1]
    if newest == str(series.pins.executorch):
        raise UpstreamError(
            "the newest release in the matrix is the pinned one",
            expected="a newer release to send fixes against",
            found=newest,
            hint="add it with --versions (e.g. --versions 1.2.0,1.5.1)",
        )
    rt = run.retarget(
        run.Request(
            version=newest,
            patches_dir=request.patches_dir,
            out_dir=request.out_dir / "retarget" / newest,
            fast=True,
            equivalence=True,
            torch=request.torch,
            upstream_clone=request.upstream_clone,
            locks=False,  # an export needs no installable candidate
        ),
        progress,
    )
    exports: list[export.Export] = []
    branches: dict[str, tuple[Path, str]] = {}
    reports: dict[str, lint.LintReport] = {}
    wanted = [v for v in rt.patches if (v.name in request.names or not request.names) and sends(v)]
    candidate = load_series(Path(rt.candidate)) if wanted else None
    release = load_release(series.pins, shared, newest)
    _, commit = release_metadata(release.wheel)
    new_run = rt.runs.get("new")
    torch = new_run.workers["stock"].torch if new_run else ""
    for verdict in wanted:  # each its own pull request on its own branch: [PATCH], not 1/N
        assert candidate is not None and verdict.behaviour is not None
        patch = candidate.get(verdict.name)
        if parse_applied_upstream(patch.header.get("Applied-Upstream", "")).text:
            continue
        base_commit, base_files, where = base_for(
            patch, release.files, commit, request.upstream_clone
        )
        progress(f"{patch.name}: based on {where}")
        affected = None
        if request.affected and new_run is not None and "patched" in new_run.workers:
            affected = run_affected(rt, patch, release, request)
        evidence = export.Evidence(
            release=newest,
            torch=torch,
            cases=tuple(_case_lines(verdict.behaviour)),
            test=verdict.behaviour.test,
            affected=affected,
        )
        item = export.export_patch(
            patch,
            {**release.files, **base_files},
            newest,
            signer=request.signer,
            evidence=evidence,
            source=verdict.source,
            base_commit=base_commit,
        )
        repo = request.out_dir / "branches" / item.stem
        branch = export.make_branch(item, repo, base=item.before, clone=request.upstream_clone)
        branches[item.name] = (repo, branch)
        if request.upstream_clone is not None:
            report = lint.run_lint(repo, list(item.after), progress=progress)
            reports[item.name] = report
            evidence = replace(evidence, lint=report.summary)
            item = replace(item, pr_body=export.pr_body(patch, item.message, evidence))
        item = replace(
            item,
            checklist=export.checklist(item.stem, branch, repo, evidence, issue=bool(item.issue)),
        )
        exports.append(item)
    return Prepared(matrix, rt, exports, branches, reports)


OUTCOME_WORDS = {
    "right": "lowers, outputs within tolerance of the fake-quantised model",
    "wrong": "lowers, outputs off",
    "failed": "fails",
}


def _case_lines(found: PatchBehaviour) -> list[str]:
    lines = []
    for case in found.bug_cases:
        stock = case.stock_error or OUTCOME_WORDS[case.stock.value]
        patched = OUTCOME_WORDS[case.patched.value] if case.patched else "not run"
        lines.append(f"`{case.case}`: without this change: {stock}; with it: {patched}")
    return lines


def run_affected(rt: Retarget, patch: Patch, release: Release, request: Request) -> TestRun | None:
    """Run the fix's affected upstream tests on stock and patched of the new release."""
    fix = fixes.by_patch(patch.name)
    workers = rt.runs["new"].workers
    if fix is None or not fix.upstream.affected_tests or "patched" not in workers:
        return None
    texts = {p: decode(release.files[p]) for p in patch.targets}
    after = apply_patch(patch, texts, allow_offset=True)
    return upstream_tests.run_tests_both_ways(
        workers["stock"].python,
        workers["patched"].python,
        release_tests=release.tests,
        patched_files={p: encode(t) for p, t in after.items()},
        pytest_ini=upstream_tests.pytest_ini(request.upstream_clone),
        selection=list(fix.upstream.affected_tests),
        log_dir=request.out_dir / "logs" / "affected",
    )
