"""Where an equivalence verdict is decided: pure functions of the three paths' results.

Size: over 500 lines on purpose, so that every verdict is decided in this one module
(docs/equivalence.md, "Verdicts", defines each).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from overlay import fixes
from overlay.equivalence.protocol import (
    ErrorInfo,
    ItemResult,
    Numerics,
    PathId,
    Payload,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.fixes import Direction, Divergence
from overlay.items import CaseInfo, ItemId, ItemKind, ProbeInfo

# An integer program is right when its outputs equal the exact reference's: no step apart.
ALLOWED_STEPS = 0
# Max error vs the fake-quantised reference, as a fraction of its range, by scheme.
DEFAULT_TOLERANCE: dict[str | None, float] = {
    None: 0.01,
    "a8w8": 0.05,
    "a8w8_snorm": 0.05,
    "a16w8": 0.05,
}
ABSOLUTE_FLOOR = 1e-3  # errors below this are never wrong (float noise on tiny outputs)
TOSA, VGF = "tosa", "vgf"  # target names; Ethos-U targets go by their config name
# "Measurably worse": the patched error exceeds stock's by this fraction of the range.
WORSE_BY = 0.01
# Why an Ethos-U command stream is compiled and estimated here, never executed.
ETHOS_U_NOT_RUN = (
    "executing a command stream needs Arm's Corstone FVPs, which no package registry carries;"
    " Vela's estimates are shown"
)
EXECUTABLE = (TOSA, VGF)  # the targets --require-executed can demand


class Observation(enum.StrEnum):
    """One thing two results of an item are compared on."""

    STATUS = "status"
    ERROR = "error"
    VALUE = "value"
    GRAPH = "graph"
    TOSA_PAYLOAD = "tosa payload"
    NUMERICS = "numerics"
    VGF_PAYLOAD = "vgf payload"
    VGF_NUMERICS = "vgf numerics"
    ETHOSU_PAYLOAD = "ethos-u payload"


class BC(enum.StrEnum):
    """(b) stock + runtime patch vs (c) diff-patched build."""

    AGREE = "agree"
    DECLARED = "declared"
    IMPROVED = "improved"  # a declared improvement: (c) right where (b) fails or is wrong
    UNDECLARED = "undeclared"
    INCOMPLETE = "incomplete"  # a path did not finish (worker timeout or crash)


class AB(enum.StrEnum):
    """(a) stock vs (b) stock + runtime patch."""

    SAME = "same"
    FIXED = "fixed"
    REGRESSION = "regression"
    CHANGED = "changed"
    STILL_BROKEN = "still broken"
    UNCHECKED = "unchecked"  # stock fails, patched lowers: its numbers are not checked here


class Problem(enum.StrEnum):
    """A kind of problem that makes a run fail; each has its own next step."""

    UNDECLARED = "undeclared"
    INCOMPLETE = "incomplete"
    CLAIM = "claim"
    EXPECTATION = "expectation"
    NOT_EXECUTED = "not executed"


class Quality(enum.StrEnum):
    """How one path's target stands against the reference: judged only where it ran."""

    RIGHT = "right"  # ran, every output within the case's limits
    WRONG = "wrong"  # ran, but outputs are off (or the run raised)
    FAILED = "failed"  # the lowering raised
    LOWERED = "lowered"  # lowered, not executed here (the reason is in the result)
    COMPILED = "compiled"  # an Ethos-U command stream: compiled, never executed here


BAD = (Quality.WRONG, Quality.FAILED)  # judged, and not right
NOT_RUN = (Quality.LOWERED, Quality.COMPILED)  # a target that lowered and did not run
Judged = Mapping[PathId, Mapping[str, Quality]]  # each path's targets, judged


@dataclass(frozen=True)
class Limits:
    """When one output counts as right: max error (fraction of range) and minimum SQNR."""

    tolerance: float
    sqnr_db: float | None = None


