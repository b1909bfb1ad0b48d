"""The upstream engine's result types (encoded by :mod:`overlay.codec` directly), and the
parser of the ``Applied-Upstream`` header."""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from overlay.equivalence.protocol import InitReply
from overlay.equivalence.verdict import AB, Quality

REPORT_SCHEMA = 3  # every upstream report: 3 since one result per patch on a base (OnBase)


class Status(enum.StrEnum):
    """How one patch (or its port) fares on one base, best first."""

    APPLIES = "applies"
    OFFSET = "offset"
    MERGED = "merged"  # the strict applier fails; git's 3-way merge from the line's base is clean
    CONTAINED = "contained"  # already upstream: the reverse applies, or the merge adds nothing
    CONFLICT = "conflict"
    MOVED = "moved"
    MISSING = "missing"


RANK = {status: rank for rank, status in enumerate(Status)}
APPLYING = frozenset({Status.APPLIES, Status.OFFSET})
CARRIED = frozenset({Status.APPLIES, Status.OFFSET, Status.MERGED})  # the patch is on the base
BROKEN = frozenset({Status.CONFLICT, Status.MOVED, Status.MISSING})


@dataclass(frozen=True)
class Evidence:
    """Why a patch is taken to be upstream already: how, and the commit when one is known."""

    kind: str  # "reverse applies", "merge adds nothing", "patch-id", "commit names it"
    commit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Conflict:
    """One conflicting region of a 3-way merge: where it starts, and its text with markers."""

    path: str
    line: int  # the line of its ``<<<<<<<`` marker, from 1
    text: str  # the region with its markers and a few lines of context


