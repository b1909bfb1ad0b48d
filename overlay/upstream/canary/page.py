"""The status page, laid out once: ``status.md``, ``status.html`` and ``status.json``."""

from __future__ import annotations

from pathlib import Path

from overlay import render
from overlay.render import Badge, Block, Heading, Items, Para, Pre, Table, item
from overlay.upstream.canary.canary_report import (
    NEWLY_CONFLICTING,
    CanaryReport,
    ForwardState,
    LineResult,
    MainBehaviour,
    Replay,
)
from overlay.upstream.canary.canary_run import result_text
from overlay.upstream.results import Status

SCHEMA_TITLE = "executorch-arm-overlay canary status"
TONES = {
    Status.APPLIES: "ok",
    Status.OFFSET: "ok",
    Status.MERGED: "warn",
    Status.CONTAINED: "info",
    Status.CONFLICT: "bad",
    Status.MOVED: "bad",
    Status.MISSING: "bad",
}
ROW_HEADERS = ("Line", "Patch", "On main", "Upstream", "Last result", "Since", "Next step")


def _target(target: Replay) -> list[Block]:
    out: list[Block] = [Heading(f"onto {target.base} ({target.commit[:12]})", 3)]
    items, pres = [], []
    for found in target.patches:
        for label, applied in (
            (found.patch, found.own),
            (f"port {found.port_version}", found.port),
        ):
            if applied is None:
                continue
            badge = Badge(applied.status.value, TONES[applied.status])
            detail = f" {applied.detail}" if applied.detail else ""
            items.append(item(f"{label}: ", badge, detail, depth=0 if applied is found.own else 1))
            items += [
                item(f"upstream evidence: {e.kind} {e.commit[:12]} {e.detail}".rstrip(), depth=1)
                for e in applied.evidence
            ]
            pres += [Pre(f"{label}: conflict in {c.path}", c.text) for c in applied.conflicts]
    out += [Items(tuple(items)), *pres]
    if target.range_diff is not None:
        out.append(Pre(target.range_diff.command, target.range_diff.text))
    return out


def _line(line: LineResult) -> list[Block]:
    out: list[Block] = [Heading(f"Line {line.line} (base {line.base[:12] or 'none'})", 2)]
    if line.error:
        return [*out, Para(f"Not replayed: {line.error}", "fail")]
    if line.base_note:
        out.append(Para(line.base_note))
    for target in line.targets:
        out += _target(target)
    forwarded, pres = [], []
    for found in line.forwarded:
        where = f" {found.commit[:12]} {found.subject!r} ({found.release or 'no release yet'})"
        forwarded.append(
            item(
                f"{found.patch}: {found.raw} -> ",
                Badge(found.state.value, "info"),
                (where if found.commit else "")
                + (f", matched by {found.matched_by}" if found.matched_by else ""),
            )
        )
        if found.state is ForwardState.MERGED_MODIFIED and found.difference:
            pres.append(
                Pre(f"{found.patch}: difference from the forwarded patch", found.difference)
            )
    bisects = [
        item(f"{b.patch}: {b.kind}: {b.commit} {b.subject!r} ({b.date}; {b.tested} commits tried)")
        for b in line.bisects
    ] or [item("nothing to bisect")]
    out += [Heading("Forwarded", 3), Items(tuple(forwarded)), *pres]
    out += [Heading("Bisect (text)", 3), Items(tuple(bisects))]
    if line.gate is not None:
        verdict = "no churn" if line.gate.ok else "CHURN"
        checks = [
            item(f"{c.name}: {'ok' if c.ok else 'FAILED'} {c.detail}".rstrip())
            for c in line.gate.checks
        ]
        out += [Heading(f"Export gate: {verdict}", 3), Items(tuple(checks))]
    return out


def _behaviour(found: MainBehaviour) -> list[Block]:
    title = f"Behaviour on main: {found.state.value}" + (f" ({found.wheel})" if found.wheel else "")
    items = []
    for p in found.patches:  # each patch's tests under it
        items.append(item(f"{p.patch}: {p.outcome.value}: {p.text}"))
        if p.test is not None:
            items.append(item(f"tests: {p.test.command}: {p.test.text}", depth=1))
    return [
        Heading(title, 2),
        *([Para(found.detail)] if found.detail else []),
        *([Items(tuple(items))] if items else []),
    ]


def blocks(report: CanaryReport) -> list[Block]:
    """Lay out the status page."""
    verdict = (
        "FAILED: " + "; ".join(report.failures)
        if report.failed
        else "ok: nothing new conflicts, no export churn"
    )
    rows = tuple(
        (
            line.line,
            row.patch,
            Badge(
                row.on.own.status.value + (" (NEW)" if NEWLY_CONFLICTING in row.flags else ""),
                TONES[row.on.own.status],
            ),
            row.upstream,
            result_text(row.on),
            row.since,
            row.text,
        )
        for line in report.lines
        for row in line.rows
    )
    out: list[Block] = [
        Heading(f"Canary: {'FAILED' if report.failed else 'ok'}"),
        Para(
            f"upstream {report.upstream} main {report.main[:12]} ({report.main_date});"
            f" run {report.created} in {report.seconds:.1f} s by {report.tool}"
        ),
        Para(verdict, "fail" if report.failed else "pass"),
        Table(ROW_HEADERS, rows),
        *_behaviour(report.behaviour),
    ]
    for line in report.lines:
        out += _line(line)
    return out


def write_page(report: CanaryReport, out_dir: Path) -> list[Path]:
    """Write ``status.{md,html,json}`` to ``out_dir``; return the paths."""
    return render.write(out_dir, "status", blocks(report), report, ("md", "html", "json"))


def json_schema() -> str:
    """Return the JSON Schema of ``status.json``, derived from the result dataclasses."""
    return render.schema(CanaryReport, SCHEMA_TITLE)
