"""Every upstream verdict, decided in one pure module from the facts in :mod:`facts`.

Four questions, each answered here and nowhere else:

- **text** (:func:`text_verdict`): from its ``Applied-Upstream`` header and how its text
  (or its port's) fares on each release, is a patch dropped, sent upstream, or ported?
- **tests** (:func:`judge_tests`): do the tests a patch adds fail before and pass after,
  for the right reason? "Fails before" counts only failures of the test's own assertion
  (``AssertionError``, ``pytest.fail``, ``DID NOT RAISE``) or of the bug's own error (as
  its trigger case shows it on stock); a collection, import, setup or kernel-registration
  error means the test *could not run*, and a patch whose test could not run is not ready.
- **behaviour** (:func:`decide_patch`, :func:`behaviour_verdict`): on one release, does
  stock fail the patch's bug triggers and does the patch fix them, without regressions?
- **retarget** (:func:`apply_behaviour`, :func:`final_verdict`, :func:`flag_stale_header`,
  :func:`readiness`): what the candidate carries, the final word per patch, and whether the
  candidate can be promoted.

The gatherers (matrix, behaviour, upstream_tests, retarget) only collect facts and call
these; the renderers only show what they return.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.version import Version

from overlay.equivalence.verdict import Quality
from overlay.upstream.facts import (
    APPLYING,
    KEPT,
    Action,
    CaseMove,
    CaseOutcome,
    Cell,
    Counts,
    Status,
    TestRun,
    TestRunJson,
    TestState,
    TextPlan,
    UpstreamInfo,
)

PORTS_HINT = "patches/<line>/ports/{version}/{name}"

# --- text ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What to do with a patch, given the matrix (and behaviour, where measured)."""

    action: str  # "drop", "upstream" (send it), "port" (needs a port first), "blocked"
    text: str
    needs_upstream: bool


def text_verdict(
    name: str, info: UpstreamInfo, cells: Mapping[str, Cell], versions: Sequence[str]
) -> Verdict:
    """Combine the patch's Applied-Upstream header with the matrix (text only)."""
    newest = versions[-1]
    effective = cells[newest].effective
    if info.version is not None:
        how = f" ({info.ref})" if info.ref else ""
        text = f"drop: fixed upstream in {info.version}{how}"
        if info.note and not info.commit:
            text += f", {info.note}"
        fixed = Version(info.version)
        stale = [v for v in versions if Version(v) >= fixed and cells[v].check.status in APPLYING]
        if stale:
            text += f"; yet the patch still applies on {', '.join(stale)}: check the header"
        return Verdict("drop", text, needs_upstream=False)
    if info.text:
        text = f"drop: {info.text} (Applied-Upstream)"
        if effective.status in APPLYING:
            text += f"; the code it changes is still in {newest} ({effective.short})"
        return Verdict("drop", text, needs_upstream=False)
    if effective.status is Status.CONTAINED:
        first = next(v for v in versions if cells[v].effective.status is Status.CONTAINED)
        return Verdict(
            "drop",
            f"drop: contained upstream since {first} (add Applied-Upstream to the header)",
            needs_upstream=False,
        )
    port = cells[newest].port_version
    if effective.status in APPLYING:
        via = f" (port {port})" if port else ""
        return Verdict(
            "upstream", f"send upstream: not fixed in {newest}; applies there{via}", True
        )
    where = PORTS_HINT.format(version=newest, name=name)
    return Verdict("port", f"port needed: {effective.short} on {newest}; add {where}", True)


# --- tests ---------------------------------------------------------------------------------


class TestOutcome(enum.StrEnum):
    """What the tests a patch adds show on one release."""

    __test__ = False  # not a pytest test class

    FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"
    PASSES_BEFORE = "passes before"  # it tests nothing the patch changes
    FAILS_AFTER = "fails after"
    COULD_NOT_RUN = "could not run"


@dataclass(frozen=True)
class TestVerdict:
    """The tests' outcome and why, e.g. ``could not run: stock: t.py::x: RuntimeError...``."""

    __test__ = False  # not a pytest test class

    outcome: TestOutcome
    text: str


_OWN = ("AssertionError", "assert ", "Failed: ")  # the test's own check failed
_NOT_OWN = ("Failed: Timeout",)  # pytest-timeout: the test did not finish
_MIN_MATCH = 12  # either message may be cut short; shorter ones say too little to match
_LABEL = re.compile(r"^(?:VGF|numerics|[\w.]*(?:Error|Exception|Warning)): ")


def _core(error: str) -> str:
    """Return an error's message without labels: ``VGF: RuntimeError: x`` gives ``x``."""
    text = error.strip()
    while (match := _LABEL.match(text)) is not None:
        text = text[match.end() :]
    return text.strip()