@dataclass(frozen=True)
class Finding:
    """A target that is not right on any of the three paths."""

    target: str
    quality: Quality  # WRONG (some path ran and was wrong) or FAILED (all raised)
    detail: str

    @property
    def text(self) -> str:
        """Return the finding as one phrase."""
        word = "wrong" if self.quality is Quality.WRONG else "fails"
        return f"{word} on stock and patched ({self.target}): {self.detail}"


@dataclass(frozen=True)
class Verdict:
    """Everything decided about one item."""

    item: ItemId
    info: CaseInfo | ProbeInfo
    results: Mapping[PathId, ItemResult]
    bc: BC
    bc_diffs: tuple[Observation, ...]
    rule: Divergence | None  # the rule that declares the (b)/(c) difference
    ab: AB
    ab_diffs: tuple[Observation, ...]
    fix: int | None  # the one runtime fix that turns (a) into (b); None: none alone
    claim_problem: str | None
    targets: Judged = dataclasses.field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    expectation_problem: str | None = None  # a finding nobody expected, or the reverse
    # the one line fix whose runtime form, in place of the runtime patch's, makes (b) agree
    # with (c); None: none alone, or not tried
    bc_fix: int | None = None
    unchecked: str | None = None  # a claim or expectation not checked here (not executed)
    not_executed: str | None = None  # a target --require-executed asks for did not run

    @property
    def problems(self) -> dict[Problem, str]:
        """Return each problem of this item that makes the run fail, in words."""
        diffs = ", ".join(d.value for d in self.bc_diffs)
        cause = f" (from fix {self.bc_fix})" if self.bc_fix is not None else ""
        stuck = "; ".join(f"({p.value}) {e.first_line}" for p, e in harness_errors(self.results))
        found = {
            Problem.UNDECLARED: f"undeclared divergence between (b) and (c): {diffs}{cause}"
            if self.bc is BC.UNDECLARED
            else None,
            Problem.INCOMPLETE: f"did not finish on {stuck}" if self.bc is BC.INCOMPLETE else None,
            Problem.CLAIM: self.claim_problem,
            Problem.EXPECTATION: self.expectation_problem,
            Problem.NOT_EXECUTED: self.not_executed,
        }
        return {kind: text for kind, text in found.items() if text}

    @property
    def failures(self) -> list[str]:
        """Return one line per problem of this item that makes the run fail."""
        return [f"{self.item}: {text}" for text in self.problems.values()]


def harness_errors(results: Mapping[PathId, ItemResult]) -> list[tuple[PathId, ErrorInfo]]:
    """Return the paths whose worker timed out or crashed on the item, with the error."""
    return [
        (p, r.error)
        for p, r in results.items()
        if r.error is not None and r.error.stage is Stage.HARNESS
    ]


def limits(info: CaseInfo | ProbeInfo) -> Limits:
    """Return the case's limits: its tolerance (or its scheme's) and its SQNR floor, if any."""
    if isinstance(info, ProbeInfo):
        return Limits(0.0)
    default_tolerance = DEFAULT_TOLERANCE.get(info.quantize, DEFAULT_TOLERANCE[None])
    return Limits(
        tolerance=info.tolerance if info.tolerance is not None else default_tolerance,
        sqnr_db=info.sqnr_db,  # small graphs: the max error only; deep nets set a floor
    )


def scales(numerics: Numerics) -> tuple[float, ...]:
    """Return each output's range (max - min of the reference; max |x| in old data)."""
    return numerics.reference_range or numerics.reference_max_abs


def numerics_quality(
    numerics: Numerics | None, error: ErrorInfo | None, limit: Limits | float
) -> Quality:
    """Judge one run's outputs against the fake-quantised reference (none: not executed)."""
    if error is not None:
        return Quality.WRONG
    if numerics is None:
        return Quality.LOWERED
    if numerics.exact is not None:
        steps = numerics.exact.steps
        return (
            Quality.WRONG if any(s is None or s > ALLOWED_STEPS for s in steps) else Quality.RIGHT
        )
    bounds = limit if isinstance(limit, Limits) else Limits(float(limit))
    sqnrs = numerics.sqnr_db or (math.inf,) * len(numerics.max_abs_err_vs_fake_quant)
    for err, scale, sqnr in zip(
        numerics.max_abs_err_vs_fake_quant, scales(numerics), sqnrs, strict=False
    ):
        if err is None or err > bounds.tolerance * scale + ABSOLUTE_FLOOR:
            return Quality.WRONG
        low = bounds.sqnr_db is not None and (sqnr is None or sqnr < bounds.sqnr_db)
        if low and err > ABSOLUTE_FLOOR:
            return Quality.WRONG
    return Quality.RIGHT


