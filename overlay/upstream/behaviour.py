"""Behaviour of the series on one release: its corpus cases on stock and patched envs
(a fix's bug triggers, its CHANGED triggers and its bystanders: docs/upstream.md)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from overlay import fixes
from overlay.equivalence import corpus
from overlay.equivalence.controller import orchestrator
from overlay.equivalence.controller.options import Options
from overlay.equivalence.protocol import (
    ErrorInfo,
    InitReply,
    ItemResult,
    Numerics,
    OutputDigest,
    PathId,
    TargetState,
    VgfResult,
)
from overlay.equivalence.verdict import AB, TOSA, VGF, classify, limits, numerics_text
from overlay.fixes import Effect, Fix
from overlay.items import CaseInfo, ItemId, ItemKind
from overlay.upstream.results import (
    NOT_DELEGATED,
    NOT_RUN,
    CaseOutcome,
    OpCounts,
    PatchBehaviour,
    ReleaseRun,
    TestRun,
)
from overlay.upstream.verdicts import case_quality, decide_patch

Progress = Callable[[str], None]
Side = tuple[InitReply, dict[str, ItemResult]]  # what a worker ran on, each case's result


def judge_case(info: CaseInfo, stock: ItemResult, patched: ItemResult | None) -> CaseOutcome:
    """Judge one case's stock and patched results by correctness."""
    limit = limits(info)
    qs = case_quality(stock, limit, vgf=info.targets_vgf)
    qp = case_quality(patched, limit, vgf=info.targets_vgf) if patched is not None else None
    ab = classify(info.item, stock, patched, limit) if patched is not None else None
    return CaseOutcome(
        info.name, qs, qp, ab, _error_of(stock), _error_of(patched),
        target_texts(stock), target_texts(patched) if patched is not None else {},
    )  # fmt: skip


def target_texts(result: ItemResult) -> dict[str, str]:
    """Return what each target gave: its error and SQNR against the fake-quantised model,
    or why it failed; a TOSA lowering that delegates nothing names the ops left on the CPU."""
    if not result.ok:
        return {TOSA: f"fails: {_error_of(result)}"}
    found = {TOSA: _numbers(result.numerics, result.numerics_error)}
    if result.graph and not any(line.startswith("delegate[") for line in result.graph):
        on_cpu = dict.fromkeys(line.removeprefix("cpu: ") for line in result.graph)
        found[TOSA] = f"{NOT_DELEGATED} ({', '.join(on_cpu)} on the CPU)"
    if result.vgf is not None and result.vgf.state is not TargetState.SKIPPED:
        vgf = result.vgf
        ran = vgf.numerics is not None or vgf.numerics_error is not None
        lowered = f"{NOT_RUN} (not run: {vgf.run_reason or 'no emulation'})"
        found[VGF] = _numbers(vgf.numerics, vgf.numerics_error) if ran else lowered
        if vgf.error is not None:
            found[VGF] = f"fails: {_first_line(vgf.error)[:300]}"
    for ethos in result.ethos_u:
        if ethos.error is not None:
            found[ethos.target] = f"fails: {_first_line(ethos.error)[:300]}"
        elif ethos.state is TargetState.COMPARED:
            found[ethos.target] = f"{NOT_RUN} ({ethos.cpu_ops} ops left on the CPU)"
    return found


def _numbers(numerics: Numerics | None, error: ErrorInfo | None) -> str:
    if error is not None:
        return f"runs, fails: {_first_line(error)[:300]}"
    return numbers_text(numerics) if numerics is not None else f"{NOT_RUN} (not run)"


def numbers_text(numerics: Numerics) -> str:
    """Return a run's numbers in a reviewer's words (no node name of the overlay's graph;
    an output all zeros where its reference is not says so), e.g. ``81 of 384 output values
    differ from the exact evaluation, by up to 7 steps (first at conv: conv2d + relu); max
    error 2.75% of range, SQNR 27.6 dB``."""
    outputs = zip(numerics.outputs, numerics.reference_max_abs, strict=False)
    zeros = [i for i, (output, peak) in enumerate(outputs) if peak > 0 and _all_zeros(output)]
    note = ""
    if zeros:
        which = "output" if len(numerics.outputs) == 1 else f"output {zeros[0]}"
        note = f" ({which} all zeros)"
    return numerics_text(numerics, reviewer=True, note=note)


_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "float16": 2, "bfloat16": 2,
             "int32": 4, "float32": 4, "int64": 8, "float64": 8}  # fmt: skip


def _all_zeros(output: OutputDigest) -> bool:
    """Return True when an output's digest (the sha256 of its raw bytes) is all zeros'."""
    size = _ITEMSIZE.get(output.dtype.removeprefix("torch."))
    if size is None:
        return False
    return hashlib.sha256(bytes(size * math.prod(output.shape))).hexdigest() == output.sha256


def _error_of(result: ItemResult | None) -> str:
    if result is None:
        return ""
    for label, error in (
        ("", result.error),
        ("VGF: ", result.vgf.error if result.vgf is not None else None),
        ("numerics: ", result.numerics_error),
    ):
        if error is not None:
            return label + _first_line(error)[:300]
    return ""


def _first_line(error: ErrorInfo) -> str:
    """Return the error's first line; a wrapped error by its root cause alone."""
    if "\n(raised as: " in error.message:
        return error.message.splitlines()[0]
    return error.first_line


