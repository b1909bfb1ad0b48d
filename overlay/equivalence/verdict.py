"""Where an equivalence verdict is decided: pure functions of the three paths' results.

Two questions per item. (b) vs (c): do stock + runtime patch and the diff-patched build
behave alike (agree), differ only as declared below (declared), or differ (undeclared)?
(a) vs (b): what does the fix change against stock, judged by correctness, not by
difference alone:

- fixed: stock fails or gives wrong numbers, the patched path is right;
- regression: the reverse, or both right but the patched numbers measurably worse;
- changed: both right (or, for a probe, both ran) and the lowering differs;
- still broken: they differ, but neither is right;
- same: no observable difference.

"Right" means: the lowering ran and every output is within the case's tolerance of the
fake-quantised reference (a fraction of the reference's range, by quantisation scheme
unless the case sets its own). :func:`decide` returns the whole verdict of one item.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from overlay import fixes
from overlay.equivalence.protocol import (
    CaseInfo,
    ItemId,
    ItemKind,
    ItemResult,
    PathId,
    ProbeInfo,
    Stage,
    VgfState,
)

# Max error vs the fake-quantised reference, as a fraction of its range, by scheme.
DEFAULT_TOLERANCE: dict[str | None, float] = {None: 0.01, "a8w8": 0.05, "a16w8": 0.05}
ABSOLUTE_FLOOR = 1e-3  # errors below this are never wrong (float noise on tiny outputs)
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


class BC(enum.StrEnum):
    """(b) stock + runtime patch vs (c) diff-patched build."""

    AGREE = "agree"
    DECLARED = "declared"
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
class DeclaredDivergence:
    """A known, accepted (b)/(c) difference: where, the exact observation, and why."""

    id: str
    item: ItemId
    b_error_type: str
    b_error_contains: str
    reason: str

    def matches(self, item: ItemId, b: ItemResult, c: ItemResult) -> bool:
        """Return True when (b) fails exactly as declared on this item and (c) does not."""
        return (
            item == self.item
            and not b.ok
            and b.error is not None
            and b.error.type == self.b_error_type
            and self.b_error_contains in b.error.message
            and c.ok
        )


# The one place divergences are declared. Each is shown in every report.
DECLARED_DIVERGENCES: tuple[DeclaredDivergence, ...] = (
    DeclaredDivergence(
        id="seed-stale-grouped-transpose-check",
        item=ItemId(ItemKind.PROBE, "RewriteConvPass.grouped_transposed_fp"),
        b_error_type="RuntimeError",
        b_error_contains="Grouped transpose convolutions are not supported",
        reason=(
            "the seed monkey-patch replaces RewriteConvPass.call with a copy that still raises"
            " 'Grouped transpose convolutions are not supported', a check upstream dropped in"
            " 5123efe184 (before 1.2.0); the diffs do not carry it. In a full lowering"
            " DecomposeGroupedConvPass splits grouped transposed convs first, so it is"
            " reachable only when RewriteConvPass runs with the seed on such a conv directly"
        ),
    ),
)


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
        return problems


def tolerance(info: CaseInfo | ProbeInfo) -> float:
    """Return the case's tolerance (fraction of the reference range)."""
    if isinstance(info, ProbeInfo):
        return 0.0
    if info.tolerance is not None:
        return info.tolerance
    return DEFAULT_TOLERANCE.get(info.quantize, DEFAULT_TOLERANCE[None])


def quality(result: ItemResult, limit: float, *, vgf: bool = False) -> Quality:
    """Judge one result: failed, wrong numbers, or right (``vgf``: VGF must lower too)."""
    if not result.ok:
        return Quality.FAILED
    if vgf and result.vgf is not None and result.vgf.state is VgfState.FAILED:
        return Quality.FAILED
    numerics = result.numerics
    if numerics is None:
        return Quality.WRONG if result.numerics_error is not None else Quality.RIGHT
    for error, scale in zip(
        numerics.max_abs_err_vs_fake_quant, numerics.reference_max_abs, strict=False
    ):
        if error is None or error > limit * scale + ABSOLUTE_FLOOR:
            return Quality.WRONG
    return Quality.RIGHT


