"""A patch's text on the new release: carried, ported, a conflict, or dropped (text only).

Only a kept patch is the base of the next one; behaviour may overrule the text's verdict later
(:func:`overlay.upstream.retarget.retarget_verdict.apply_behaviour`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from overlay import worktree
from overlay._hashing import sha256_bytes
from overlay.text.applier import decode
from overlay.text.series import Series
from overlay.upstream import replay
from overlay.upstream.results import KEPT, Action, OnBase, parse_applied_upstream
from overlay.upstream.retarget.retarget_verdict import text_action


@dataclass(frozen=True)
class TextPlan:
    """A patch's text on the new release, before behaviour is known (the candidate's input)."""

    replayed: OnBase
    action: Action
    source: str  # "pinned", "port 1.5.1", "3-way merge", "Applied-Upstream: ...", ...
    after: dict[str, str]  # the release's texts after it, for each file it changes
    message: str  # the work tree commit message (the port's header for a port)
    commit: str = ""  # the work tree commit it was taken from (--resume), "" when none

    @property
    def name(self) -> str:
        """Return the patch's file name."""
        return self.replayed.patch


def plan_series(
    series: Series,
    ports: replay.Ports,
    old_files: Mapping[str, bytes],
    new_files: Mapping[str, bytes],
    *,
    version: str,
    taken: Mapping[str, Mapping[str, str]] | None = None,
) -> list[TextPlan]:
    """Plan every patch in order; a kept patch's result is the base of the next one.

    ``taken``: the files after each patch the retarget's work tree already holds
    (``--resume``): the later patches are planned on top of them.
    """
    infos = {
        p.name: parse_applied_upstream(p.header.get("Applied-Upstream", "")) for p in series.patches
    }
    old = {p: decode(d) for p, d in old_files.items()}
    carries = replay.replay(
        series.patches,
        {p: decode(d) for p, d in new_files.items()},
        frozenset(new_files),
        steps=replay.line_steps(series.patches, old),
        ports=replay.ports_for(ports, version),
        base=f"executorch {version}",
        line=str(series.pins.executorch),
        keep=lambda r: text_action(r, infos[r.patch])[0] in KEPT or r.patch in (taken or {}),
        taken=taken,
    )
    plans = []
    for patch, carry in zip(series.patches, carries, strict=True):
        text = carry.carrier or patch
        action, source = text_action(carry.replayed, infos[patch.name])
        after = {p: carry.after[p] for p in text.targets if p in carry.after}
        message = worktree.commit_message(patch.name, text.subject, text.header_text)
        plans.append(TextPlan(carry.replayed, action, source, after, message))
    return plans


def candidate_pristine(plans: Sequence[TextPlan], new_files: Mapping[str, bytes]) -> dict[str, str]:
    """Return the release's sha256 of every file the kept patches touch, sorted by path
    (a file they create is not the release's)."""
    touched = {path for plan in plans if plan.action in KEPT for path in plan.after}
    return {path: sha256_bytes(new_files[path]) for path in sorted(touched) if path in new_files}