def is_own_failure(reason: str, expected_errors: Sequence[str] = ()) -> bool:
    """Return True when a failed test failed on its own check, or with the bug's error.

    Example: ``AssertionError: assert 1 == 2`` or ``Failed: DID NOT RAISE`` are the test's
    own; ``RuntimeError: Missing out variants: {...}`` is not (unless the bug's trigger case
    fails on stock with that very error).
    """
    text = reason.strip()
    if text.startswith(_OWN) and not text.startswith(_NOT_OWN):
        return True
    core = _core(text)
    return any(
        len(expected) >= _MIN_MATCH
        and len(core) >= _MIN_MATCH
        and (expected in core or core in expected)
        for expected in map(_core, expected_errors)
    )


def _not_run(label: str, counts: Counts, expected: Sequence[str], *, stock: bool) -> str:
    """Return why a side's tests did not run as written ("" when they did)."""
    if counts.problem:
        return f"{label}: {counts.problem}"
    if not counts.tests:
        return f"{label}: no test ran ({counts.text})"
    for test in counts.tests:
        if test.state is TestState.ERROR:
            return f"{label}: {test.node}: {test.reason or 'error'}"
        if test.state is TestState.SKIPPED:
            return f"{label}: {test.node} skipped: {test.reason or 'no reason given'}"
        if stock and test.state is TestState.FAILED and not is_own_failure(test.reason, expected):
            return f"{label}: {test.node}: {test.reason or 'failed'}"
    return ""


def judge_tests(run: TestRun, expected_errors: Sequence[str] = ()) -> TestVerdict:
    """Decide whether a patch's tests fail before and pass after, for the right reason."""
    if run.stock is None:
        return TestVerdict(TestOutcome.COULD_NOT_RUN, "could not run: not run on stock")
    for label, counts, stock in (("stock", run.stock, True), ("patched", run.patched, False)):
        reason = _not_run(label, counts, expected_errors, stock=stock)
        if reason:
            return TestVerdict(TestOutcome.COULD_NOT_RUN, f"could not run: {reason}")
    summary = f"{run.stock.text} -> {run.patched.text}"
    failing = [t for t in run.patched.tests if t.state in (TestState.FAILED, TestState.XPASSED)]
    if failing or not run.patched.ok:
        reasons = "; ".join(f"{t.node}: {t.reason}" for t in failing) or run.patched.text
        return TestVerdict(TestOutcome.FAILS_AFTER, f"fails after ({summary}): {reasons}")
    before = [t for t in run.stock.tests if t.state is TestState.FAILED]
    if not before:
        return TestVerdict(TestOutcome.PASSES_BEFORE, f"passes before ({summary})")
    why = "; ".join(f"{t.node.rsplit('::', 1)[-1]}: {t.reason[:120]}" for t in before)
    return TestVerdict(TestOutcome.FAILS_BEFORE_PASSES_AFTER, f"fails before ({summary}): {why}")


# --- behaviour -----------------------------------------------------------------------------


class Outcome(enum.StrEnum):
    """What a patch does on one release, judged by its trigger cases and tests."""

    FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"
    FIXED_ON_STOCK = "already fixed on stock"
    REGRESSION = "regression with patch"
    STILL_FAILS = "still fails with patch"
    NO_BUG_TRIGGER = "no bug trigger"
    COULD_NOT_RUN = "could not run"
    INCOMPLETE = "incomplete"


NOT_NEEDED = frozenset({Outcome.FIXED_ON_STOCK, Outcome.NO_BUG_TRIGGER})


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

    def as_json(self) -> PatchBehaviourJson:
        """Return the JSON form (the tests' verdict as its text)."""
        return PatchBehaviourJson(
            patch=self.patch,
            release=self.release,
            outcome=self.outcome,
            text=self.text,
            bug_cases=self.bug_cases,
            other_cases=self.other_cases,
            regressions=self.regressions,
            test=self.test.as_json() if self.test else None,
            test_verdict=self.test_verdict.text if self.test_verdict else None,
        )


@dataclass(frozen=True)
class PatchBehaviourJson:
    """One patch on one release as JSON: its trigger cases, outcome, tests and why."""

    patch: str
    release: str
    outcome: Outcome
    text: str
    bug_cases: tuple[CaseOutcome, ...]
    other_cases: tuple[CaseOutcome, ...]
    regressions: tuple[str, ...]
    test: TestRunJson | None
    test_verdict: str | None


