"""Where an equivalence verdict is decided: pure functions of the three paths' results.

(Over 500 lines on purpose: every verdict is decided in this one module, the one place
docs/architecture.md names for them.)

Two questions per item. (b) vs (c): do stock + runtime patch and the diff-patched build
behave alike (agree), differ only as declared below (declared), or differ (undeclared)?
(a) vs (b): what does the fix change against stock, judged by correctness, not by
difference alone:

- fixed: stock fails or gives wrong numbers, the patched path is right;
- regression: the reverse, or both right but the patched numbers measurably worse;
- changed: both right (or, for a probe, both ran) and the lowering differs;
- still broken: they differ, but neither is right;
- same: no observable difference.

"Right" means: the lowering ran and every output is within the case's limits against the
fake-quantised reference: the max error as a fraction of the reference's range, and, where
set, a minimum SQNR (by quantisation scheme unless the case sets its own). Each target is
judged on its own: the TOSA reference model run, the executed VGF program, and each
Ethos-U lowering (it compiles or it fails: nothing executes it here). A case quantised for
VGF (``CaseInfo.targets_vgf``) also counts a failed VGF lowering in its overall quality.

A case whose target is wrong (or fails) on all three paths is a finding of its own
("wrong on stock and patched"): it fails the run unless the case says why it is expected
(``CaseInfo.expect_broken``, declared for the releases in ``broken_releases``), and an
expectation that does not reproduce fails it too.
:func:`decide` returns the whole verdict of one item.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from overlay import fixes
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    ItemId,
    ItemKind,
    ItemResult,
    Numerics,
    PathId,
    ProbeInfo,
    Stage,
    TargetState,
)
from overlay.fixes import DeclaredDivergence, DivergenceKind

# Max error vs the fake-quantised reference, as a fraction of its range, by scheme.
DEFAULT_TOLERANCE: dict[str | None, float] = {None: 0.01, "a8w8": 0.05, "a16w8": 0.05}
# Minimum SQNR (dB) vs the fake-quantised reference, by scheme (None: not checked). Small
# graphs are judged by the max error; deep nets set their own floor (see corpus.ZOO_*).
DEFAULT_SQNR_DB: dict[str | None, float | None] = {None: None, "a8w8": None, "a16w8": None}
ABSOLUTE_FLOOR = 1e-3  # errors below this are never wrong (float noise on tiny outputs)
TOSA, VGF = "tosa", "vgf"  # target names; Ethos-U targets go by their config name
# "Measurably worse": the patched error exceeds stock's by this fraction of the range.
WORSE_BY = 0.01


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
    IMPROVED = "improved"  # a declared improvement: (c) right where (b) is not
    UNDECLARED = "undeclared"
    INCOMPLETE = "incomplete"  # a path did not finish (worker timeout or crash)


class AB(enum.StrEnum):
    """(a) stock vs (b) stock + runtime patch."""

    SAME = "same"
    FIXED = "fixed"
    REGRESSION = "regression"
    CHANGED = "changed"
    STILL_BROKEN = "still broken"


class Quality(enum.StrEnum):
    """How one path's result stands against the reference."""

    RIGHT = "right"
    WRONG = "wrong"  # lowered, but outputs are off (or could not be run)
    FAILED = "failed"  # the lowering raised


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
    declared: str | None
    ab: AB
    ab_diffs: tuple[Observation, ...]
    fix: int | None  # the one runtime fix that turns (a) into (b); None: none alone
    quality: Mapping[PathId, Quality]
    claim_problem: str | None
    targets: Mapping[PathId, Mapping[str, Quality]] = dataclasses.field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    expectation_problem: str | None = None  # a finding nobody expected, or the reverse

    @property
    def failures(self) -> list[str]:
        """Return one line per problem of this item that makes the run fail."""
        problems = []
        if self.bc is BC.UNDECLARED:
            diffs = ", ".join(d.value for d in self.bc_diffs)
            problems.append(f"{self.item}: undeclared divergence between (b) and (c): {diffs}")
        if self.bc is BC.INCOMPLETE:
            stuck = [
                f"({p.value}) {r.error.first_line}"
                for p, r in self.results.items()
                if r.error is not None and r.error.stage is Stage.HARNESS
            ]
            problems.append(f"{self.item}: did not finish on {'; '.join(stuck)}")
        if self.claim_problem:
            problems.append(f"{self.item}: {self.claim_problem}")
        if self.expectation_problem:
            problems.append(f"{self.item}: {self.expectation_problem}")
        return problems


