"""The engine's reports laid out as blocks: the matrix, a suite run, an export."""

from __future__ import annotations

from collections.abc import Sequence

from overlay import render
from overlay.render import Badge, Block, Heading, Inline, Items, Para, Pre, Table, item
from overlay.text.series import PATCH_SUFFIX
from overlay.upstream.results import (
    Matrix,
    OnBase,
    PatchVerdict,
    Sending,
    Status,
    SuiteRun,
    TestState,
)
from overlay.upstream.verdicts import op_count_change


def matrix_blocks(matrix: Matrix) -> list[Block]:
    """Lay out the matrix: each patch on each release, its verdict and the details."""
    rows = tuple(
        (row.patch.removesuffix(PATCH_SUFFIX), *(cell.short for cell in row.bases))
        for row in matrix.rows
    )
    items = []
    for row in matrix.rows:
        items.append(item(f"{row.patch}: {row.text}"))
        for cell in row.bases:
            for label, applied in (("", cell.own), ("port ", cell.port)):
                if applied is not None and applied.status is not Status.APPLIES and applied.detail:
                    status = f"{applied.status.value}: {applied.detail}"
                    items.append(item(f"{cell.base} {label}{status}", depth=1))
    wheels = [
        item(f"{w.file} sha256 {w.sha256} ({'recorded' if w.pinned else 'NOT recorded'})")
        for w in matrix.wheels.values()
    ]
    unpinned = [f'"{v}" = "{w.sha256}"' for v, w in matrix.wheels.items() if not w.pinned]
    note = f"not yet recorded; add under [sha256] in {matrix.pins_file}:\n" + "\n".join(unpinned)
    return [
        Heading(f"executorch version matrix (series {matrix.series[:12]})"),
        Table(("patch", *matrix.versions), rows),
        Items(tuple(items)),
        Heading("Wheels", 2),
        Items(tuple(wheels)),
        *([Pre("Unverified releases", note)] if unpinned else []),
    ]


def suite_blocks(result: SuiteRun) -> list[Block]:
    """Lay out one line's suite run: counts per build, the tests it broke and fixed."""
    run = result.run
    verdict = (
        f"{len(result.broken)} test(s) pass on stock and not with the patches"
        if result.broken
        else "no test passes on stock and fails with the patches"
    )
    problems = [p for p in (run.stock.problem, run.patched.problem) if p]
    return [
        Heading(f"Upstream's Arm tests on the {result.line} line: stock vs patched"),
        Para(f"executorch {result.release}; {verdict}.", "fail" if result.broken else "pass"),
        Table(
            ("build", *(s.value for s in TestState)),
            tuple(
                (label, *(str(counts.count(s)) for s in TestState))
                for label, counts in (("stock", run.stock), ("patched", run.patched))
            ),
        ),
        *[Para(f"pytest did not run: {p}", "fail") for p in problems],
        Heading("Broken by the patches", 2),
        render.listing(result.broken),
        Heading("Fixed by the patches", 2),
        render.listing(result.fixed),
        Heading(f"{len(run.selection)} test files, {run.seconds / 60:.0f} min", 2),
        Pre("command", f"{run.command}"),
    ]


def _on_base(base: OnBase) -> str:
    if not base.lands:
        return base.own.detail
    found = base.behaviour
    return found.outcome.value if found is not None else "not measured"


def _verdict(report: Sending, problems: Sequence[str]) -> Badge:
    if problems:
        return Badge("held back", "bad")
    if report.stale_main:
        return Badge(f"ready on {report.release}, not on main", "warn")
    return Badge("ready", "ok")


def _bystanders(sub: PatchVerdict) -> str:
    """Return how many bystander models lower to other TOSA operators with the fix."""
    counts = [c for b in sub.bases for c in b.bystanders]
    if not counts:
        return "not run"
    changed = {(c.case, c.target) for c in counts if op_count_change(c)}
    return f"{len(changed)} of {len({(c.case, c.target) for c in counts})} change"


def sending_blocks(report: Sending) -> list[Block]:
    """Lay out an export: main's commit and date, each fix on each base, upstream's gate,
    what keeps it back, and whether main is too old to tell."""
    bases = [b.base for b in report.submissions[0].bases] if report.submissions else []
    rows: list[tuple[Inline, ...]] = [
        (
            sub.patch.removesuffix(PATCH_SUFFIX),
            *(_on_base(b) for b in sub.bases),
            "not run" if lint is None else f"{len(lint.findings)} finding(s)",
            f"{sum(bool(c.findings) for c in checks)} of {len(checks)} fail"
            if checks
            else "not run",
            _bystanders(sub),
            _verdict(report, sub.flags),
        )
        for sub in report.submissions
        for lint, checks in [(sub.review.lint, sub.review.checks) if sub.review else (None, ())]
    ]
    problems = [f"{s.patch}: {p}" for s in report.submissions for p in s.flags]
    main = f"main {report.main[:12]} ({report.main_date[:10] or 'date unknown'})"
    release = f"executorch {report.release} ({report.release_date[:10] or 'date not recorded'})"
    stale = report.stale_main
    return [
        Heading(f"Upstream pull requests from the {report.line} line: {main} and {release}"),
        *([Para(f"{stale[:1].upper()}{stale[1:]}.", "fail")] if stale else []),
        Table(
            ("patch", *bases, "upstream lint", "pre-push checks", "bystanders", "verdict"),
            tuple(rows),
        ),
        Heading("Held back", 2),
        render.listing(problems),
        Heading("Not sent", 2),
        render.listing([f"{name}: {why}" for name, why in report.skipped.items()]),
    ]