def decide_patch(
    patch: str,
    release: str,
    bug: Sequence[CaseOutcome],
    other: Sequence[CaseOutcome],
    *,
    kept: bool,
    regressions: Sequence[str] = (),
    test: TestRun | None = None,
) -> PatchBehaviour:
    """Decide a patch's outcome on a release from its cases and tests.

    ``kept`` says whether the patched env carries this patch; without it only the stock
    side counts (is the bug still there?).
    """
    found = PatchBehaviour(patch, release, tuple(bug), tuple(other), Outcome.INCOMPLETE, "")
    still = [c for c in bug if c.stock is not Quality.RIGHT]
    if not bug and kept and regressions:
        text = (
            f"no bug trigger on {release}, and a regression with the patch:"
            f" {', '.join(regressions)} right on stock, not with the patch"
        )
        return replace(found, outcome=Outcome.REGRESSION, text=text,
                       regressions=tuple(regressions), test=test)  # fmt: skip
    if not bug:
        wrong_other = [c.case for c in other if c.stock is not Quality.RIGHT]
        if wrong_other:
            text = f"no bug trigger; stock {release} is not right on {', '.join(wrong_other)}"
        else:
            cases = ", ".join(c.case for c in other) or "none"
            text = (
                f"no case fails on stock {release}: its trigger cases ({cases}) are right "
                "there, the patch only changes how they lower"
            )
        return replace(found, outcome=Outcome.NO_BUG_TRIGGER, text=text, test=test)
    if not still:
        names = ", ".join(c.case for c in bug)
        text = f"fixed upstream in {release}: trigger cases now pass on stock ({names})"
        return replace(found, outcome=Outcome.FIXED_ON_STOCK, text=text, test=test)
    names = ", ".join(f"{c.case} ({c.stock_error or c.stock.value})" for c in still)
    if not kept:
        text = f"still needed on {release}: stock fails {names}"
        return replace(found, outcome=Outcome.STILL_FAILS, text=text, test=test)
    not_fixed = [c for c in still if c.patched is not Quality.RIGHT]
    if regressions:
        text = (
            f"regression with the patch on {release}: {', '.join(regressions)} "
            "right on stock, not with the patch"
        )
        outcome = Outcome.REGRESSION
    elif not_fixed:
        text = f"still fails with the patch on {release}: " + ", ".join(
            f"{c.case} ({c.patched_error or c.patched})" for c in not_fixed
        )
        outcome = Outcome.STILL_FAILS
    else:
        text = f"fails on stock {release}, passes with the patch: {names}"
        outcome = Outcome.FAILS_BEFORE_PASSES_AFTER
    tests = judge_tests(test, [c.stock_error for c in still]) if test is not None else None
    if tests is not None and outcome is Outcome.FAILS_BEFORE_PASSES_AFTER:
        if tests.outcome is TestOutcome.COULD_NOT_RUN:
            text += f"; but its upstream test {tests.text}"
            outcome = Outcome.COULD_NOT_RUN
        elif tests.outcome is not TestOutcome.FAILS_BEFORE_PASSES_AFTER:
            text += (
                "; but its upstream test does not fail before and pass after"
                f" ({tests.outcome.value}: {tests.text})"
            )
            outcome = Outcome.STILL_FAILS
    return PatchBehaviour(
        patch, release, tuple(bug), tuple(other), outcome, text, tuple(regressions), test, tests
    )


def behaviour_verdict(
    port_version: str | None, upstream: UpstreamInfo, found: PatchBehaviour
) -> Verdict:
    """The matrix verdict of one patch from its behaviour on the newest measured release."""
    via = f"port {port_version}" if port_version else "the patch"
    outcome = found.outcome
    if outcome is Outcome.FAILS_BEFORE_PASSES_AFTER:
        text = f"send upstream ({via}): {found.text}"
        if found.test is not None:
            stock = found.test.stock.text if found.test.stock else "not run"
            text += f"; its test: {stock} -> {found.test.patched.text}"
        return Verdict("upstream", text, needs_upstream=True)
    if outcome is Outcome.FIXED_ON_STOCK:
        ref = upstream.ref or upstream.note
        return Verdict("drop", f"drop: {found.text}" + (f" ({ref})" if ref else ""), False)
    if outcome is Outcome.NO_BUG_TRIGGER:
        return Verdict("drop", f"drop: {found.text}", needs_upstream=False)
    if outcome is Outcome.COULD_NOT_RUN:
        return Verdict("blocked", f"not sent ({via}): {found.text}", needs_upstream=True)
    return Verdict("port", f"port needed ({via}): {found.text}", needs_upstream=True)


# --- retarget ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatchVerdict:
    """The final word on one patch: action, evidence and disagreements."""

    name: str
    action: Action
    text: str
    plan: TextPlan
    behaviour: PatchBehaviour | None
    flags: tuple[str, ...] = ()  # disagreements and redundancies

    def as_json(self) -> PatchVerdictJson:
        """Return the JSON form (the text plan's status, detail, source and conflicts)."""
        return PatchVerdictJson(
            name=self.name,
            action=self.action,
            text=self.text,
            text_status=self.plan.status,
            text_detail=self.plan.detail,
            source=self.plan.source,
            conflicts=self.plan.conflicts,
            merge_note=self.plan.merge_note,
            behaviour=self.behaviour.as_json() if self.behaviour else None,
            flags=self.flags,
        )