def target_qualities(result: ItemResult, limit: Limits | float) -> dict[str, Quality]:
    """Judge each target a result has: failed, its numbers where it can run, else compiled."""
    return {
        name: Quality.FAILED
        if run.state is TargetState.FAILED
        else numerics_quality(run.numerics, run.numerics_error, limit)
        if name in EXECUTABLE
        else Quality.COMPILED
        for name, run in target_runs(result).items()
    }


def judged_targets(
    info: CaseInfo | ProbeInfo, results: Mapping[PathId, ItemResult]
) -> dict[PathId, dict[str, Quality]]:
    """Return each path's targets judged (a probe has none: it lowers nothing)."""
    limit = limits(info)
    case = isinstance(info, CaseInfo)
    return {p: target_qualities(r, limit) if case else {} for p, r in results.items()}


@dataclass(frozen=True)
class TargetRun:
    """One target of a result as the verdicts see it: its lowering and its run."""

    state: TargetState  # COMPARED: lowered (TOSA: the result is ok), FAILED: it raised
    error: ErrorInfo | None = None  # the lowering's
    numerics: Numerics | None = None  # TOSA on its reference model, an executed VGF program
    numerics_error: ErrorInfo | None = None
    run_reason: str = ""  # why a lowered target was not executed here
    payloads: tuple[Payload, ...] = ()


def target_runs(result: ItemResult) -> dict[str, TargetRun]:
    """Return each target a result has (a skipped one is absent): TOSA, VGF, each Ethos-U."""
    tosa = TargetState.COMPARED if result.ok else TargetState.FAILED
    lowered: list[tuple[str, TargetState, ItemResult | VgfResult]] = [(TOSA, tosa, result)]
    if result.vgf is not None:
        lowered.append((VGF, result.vgf.state, result.vgf))
    runs = {
        name: TargetRun(state, x.error, x.numerics, x.numerics_error, x.run_reason, x.payloads)
        for name, state, x in lowered
        if state is not TargetState.SKIPPED
    }
    for e in result.ethos_u:
        if e.state is not TargetState.SKIPPED:
            runs[e.target] = TargetRun(e.state, e.error, None, None, ETHOS_U_NOT_RUN, e.payloads)
    return runs


def _worse(a: Numerics | None, b: Numerics | None) -> bool:
    """Return True when (b)'s numbers are measurably worse than (a)'s on some output."""
    if a is None or b is None:
        return False
    pairs = zip(a.max_abs_err_vs_fake_quant, b.max_abs_err_vs_fake_quant, scales(b), strict=False)
    for stock, patched, scale in pairs:
        if stock is None or patched is None:
            continue
        if patched - stock > WORSE_BY * scale + ABSOLUTE_FLOOR:
            return True
    return False


def _lowering_key(run: TargetRun) -> tuple[object, ...]:
    """Return what a target's lowering is compared on: its state, error and payloads' digests."""
    error = run.error.key if run.error is not None else None
    return run.state, error, tuple((p.backend, p.size, p.sha256) for p in run.payloads)


def _run_key(run: TargetRun) -> object:
    """Return what two runs' numbers are compared on: the run's error, else the outputs' digests."""
    if run.numerics_error is not None:
        return run.numerics_error.key  # (type, message): never a tuple of sha256 digests
    return run.numerics.key if run.numerics is not None else None


