"""The canary's typed results: frozen dataclasses the status page and ``status.json`` carry.

Everything here is plain data (no I/O): :mod:`overlay.codec` encodes it, decodes a previous
``status.json`` strictly, and derives the committed JSON Schema from it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

SCHEMA_VERSION = 1


class TextStatus(enum.StrEnum):
    """How one patch fares when the series is replayed onto a new base, best first."""

    UNCHANGED = "applies unchanged"
    OFFSET = "applies with offset"
    MERGED = "applies after 3-way merge"
    UPSTREAM = "already upstream"
    CONFLICT = "conflicts"
    MISSING = "file missing"


class ForwardState(enum.StrEnum):
    """What became of a patch's ``Forwarded:`` target upstream."""

    MERGED_AS_SENT = "merged as sent"
    MERGED_MODIFIED = "merged modified"
    OPEN = "still open"
    NOT_FOUND = "not found"
    NOT_FORWARDED = "not forwarded"
    NOT_NEEDED = "not needed"


class HostState(enum.StrEnum):
    """Whether the behaviour of main's ``backends/arm`` could be measured."""

    HOSTED = "hosted"
    NOT_HOSTED = "not hosted"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class ConflictHunk:
    """One conflicting region of a 3-way merge, as text with its markers."""

    path: str
    text: str


@dataclass(frozen=True)
class UpstreamEvidence:
    """Why a patch is taken to be upstream already: how, and the commit when one is known."""

    kind: str  # "reverse applies", "merge adds nothing", "patch-id", "commit names it"
    commit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class PatchOnTarget:
    """One patch (or one port) replayed onto one target."""

    patch: str
    status: TextStatus
    detail: str = ""
    offsets: tuple[int, ...] = ()
    conflicts: tuple[ConflictHunk, ...] = ()
    evidence: tuple[UpstreamEvidence, ...] = ()
    port: str = ""  # the release a port was made for ("" for the line's own patch)


@dataclass(frozen=True)
class RangeDiffPair:
    """One row of ``git range-diff``: a patch before and after the rebase."""

    old: int  # position in the line's series (0: none)
    new: int  # position in the rebased series (0: dropped)
    relation: str  # "=" same, "!" changed, "<" dropped, ">" added
    subject: str


@dataclass(frozen=True)
class RangeDiff:
    """``git range-diff`` of the series on its base vs rebased onto the target."""

    command: str
    text: str
    pairs: tuple[RangeDiffPair, ...] = ()


@dataclass(frozen=True)
class TargetResult:
    """The series of one line replayed onto one upstream target (``main`` or a tag)."""

    target: str  # "main" or "v1.3.0"
    commit: str
    patches: tuple[PatchOnTarget, ...]
    ports: tuple[PatchOnTarget, ...] = ()
    range_diff: RangeDiff | None = None


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
class CaseRun:
    """One trigger case of a patch on main, stock and patched."""

    case: str
    stock: str  # "right", "wrong", "failed"
    patched: str


@dataclass(frozen=True)
class PatchBehaviour:
    """A patch's trigger cases on main's ``backends/arm`` hosted by the newest wheel."""

    patch: str
    outcome: str  # behaviour.Outcome value
    text: str
    cases: tuple[CaseRun, ...] = ()
    test: str = ""  # its exported tests: the command, stock -> patched counts


@dataclass(frozen=True)
class Behaviour:
    """Whether behaviour ran on main, and why not when it did not."""

    state: HostState
    wheel: str = ""  # the executorch release hosting main's backends/arm
    detail: str = ""  # the import error (first lines), or why it was not run
    patches: tuple[PatchBehaviour, ...] = ()


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


@dataclass(frozen=True)
class Row:
    """One line of the status page: a patch of a line, its state, what to do next."""

    line: str
    patch: str
    subject: str
    main: TextStatus
    upstream: str  # forwarded state, with the commit and release when merged
    result: str  # one sentence: the canary's finding
    next_step: str
    since: str  # date this main status was first seen
    newly_conflicting: bool = False
    bisect: str = ""  # "Superseded-by: <commit>" or "Broken-by: <commit>"


@dataclass(frozen=True)
class LineResult:
    """Everything the canary found for one release line."""

    line: str
    base: str  # the upstream commit of v<line>, the series' base
    targets: tuple[TargetResult, ...]
    forwarded: tuple[Forwarded, ...]
    bisects: tuple[BisectResult, ...]
    gate: Gate | None
    rows: tuple[Row, ...]
    error: str = ""  # why the line could not be replayed at all


@dataclass(frozen=True)
class CanaryReport:
    """The canary over every release line: the status page's data."""

    schema: int
    created: str  # ISO date-time (UTC)
    tool: str
    upstream: str
    main: str  # the commit of upstream main
    main_date: str
    lines: tuple[LineResult, ...]
    behaviour: Behaviour
    seconds: float
    failures: tuple[str, ...]  # newly conflicting patches, export churn

    @property
    def failed(self) -> bool:
        """Return True when the canary found a new conflict or export churn."""
        return bool(self.failures)
