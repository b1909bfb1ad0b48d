"""What moving to the new release changes for a user: case by case, and the runtime form."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from packaging.version import Version

from overlay import fixes
from overlay.equivalence import corpus
from overlay.equivalence.protocol import ItemResult
from overlay.equivalence.verdict import compare
from overlay.fixes import DiffOnly, Effect, Fix
from overlay.upstream.behaviour import judge_case
from overlay.upstream.results import KEPT
from overlay.upstream.retarget.retarget_verdict import CaseMove, TextPlan

Results = Mapping[str, ItemResult]  # case -> one worker's result


def case_moves(
    old: tuple[Results, Results],
    new: tuple[Results, Results],
    release: str,
    own_fixes: Sequence[Fix] = (),
) -> list[CaseMove]:
    """Compare the pinned patched build with the new one, case by case (pure).

    ``old`` and ``new``: (stock, patched) results of the pinned and the new release.
    ``own_fixes``: the fixes the new release's existing line carries beyond the candidate.
    A case right with the pinned build and not with the candidate is ``covered_by`` one of
    them when it claims the case FIXED on the new release.
    """
    moves = []
    for name, sn in new[0].items():
        if name not in old[0]:
            continue
        so = old[0][name]
        move = _move(name, (so, old[1].get(name, so)), (sn, new[1].get(name, sn)), release)
        if move.lost:
            move = covered(move, release, own_fixes)
        moves.append(move)
    return moves


def covered(move: CaseMove, release: str, own_fixes: Sequence[Fix]) -> CaseMove:
    """Name the line's own fix that fixes a case the candidate loses (none: unchanged).

    Example: ``grid_warp_int8_vgf_int`` from 1.2.0 to 1.5.1: right on 1.2.0, its VGF lowering
    fails with the ported series, and the 1.5.1 line carries fix 7, which claims it FIXED
    there. Becomes: ``covered_by`` ``fix 7``, and the note says the line keeps it.
    """
    for fix, trigger in fixes.triggers_of(move.case, release):
        if fix in own_fixes and trigger.effect is Effect.FIXED:
            note = (
                f"{move.note}; fixed on {release} by fix {fix.number}, the {release} line's own"
                " fix (not carried from the pinned line): the line keeps it"
            )
            return dataclasses.replace(move, note=note, covered_by=f"fix {fix.number}")
    return move


def _move(
    name: str,
    old: tuple[ItemResult, ItemResult],
    new: tuple[ItemResult, ItemResult],
    release: str,
) -> CaseMove:
    """Judge one case: (stock, patched) on the pinned and on the new release."""
    (so, po), (sn, pn) = old, new
    info = corpus.info(name)
    qo = judge_case(info, so, po).patched
    qn = judge_case(info, sn, pn).patched
    changes = compare(po, pn)
    patch_old = bool(compare(so, po))
    patch_new = bool(compare(sn, pn))
    if not changes:
        attribution, note = "no change", "same result"
    elif not patch_old and not patch_new:
        attribution, note = "upstream change", "the patches touch this case on neither release"
    elif patch_old and not patch_new:
        attribution = "patch"
        note = f"the pinned patches changed this case; on {release} nothing kept does"
    elif not patch_old and patch_new:
        attribution, note = "patch", f"a kept patch changes this case on {release}"
    else:
        attribution, note = "upstream change and patch", "both releases patch this case"
    quality_old = qo.value if qo else "?"
    quality_new = qn.value if qn else "?"
    if quality_old != quality_new:
        note += f"; {quality_old} -> {quality_new}"
    return CaseMove(
        name, quality_old, quality_new, tuple(c.value for c in changes), attribution, note
    )


def runtime_form_note(plans: Sequence[TextPlan], version: str) -> str:
    """Say whether ``overlay.runtime`` can patch the new release, fix by fix (pure)."""
    kept = [v for v in plans if v.action in KEPT]
    if not kept:
        return f"nothing is kept on {version}: no runtime form is needed"
    lines = []
    for plan in kept:
        fix = fixes.by_patch(plan.name)
        if fix is None:
            lines.append(f"{plan.name}: not in the fix registry: no runtime form")
            continue
        declared = fix.runtime.get(version)
        if declared is not None:
            forms = fix.runtime_forms(version)
            what = (
                declared.text
                if isinstance(declared, DiffOnly)
                else ", ".join(form.qualname for form in forms)
            )
            lines.append(f"{plan.name}: its fix module declares {version}: {what}")
            continue
        written = [(line, f) for line in fix.runtime for f in fix.runtime_forms(line)]
        if not written:
            lines.append(f"{plan.name}: no runtime form on any line: the diff is its only form")
            continue
        line, form = max(written, key=lambda pair: Version(pair[0]))
        files = set(plan.after)
        if files != set(fix.repo_paths):
            lines.append(
                f"{plan.name}: no runtime form on {version}: the fix now changes"
                f" {', '.join(sorted(files))}, while its {line} runtime form replaces"
                f" {form.qualname} in {form.repo_path}; the diff-patched build is the only"
                f" form there (declare DiffOnly for {version} in its fix module)"
            )
        else:
            lines.append(
                f"{plan.name}: its {line} runtime form replaces {form.attribute}; check the"
                f" function is unchanged on {version}, then key a form for {version} in its"
                " fix module (overlay.runtime applies forms per line)"
            )
    return "\n".join(lines)