def limits(info: CaseInfo | ProbeInfo) -> Limits:
    """Return the case's limits: its own, or its quantisation scheme's defaults."""
    if isinstance(info, ProbeInfo):
        return Limits(0.0)
    default_tolerance = DEFAULT_TOLERANCE.get(info.quantize, DEFAULT_TOLERANCE[None])
    return Limits(
        tolerance=info.tolerance if info.tolerance is not None else default_tolerance,
        sqnr_db=info.sqnr_db if info.sqnr_db is not None else DEFAULT_SQNR_DB.get(info.quantize),
    )


def tolerance(info: CaseInfo | ProbeInfo) -> float:
    """Return the case's tolerance (fraction of the reference range)."""
    return limits(info).tolerance


def _as_limits(limit: Limits | float) -> Limits:
    return limit if isinstance(limit, Limits) else Limits(float(limit))


def scales(numerics: Numerics) -> tuple[float, ...]:
    """Return each output's range (max - min of the reference; max |x| in old data)."""
    return numerics.reference_range or numerics.reference_max_abs


def numerics_quality(
    numerics: Numerics | None, error: ErrorInfo | None, limit: Limits | float
) -> Quality:
    """Judge one run's outputs against the fake-quantised reference."""
    if error is not None:
        return Quality.WRONG
    if numerics is None:
        return Quality.RIGHT
    bounds = _as_limits(limit)
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


def quality(result: ItemResult, limit: Limits | float, *, vgf: bool = False) -> Quality:
    """Judge one result on TOSA: failed, wrong numbers, or right (``vgf``: VGF must lower too)."""
    if not result.ok:
        return Quality.FAILED
    if vgf and result.vgf is not None and result.vgf.state is TargetState.FAILED:
        return Quality.FAILED
    return numerics_quality(result.numerics, result.numerics_error, limit)


def target_qualities(result: ItemResult, limit: Limits | float) -> dict[str, Quality]:
    """Judge each target a result has: TOSA, the executed VGF program, each Ethos-U.

    A target that was skipped is absent; one that lowered but was not executed (VGF
    without the emulation, every Ethos-U) counts as right: nothing says it is wrong.
    """
    judged = {TOSA: quality(result, limit)}
    vgf = result.vgf
    if vgf is not None and vgf.state is TargetState.FAILED:
        judged[VGF] = Quality.FAILED
    elif vgf is not None and vgf.state is TargetState.COMPARED:
        judged[VGF] = numerics_quality(vgf.numerics, vgf.numerics_error, limit)
    for ethos in result.ethos_u:
        if ethos.state is TargetState.FAILED:
            judged[ethos.target] = Quality.FAILED
        elif ethos.state is TargetState.COMPARED:
            judged[ethos.target] = Quality.RIGHT
    return judged


def target_numerics(result: ItemResult, target: str) -> Numerics | None:
    """Return the numerics a target produced (TOSA reference model or executed VGF)."""
    if target == TOSA:
        return result.numerics
    if target == VGF and result.vgf is not None:
        return result.vgf.numerics
    return None


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


def _payload_key(result: ItemResult) -> tuple[tuple[str, int, str], ...]:
    return tuple((p.backend, p.size, p.sha256) for p in result.payloads)


def _vgf_key(result: ItemResult) -> object:
    vgf = result.vgf
    if vgf is None or vgf.state is TargetState.SKIPPED:
        return None  # nothing to compare
    if vgf.state is TargetState.FAILED:
        return ("error", vgf.error.key if vgf.error else None)
    return tuple((p.backend, p.size, p.sha256) for p in vgf.payloads)


def _vgf_numerics_key(result: ItemResult) -> object:
    vgf = result.vgf
    if vgf is None or vgf.state is not TargetState.COMPARED:
        return None
    if vgf.numerics_error is not None:
        return ("error", vgf.numerics_error.key)
    return vgf.numerics.key if vgf.numerics is not None else None


def _ethos_key(result: ItemResult) -> object:
    keys: list[object] = []
    for target in result.ethos_u:
        if target.state is TargetState.FAILED:
            keys.append((target.target, "error", target.error.key if target.error else None))
        elif target.state is TargetState.COMPARED:
            keys.append((target.target, tuple((p.size, p.sha256) for p in target.payloads)))
    return tuple(keys)


def _numerics_key(result: ItemResult) -> object:
    if result.numerics_error is not None:
        return ("error", result.numerics_error.key)
    return result.numerics.key if result.numerics is not None else None