@dataclass(frozen=True)
class Applied:
    """The result of trying one patch (or one port) on one base."""

    status: Status
    detail: str = ""
    offsets: tuple[int, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    evidence: tuple[Evidence, ...] = ()

    @property
    def short(self) -> str:
        """Return a compact cell text, e.g. ``conflict h1`` or ``offset +12``."""
        if self.status is Status.OFFSET and self.offsets:
            return "offset " + ",".join(f"{o:+d}" for o in self.offsets)
        if self.status is Status.CONFLICT and self.detail.startswith("hunk "):
            return "conflict h" + self.detail.split()[1].split("/")[0]
        return self.status.value


@dataclass(frozen=True)
class OnBase:
    """Patch P on base B (docs/upstream.md's ``OnBase``): how its text, or its port's, lands
    there and, where measured, what it does there."""

    patch: str
    own: Applied
    port_version: str = ""  # the newer line whose patch of the same number is the port
    port: Applied | None = None
    base: str = ""  # "1.5.1" (a release's sources), "main", "v1.3.0"
    commit: str = ""  # the upstream commit of the base ("" when unknown)
    date: str = ""  # the date of ``commit`` (ISO 8601; "" when unknown)
    behaviour: PatchBehaviour | None = None  # its trigger cases, and the tests it adds, both ways
    affected: TestRun | None = None  # every test of its test files and affected_tests, both ways
    broken: tuple[str, ...] = ()  # of those, passing on stock and not with it
    bystanders: tuple[OpCounts, ...] = ()  # models outside its triggers, stock and with it

    @property
    def cases(self) -> tuple[CaseOutcome, ...]:
        """Return its trigger cases as measured here (none when not measured)."""
        return self.behaviour.cases if self.behaviour else ()

    @property
    def target_results(self) -> list[tuple[str, str]]:
        """Return each (target, result) of its trigger cases: a case's stock ones, then patched."""
        return [
            r for c in self.cases for r in (*c.stock_targets.items(), *c.patched_targets.items())
        ]

    @property
    def effective(self) -> Applied:
        """Return the port's result if there is a port, else the line's own patch's."""
        return self.port if self.port is not None else self.own

    @property
    def carried_by_port(self) -> bool:
        """Return True when the port is what the base carries (it applies there)."""
        return self.port is not None and self.port.status in APPLYING

    @property
    def lands(self) -> bool:
        """Return True when the base carries it (its own text, or its port)."""
        return self.own.status in CARRIED or self.carried_by_port

    @property
    def short(self) -> str:
        """Return the short text (a matrix cell): the patch's result, then its port's."""
        if self.port is None:
            return self.own.short
        return f"{self.own.short} / port {self.port.short}"


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
class UpstreamInfo:
    """What a patch's ``Applied-Upstream`` header says."""

    text: str
    version: str | None
    commit: str | None
    note: str


def parse_applied_upstream(text: str) -> UpstreamInfo:
    """Parse ``Applied-Upstream``: ``1.3.0, commit:<sha> (PR #N)`` or free text."""
    text = " ".join(text.split())
    head, _, rest = text.partition(",")
    version, note = None, text
    with contextlib.suppress(InvalidVersion):
        Version(head.strip())
        version, note = head.strip(), rest.strip()
    words = reversed(note.replace("(", " ").replace(")", " ").split())  # the last one counts
    commit = next((w.removeprefix("commit:") for w in words if w.startswith("commit:")), None)
    return UpstreamInfo(text=text, version=version, commit=commit, note=note)


NOT_RUN = "lowers"  # how a target's result starts where it lowered and never ran
NOT_DELEGATED = "not delegated"  # where the partitioner took nothing: the CPU ran it all
NOT_COMPARED = (NOT_RUN, NOT_DELEGATED)  # how a result starts that is no target's output
EXACT = "exact: the quantised graph evaluated in integer arithmetic"  # defined in the method line


@dataclass(frozen=True)
class CaseOutcome:
    """One corpus case on stock and (when a patched env ran) patched of one release."""

    case: str
    stock: Quality
    patched: Quality | None
    ab: AB | None  # stock -> patched, judged by correctness
    stock_error: str = ""
    patched_error: str = ""
    # target -> its error and SQNR, why it failed, or NOT_RUN... (lowered, never executed)
    stock_targets: dict[str, str] = field(default_factory=dict)
    patched_targets: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReleaseRun:
    """The corpus cases run on stock and (optionally) patched envs of one release, judged."""

    release: str
    workers: dict[str, InitReply]  # "stock" / "patched" -> what the worker ran on
    cases: dict[str, CaseOutcome]
    seconds: float


class TestState(enum.StrEnum):
    """How one test ended, as pytest's JUnit report says."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"  # the test body raised (an assertion or any other error)
    ERROR = "error"  # collection, setup or teardown failed: the body never ran as written
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"
    # lowered, then needed a target this machine lacks: upstream's executor_runner (built by
    # its setup_testing*.sh) to run a VGF or Ethos-U file on; neither passed nor failed
    NO_TARGET = "not run here"


@dataclass(frozen=True)
class TestResult:
    """One test of a pytest run: its node, how it ended and why (the exception line)."""

    __test__ = False  # not a pytest test class

    node: str
    state: TestState
    reason: str = ""  # "AssertionError: ...", "RuntimeError: Missing out variants: ...", ...
    causes: tuple[str, ...] = ()  # the exceptions it was raised from (chained), innermost first


@dataclass(frozen=True)
class Counts:
    """One pytest run: every test's result (its JUnit report), or why it did not run."""

    tests: tuple[TestResult, ...] = ()
    problem: str = ""  # pytest itself failed (no report)

    def count(self, state: TestState) -> int:
        """Return how many tests ended in ``state``."""
        return sum(t.state is state for t in self.tests)

    @property
    def ok(self) -> bool:
        """Return True when something ran and nothing failed."""
        ran = self.count(TestState.PASSED) + self.count(TestState.XFAILED)
        return ran > 0 and not self.count(TestState.FAILED) and not self.count(TestState.ERROR)

    @property
    def text(self) -> str:
        """Return ``3 passed, 1 failed, 2 skipped (glslc not found)``: skips, xfails and
        tests not run here say why."""

        def why(state: TestState) -> str:
            if state is TestState.NO_TARGET:
                return " (no executor_runner built)"
            if state not in (TestState.SKIPPED, TestState.XFAILED):
                return ""
            reasons = dict.fromkeys(t.reason for t in self.tests if t.state is state and t.reason)
            return f" ({'; '.join(reasons)})" if reasons else ""

        counts = [(s, self.count(s)) for s in TestState]
        labels = {TestState.ERROR: "errors"}
        return (
            ", ".join(f"{n} {labels.get(s, s.value)}{why(s)}" for s, n in counts if n)
            or "no tests ran"
        )


@dataclass(frozen=True)
class TestRun:
    """Upstream tests run with pytest on stock and on patched of one release."""

    __test__ = False  # not a pytest test class

    command: str  # as a reviewer runs it in an executorch checkout
    selection: tuple[str, ...]  # node ids or files
    stock: Counts
    patched: Counts
    seconds: float

    @property
    def text(self) -> str:
        """Return ``stock 1 failed -> patched 1 passed``."""
        return f"stock {self.stock.text} -> patched {self.patched.text}"


class Outcome(enum.StrEnum):
    """What a patch does on one release, judged by its trigger cases and tests."""

    FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"
    FIXED_ON_STOCK = "already fixed on stock"
    REGRESSION = "regression with patch"
    STILL_FAILS = "still fails with patch"
    NO_BUG_TRIGGER = "no bug trigger"
    COULD_NOT_RUN = "could not run"


NOT_NEEDED = frozenset({Outcome.FIXED_ON_STOCK, Outcome.NO_BUG_TRIGGER})


class TestOutcome(enum.StrEnum):
    """What the tests a patch adds do, run without and with it."""

    __test__ = False  # not a pytest test class

    FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"
    PASSES_BEFORE = "passes before"  # they test nothing the patch changes
    FAILS_AFTER = "fails after"
    COULD_NOT_RUN = "could not run"


@dataclass(frozen=True)
class TestVerdict:
    """The tests' outcome and why, e.g. ``could not run: stock: t.py::x: RuntimeError...``."""

    __test__ = False  # not a pytest test class

    outcome: TestOutcome
    text: str


@dataclass(frozen=True)
class PatchBehaviour:
    """One patch on one release: its trigger cases, its outcome and why."""

    patch: str
    release: str
    bug_cases: tuple[CaseOutcome, ...]
    other_cases: tuple[CaseOutcome, ...]  # its CHANGED triggers
    outcome: Outcome
    text: str
    regressions: tuple[str, ...] = ()
    test: TestRun | None = None
    test_verdict: TestVerdict | None = None

    @property
    def cases(self) -> tuple[CaseOutcome, ...]:
        """Return its trigger cases: the bug's, then the others."""
        return (*self.bug_cases, *self.other_cases)


@dataclass(frozen=True)
class LintReport:
    """What upstream's linters, or one check of its pre-push hook, said about a commit."""

    ran: str  # the command, or why it did not run
    findings: tuple[str, ...]  # lintrunner's one-line findings; a hook check's lines
    seconds: float
    note: str = ""  # a hook check: what main says without the commit, or why it did not run

    @property
    def summary(self) -> str:
        """Return a one-line result for the PR's Test plan."""
        if not self.findings:  # a note says why: main fails it too, or it did not run
            return f"{self.ran}: {self.note or 'clean'}"
        note = f" ({self.note})" if self.note else ""
        return f"{self.ran}: {len(self.findings)} finding(s): {'; '.join(self.findings)}{note}"


@dataclass(frozen=True)
class SuiteRun:
    """Upstream's own Arm tests on a line's stock and patched builds, compared test by test."""

    line: str
    release: str
    run: TestRun
    broken: tuple[str, ...]  # passed on stock, not with the patches: fails the run
    fixed: tuple[str, ...]  # failed on stock, passed with the patches


@dataclass(frozen=True)
class OpCounts:
    """A bystander model's TOSA operators by type, stock and with a patch, on one target
    (``tosa`` or ``vgf``); an error says the side did not lower."""

    case: str
    model: str  # the model and its quantizer config, as upstream would rebuild it
    spec: str
    target: str
    stock: dict[str, int]
    patched: dict[str, int]
    stock_error: str = ""
    patched_error: str = ""


@dataclass(frozen=True)
class Review:
    """Upstream's gate on one fix's commit (the export)."""

    base_commit: str  # what the mbox is made against (main where it applies)
    lint: LintReport | None  # None: not run (the commit is not on main)
    rules: tuple[str, ...]  # the pre-push hook's rules the commit breaks
    checks: tuple[LintReport, ...] = ()  # the pre-push hook's other checks (None of lint: none)


@dataclass(frozen=True)
class Sending:
    """``export-upstream``: each fix of a line, against the newest release and upstream main."""

    line: str
    release: str
    torch: str  # the torch of the release's env
    main: str
    submissions: tuple[PatchVerdict, ...]  # each fix: on main and the release, its review
    skipped: dict[str, str]  # patch -> why it is not sent
    seconds: float
    main_date: str = ""  # main's commit date (ISO 8601)
    release_date: str = ""  # the release's (its commit's, else its recorded upload day)
    stale_main: str = ""  # why no fix is ready on main ("": main is as new as the release)
    schema: int = REPORT_SCHEMA


@dataclass(frozen=True)
class Wheel:
    """The wheel a release's sources were read from."""

    file: str
    sha256: str
    pinned: bool  # the sha256 was checked against patches/upstream.toml


@dataclass(frozen=True)
class Matrix:
    """The version matrix: the series replayed onto each release's sources, oldest first."""

    series: str  # the series digest
    pins_file: str  # where releases' wheel hashes are recorded
    wheels: dict[str, Wheel]  # release -> its wheel, oldest first
    rows: tuple[PatchVerdict, ...]  # each patch on each release, oldest first
    schema: int = REPORT_SCHEMA

    @property
    def versions(self) -> tuple[str, ...]:
        """Return the releases, oldest first."""
        return tuple(self.wheels)


class Action(enum.StrEnum):
    """What to do with a patch, given how it fares on its bases."""

    DROP = "drop"
    CARRIED = "carried"  # a retarget: its own text is on the new release
    PORTED = "ported"  # a retarget: its port, or a clean 3-way merge, is
    CONFLICT = "conflict"  # to resolve (the matrix: a port is needed first)
    SEND = "send upstream"  # the matrix: not fixed upstream; the export: ready to send
    KEEP = "keep"  # the canary: keep it on its line
    HOLD = "held back"  # the export: something keeps it from being sent


KEPT = frozenset({Action.CARRIED, Action.PORTED})


@dataclass(frozen=True)
class PatchVerdict:
    """One patch judged: its result on each base it was tried on (oldest first, the newest
    last), what to do, and why: the rows of every report."""

    patch: str
    subject: str
    bases: tuple[OnBase, ...]
    action: Action
    text: str  # why (the canary: the next step)
    upstream: str = ""  # its Applied-Upstream header; the canary: what its Forwarded: became
    source: str = ""  # where its text comes from: "pinned", "port 1.5.1", "3-way merge", ...
    flags: tuple[str, ...] = ()  # the export: what holds it back; a retarget: disagreements;
    # the canary: NEWLY_CONFLICTING, the commit bisected ("Broken-by: <commit>")
    since: str = ""  # the canary: the day its status on main was first seen
    review: Review | None = None  # the export: upstream's gate on its commit

    @property
    def on(self) -> OnBase:
        """Return its result on the newest base."""
        return self.bases[-1]


@dataclass(frozen=True)
class PinAttempt:
    """One set of runtime pins tried in a fresh stock env."""

    runtime: dict[str, str]
    ok: bool
    detail: str
    seconds: float
    origin: str = ""  # where its torch and tools came from
