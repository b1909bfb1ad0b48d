"""``equivalence.json``: the report as a typed document, written and read with the codec
(every verdict decided again on load); its JSON Schema is derived, no copy is kept."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import overlay
from overlay import codec
from overlay.codec import JsonValue
from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.verdict import AB, BC, decide
from overlay.errors import EquivalenceInputError

REPORT_SCHEMA: Final = 7  # 7: exact reference; 6: the Report; 5: divergence rules; 4: typed
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
class ReportDocument:
    """An equivalence report of executorch-arm-overlay: verdict first, then the whole run."""

    schema: Literal[7]  # REPORT_SCHEMA
    tool: Tool
    verdict: Literal["pass", "fail"]
    failures: tuple[str, ...]
    summary: Summary
    report: Report  # every item's verdict and every path's full result; options as recorded


def counts(report: Report) -> tuple[Counter[str], Counter[str]]:
    """Return how many items got each (a) vs (b) and each (b) vs (c) verdict."""
    ab = Counter(v.ab.value for v in report.verdicts)
    return ab, Counter(v.bc.value for v in report.verdicts)


def to_document(report: Report) -> ReportDocument:
    """Return the whole report as its typed document (every path's full result included)."""
    ab, bc = counts(report)
    return ReportDocument(
        schema=REPORT_SCHEMA,
        tool=Tool(TOOL, overlay.__version__),
        verdict="fail" if report.failures else "pass",
        failures=tuple(report.failures),
        summary=Summary(
            items=len(report.verdicts),
            selected=len(report.selection),
            a_vs_b={a.value: ab[a.value] for a in AB},
            b_vs_c={b.value: bc[b.value] for b in BC},
        ),
        report=dataclasses.replace(
            report,
            options=report.options.recorded(),
            created=report.created or datetime.now(UTC).isoformat(timespec="seconds"),
        ),
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
        report = codec.decode(ReportDocument, data, str(path.name)).report
        verdicts = tuple(
            decide(
                v.item,
                v.info,
                v.results,
                v.fix,
                bc_fix=v.bc_fix,
                version=report.executorch or None,
                required=report.options.require_executed,
            )
            for v in report.verdicts
        )
    except (codec.CodecError, KeyError, ValueError) as exc:
        raise EquivalenceInputError(
            f"{path} does not hold a valid equivalence report",
            expected=f"the fields of report schema {REPORT_SCHEMA} (see report-schema)",
            found=str(exc)[:300],
            hint="re-run the shard that wrote it",
        ) from exc
    return dataclasses.replace(report, verdicts=verdicts)


def schema() -> dict[str, JsonValue]:
    """Return the JSON Schema of ``equivalence.json`` (derived from :class:`ReportDocument`)."""
    return codec.schema(ReportDocument, title="equivalence.json")
