"""The outcome of a run (or of merged shards): the typed :class:`Report`, and what to do next.

A failing run's next step is written for who can act: a ``--models`` case is declared in the
user's own file, a corpus case or a divergence in the overlay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from overlay.equivalence.controller.options import RunChoices, Shard
from overlay.equivalence.controller.result_cache import Keys
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import InitReply, PathId
from overlay.equivalence.verdict import Problem, Verdict, harness_errors
from overlay.errors import EquivalenceError
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