def compare(x: ItemResult, y: ItemResult) -> tuple[Observation, ...]:
    """Return the observations in which two results of one item differ."""
    diffs = []
    if x.status is not y.status:
        diffs.append(Observation.STATUS)
    elif (x.error.key if x.error else None) != (y.error.key if y.error else None):
        diffs.append(Observation.ERROR)
    if x.value != y.value:
        diffs.append(Observation.VALUE)
    if x.graph != y.graph:
        diffs.append(Observation.GRAPH)
    if _payload_key(x) != _payload_key(y):
        diffs.append(Observation.TOSA_PAYLOAD)
    if _numerics_key(x) != _numerics_key(y):
        diffs.append(Observation.NUMERICS)
    if _vgf_key(x) != _vgf_key(y):
        diffs.append(Observation.VGF_PAYLOAD)
    if _vgf_numerics_key(x) != _vgf_numerics_key(y):
        diffs.append(Observation.VGF_NUMERICS)
    if _ethos_key(x) != _ethos_key(y):
        diffs.append(Observation.ETHOSU_PAYLOAD)
    return tuple(diffs)


# When targets disagree, the verdict that needs attention first wins.
_AB_PRIORITY = (AB.REGRESSION, AB.FIXED, AB.STILL_BROKEN, AB.CHANGED)


def _classify_target(qa: Quality, qb: Quality, worse: bool) -> AB:
    if qa is not Quality.RIGHT and qb is Quality.RIGHT:
        return AB.FIXED
    if qa is Quality.RIGHT and qb is not Quality.RIGHT:
        return AB.REGRESSION
    if qa is Quality.RIGHT:
        return AB.REGRESSION if worse else AB.CHANGED
    return AB.STILL_BROKEN


def classify(item: ItemId, a: ItemResult, b: ItemResult, limit: Limits | float) -> AB:
    """Classify (a) vs (b) by correctness, target by target (see the module docstring)."""
    if not compare(a, b):
        return AB.SAME
    if item.kind is ItemKind.PROBE:
        if a.ok != b.ok:
            return AB.FIXED if b.ok else AB.REGRESSION
        return AB.CHANGED
    qa, qb = target_qualities(a, limit), target_qualities(b, limit)
    found = {
        _classify_target(
            qa[target],
            qb[target],
            _worse(target_numerics(a, target), target_numerics(b, target)),
        )
        for target in qa
        if target in qb
    }
    return next(v for v in _AB_PRIORITY if v in found)


def check_claim(
    item: ItemId, ab: AB, fix: int | None, version: str | None = None, *, attributed: bool = True
) -> str | None:
    """Return a problem when a fix's trigger on this case did not reproduce, else None.

    ``version`` is the executorch release the run used: only triggers claimed for it count.
    Without attribution runs (``attributed`` False) only the effect is checked, not the fix.
    """
    if item.kind is not ItemKind.CASE:
        return None
    problems = []
    for entry, trigger in fixes.triggers_of(item.name, version):
        wanted = f"{trigger.effect.value} by patch {entry.number}"
        found = "no difference" if ab is AB.SAME else f"{ab.value} by patch {fix}"
        if ab.value != trigger.effect.value or (attributed and fix != entry.number):
            problems.append(
                f"fix {entry.number} claims '{wanted}' ({trigger.why}), found '{found}'"
            )
    return "; ".join(problems) or None


def claim_on_patched(
    item: ItemId, ac: AB, improving: Iterable[DeclaredDivergence], version: str | None
) -> str | None:
    """Check a claim on (a) vs (c) where (b) lacks the fix, as an improvement declares.

    Example: the seed as (b) on 1.2.0 lacks fix 5, so ``zoo_grid_warp_a16w8_int16`` is
    wrong on (a) and (b), right on (c); fixes 1 and 5 both declare the improvement there.
    Becomes: fix 5's claim 'fixed by patch 5' holds when (a) vs (c) is 'fixed' and fix 5 is
    one of the fixes declaring the improvement.
    """
    numbers = {d.fix for d in improving}
    claimed = [entry.number for entry, _ in fixes.triggers_of(item.name, version)]
    fix = next((n for n in claimed if n in numbers), None)
    return check_claim(item, ac, fix, version)


def needs_attribution(results: Mapping[PathId, ItemResult]) -> bool:
    """Return True when (a) and (b) differ, so the difference must be pinned to one fix."""
    return bool(compare(results[PathId.STOCK], results[PathId.RUNTIME]))


def _detail(results: Mapping[PathId, ItemResult], target: str) -> str:
    """Say how a target is off on the patched path: the error, or the worst output."""
    result = results[PathId.PATCHED]
    if target == TOSA and result.error is not None:
        return result.error.first_line
    if target == VGF and result.vgf is not None:
        if result.vgf.error is not None:
            return result.vgf.error.first_line
        if result.vgf.numerics_error is not None:
            return result.vgf.numerics_error.first_line
    for ethos in result.ethos_u:
        if ethos.target == target and ethos.error is not None:
            return ethos.error.first_line
    numerics = target_numerics(result, target)
    if numerics is None:
        return "no numbers"
    return numerics_text(numerics)


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


