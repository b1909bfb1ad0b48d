"""What the canary found: ``status.json``, the status page's data (encoded by the codec
directly; its per-patch results are the engine's)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from overlay.upstream.results import OnBase, PatchBehaviour, PatchVerdict, RangeDiff


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
