"""The facts upstream verdicts are decided from: text checks, cases, tests, text plans.

Gathered by :mod:`overlay.upstream.matrix` (a patch's text on a release),
:mod:`overlay.upstream.behaviour` (corpus cases on stock and patched envs),
:mod:`overlay.upstream.upstream_tests` (pytest on upstream's tests) and
:mod:`overlay.upstream.retarget.text_plan` (a patch's text plan on a new release); read by
:mod:`overlay.upstream.verdicts`, the one place that decides. Data only, plus the parser
of the ``Applied-Upstream`` header.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from overlay.equivalence.verdict import AB, Quality


class Status(enum.StrEnum):
    """How one patch (or one file diff of it) fares on one release, best first."""

    APPLIES = "applies"
    OFFSET = "offset"
    CONTAINED = "contained"
    CONFLICT = "conflict"
    MOVED = "moved"
    MISSING = "missing"


RANK = {status: rank for rank, status in enumerate(Status)}
APPLYING = frozenset({Status.APPLIES, Status.OFFSET})


@dataclass(frozen=True)
class Check:
    """The result of trying one patch on one release's sources."""

    status: Status
    detail: str = ""

    @property
    def short(self) -> str:
        """Return a compact cell text, e.g. ``conflict h1`` or ``offset +12``."""
        if self.status is Status.OFFSET:
            return f"offset {self.detail.split()[0]}" if self.detail else "offset"
        if self.status is Status.CONFLICT and self.detail.startswith("hunk "):
            return "conflict h" + self.detail.split()[1].split("/")[0]
        return self.status.value


@dataclass(frozen=True)
class Cell:
    """One patch on one release: the pinned patch and, where one exists, its port."""

    version: str
    check: Check
    port_version: str | None = None
    port: Check | None = None

    @property
    def effective(self) -> Check:
        """Return the port's result if there is a port, else the pinned patch's."""
        return self.port if self.port is not None else self.check

    @property
    def short(self) -> str:
        """Return the terminal cell text."""
        if self.port is None:
            return self.check.short
        return f"{self.check.short} / port {self.port.short}"

    def as_json(self) -> CellJson:
        """Return the JSON form (the pinned patch's result; the port's, where one exists)."""
        port = None
        if self.port is not None:
            port = PortJson(self.port_version, self.port.status, self.port.detail)
        return CellJson(self.version, self.check.status, self.check.detail, port)


@dataclass(frozen=True)
class PortJson:
    """A port's result in a matrix cell."""

    version: str | None
    status: Status
    detail: str


@dataclass(frozen=True)
class CellJson:
    """One matrix cell as JSON: the pinned patch's status and, where one exists, its port's."""

    version: str
    status: Status
    detail: str
    port: PortJson | None = None


@dataclass(frozen=True)
class UpstreamInfo:
    """What a patch's ``Applied-Upstream`` header says."""

    text: str
    version: str | None
    commit: str | None
    note: str

    @property
    def ref(self) -> str:
        """Return a short reference: a 10-digit commit, or nothing."""
        return self.commit[:10] if self.commit else ""


def parse_applied_upstream(text: str) -> UpstreamInfo:
    """Parse ``Applied-Upstream``: ``1.3.0, commit:<sha> (PR #N)`` or free text."""
    text = " ".join(text.split())
    version = None
    note = text
    head, _, rest = text.partition(",")
    try:
        Version(head.strip())
    except InvalidVersion:
        pass
    else:
        version, note = head.strip(), rest.strip()
    commit = None
    for word in note.replace("(", " ").replace(")", " ").split():
        if word.startswith("commit:"):
            commit = word.removeprefix("commit:")
    return UpstreamInfo(text=text, version=version, commit=commit, note=note)


@dataclass(frozen=True)
class CaseOutcome:
    """One corpus case on stock and (when a patched env ran) patched of one release."""

    case: str
    stock: Quality
    patched: Quality | None
    ab: AB | None  # stock -> patched, judged by correctness
    stock_error: str = ""
    patched_error: str = ""