@dataclass(frozen=True)
class PatchVerdictJson:
    """The final word on one patch as JSON."""

    name: str
    action: Action
    text: str
    text_status: Status
    text_detail: str
    source: str
    conflicts: tuple[str, ...]
    merge_note: str
    behaviour: PatchBehaviourJson | None
    flags: tuple[str, ...]


def apply_behaviour(plan: TextPlan, found: PatchBehaviour | None) -> TextPlan:
    """Let stock of the new release decide: drop what it no longer needs, keep what it does.

    A patch the text would drop (its header names an upstream fix) but whose trigger still
    fails on stock is kept: merged when git merges it, else a conflict to resolve by hand.
    """
    if found is None:
        return plan
    if found.outcome in NOT_NEEDED:
        return replace(plan, action=Action.DROP) if plan.action is not Action.DROP else plan
    if plan.action is Action.DROP and plan.status is not Status.CONTAINED:
        if plan.after and not plan.conflicts:
            return replace(plan, action=Action.PORTED, source="3-way merge")
        conflicts = plan.conflicts or (plan.merge_note,)
        return replace(plan, action=Action.CONFLICT, source="3-way merge", conflicts=conflicts)
    return plan


def final_verdict(
    plan: TextPlan, found: PatchBehaviour | None, version: str, *, registered: bool = True
) -> PatchVerdict:
    """Combine a patch's text plan and its behaviour on the new release.

    ``registered`` says whether the fix registry knows the patch (its trigger cases).
    """
    flags: list[str] = []
    upstream_ref = f" ({plan.source})" if plan.source.startswith("Applied-Upstream") else ""
    if found is None:
        text = f"{plan.action.value} ({plan.source}); behaviour not checked"
        if plan.action is Action.CONFLICT:
            text = f"conflict: {'; '.join(plan.conflicts)}"
        action = plan.action
    elif found.outcome in NOT_NEEDED:
        action = Action.DROP
        if found.outcome is Outcome.FIXED_ON_STOCK:
            text = found.text + upstream_ref
        else:
            text = f"drop: {found.text}{upstream_ref}"
        if plan.action in KEPT:
            flags.append(
                f"text says {plan.action.value} ({plan.source}) but no trigger case differs"
                f" on stock {version}: redundant, or its bug is not covered by a case"
            )
    else:
        kept = apply_behaviour(plan, found)
        action = kept.action
        text = f"{action.value} ({kept.source}): {found.text}"
        if plan.action is Action.DROP and plan.status is not Status.CONTAINED:
            flags.append(
                f"text says drop ({plan.source}) but stock {version} still fails its"
                f" trigger cases: {found.text}"
            )
            if kept.conflicts:
                text += f"; {'; '.join(kept.conflicts)}"
    if not registered:
        flags.append("no fix module in overlay/fixes/: no trigger cases to check")
    return PatchVerdict(plan.name, action, text, plan, found, tuple(flags))


def flag_stale_header(verdict: PatchVerdict, header: UpstreamInfo, version: str) -> PatchVerdict:
    """Flag a kept patch whose header still says upstream fixed it by ``version``.

    The export sends no patch that names an upstream fix, so such a header (carried
    over from the pinned patch, or left in a resolved conflict's commit message) must
    be rewritten to say what the kept text fixes.
    """
    if verdict.action not in KEPT or not header.text:
        return verdict
    if header.version is not None and Version(header.version) > Version(version):
        return verdict
    flag = (
        f"kept on {version}, yet its header says Applied-Upstream: {header.text}: rewrite the"
        " header (the commit message in the work tree) to say what it fixes on this"
        " release; the export sends no patch that names an upstream fix"
    )
    return replace(verdict, flags=(*verdict.flags, flag))


def readiness(
    verdicts: Sequence[PatchVerdict],
    moves: Sequence[CaseMove],
    *,
    behaviour_checked: bool,
    other: Sequence[str] = (),
) -> tuple[str, ...]:
    """Return every problem that keeps a candidate from promotion (empty: ready)."""
    problems = list(other)
    for verdict in verdicts:
        if verdict.action is Action.CONFLICT:
            problems.append(f"{verdict.name}: conflict ({'; '.join(verdict.plan.conflicts)})")
        found = verdict.behaviour
        if (
            verdict.action in KEPT
            and found is not None
            and found.outcome is not Outcome.FAILS_BEFORE_PASSES_AFTER
        ):
            problems.append(f"{verdict.name}: {found.text}")
    if not behaviour_checked:
        problems.append("behaviour not checked (--no-behaviour): not promotable")
    for move in moves:
        if move.lost and not move.covered_by:
            problems.append(f"{move.case}: right with the pinned build, {move.new_patched} now")
    return tuple(problems)
