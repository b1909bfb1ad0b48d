"""A patch's text on the new release: carried, ported, a conflict, or dropped (text only).

*carried*: it applies, maybe at an offset (regenerated at the new lines); *ported*: a
maintained port applies (the line ``patches/<version>/`` or ``ports/<version>/``, see
:func:`overlay.upstream.releases.load_ports`), or git's 3-way merge from the pinned base
to the new release is clean; *conflict*: the merge leaves markers (named by line); *drop*:
contained upstream or an ``Applied-Upstream`` header. Behaviour may overrule all of this
later (:func:`overlay.upstream.verdicts.apply_behaviour`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from overlay import worktree
from overlay._git import merge_file
from overlay._hashing import sha256_bytes
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Patch, Series
from overlay.upstream.facts import (
    APPLYING,
    KEPT,
    Action,
    Status,
    TextPlan,
    parse_applied_upstream,
)
from overlay.upstream.matrix import check_patch, port_for
from overlay.upstream.retarget.conflicts import conflict_lines

MERGE_LABELS = ("new release", "pinned base", "pinned patch")


def plan_patch(
    patch: Patch,
    port: tuple[str, Patch] | None,
    old_before: Mapping[str, str],
    new_before: Mapping[str, str],
    names: frozenset[str],
) -> TextPlan:
    """Decide a patch's text on the new release (pure but for ``git merge-file``).

    ``old_before``/``new_before`` are the texts before this patch (earlier kept patches
    applied) on the pinned and on the new release.
    """
    check, after = check_patch(patch, new_before, names)
    info = parse_applied_upstream(patch.header.get("Applied-Upstream", ""))
    merge_note, merged, conflicts = _three_way(patch, old_before, new_before)
    if port is not None:
        port_version, port_patch = port
        port_check, port_after = check_patch(port_patch, new_before, names)
        if port_check.status in APPLYING:
            message = worktree.commit_message(
                patch.name, port_patch.subject, port_patch.header_text
            )
            return TextPlan(
                patch.name, check.status, check.detail, Action.PORTED, f"port {port_version}",
                {p: port_after[p] for p in port_patch.targets}, (),
                merge_note or f"the pinned patch {check.short} on the new release", message,
            )  # fmt: skip
    if check.status in APPLYING:
        after = {p: after[p] for p in patch.targets}
        return TextPlan(patch.name, check.status, check.detail, Action.CARRIED, "pinned", after)
    if check.status is Status.CONTAINED:
        return TextPlan(patch.name, check.status, check.detail, Action.DROP, "contained upstream")
    if info.version is not None or info.text:
        return TextPlan(
            patch.name, check.status, check.detail, Action.DROP,
            f"Applied-Upstream: {info.text}", merged or {}, tuple(conflicts), merge_note,
        )  # fmt: skip
    if merged is not None and not conflicts:
        return TextPlan(
            patch.name, check.status, check.detail, Action.PORTED, "3-way merge", merged
        )
    return TextPlan(
        patch.name, check.status, check.detail, Action.CONFLICT, "3-way merge",
        merged or {}, tuple(conflicts), merge_note,
    )  # fmt: skip


def _three_way(
    patch: Patch, old_before: Mapping[str, str], new_before: Mapping[str, str]
) -> tuple[str, dict[str, str] | None, list[str]]:
    """Merge the pinned patch onto the new release, file by file."""
    try:
        old_after = apply_patch(patch, old_before)
    except HunkMismatchError:
        return "the pinned patch does not apply to the pinned base", None, []
    merged: dict[str, str] = {}
    conflicts: list[str] = []
    for path in patch.targets:
        if path not in new_before:
            return f"{path} is not in the new release (moved or removed)", None, [path]
        data, count = merge_file(
            encode(new_before[path]), encode(old_before[path]), encode(old_after[path]),
            MERGE_LABELS,
        )  # fmt: skip
        merged[path] = text = decode(data)
        if count:
            conflicts += [
                f"{path}: conflict {n} at line {line}"
                for n, line in enumerate(conflict_lines(text), start=1)
            ]
    if conflicts:
        return f"3-way merge conflicts: {'; '.join(conflicts)}", merged, conflicts
    if all(merged[p] == new_before[p] for p in merged):
        # nothing left to carry: kept anyway (behaviour), it is a port for a person to write
        return "3-way merge gives the new release unchanged (already there)", None, []
    return "3-way merge applies cleanly", merged, []


def plan_series(
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    old_files: Mapping[str, bytes],
    new_files: Mapping[str, bytes],
    version: str,
) -> list[TextPlan]:
    """Plan every patch in order; a kept patch's result is the base of the next one."""
    old_texts = {p: decode(d) for p, d in old_files.items()}
    new_texts = {p: decode(d) for p, d in new_files.items()}
    names = frozenset(new_files)
    plans = []
    for patch in series.patches:
        plan = plan_patch(patch, port_for(ports, patch.name, version), old_texts, new_texts, names)
        plans.append(plan)
        with contextlib.suppress(HunkMismatchError):
            old_texts = apply_patch(patch, old_texts)
        if plan.action in KEPT:
            new_texts = {**new_texts, **plan.after}
    return plans


def candidate_pristine(plans: Sequence[TextPlan], new_files: Mapping[str, bytes]) -> dict[str, str]:
    """Return the release's sha256 of every file the kept patches touch, sorted by path."""
    touched = {path for plan in plans if plan.action in KEPT for path in plan.after}
    return {path: sha256_bytes(new_files[path]) for path in sorted(touched)}
