"""The outcome of a run: the typed :class:`Report`, its ``equivalence.json`` document (read
back with every verdict decided again; its JSON Schema derived), shard reports merged into
one, and each failure's next step, written for who can act on it."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import overlay
from overlay import codec
from overlay.codec import JsonValue
from overlay.equivalence.controller.options import RunChoices, Shard
from overlay.equivalence.controller.result_cache import Keys
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import PATHS, InitReply, PathId
from overlay.equivalence.verdict import AB, BC, Problem, Verdict, decide, harness_errors
from overlay.errors import EquivalenceError, EquivalenceInputError
from overlay.fixes import Divergence
from overlay.items import CaseInfo, ItemId, ProbeInfo


@dataclass(frozen=True)
class WorkerInfo:
    """What one path ran on (``init`` from the cache when no worker had to start)."""

    path: PathId
    python: str
    runtime_patch: str | None
    init: InitReply | None
    lock: str | None = None  # the committed lock the path's venv was synced from (its stamp)


@dataclass(frozen=True)
class Report:
    """The outcome of one equivalence run (or of merged shards)."""

    options: RunChoices
    workers: dict[PathId, WorkerInfo]
    verdicts: tuple[Verdict, ...]
    declared: tuple[Divergence, ...]  # the divergence rules of the run's line
    wall_seconds: float
    phase_seconds: dict[str, float]
    stats: dict[PathId, PathStats] = field(default_factory=dict)
    keys: Keys | None = None  # what the results were keyed by (shards must agree)
    created: str = ""  # ISO 8601, UTC
    selection: tuple[ItemId, ...] = ()  # every item selected, before sharding
    shards: tuple[Shard, ...] = ()  # the shards this report covers; (): the whole selection
    merged: bool = False  # made by merging shard reports: it must cover the selection
    executorch: str = ""  # the stock env's executorch version: fix triggers are scoped by it

    @property
    def failures(self) -> list[str]:
        """Return one line per problem that makes the run fail."""
        problems = [line for verdict in self.verdicts for line in verdict.failures]
        if self.merged and self.missing:
            count = self.shards[0].count if self.shards else 1
            have = {s.index for s in self.shards}
            lost = [str(Shard(i, count)) for i in range(1, count + 1) if i not in have]
            problems.append(
                f"{len(self.missing)} of {len(self.selection)} selected items have no result"
                f" (shards missing: {', '.join(lost) or 'none'})"
            )
        return problems

    @property
    def missing(self) -> list[ItemId]:
        """Return the selected items this report has no verdict for."""
        have = {v.item for v in self.verdicts}
        return [item for item in self.selection if item not in have]


# The next step of each kind of problem that reads the same for every item.
STEPS = {
    Problem.UNDECLARED: "(b) and (c) differ: the runtime patch and the diffs do not do the"
    " same; fix the one that is wrong (overlay maintainers declare an intended difference,"
    " with its reason, in the fix's module: overlay/fixes/fNNNN_*.py)",
    Problem.CLAIM: "a fix's claimed trigger did not reproduce: the overlay maintainers update"
    " the claim (overlay/fixes) or the fix",
    Problem.NOT_EXECUTED: "a target --require-executed names did not run here: install what"
    " its reason names (the Vulkan emulation: apt-get install mesa-vulkan-drivers), or run"
    " without --require-executed",
}


def user_file(info: CaseInfo | ProbeInfo) -> str | None:
    """Return the models file a case comes from (None: the overlay's corpus, a probe)."""
    return info.source if isinstance(info, CaseInfo) and info.source != "corpus" else None


def declare_broken(where: str) -> str:
    """Return how a user declares a case of the models file ``where`` wrong on every path."""
    return f"set 'expect_broken': '<why>' on its entry in CASES of {where}"


def _step(verdict: Verdict, problem: Problem) -> str:
    """Return the next step of one problem of an item, for who can act on it."""
    name, where = verdict.item.name, user_file(verdict.info)
    if problem is Problem.EXPECTATION and where and verdict.findings:
        return (
            f"{name} is wrong on every path, stock included: if that is known,"
            f" {declare_broken(where)}"
        )
    if problem is Problem.EXPECTATION and where:
        return f"{name} is right now: drop 'expect_broken' from its entry in CASES of {where}"
    if problem is Problem.EXPECTATION:
        return (
            f"{name} (an overlay corpus case) changed against its expect_broken: report it"
            " to the overlay maintainers, who update the case"
        )
    if problem is Problem.INCOMPLETE:
        stuck = ", ".join(sorted({e.type for _, e in harness_errors(verdict.results)}))
        return (
            f"an item did not finish ({stuck}): raise --timeout, or run it alone with --case;"
            " a crashed worker's log is in <out>/equivalence-logs"
        )
    return STEPS[problem]


def next_steps(report: Report) -> list[str]:
    """Return one next step per kind of problem in the report, for who can act on it."""
    steps = {_step(v, problem): None for v in report.verdicts for problem in v.problems}
    if report.merged and report.missing:
        steps["merge the equivalence.json of every shard (--shard K/N for every K)"] = None
    return list(steps)


def failure_error(report: Report, written: Path) -> EquivalenceError | None:
    """Return the error a failing report ends the run with (None: it passed)."""
    if not report.failures:
        return None
    return EquivalenceError(
        f"{len(report.failures)} problem(s): undeclared divergences, findings, unfinished"
        " items, unreproduced claims or targets that did not run",
        expected="(b) stock + runtime patch and (c) the diff-patched build agree, and every"
        " case is right on some path or declared expect_broken",
        found="\n".join(report.failures),
        hint=f"read {written} (or the .html beside it); " + "; ".join(next_steps(report)),
    )


def _refuse(what: str, expected: str, found: str) -> EquivalenceInputError:
    return EquivalenceInputError(
        f"cannot merge these reports: {what}",
        expected=expected,
        found=found,
        hint="merge the equivalence.json of every shard of one run (same --shard N, same"
        " inputs, same overlay version)",
    )


def merge(reports: Sequence[Report]) -> Report:
    """Join shard reports of one run into one report (refusing shards of different runs)."""
    if not reports:
        raise _refuse("no reports", "one equivalence.json per shard", "none")
    first = reports[0]
    for report in reports:
        if not report.shards:
            raise _refuse("a report is not a shard", "reports made with --shard K/N", "a whole run")
        if report.keys != first.keys:
            raise _refuse(
                "the shards ran different inputs",
                "the same environments, runtime patch, models and overlay sources",
                _key_difference(first.keys, report.keys),
            )
        if report.selection != first.selection:
            raise _refuse(
                "the shards selected different items",
                "the same options (--fast, --case, --models) on every shard",
                f"{len(first.selection)} vs {len(report.selection)} selected items",
            )
    shards = sorted(s for r in reports for s in r.shards)
    if len({s.count for s in shards}) != 1 or len(set(shards)) != len(shards):
        raise _refuse(
            "shard numbers do not fit together",
            "K/N with one N and every K once",
            ", ".join(str(s) for s in shards),
        )
    by_item = {v.item: v for r in reports for v in r.verdicts}
    order = {item: index for index, item in enumerate(first.selection)}
    stats = {
        p: PathStats(
            **{
                f.name: sum(getattr(r.stats.get(p, PathStats()), f.name) for r in reports)
                for f in dataclasses.fields(PathStats)
            }
        )
        for p in PATHS
    }
    return dataclasses.replace(
        first,
        options=dataclasses.replace(first.options, shard=None),
        verdicts=tuple(sorted(by_item.values(), key=lambda v: order.get(v.item, len(order)))),
        wall_seconds=max(r.wall_seconds for r in reports),
        phase_seconds={f"shard {s}": r.wall_seconds for r in reports for s in r.shards},
        stats=stats,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        shards=tuple(shards),
        merged=True,
    )


def _key_difference(a: Keys | None, b: Keys | None) -> str:
    if a is None or b is None:
        return "a report without cache keys"
    if a.base != b.base:
        return "another overlay version or sources (or pins.toml)"
    for path in PATHS:
        if a.paths.get(path) != b.paths.get(path):
            return f"path ({path.value}) {path.label} ran another environment or runtime patch"
    return "another models file"


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
