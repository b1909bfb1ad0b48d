"""Find the upstream commit that made a patch redundant, or the one that broke it (text).

Only the commits on main's first-parent line since the line's base that touch the
patch's files can change how it applies, so every one of them is tried in order (no
monotonicity is assumed, unlike ``git bisect``): the first where the patch is already
upstream is its ``Superseded-by:``, the first where it conflicts (or its file is gone) its
``Broken-by:``. Earlier patches of the series that touch the same files are applied first,
where they still apply. Behaviour is not bisected: that needs an environment per commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from overlay.text.applier import HunkMismatchError, apply_patch, decode
from overlay.upstream.canary.gitrepo import Scratch
from overlay.upstream.canary.rebase import LineSeries, Step, classify
from overlay.upstream.canary.results import BisectResult, TextStatus

SUPERSEDED = "Superseded-by"
BROKEN = "Broken-by"
WANTED = {
    SUPERSEDED: frozenset({TextStatus.UPSTREAM}),
    BROKEN: frozenset({TextStatus.CONFLICT, TextStatus.MISSING}),
}


def state_at(scratch: Scratch, commit: str, step: Step, earlier: Sequence[Step]) -> TextStatus:
    """Return how the patch of ``step`` fares on upstream ``commit`` (text only)."""
    patch = step.patch
    paths = list(patch.targets)
    texts = {p: decode(d) for p, d in scratch.files(commit, paths).items()}
    for before in earlier:
        if set(before.patch.targets) & set(paths) and set(before.patch.targets) <= set(texts):
            try:
                texts = apply_patch(before.patch, texts, allow_offset=True)
            except HunkMismatchError:
                continue
    labels = (commit[:12], "before", patch.name)
    found, _ = classify(patch, texts, frozenset(texts), step, labels)
    return found.status


def bisect(
    scratch: Scratch, line: LineSeries, name: str, main: str, kind: str
) -> BisectResult | None:
    """Return the first commit on main where patch ``name`` is ``kind`` (SUPERSEDED or BROKEN)."""
    index = next(i for i, step in enumerate(line.steps) if step.patch.name == name)
    step = line.steps[index]
    commits = scratch.log(f"{line.base}..{main}", step.patch.targets, first_parent=True)
    for tested, entry in enumerate(reversed(commits), start=1):
        if state_at(scratch, entry.commit, step, line.steps[:index]) in WANTED[kind]:
            return BisectResult(name, kind, entry.commit, entry.subject, entry.date, tested, "text")
    return None
