"""Find the upstream commit that made a patch redundant, or the one that broke it (text).

No monotonicity is assumed (unlike ``git bisect``): each first-parent commit on main that
touches the patch's files is tried in order, from the fork point of the line's base (a
release wheel's base sits on one older than the release). Behaviour is not bisected: that
needs an environment per commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from overlay.text.applier import HunkMismatchError, apply_patch, decode
from overlay.text.series import Patch
from overlay.upstream.canary.canary_report import BisectResult
from overlay.upstream.canary.rebase import LineSeries
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.replay import Step, try_patch
from overlay.upstream.results import BROKEN, Status

SUPERSEDED = "Superseded-by"
BROKEN_BY = "Broken-by"
WANTED = {SUPERSEDED: frozenset({Status.CONTAINED}), BROKEN_BY: BROKEN}


def state_at(
    scratch: Scratch, commit: str, patch: Patch, step: Step, earlier: Sequence[Patch]
) -> Status:
    """Return how ``patch`` fares on upstream ``commit`` (text only)."""
    paths = list(patch.targets)
    texts = {p: decode(d) for p, d in scratch.files(commit, paths).items()}
    for before in earlier:
        edits = set(before.targets) - set(before.creates)
        if set(before.targets) & set(paths) and edits <= set(texts):
            try:
                texts = apply_patch(before, texts, allow_offset=True)
            except HunkMismatchError:
                continue
    found, _ = try_patch(patch, texts, frozenset(texts), step, (commit[:12], "before", patch.name))
    return found.status


def bisect(
    scratch: Scratch, line: LineSeries, name: str, main: str, kind: str
) -> BisectResult | None:
    """Return the first commit on main where patch ``name`` is ``kind`` (a key of WANTED)."""
    index = next(i for i, patch in enumerate(line.patches) if patch.name == name)
    patch, step = line.patches[index], line.steps[index]
    commits = scratch.log(f"{line.base}..{main}", patch.targets, first_parent=True)
    earlier = line.patches[:index]
    fork = scratch.run("merge-base", line.base, main).strip()
    # a commit breaks the patch only where it applied before: at the fork point or later
    applied = kind != BROKEN_BY or state_at(scratch, fork, patch, step, earlier) not in BROKEN
    for tested, entry in enumerate(reversed(commits), start=1):
        state = state_at(scratch, entry.commit, patch, step, earlier)
        if applied and state in WANTED[kind]:
            return BisectResult(name, kind, entry.commit, entry.subject, entry.date, tested, "text")
        applied = applied or state not in BROKEN
    return None
