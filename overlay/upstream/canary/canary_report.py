"""What the canary found (``status.json``, encoded by the codec directly; its per-patch results
are the engine's) and the status page, laid out once: ``status.md``, ``.html`` and ``.json``."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from overlay import render
from overlay.render import Badge, Block, Heading, Items, Para, Pre, Table, item
from overlay.upstream.results import (
    BROKEN,
    OnBase,
    PatchBehaviour,
    PatchVerdict,
    RangeDiff,
    Status,
)


@dataclass(frozen=True)
class Replay:
    """A line's series replayed onto one base: a release, upstream ``main`` or a tag."""

    base: str  # "1.5.1" (a release's wheel), "main", "v1.3.0"
    commit: str  # the upstream commit of the base ("" when unknown)
    patches: tuple[OnBase, ...]
    range_diff: RangeDiff | None = None


class ForwardState(enum.StrEnum):
    """What became of a patch's ``Forwarded:`` target upstream."""

    MERGED_AS_SENT = "merged as sent"
    MERGED_MODIFIED = "merged modified"
    OPEN = "still open"
    NOT_FOUND = "not found"
    NOT_FORWARDED = "not forwarded"
    NOT_NEEDED = "not needed"


MERGED = frozenset({ForwardState.MERGED_AS_SENT, ForwardState.MERGED_MODIFIED})
NEWLY_CONFLICTING = "newly conflicting on main"  # a canary row's flag: a failure
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


@dataclass(frozen=True)
class Forwarded:
    """A patch's ``Forwarded:`` header and what upstream history says about it."""

    patch: str
    raw: str
    kind: str  # "pr", "issue", "mail", "url", "no", "not-needed", "not-yet"
    number: int | None
    state: ForwardState
    commit: str = ""
    subject: str = ""
    matched_by: str = ""  # "patch-id", "PR number", "issue number", "subject"
    difference: str = ""  # what upstream changed differently (a diff), when merged modified
    release: str = ""  # the first release tag holding the commit, "" when none yet
    detail: str = ""
    applied_upstream: str = ""  # the patch's Applied-Upstream header, as written


@dataclass(frozen=True)
class BisectResult:
    """The upstream commit that made a patch redundant, or the one that broke it."""

    patch: str
    kind: str  # "Superseded-by" or "Broken-by"
    commit: str
    subject: str
    date: str
    tested: int  # commits examined (those touching the patch's files)
    how: str  # "text" (behaviour bisects are not run)


@dataclass(frozen=True)
class GateCheck:
    """One idempotence check of the export gate."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Gate:
    """Regenerating the series and exporting the mboxes changes no byte (any git config)."""

    ok: bool
    checks: tuple[GateCheck, ...]


class HostState(enum.StrEnum):
    """Whether the behaviour of main's ``backends/arm`` could be measured."""

    HOSTED = "hosted"
    NOT_HOSTED = "not hosted"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class MainBehaviour:
    """Whether behaviour ran on main, why not when it did not, and each patch there."""

    state: HostState
    wheel: str = ""  # the executorch release hosting main's backends/arm
    detail: str = ""  # the import error (first lines), or why it was not run
    patches: tuple[PatchBehaviour, ...] = ()


@dataclass(frozen=True)
class LineResult:
    """Everything the canary found for one release line."""

    line: str
    base: str  # the upstream commit of v<line>, the series' base
    targets: tuple[Replay, ...]  # main first, then the newer release tags
    forwarded: tuple[Forwarded, ...]
    bisects: tuple[BisectResult, ...]
    gate: Gate | None
    rows: tuple[PatchVerdict, ...]  # each patch on main
    error: str = ""  # why the line could not be replayed at all
    base_note: str = ""  # how the base was made when upstream lacks the line's tag


@dataclass(frozen=True)
class CanaryReport:
    """The canary over every release line: the status page's data (``status.json``)."""

    schema: int
    created: str  # ISO date-time (UTC)
    tool: str
    upstream: str
    main: str  # the commit of upstream main
    main_date: str
    lines: tuple[LineResult, ...]
    behaviour: MainBehaviour
    seconds: float
    failures: tuple[str, ...]  # newly conflicting patches, export churn

    @property
    def failed(self) -> bool:
        """Return True when the canary found a new conflict or export churn."""
        return bool(self.failures)


def result_text(on_main: OnBase) -> str:
    """Return one sentence of what the canary found on main."""
    own = on_main.own
    if own.status is Status.OFFSET:
        text = "applies at offset " + ",".join(f"{o:+d}" for o in own.offsets)
    elif own.status is Status.CONFLICT:
        paths = sorted({c.path for c in own.conflicts})
        where = f" in {', '.join(paths)}" if paths else ""
        text = f"conflicts{where} ({len(own.conflicts)} regions)"
    elif own.status is Status.CONTAINED:
        how = ", ".join(dict.fromkeys(e.kind for e in own.evidence)) or "text"
        text = f"already upstream ({how})"
    elif own.status in BROKEN:
        text = f"file {own.status.value}: {own.detail}"
    else:
        text = own.status.value
    if on_main.port is not None:
        text += f"; port {on_main.port_version}: {on_main.port.status.value}"
    if on_main.behaviour is not None:
        text += f"; behaviour: {on_main.behaviour.outcome.value}"
    return text


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
