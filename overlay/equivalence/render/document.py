"""``equivalence.json``: the report as a typed document, written and read with the codec.

:class:`ReportDocument` and the dataclasses under it are the file's one definition:
:func:`to_document` makes one of a :class:`~overlay.equivalence.controller.outcome.Report`
(the codec writes it), :func:`load` decodes one strictly (a missing, unknown or mistyped
field is refused) and decides every verdict again from the stored results, and
:func:`schema` derives its JSON Schema (``python -m overlay report-schema`` prints it; no
copy is kept).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import overlay
from overlay import codec
from overlay.codec import JsonValue
from overlay.equivalence.controller.options import RunChoices, Shard
from overlay.equivalence.controller.outcome import Report, WorkerInfo
from overlay.equivalence.controller.result_cache import Keys
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import ItemResult, PathId
from overlay.equivalence.verdict import (
    AB,
    BC,
    Finding,
    Observation,
    Quality,
    Verdict,
    decide,
)
from overlay.errors import EquivalenceInputError
from overlay.fixes import Divergence
from overlay.items import CaseInfo, ItemId, ItemKind, ProbeInfo

REPORT_SCHEMA: Final = 5  # 5: divergence rules, (b)/(c) attribution; 4: a typed document
TOOL: Final = "executorch-arm-overlay"


@dataclass(frozen=True)
class Tool:
    """The program that wrote the report."""

    name: Literal["executorch-arm-overlay"]  # TOOL
    version: str


@dataclass(frozen=True)
class Summary:
    """How many items got each verdict (keys: the verdicts' values)."""

    items: int
    selected: int
    a_vs_b: dict[str, int]
    b_vs_c: dict[str, int]


@dataclass(frozen=True)
class StockVsRuntime:
    """(a) stock vs (b) stock + runtime patch: what the fixes change, and which fix alone."""

    verdict: AB
    fix: int | None
    differs_in: tuple[Observation, ...]


@dataclass(frozen=True)
class RuntimeVsPatched:
    """(b) stock + runtime patch vs (c) the diff-patched build: the rule that declares the
    difference, and the fix whose line form in place of the runtime patch's removes it."""

    verdict: BC
    rule: str | None
    fix: int | None
    differs_in: tuple[Observation, ...]


@dataclass(frozen=True)
class ItemRecord:
    """One item: its description, its verdicts and every path's full result (keys a, b, c)."""

    item: str
    kind: ItemKind
    name: str
    info: CaseInfo | ProbeInfo
    a_vs_b: StockVsRuntime
    b_vs_c: RuntimeVsPatched
    targets: dict[str, dict[str, Quality]]
    findings: tuple[Finding, ...]
    expectation_problem: str | None
    claim_problem: str | None
    results: dict[str, ItemResult]


@dataclass(frozen=True)
class ReportDocument:
    """An equivalence report of executorch-arm-overlay: verdict first, every path's results."""

    schema: Literal[5]  # REPORT_SCHEMA
    tool: Tool
    created: str  # ISO 8601, UTC
    verdict: Literal["pass", "fail"]
    failures: tuple[str, ...]
    summary: Summary
    selection: tuple[str, ...]
    shards: tuple[Shard, ...]
    merged: bool
    executorch: str
    keys: Keys | None
    options: RunChoices
    workers: dict[str, WorkerInfo]  # by path: a, b, c
    stats: dict[str, PathStats]
    declared_divergences: tuple[Divergence, ...]
    wall_seconds: float
    phase_seconds: dict[str, float]
    items: tuple[ItemRecord, ...]


def _record(verdict: Verdict) -> ItemRecord:
    return ItemRecord(
        item=str(verdict.item),
        kind=verdict.item.kind,
        name=verdict.item.name,
        info=verdict.info,
        a_vs_b=StockVsRuntime(verdict.ab, verdict.fix, verdict.ab_diffs),
        b_vs_c=RuntimeVsPatched(
            verdict.bc,
            verdict.rule.name if verdict.rule else None,
            verdict.bc_fix,
            verdict.bc_diffs,
        ),
        targets={p.value: dict(judged) for p, judged in verdict.targets.items()},
        findings=verdict.findings,
        expectation_problem=verdict.expectation_problem,
        claim_problem=verdict.claim_problem,
        results={p.value: r for p, r in verdict.results.items()},
    )


def to_document(report: Report) -> ReportDocument:
    """Return the whole report as its typed document (every path's full result included)."""
    ab = Counter(v.ab for v in report.verdicts)
    bc = Counter(v.bc for v in report.verdicts)
    return ReportDocument(
        schema=REPORT_SCHEMA,
        tool=Tool(TOOL, overlay.__version__),
        created=report.created or datetime.now(UTC).isoformat(timespec="seconds"),
        verdict="fail" if report.failures else "pass",
        failures=tuple(report.failures),
        summary=Summary(
            items=len(report.verdicts),
            selected=len(report.selection),
            a_vs_b={a.value: ab[a] for a in AB},
            b_vs_c={b.value: bc[b] for b in BC},
        ),
        selection=tuple(str(item) for item in report.selection),
        shards=report.shards,
        merged=report.merged,
        executorch=report.executorch,
        keys=report.keys,
        options=report.options.recorded(),
        workers={p.value: info for p, info in report.workers.items()},
        stats={p.value: s for p, s in report.stats.items()},
        declared_divergences=report.declared,
        wall_seconds=report.wall_seconds,
        phase_seconds=dict(report.phase_seconds),
        items=tuple(_record(v) for v in report.verdicts),
    )


def _item_id(text: str) -> ItemId:
    kind, _, name = text.partition(":")
    return ItemId(ItemKind(kind), name)


def from_document(document: ReportDocument) -> Report:
    """Return the report a document holds; every verdict is decided again from its results."""
    version = document.executorch or None
    verdicts = tuple(
        decide(
            _item_id(record.item),
            record.info,
            {PathId(p): r for p, r in record.results.items()},
            record.a_vs_b.fix,
            bc_fix=record.b_vs_c.fix,
            version=version,
            required=document.options.require_executed,
        )
        for record in document.items
    )
    return Report(
        options=document.options,
        workers={PathId(p): w for p, w in document.workers.items()},
        verdicts=verdicts,
        declared=document.declared_divergences,
        wall_seconds=document.wall_seconds,
        phase_seconds=document.phase_seconds,
        stats={PathId(p): s for p, s in document.stats.items()},
        keys=document.keys,
        created=document.created,
        selection=tuple(_item_id(i) for i in document.selection),
        shards=document.shards,
        merged=document.merged,
        executorch=document.executorch,
    )


def load(path: Path) -> Report:
    """Read a report JSON back into a Report (verdicts decided again from its results)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EquivalenceInputError(
            f"cannot read the report {path}",
            expected="an equivalence.json written by `executorch-arm-overlay equivalence`",
            found=str(exc),
            hint="pass the equivalence.json of each shard",
        ) from exc
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise EquivalenceInputError(
            f"{path} is not an equivalence report of schema {REPORT_SCHEMA}",
            expected=f"schema {REPORT_SCHEMA} ({TOOL} {overlay.__version__})",
            found=f"schema {data.get('schema') if isinstance(data, dict) else None!r}",
            hint="re-run the shards with this version of the overlay",
        )
    try:
        return from_document(codec.decode(ReportDocument, data, str(path.name)))
    except (codec.CodecError, KeyError, ValueError) as exc:
        raise EquivalenceInputError(
            f"{path} does not hold a valid equivalence report",
            expected=f"the fields of report schema {REPORT_SCHEMA} (see report-schema)",
            found=str(exc)[:300],
            hint="re-run the shard that wrote it",
        ) from exc


def schema() -> dict[str, JsonValue]:
    """Return the JSON Schema of ``equivalence.json`` (derived from :class:`ReportDocument`)."""
    return codec.schema(ReportDocument, title="equivalence.json")
