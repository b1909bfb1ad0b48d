"""The engine's reports laid out as blocks: the matrix, a suite run, an export."""

from __future__ import annotations

from overlay import render
from overlay.render import Badge, Block, Heading, Inline, Items, Para, Pre, Table, item
from overlay.text.series import PATCH_SUFFIX
from overlay.upstream.results import Matrix, Review, Sending, Status, SuiteRun, TestState
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


def sending_blocks(report: Sending) -> list[Block]:
    """Lay out an export: main's commit and date, each fix on each base, upstream's gate,
    what keeps it back, and whether main is too old to tell."""
    bases = [b.base for b in report.submissions[0].bases] if report.submissions else []
    rows: list[tuple[Inline, ...]] = []
    for sub in report.submissions:
        review = sub.review or Review("", None, ())
        lint = "not run" if review.lint is None else f"{len(review.lint.findings)} finding(s)"
        failing = sum(bool(c.findings) for c in review.checks)
        checks = f"{failing} of {len(review.checks)} fail" if review.checks else "not run"
        counts = [c for b in sub.bases for c in b.bystanders]  # lowered to other operators?
        changed = {(c.case, c.target) for c in counts if op_count_change(c)}
        moved = f"{len(changed)} of {len({(c.case, c.target) for c in counts})} change"
        verdict = Badge("ready", "ok")
        if sub.flags:
            verdict = Badge("held back", "bad")
        elif report.stale_main:
            verdict = Badge(f"ready on {report.release}, not on main", "warn")
        on_bases = [
            (b.behaviour.outcome.value if b.behaviour else "not measured")
            if b.lands
            else b.own.detail
            for b in sub.bases
        ]
        name = sub.patch.removesuffix(PATCH_SUFFIX)
        rows.append((name, *on_bases, lint, checks, moved if counts else "not run", verdict))
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
