"""Prepare upstream pull requests: what to send is decided by behaviour, not by text alone.

``prepare`` builds the text matrix over the releases, then runs the retarget mechanism on
the newest one (:mod:`overlay.upstream.retarget`: stock and patched envs of that release,
trigger cases, the tests a patch adds, both ways) and the same cases on the pinned
release. A patch is sent only when its bug trigger fails on stock of the target release
and passes with the patch, its new test fails before and passes after, and nothing in
the corpus regresses. Each patch sent gets an mbox, a PR body, a drafted issue when it
names none, a checklist, lint results (with an upstream clone) and a git branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from overlay import fixes
from overlay._git import git, show
from overlay.errors import OverlayError, UpstreamError
from overlay.text.applier import HunkMismatchError, apply_patch, decode
from overlay.text.series import Patch, Series, load_series
from overlay.upstream import behaviour, commit_rules, export, lint, retarget, upstream_tests
from overlay.upstream.facts import TestRun, parse_applied_upstream
from overlay.upstream.matrix import Matrix
from overlay.upstream.releases import release_metadata, run_matrix
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import PatchBehaviour, behaviour_verdict, decide_patch

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
    """The matrix with behaviour, the retarget it rests on, and the exports."""

    matrix: Matrix
    behaviour: dict[str, dict[str, PatchBehaviour]]  # patch -> release -> behaviour
    retarget: retarget.Retarget
    exports: list[export.Export]
    branches: dict[str, tuple[Path, str]] = field(default_factory=dict)  # name -> (repo, branch)
    lint: dict[str, lint.LintReport] = field(default_factory=dict)


def attribute(regressions: Sequence[str], patch: str, series_size: int) -> list[str]:
    """Return the regressions that belong to ``patch`` (its trigger cases, or a lone patch)."""
    if series_size == 1:
        return list(regressions)
    fix = fixes.by_patch(patch)
    named = {t.case for t in fix.triggers} if fix is not None else set()
    return [case for case in regressions if case in named]


def pinned_behaviour(series: Series, run: behaviour.ReleaseRun) -> dict[str, PatchBehaviour]:
    """Decide every pinned patch on the pinned release's stock and patched runs."""
    version = str(series.pins.executorch)
    regressions = behaviour.regressions_of(run)
    found = {}
    for patch in series.patches:
        fix = fixes.by_patch(patch.name)
        if fix is None:
            continue
        bug, other = behaviour.triggers(fix, [version])
        found[patch.name] = decide_patch(
            patch.name,
            version,
            behaviour.judged(run, bug),
            behaviour.judged(run, other),
            kept=True,
            regressions=attribute(regressions, patch.name, len(series.patches)),
        )
    return found


def with_behaviour(matrix: Matrix, table: Mapping[str, Mapping[str, PatchBehaviour]]) -> Matrix:
    """Return the matrix whose verdicts rest on behaviour where it was measured (pure)."""
    rows = []
    for row in matrix.rows:
        measured = table.get(row.name, {})
        newest = max(measured, key=matrix.versions.index, default=None)
        if newest is None:
            text = f"{row.verdict.text} (text only: no behaviour measured)"
            rows.append(replace(row, verdict=replace(row.verdict, text=text)))
            continue
        found = measured[newest]
        port = row.cells[found.release].port_version if found.release in row.cells else None
        rows.append(replace(row, verdict=behaviour_verdict(port, row.upstream, found)))
    return replace(matrix, rows=tuple(rows), behaviour={k: dict(v) for k, v in table.items()})


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
    """Build the behaviour matrix and export every patch it says to send."""
    commit_rules.check_signer(request.signer)  # before minutes of work, not at the mbox
    series = load_series(request.patches_dir)
    shared = for_series(request.patches_dir)
    versions = list(dict.fromkeys(request.versions or shared.matrix_versions))
    matrix = run_matrix(series, request.patches_dir, versions)
    newest = matrix.newest
    table: dict[str, dict[str, PatchBehaviour]] = {}
    if newest == str(series.pins.executorch):
        raise UpstreamError(
            "the newest release in the matrix is the pinned one",
            expected="a newer release to send fixes against",
            found=newest,
            hint="add it with --versions (e.g. --versions 1.2.0,1.5.1)",
        )
    rt = retarget.retarget(
        retarget.Request(
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
    if "old" in rt.runs:
        for name, found in pinned_behaviour(series, rt.runs["old"]).items():
            table.setdefault(name, {})[str(series.pins.executorch)] = found
    for verdict in rt.verdicts:
        if verdict.behaviour is not None:
            table.setdefault(verdict.name, {})[newest] = verdict.behaviour
    matrix = with_behaviour(matrix, table)
    exports: list[export.Export] = []
    branches: dict[str, tuple[Path, str]] = {}
    reports: dict[str, lint.LintReport] = {}
    wanted = [
        row
        for row in matrix.rows
        if (row.name in request.names or not request.names) and row.verdict.action == "upstream"
    ]
    candidate = load_series(rt.candidate) if wanted else None
    release_files = matrix.releases[newest].files
    new_run = rt.runs.get("new")
    torch = new_run.init["stock"].torch if new_run else ""
    for row in wanted:  # each its own pull request on its own branch: [PATCH], not 1/N
        assert candidate is not None
        patch = candidate.get(row.name)
        found = table[row.name][newest]
        if parse_applied_upstream(patch.header.get("Applied-Upstream", "")).text:
            continue
        _, commit = release_metadata(rt.wheel)
        base_commit, base_files, where = base_for(
            patch, release_files, commit, request.upstream_clone
        )
        progress(f"{patch.name}: based on {where}")
        affected = None
        if request.affected and new_run is not None and new_run.patched_python:
            affected = run_affected(rt, patch, release_files, request)
        evidence = export.Evidence(
            release=newest,
            torch=torch,
            cases=tuple(_case_lines(found)),
            test=found.test,
            affected=affected,
        )
        item = export.export_patch(
            patch,
            {**release_files, **base_files},
            newest,
            signer=request.signer,
            evidence=evidence,
            source="port" if row.cells[newest].port_version else "pinned",
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
    return Prepared(matrix, table, rt, exports, branches, reports)


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


def run_affected(
    rt: retarget.Retarget, patch: Patch, release_files: Mapping[str, bytes], request: Request
) -> TestRun | None:
    """Run the fix's affected upstream tests on stock and patched of the new release."""
    fix = fixes.by_patch(patch.name)
    run = rt.runs["new"]
    if fix is None or not fix.upstream.affected_tests or run.patched_python is None:
        return None
    tests = {p: d for p, d in rt.release_tests.items()}
    patched_files = {p: d for p, d in _after(patch, release_files).items()}
    return upstream_tests.run_tests_both_ways(
        run.stock_python,
        run.patched_python,
        release_tests=tests,
        patched_files=patched_files,
        pytest_ini=upstream_tests.pytest_ini(request.upstream_clone),
        selection=list(fix.upstream.affected_tests),
        log_dir=request.out_dir / "logs" / "affected",
    )


def _after(patch: Patch, files: Mapping[str, bytes]) -> dict[str, bytes]:
    texts = {p: decode(files[p]) for p in patch.targets}
    return {p: t.encode("utf-8", "surrogateescape") for p, t in apply_patch(patch, texts).items()}