def observed(result: ItemResult) -> dict[Observation, object]:
    """Return what a result is compared on, by observation: payloads by digest, a run by its
    error or its outputs' digests, a skipped target (a VGF program not run) by nothing."""
    runs = target_runs(result)
    tosa, vgf = runs.pop(TOSA), runs.pop(VGF, None)
    _, tosa_error, tosa_payloads = _lowering_key(tosa)
    return {
        Observation.STATUS: result.status,
        Observation.ERROR: tosa_error,
        Observation.VALUE: result.value,
        Observation.GRAPH: result.graph,
        Observation.TOSA_PAYLOAD: tosa_payloads,
        Observation.NUMERICS: _run_key(tosa),
        Observation.VGF_PAYLOAD: _lowering_key(vgf) if vgf else None,
        Observation.VGF_NUMERICS: _run_key(vgf)
        if vgf and vgf.state is TargetState.COMPARED
        else None,
        Observation.ETHOSU_PAYLOAD: tuple((t, *_lowering_key(run)) for t, run in runs.items()),
    }


def compare(x: ItemResult, y: ItemResult) -> tuple[Observation, ...]:
    """Return the observations in which two results of one item differ (an error only
    where the statuses agree: a status change says it)."""
    seen_x, seen_y = observed(x), observed(y)
    diffs = [o for o in Observation if seen_x[o] != seen_y[o]]
    if Observation.STATUS in diffs:
        return tuple(d for d in diffs if d is not Observation.ERROR)
    return tuple(diffs)


# When targets disagree, the verdict that needs attention first wins.
_AB_PRIORITY = (AB.REGRESSION, AB.FIXED, AB.UNCHECKED, AB.STILL_BROKEN, AB.CHANGED)


def _classify_target(qa: Quality, qb: Quality, worse: bool) -> AB:
    """Classify one target; a target not executed on a path is neither right nor wrong."""
    if qb in BAD:
        return AB.STILL_BROKEN if qa in BAD else AB.REGRESSION
    if qa in BAD:
        return AB.FIXED if qb is Quality.RIGHT else AB.UNCHECKED
    if qa is qb is Quality.RIGHT and worse:
        return AB.REGRESSION
    return AB.CHANGED


def classify(item: ItemId, a: ItemResult, b: ItemResult, limit: Limits | float) -> AB:
    """Classify (a) vs (b) by correctness, target by target (see the module docstring)."""
    if not compare(a, b):
        return AB.SAME
    if item.kind is ItemKind.PROBE:
        if a.ok != b.ok:
            return AB.FIXED if b.ok else AB.REGRESSION
        return AB.CHANGED
    qa, qb = target_qualities(a, limit), target_qualities(b, limit)
    ra, rb = target_runs(a), target_runs(b)
    found = {
        _classify_target(qa[t], qb[t], _worse(ra[t].numerics, rb[t].numerics))
        for t in qa
        if t in qb
    }
    return next(v for v in _AB_PRIORITY if v in found)


def check_claim(
    item: ItemId,
    ab: AB,
    fix: int | None,
    version: str | None = None,
    *,
    attributed: bool = True,
    unrun: bool = False,
) -> str | None:
    """Return a problem when a fix's trigger on this case (for ``version``) did not reproduce
    (``attributed`` False: only its effect); :func:`unchecked_claims` says what is unseen."""
    if item.kind is not ItemKind.CASE:
        return None
    problems = []
    for entry, trigger in fixes.triggers_of(item.name, version):
        wanted = f"{trigger.effect.value} by patch {entry.number}"
        found = "no difference" if ab is AB.SAME else f"{ab.value} by patch {fix}"
        fixed = trigger.effect.value == AB.FIXED.value
        effect = AB.FIXED if _not_checked(ab, unrun) and fixed else ab
        if effect.value != trigger.effect.value or (attributed and fix != entry.number):
            problems.append(
                f"fix {entry.number} claims '{wanted}' ({trigger.why}), found '{found}'"
            )
    return "; ".join(problems) or None


def _not_checked(ab: AB, unrun: bool) -> bool:
    """Return True when (a) vs (b) cannot show a fix here: stock fails and the patched
    target was not executed, or they differ only where stock's target was not executed."""
    return ab is AB.UNCHECKED or (unrun and ab is AB.CHANGED)


