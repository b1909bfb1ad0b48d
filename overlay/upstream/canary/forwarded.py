"""Track a patch's ``Forwarded:`` target to its merge upstream, as GitGitGadget does: matched
on main in the order docs/canary.md gives, *merged as sent* when the commit leaves the patch's
files as the patch does, else *merged modified*, with the difference."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Patch
from overlay.upstream.canary.canary_report import Forwarded, ForwardState
from overlay.upstream.commit_rules import PREFIX
from overlay.upstream.export import upstream_subject
from overlay.upstream.gitrepo import LogEntry, Scratch
from overlay.upstream.results import parse_applied_upstream

_PR_URL = re.compile(r"github\.com/[\w.-]+/[\w.-]+/pull/(\d+)")
_ISSUE_URL = re.compile(r"github\.com/[\w.-]+/[\w.-]+/issues/(\d+)")
_PR_IN_MESSAGE = re.compile(r"\(#(\d+)\)|/pull/(\d+)\b")
_PR_IN_HEADER = re.compile(r"\bPR #(\d+)\b|/pull/(\d+)\b")
_FIXES = re.compile(
    r"(?i)\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?)\b:?\s+"
    r"(?:https?://github\.com/[\w.-]+/[\w.-]+/issues/|#)(\d+)\b"
)
_PR_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")
_TAGS = re.compile(r"^\s*(?:\[[^]]*\]\s*)+")
PLAIN = {"no": "no", "not-needed": "not-needed", "not-yet": "not-yet"}


def parse_forwarded(raw: str) -> tuple[str, int | None]:
    """Return (kind, PR or issue number) of a ``Forwarded:`` value.

    Example: ``https://github.com/pytorch/executorch/issues/18491``.
    Becomes: ``("issue", 18491)``.
    """
    value = " ".join(raw.split())
    plain = PLAIN.get(value.lower())
    if plain is not None:
        return plain, None
    if match := _PR_URL.search(value):
        return "pr", int(match.group(1))
    if match := _ISSUE_URL.search(value):
        return "issue", int(match.group(1))
    if ("@" in value and "://" not in value) or value.lower().startswith("mailto:"):
        return "mail", None
    return "url", None


def prs_named(message: str) -> set[int]:
    """Return the PR numbers a commit message names (``(#N)``, ``.../pull/N``)."""
    return {int(a or b) for a, b in _PR_IN_MESSAGE.findall(message)}


def issues_fixed(message: str) -> set[int]:
    """Return the issues a commit message says it fixes (``Fixes #N``, ``Closes <url>``)."""
    return {int(n) for n in _FIXES.findall(message)}


def normal_subject(subject: str) -> str:
    """Return a subject without ``(#N)``, ``[tags]``, the Arm prefix, case and final dot."""
    text = _TAGS.sub("", _PR_SUFFIX.sub("", subject)).strip()
    if text.lower().startswith(PREFIX.lower()):
        text = text[len(PREFIX) :]
    return " ".join(text.lower().rstrip(".").split())


def applied_upstream(patch: Patch) -> tuple[str, set[int]]:
    """Return the commit and the PR numbers a patch's ``Applied-Upstream:`` header records.

    Example: ``Applied-Upstream: 1.3.0, commit:22867a9148 (PR #18778)``.
    Becomes: ``("22867a9148", {18778})``.
    """
    text = patch.header.get("Applied-Upstream", "")
    prs = {int(a or b) for a, b in _PR_IN_HEADER.findall(text)}
    return parse_applied_upstream(text).commit or "", prs


def find_commit(
    patch: Patch,
    kind: str,
    number: int | None,
    history: Sequence[LogEntry],
    *,
    patch_ids: Mapping[str, str],
    own_id: str,
) -> tuple[LogEntry, str] | None:
    """Return the upstream commit that carries ``patch`` and how it was matched, if any."""
    by_commit = {entry.commit: entry for entry in history}
    if own_id and own_id in patch_ids and patch_ids[own_id] in by_commit:
        return by_commit[patch_ids[own_id]], "patch-id"
    oldest_first = list(reversed(history))
    recorded, recorded_prs = applied_upstream(patch)
    for entry in oldest_first:
        if recorded and entry.commit.startswith(recorded):
            return entry, "Applied-Upstream commit"
        if recorded_prs & prs_named(entry.message):
            return entry, "Applied-Upstream PR"
    if kind == "pr" and number is not None:
        for entry in oldest_first:
            if number in prs_named(entry.message):
                return entry, "PR number"
    issues = set(patch.issues) | ({number} if kind == "issue" and number is not None else set())
    if issues:
        for entry in oldest_first:
            if issues & issues_fixed(entry.message):
                return entry, "issue number"
    subjects = {normal_subject(patch.subject), normal_subject(upstream_subject(patch))}
    for entry in oldest_first:
        if normal_subject(entry.subject) in subjects:
            return entry, "subject"
    return None


def difference(scratch: Scratch, patch: Patch, commit: str) -> str:
    """Return how ``commit`` differs from ``patch`` on the patch's files ("" when equal).

    The patch is applied to the commit's parent and committed; the answer is the git diff
    from that to the upstream commit. A patch that does not apply there is compared as
    text: its diff against the commit's diff of the same files.
    """
    parent = f"{commit}^"
    before = scratch.files(parent, patch.targets)
    try:
        ours = apply_patch(patch, {p: decode(d) for p, d in before.items()}, allow_offset=True)
    except HunkMismatchError:
        theirs = scratch.diff(parent, commit, patch.targets)
        lines = difflib.unified_diff(
            patch.diff.splitlines(keepends=True),
            theirs.splitlines(keepends=True),
            "forwarded patch",
            f"upstream {commit[:12]}",
        )
        return "".join(lines)
    mine = scratch.commit(
        scratch.rev(parent),
        {p: encode(t) for p, t in ours.items()},
        f"{patch.name} on {commit[:12]}^\n",
        date="1970-01-01T00:00:00+0000",
    )
    return scratch.diff(mine, commit, patch.targets)


def track(
    scratch: Scratch,
    patch: Patch,
    history: Sequence[LogEntry],
    patch_ids: Mapping[str, str],
) -> Forwarded:
    """Match one patch's ``Forwarded:`` against ``history`` (newest first)."""
    raw = patch.header.get("Forwarded", "").strip()
    applied = " ".join(patch.header.get("Applied-Upstream", "").split())
    kind, number = parse_forwarded(raw)
    own_id = scratch.patch_id(patch.diff)
    found = find_commit(patch, kind, number, history, patch_ids=patch_ids, own_id=own_id)
    if found is None:
        state = {
            "pr": ForwardState.OPEN,
            "issue": ForwardState.OPEN,
            "no": ForwardState.NOT_FORWARDED,
            "not-yet": ForwardState.NOT_FORWARDED,
            "not-needed": ForwardState.NOT_NEEDED,
        }.get(kind, ForwardState.NOT_FOUND)
        detail = "no upstream commit on main carries it" if kind in ("pr", "issue") else ""
        return Forwarded(
            patch.name, raw, kind, number, state, detail=detail, applied_upstream=applied
        )
    entry, how = found
    diff = "" if how == "patch-id" else difference(scratch, patch, entry.commit)
    state = ForwardState.MERGED_MODIFIED if diff else ForwardState.MERGED_AS_SENT
    return Forwarded(
        patch.name,
        raw,
        kind,
        number,
        state,
        commit=entry.commit,
        subject=entry.subject,
        matched_by=how,
        difference=diff,
        release=scratch.first_release(entry.commit),
        applied_upstream=applied,
    )