def triggers(
    fix: Fix, versions: Iterable[str], *, target: str | None = None
) -> tuple[list[str], list[str]]:
    """Return (bug trigger cases, other trigger cases) of ``fix`` claimed for ``versions``;
    a case another fix claims for ``target`` (the release they run on) is that fix's there."""
    wanted = list(versions)
    taken = set()
    if target is not None:
        taken = {
            t.case
            for owner in fixes.FIXES
            if owner is not fix
            for t in owner.triggers
            if t.applies_to(target)
        }
    bug: list[str] = []
    other: list[str] = []
    for trigger in fix.triggers:
        if trigger.case in taken or not any(trigger.applies_to(v) for v in wanted):
            continue
        if trigger.effect is Effect.FIXED:
            bug.append(trigger.case)
        elif trigger.effect is Effect.CHANGED:
            other.append(trigger.case)
    return list(dict.fromkeys(bug)), [c for c in dict.fromkeys(other) if c not in bug]


def bystanders(fix: Fix | None) -> list[str]:
    """Return the bystander cases of ``fix``: every one it claims no trigger on."""
    claimed = {t.case for t in fix.triggers} if fix is not None else set()
    return [c.name for c in corpus.BYSTANDERS if c.name not in claimed]


def op_counts(names: Sequence[str], stock: Side, patched: Side) -> tuple[OpCounts, ...]:
    """Return each case's TOSA operators by type on stock and patched: TOSA always, VGF
    where the case targets VGF and both sides lowered for it or failed to."""
    found = []
    for name in names:
        before, after = stock[1].get(name), patched[1].get(name)
        if before is None or after is None:
            continue
        info = corpus.info(name)
        case = (name, info.note, info.spec)
        pairs: list[tuple[str, ItemResult | VgfResult, ItemResult | VgfResult]] = [
            (TOSA, before, after)
        ]
        ran = (before.vgf, after.vgf)
        if info.targets_vgf and all(v and v.state is not TargetState.SKIPPED for v in ran):
            assert before.vgf is not None and after.vgf is not None
            pairs.append((VGF, before.vgf, after.vgf))
        for target, old, new in pairs:
            errors = (_first_line(r.error)[:300] if r.error is not None else "" for r in (old, new))
            found.append(OpCounts(*case, target, old.tosa_ops, new.tosa_ops, *errors))
    return tuple(found)


def trigger_cases(
    versions: Iterable[str], patches: Iterable[str] | None = None, *, target: str | None = None
) -> list[str]:
    """Return every case the fixes of ``patches`` (default: every fix) claim, bug or other,
    for ``versions``, in corpus order; ``target``: the release they run on (:func:`triggers`).
    """
    wanted = list(versions)
    chosen = fixes.FIXES if patches is None else [f for f in map(fixes.by_patch, patches) if f]
    named = {c for fix in chosen for group in triggers(fix, wanted, target=target) for c in group}
    return [c.name for c in corpus.ALL_CASES if c.name in named]


def measure(
    patches: Iterable[str],
    run: ReleaseRun,
    claimed: Sequence[str],
    *,
    target: str | None = None,
    kept: bool = True,
    tests: Mapping[str, TestRun] | None = None,
) -> dict[str, PatchBehaviour]:
    """Decide each patch (with a fix module) on ``run`` from the claims for ``claimed``
    (``target``, ``kept``: as :func:`triggers`, :func:`~overlay.upstream.verdicts.decide_patch`)."""
    regressions = [n for n, case in run.cases.items() if case.ab is AB.REGRESSION] if kept else []
    found = {}
    for name in patches:
        fix = fixes.by_patch(name)
        if fix is None:
            continue
        bug, other = triggers(fix, claimed, target=target)
        bugs, others = ([run.cases[n] for n in names if n in run.cases] for names in (bug, other))
        found[name] = decide_patch(
            name, run.release, bugs, others, kept=kept, regressions=regressions,
            test=(tests or {}).get(name),
        )  # fmt: skip
    return found


def run_envs(
    jobs: Mapping[str, str],
    cases: Sequence[str],
    *,
    out_dir: Path,
    progress: Progress = lambda _: None,
) -> dict[str, Side]:
    """Run ``cases`` in each env of ``jobs`` (label -> python), one worker each, in parallel."""
    items = [ItemId(ItemKind.CASE, corpus.info(c).name) for c in dict.fromkeys(cases)]
    if not jobs:
        return {}

    def one(label: str, python: str) -> Side:
        slug = re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")
        options = Options(python, python, probes=False, out_dir=out_dir / slug)
        init, results = orchestrator.run_items(
            options, PathId.STOCK, python, items, progress=lambda text: progress(f"{label} {text}")
        )
        return init, {item.name: result for item, result in results.items()}

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {label: pool.submit(one, label, python) for label, python in jobs.items()}
        return {label: future.result() for label, future in futures.items()}


def assemble(release: str, stock: Side, patched: Side | None) -> ReleaseRun:
    """Put one release's stock and patched sides together, each case judged."""
    workers = {"stock": stock[0]} | ({"patched": patched[0]} if patched else {})
    after = patched[1] if patched else {}
    cases = {
        name: judge_case(corpus.info(name), result, after.get(name))
        for name, result in stock[1].items()
    }
    seconds = sum(r.seconds for side in (stock, patched) if side for r in side[1].values())
    return ReleaseRun(release, workers, cases, seconds)