def unchecked_claims(
    item: ItemId,
    ab: AB,
    patched: ItemResult,
    judged: Mapping[str, Quality],
    version: str | None,
    *,
    unrun: bool = False,
) -> str | None:
    """Say which FIXED claims this machine could not check: a target not executed."""
    claims = [
        f"fix {entry.number} claims '{trigger.why}'"
        for entry, trigger in fixes.triggers_of(item.name, version)
        if trigger.effect.value == AB.FIXED.value
    ]
    if not _not_checked(ab, unrun) or item.kind is not ItemKind.CASE or not claims:
        return None
    runs = target_runs(patched)
    reasons = sorted({runs[t].run_reason for t, q in judged.items() if q in NOT_RUN})
    return f"{'; '.join(claims)}: not checked here ({'; '.join(reasons)})"


def fractions(numerics: Numerics | None) -> list[float | None]:
    """Return each output's error vs the fake-quantised reference, as a fraction of its range."""
    if numerics is None:
        return []
    return [
        None if error is None else (error / scale if scale > 0 else (0.0 if error == 0 else 1.0))
        for error, scale in zip(numerics.max_abs_err_vs_fake_quant, scales(numerics), strict=False)
    ]


def worst(numerics: Numerics) -> tuple[float, float | None] | None:
    """Return the worst output's error (fraction of range) and lowest SQNR (None: shapes differ)."""
    errors = fractions(numerics)
    if any(e is None for e in errors):
        return None
    known = [s for s in numerics.sqnr_db if s is not None]
    return max((e for e in errors if e is not None), default=0.0), min(known, default=None)


def exact_text(numerics: Numerics, *, reviewer: bool = False) -> str:
    """Return how a run stands against the exact reference ("" when there is none).

    Example: 7 steps off in 81 of 384 values, first after ``conv``'s conv2d + relu.
    Becomes: ``81 of 384 output values differ from the exact reference, by up to 7 steps
    (first at conv: conv2d + relu (quantize_per_tensor_default_2))``. In a ``reviewer``'s
    words (a PR): "the exact evaluation", without the node of the converted graph.
    """
    check = numerics.exact
    if check is None:
        return ""
    term = "the exact evaluation" if reviewer else "the exact reference"
    if any(s is None for s in check.steps):
        return f"output shape differs from {term}"
    most = max((s for s in check.steps if s is not None), default=0)
    if most == 0:
        return f"equal to {term}"
    # check.first: "<module>: <ops> (<quantize node>)" (worker/departure.py)
    where = re.sub(r" \([^()]*\)$", "", check.first) if reviewer else check.first
    first = f" (first at {where})" if where else ""
    by = f"up to {most} steps" if most > 1 else "1 step"
    values, differing = sum(math.prod(o.shape) for o in numerics.outputs), sum(check.differing)
    if values:
        noun = f"{differing} of {values} output values"
    else:  # older results without their outputs' shapes
        noun = f"{differing} output value{'s' * (differing != 1)}"
    verb = "differs" if differing == 1 else "differ"
    return f"{noun} {verb} from {term}, by {by}{first}"


def numerics_text(numerics: Numerics, *, reviewer: bool = False, note: str = "") -> str:
    """Return '[exact: ...; ]max error X% of range, SQNR Y dB' for the worst output, in a
    ``reviewer``'s words (:func:`exact_text`, no "vs fake-quant"); ``note`` follows the SQNR."""
    found = worst(numerics)
    if found is None:
        return "output shape differs from the reference"
    fraction, sqnr = found
    lowest = f"{math.inf if sqnr is None else sqnr:.1f}"  # Python writes infinity as 'inf'
    versus = " vs fake-quant" if not reviewer and numerics.exact is not None else ""
    text = f"max error{versus} {100 * fraction:.2f}% of range, SQNR {lowest} dB{note}"
    return "; ".join(filter(None, (exact_text(numerics, reviewer=reviewer), text)))