class TestState(enum.StrEnum):
    """How one test ended, as pytest's JUnit report says."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"  # the test body raised (an assertion or any other error)
    ERROR = "error"  # collection, setup or teardown failed: the body never ran as written
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"


@dataclass(frozen=True)
class TestResult:
    """One test of a pytest run: its node, how it ended and why (the exception line)."""

    __test__ = False  # not a pytest test class

    node: str
    state: TestState
    reason: str = ""  # "AssertionError: ...", "RuntimeError: Missing out variants: ...", ...


@dataclass(frozen=True)
class Counts:
    """One pytest run: its closing counts, every test's result, or why it did not run."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0
    tests: tuple[TestResult, ...] = field(default=(), compare=False)
    problem: str = field(default="", compare=False)  # pytest itself failed (no report)

    @property
    def ok(self) -> bool:
        """Return True when something ran and nothing failed."""
        return self.passed + self.xfailed > 0 and self.failed == 0 and self.errors == 0

    @property
    def text(self) -> str:
        """Return ``3 passed, 1 failed`` style text."""
        parts = [
            f"{n} {label}"
            for n, label in (
                (self.passed, "passed"),
                (self.failed, "failed"),
                (self.errors, "errors"),
                (self.skipped, "skipped"),
                (self.xfailed, "xfailed"),
                (self.xpassed, "xpassed"),
            )
            if n
        ]
        return ", ".join(parts) or "no tests ran"


@dataclass(frozen=True)
class TestRun:
    """Upstream tests run with pytest on stock and on patched of one release."""

    __test__ = False  # not a pytest test class

    command: str  # as a reviewer runs it in an executorch checkout
    selection: tuple[str, ...]  # node ids or files
    stock: Counts | None  # None: not run on stock (the affected subset runs patched only)
    patched: Counts
    seconds: float

    def as_json(self) -> TestRunJson:
        """Return the JSON form: counts as text, every test's result."""
        return TestRunJson(
            command=self.command,
            selection=self.selection,
            stock=self.stock.text if self.stock else None,
            patched=self.patched.text,
            stock_tests=self.stock.tests if self.stock else (),
            patched_tests=self.patched.tests,
            seconds=round(self.seconds, 1),
        )


@dataclass(frozen=True)
class TestRunJson:
    """An upstream test run as JSON: counts as text (``3 passed, 1 failed``), every test."""

    __test__ = False  # not a pytest test class

    command: str
    selection: tuple[str, ...]
    stock: str | None
    patched: str
    stock_tests: tuple[TestResult, ...]
    patched_tests: tuple[TestResult, ...]
    seconds: float


class Action(enum.StrEnum):
    """What happens to a patch on the new release."""

    DROP = "drop"
    CARRIED = "carried"
    PORTED = "ported"
    CONFLICT = "conflict"


KEPT = frozenset({Action.CARRIED, Action.PORTED})


@dataclass(frozen=True)
class TextPlan:
    """A patch's text on the new release, before behaviour is known."""

    name: str
    status: Status  # the matrix status of the pinned patch on the new release
    detail: str
    action: Action
    source: str  # "pinned", "port 1.5.1", "3-way merge", "Applied-Upstream", ...
    after: dict[str, str] = field(default_factory=dict)  # new release texts after it
    conflicts: tuple[str, ...] = ()  # "path: hunk N" of the 3-way merge
    merge_note: str = ""  # what a 3-way merge of the pinned patch gave (also when a port won)
    message: str = ""  # the work tree commit message (the port's header for a port)


@dataclass(frozen=True)
class CaseMove:
    """One corpus case across the move: pinned patched build vs new patched build."""

    case: str
    old_patched: str  # quality
    new_patched: str
    changes: tuple[str, ...]  # observations that differ
    attribution: str  # "no change", "upstream change", "patch", "upstream change and patch"
    note: str
    covered_by: str = ""  # the existing target line's own patch that fixes a lost case

    @property
    def lost(self) -> bool:
        """Return True when the case was right with the pinned build and is not now."""
        return self.old_patched == "right" and self.new_patched != "right"