def _worse(a: ItemResult, b: ItemResult) -> bool:
    """Return True when (b)'s numbers are measurably worse than (a)'s on some output."""
    if a.numerics is None or b.numerics is None:
        return False
    pairs = zip(
        a.numerics.max_abs_err_vs_fake_quant,
        b.numerics.max_abs_err_vs_fake_quant,
        b.numerics.reference_max_abs,
        strict=False,
    )
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
    if vgf is None or vgf.state is VgfState.SKIPPED:
        return None  # nothing to compare
    if vgf.state is VgfState.FAILED:
        return ("error", vgf.error.key if vgf.error else None)
    return tuple((p.backend, p.size, p.sha256) for p in vgf.payloads)


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
    return tuple(diffs)


def classify(item: ItemId, a: ItemResult, b: ItemResult, limit: float, *, vgf: bool = False) -> AB:
    """Classify (a) vs (b) by correctness (see the module docstring)."""
    if not compare(a, b):
        return AB.SAME
    if item.kind is ItemKind.PROBE:
        if a.ok != b.ok:
            return AB.FIXED if b.ok else AB.REGRESSION
        return AB.CHANGED
    qa, qb = quality(a, limit, vgf=vgf), quality(b, limit, vgf=vgf)
    if qa is not Quality.RIGHT and qb is Quality.RIGHT:
        return AB.FIXED
    if qa is Quality.RIGHT and qb is not Quality.RIGHT:
        return AB.REGRESSION
    if qa is Quality.RIGHT:
        return AB.REGRESSION if _worse(a, b) else AB.CHANGED
    return AB.STILL_BROKEN


def check_claim(item: ItemId, ab: AB, fix: int | None, version: str | None = None) -> str | None:
    """Return a problem when a fix's trigger on this case did not reproduce, else None.

    ``version`` is the executorch release the run used: only triggers claimed for it count.
    """
    if item.kind is not ItemKind.CASE:
        return None
    problems = []
    for entry, trigger in fixes.triggers_of(item.name, version):
        wanted = f"{trigger.effect.value} by patch {entry.number}"
        found = "no difference" if ab is AB.SAME else f"{ab.value} by patch {fix}"
        if ab.value != trigger.effect.value or fix != entry.number:
            problems.append(
                f"fix {entry.number} claims '{wanted}' ({trigger.why}), found '{found}'"
            )
    return "; ".join(problems) or None


def needs_attribution(results: Mapping[PathId, ItemResult]) -> bool:
    """Return True when (a) and (b) differ, so the difference must be pinned to one fix."""
    return bool(compare(results[PathId.STOCK], results[PathId.RUNTIME]))


def decide(
    item: ItemId,
    info: CaseInfo | ProbeInfo,
    results: Mapping[PathId, ItemResult],
    fix: int | None,
    declared: Iterable[DeclaredDivergence] = DECLARED_DIVERGENCES,
    *,
    version: str | None = None,
) -> Verdict:
    """Decide (b) vs (c), (a) vs (b) and the claim check of one item."""
    a, b, c = results[PathId.STOCK], results[PathId.RUNTIME], results[PathId.PATCHED]
    limit = tolerance(info)
    vgf = isinstance(info, CaseInfo) and info.targets_vgf
    harness = any(r.error is not None and r.error.stage is Stage.HARNESS for r in results.values())
    bc_diffs = compare(b, c)
    declared_id = None
    if harness:
        bc = BC.INCOMPLETE
    elif not bc_diffs:
        bc = BC.AGREE
    else:
        match = next((d for d in declared if d.matches(item, b, c)), None)
        bc = BC.DECLARED if match is not None else BC.UNDECLARED
        declared_id = match.id if match is not None else None
    ab_diffs = compare(a, b)
    ab = classify(item, a, b, limit, vgf=vgf)
    attributed = fix if ab is not AB.SAME else None
    return Verdict(
        item=item,
        info=info,
        results=dict(results),
        bc=bc,
        bc_diffs=bc_diffs,
        declared=declared_id,
        ab=ab,
        ab_diffs=ab_diffs,
        fix=attributed,
        quality={p: quality(r, limit, vgf=vgf) for p, r in results.items()},
        claim_problem=None if harness else check_claim(item, ab, attributed, version),
    )