def findings(results: Judged, raw: Mapping[PathId, ItemResult]) -> tuple[Finding, ...]:
    """Return every target that is not right on any of the three paths."""
    shared = set.intersection(*(set(q) for q in results.values()))
    patched = target_runs(raw[PathId.PATCHED])  # how a target is off is said from (c)
    found = []
    for target in sorted(shared, key=lambda t: (t != TOSA, t != VGF, t)):
        seen = [results[p][target] for p in results]
        if all(q in BAD for q in seen):
            kind = Quality.WRONG if Quality.WRONG in seen else Quality.FAILED
            run = patched[target]
            error = run.error or run.numerics_error
            if error is not None:
                detail = error.first_line
            elif run.numerics is not None:
                detail = numerics_text(run.numerics)
            else:
                detail = "no numbers"
            found.append(Finding(target, kind, detail))
    return tuple(found)


def expected_broken(info: CaseInfo | ProbeInfo, version: str | None = None) -> str:
    """Return why a case is declared wrong on every path of ``version`` ("" if it is not)."""
    if not isinstance(info, CaseInfo) or not fixes.release_matches(info.broken_releases, version):
        return ""
    return info.expect_broken


def check_expectation(
    info: CaseInfo | ProbeInfo,
    found: tuple[Finding, ...],
    version: str | None = None,
    *,
    unrun: bool = False,
) -> str | None:
    """Return a problem when findings and the case's declared ``expect_broken`` disagree
    (``unrun``: a target executed on no path, so an expected breakage is unchecked)."""
    if not isinstance(info, CaseInfo):
        return None
    expected = expected_broken(info, version)
    if found and not expected:
        return "; ".join(f.text for f in found)
    if expected and not found and not unrun:
        return f"expected to be wrong on every path ({expected}), but a path is right"
    return None


def rule_holds(
    rule: Divergence,
    info: CaseInfo | ProbeInfo,
    results: Mapping[PathId, ItemResult],
    targets: Judged,
) -> bool:
    """Return True when a divergence rule's condition holds on an item's observations.

    Example: fix 1's 1.2.0 rule (spec has int16, no FP; (b) raises a declared error) on
    a user's a16w8 conv on TOSA-1.0+INT+int16 where the seed's form raises it.
    Becomes: True when (c) is neither wrong nor failing on any target (an IMPROVEMENT);
    an EQUIVALENT rule needs only (c) to lower.
    """
    b, c = results[PathId.RUNTIME], results[PathId.PATCHED]
    if isinstance(info, CaseInfo):
        features = set(info.spec.split("+")[1:])  # TOSA-1.0+INT+int16: {"INT", "int16"}
        if not features.issuperset(rule.spec_has) or features.intersection(rule.spec_lacks):
            return False
        if rule.quantize and info.quantize != rule.quantize:
            return False
    elif rule.spec_has or rule.spec_lacks or rule.quantize:
        return False
    runs = target_runs(b).values()
    errors = [e for run in runs for e in (run.error, run.numerics_error) if e is not None]
    named = [line for r in results.values() for line in r.graph]
    named += [f"{e.message}\n{e.traceback}" for e in errors]
    if rule.involves and not any(w in text for w in rule.involves for text in named):
        return False
    other = rule.other
    if isinstance(other, str):  # WRONG_NUMBERS
        shows = b.ok and Quality.WRONG in targets[PathId.RUNTIME].values()
    else:
        shows = any(s.type == e.type and s.contains in e.message for e in errors for s in other)
    if not shows:
        return False
    if rule.direction is Direction.EQUIVALENT:
        return c.ok
    return not any(q in BAD for q in targets[PathId.PATCHED].values())