def sqnr_text(value: float) -> str:
    """Return an SQNR in dB with one decimal ('inf' when the outputs are equal)."""
    return "inf" if math.isinf(value) and value > 0 else f"{value:.1f}"


def numerics_text(numerics: Numerics) -> str:
    """Return 'error X% of range, SQNR Y dB' for the worst output."""
    found = worst(numerics)
    if found is None:
        return "output shape differs from the reference"
    fraction, sqnr = found
    lowest = sqnr_text(math.inf if sqnr is None else sqnr)
    return f"max error {100 * fraction:.2f}% of range, SQNR {lowest} dB"


def findings(
    results: Mapping[PathId, Mapping[str, Quality]], raw: Mapping[PathId, ItemResult]
) -> tuple[Finding, ...]:
    """Return every target that is not right on any of the three paths."""
    shared = set.intersection(*(set(q) for q in results.values()))
    found = []
    for target in sorted(shared, key=lambda t: (t != TOSA, t != VGF, t)):
        seen = [results[p][target] for p in results]
        if all(q is not Quality.RIGHT for q in seen):
            kind = Quality.WRONG if Quality.WRONG in seen else Quality.FAILED
            found.append(Finding(target, kind, _detail(raw, target)))
    return tuple(found)


def expected_broken(info: CaseInfo | ProbeInfo, version: str | None = None) -> str:
    """Return why a case is declared wrong on every path of ``version`` ("" if it is not)."""
    if not isinstance(info, CaseInfo) or not fixes.release_matches(info.broken_releases, version):
        return ""
    return info.expect_broken


def check_expectation(
    info: CaseInfo | ProbeInfo, found: tuple[Finding, ...], version: str | None = None
) -> str | None:
    """Return a problem when findings and the case's declared ``expect_broken`` disagree."""
    if not isinstance(info, CaseInfo):
        return None
    expected = expected_broken(info, version)
    if found and not expected:
        return "; ".join(f.text for f in found)
    if expected and not found:
        return f"expected to be wrong on every path ({expected}), but a path is right"
    return None


def _all_right(targets: Mapping[str, Quality]) -> bool:
    return all(q is Quality.RIGHT for q in targets.values())


def decide(
    item: ItemId,
    info: CaseInfo | ProbeInfo,
    results: Mapping[PathId, ItemResult],
    fix: int | None,
    declared: Iterable[DeclaredDivergence] | None = None,
    *,
    version: str | None = None,
    attributed: bool = True,
) -> Verdict:
    """Decide (b) vs (c), (a) vs (b), findings and the claim check of one item.

    ``version`` is the stock executorch release: fix claims, expected breakage and (unless
    ``declared`` is given) the declared divergences of the fix registry are per release.
    """
    if declared is None:
        declared = fixes.declared_divergences(version)
    a, b, c = results[PathId.STOCK], results[PathId.RUNTIME], results[PathId.PATCHED]
    limit = limits(info)
    vgf = isinstance(info, CaseInfo) and info.targets_vgf
    harness = any(r.error is not None and r.error.stage is Stage.HARNESS for r in results.values())
    bc_diffs = compare(b, c)
    targets = {p: target_qualities(r, limit) for p, r in results.items()}
    declared_id = None
    if harness:
        bc = BC.INCOMPLETE
    elif not bc_diffs:
        bc = BC.AGREE
    else:
        improves = _all_right(targets[PathId.PATCHED]) and not _all_right(targets[PathId.RUNTIME])
        matches = [d for d in declared if d.matches(item, b, c, improves=improves)]
        if matches:
            improvement = matches[0].kind is DivergenceKind.IMPROVEMENT
            bc = BC.IMPROVED if improvement else BC.DECLARED
            declared_id = matches[0].id
        else:
            bc = BC.UNDECLARED
    ab_diffs = compare(a, b)
    ab = classify(item, a, b, limit)
    attributed_fix = fix if ab is not AB.SAME else None
    if bc is BC.IMPROVED:
        # (b) lacks the fix here, as declared: the fix's claim is judged on (a) vs (c)
        claim = claim_on_patched(item, classify(item, a, c, limit), matches, version)
    else:
        claim = check_claim(item, ab, attributed_fix, version, attributed=attributed)
    found = () if harness or item.kind is ItemKind.PROBE else findings(targets, results)
    return Verdict(
        item=item,
        info=info,
        results=dict(results),
        bc=bc,
        bc_diffs=bc_diffs,
        declared=declared_id,
        ab=ab,
        ab_diffs=ab_diffs,
        fix=attributed_fix,
        quality={p: quality(r, limit, vgf=vgf) for p, r in results.items()},
        claim_problem=None if harness else claim,
        targets=targets,
        findings=found,
        expectation_problem=None if harness else check_expectation(info, found, version),
    )