def required_problem(
    results: Mapping[PathId, ItemResult],
    targets: Judged,
    required: Iterable[str],
) -> str | None:
    """Return why a target ``--require-executed`` names did not run on some path (None: ran;
    a failed lowering is judged, and a VGF lowering that delegated nothing has nothing to run)."""
    missing: dict[tuple[str, str], list[str]] = {}
    for target in required:
        for path, result in results.items():
            vgf = result.vgf if target == VGF else None
            if vgf is not None and vgf.state is TargetState.SKIPPED:
                reason = f"not lowered: {vgf.reason}"
            elif targets[path].get(target) is Quality.LOWERED and (vgf is None or vgf.payloads):
                reason = target_runs(result)[target].run_reason
            else:
                continue
            missing.setdefault((target, reason), []).append(f"({path.value})")
    return (
        "; ".join(
            f"{target} not executed on {', '.join(paths)} (--require-executed {target}): {reason}"
            for (target, reason), paths in missing.items()
        )
        or None
    )


def decide(
    item: ItemId,
    info: CaseInfo | ProbeInfo,
    results: Mapping[PathId, ItemResult],
    fix: int | None,
    rules: Iterable[Divergence] | None = None,
    *,
    bc_fix: int | None = None,
    version: str | None = None,
    attributed: bool = True,
    required: Iterable[str] = (),
) -> Verdict:
    """Decide (b) vs (c), (a) vs (b), findings and the claim check of one item on the stock
    release ``version``; ``fix``, ``bc_fix``: the run's attributions."""
    if rules is None:
        rules = fixes.divergences(version)
    a, b, c = results[PathId.STOCK], results[PathId.RUNTIME], results[PathId.PATCHED]
    limit = limits(info)
    harness = bool(harness_errors(results))
    bc_diffs = compare(b, c)
    targets = judged_targets(info, results)
    matches: list[Divergence] = []
    if harness:
        bc = BC.INCOMPLETE
    elif not bc_diffs:
        bc = BC.AGREE
    else:
        matches = [
            rule
            for rule in rules
            if bc_fix in (None, rule.fix) and rule_holds(rule, info, results, targets)
        ]
        improvement = bool(matches) and matches[0].direction is Direction.IMPROVEMENT
        bc = (BC.IMPROVED if improvement else BC.DECLARED) if matches else BC.UNDECLARED
    ab_diffs = compare(a, b)
    ab = classify(item, a, b, limit)
    attributed_fix = fix if ab is not AB.SAME else None
    # a target stock lowered and did not run (no emulation layer): a bug it shows is unseen
    stock_unrun = Quality.LOWERED in targets[PathId.STOCK].values()
    effect, claimed, by_run = ab, attributed_fix, attributed
    if bc is BC.IMPROVED:
        # (b) lacks the fix here, as declared: the fix's claim is judged on (a) vs (c), by
        # its effect (no run attributes (a) vs (c))
        effect, claimed, by_run = classify(item, a, c, limit), None, False
    claim = check_claim(item, effect, claimed, version, attributed=by_run, unrun=stock_unrun)
    unchecked = unchecked_claims(
        item, effect, c, targets[PathId.PATCHED], version, unrun=stock_unrun
    )
    found = () if harness or item.kind is ItemKind.PROBE else findings(targets, results)
    # each target lowered or compiled, executed on no path (a probe has no targets: none)
    shared = set.intersection(*(set(judged) for judged in targets.values()))
    c_runs = target_runs(c)
    unrun = [
        f"{t} not executed: {c_runs[t].run_reason}"
        for t in sorted(shared)
        if all(judged[t] in NOT_RUN for judged in targets.values())
    ]
    expected = expected_broken(info, version)
    if expected and not found and unrun:  # an expected breakage this machine cannot see
        note = f"expected to be wrong on every path ({expected}): not checked here"
        unchecked = "; ".join(filter(None, (unchecked, f"{note} ({'; '.join(unrun)})")))
    return Verdict(
        item=item,
        info=info,
        results=dict(results),
        bc=bc,
        bc_diffs=bc_diffs,
        rule=matches[0] if matches else None,
        ab=ab,
        ab_diffs=ab_diffs,
        fix=attributed_fix,
        claim_problem=None if harness else claim,
        targets=targets,
        findings=found,
        expectation_problem=None
        if harness
        else check_expectation(info, found, version, unrun=bool(unrun)),
        bc_fix=bc_fix if bc_diffs else None,
        unchecked=unchecked,
        not_executed=None if harness else required_problem(results, targets, required),
    )
