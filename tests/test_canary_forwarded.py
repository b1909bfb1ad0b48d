"""Forwarded: parsing the header, reading commit messages, the order of matches."""

from __future__ import annotations

import pytest

from overlay.text.series import Patch, parse_patch
from overlay.upstream.canary.forwarded import (
    applied_upstream,
    find_commit,
    issues_fixed,
    normal_subject,
    parse_forwarded,
    prs_named,
)
from overlay.upstream.gitrepo import LogEntry

from scaffold import make_diff

PATH = "backends/arm/x.py"


def _patch(forwarded: str, extra: str = "") -> Patch:
    header = (
        f"Description: Fix the rescale\nForwarded: {forwarded}\n{extra}Last-Update: 2026-12-02\n"
    )
    return parse_patch("0001-x.patch", header + "---\n" + make_diff(PATH, "a\n", "b\n"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://github.com/pytorch/executorch/pull/12345", ("pr", 12345)),
        ("https://github.com/pytorch/executorch/issues/18491", ("issue", 18491)),
        ("no", ("no", None)),
        ("Not-Needed", ("not-needed", None)),
        ("not-yet", ("not-yet", None)),
        ("arm-dev@lists.example.org", ("mail", None)),
        ("mailto:someone@example.org", ("mail", None)),
        ("https://discuss.pytorch.org/t/1", ("url", None)),
    ],
)
def test_parse_forwarded(raw: str, expected: tuple[str, int | None]) -> None:
    assert parse_forwarded(raw) == expected


def test_messages_name_prs_and_fixed_issues() -> None:
    message = (
        "Arm backend: Fix x (#18778)\n\nFixes #18491\n"
        "closes https://github.com/pytorch/executorch/issues/7\nsee #99"
    )
    assert prs_named(message) == {18778}
    assert prs_named("Pull Request resolved: https://github.com/pytorch/executorch/pull/5") == {5}
    assert issues_fixed(message) == {18491, 7}


def test_subjects_compare_without_prefix_tags_pr_and_case() -> None:
    assert normal_subject("[ghstack] Arm backend: Fix the Rescale. (#12)") == "fix the rescale"
    assert normal_subject("Fix the rescale") == "fix the rescale"


def test_applied_upstream_names_commit_and_prs() -> None:
    patch = _patch("no", "Applied-Upstream: 1.3.0, commit:22867a9148 (PR #18778)\n")
    assert applied_upstream(patch) == ("22867a9148", {18778})
    assert applied_upstream(_patch("no")) == ("", set())


def _entry(commit: str, subject: str, body: str = "") -> LogEntry:
    return LogEntry(commit * 40, "2026-01-01", subject, body)


HISTORY = [  # newest first, as git log lists it
    _entry("e", "Arm backend: Fix the rescale"),
    _entry("d", "Arm backend: Other (#12345)"),
    _entry("c", "Arm backend: Something", "Fixes #18491"),
    _entry("b", "Arm backend: Older (#12345)"),
    _entry("a", "Unrelated (#18778)"),
]


def _found(patch: Patch, ids: dict[str, str] | None = None, own: str = "") -> str:
    kind, number = parse_forwarded(patch.header["Forwarded"])
    hit = find_commit(patch, kind, number, HISTORY, patch_ids=ids or {}, own_id=own)
    return f"{hit[0].commit[0]} {hit[1]}" if hit else "none"


def test_matches_in_order_patch_id_header_pr_issue_subject() -> None:
    pr = _patch("https://github.com/pytorch/executorch/pull/12345")
    assert _found(pr, {"pid": "c" * 40}, "pid") == "c patch-id"
    assert (
        _found(_patch("no", "Applied-Upstream: 1.3.0, commit:dddd\n"))
        == "d Applied-Upstream commit"
    )
    assert _found(_patch("no", "Applied-Upstream: 1.3.0 (PR #18778)\n")) == "a Applied-Upstream PR"
    assert _found(pr) == "b PR number"  # the oldest commit naming the PR
    issue = _patch("https://github.com/pytorch/executorch/issues/18491")
    assert _found(issue) == "c issue number"
    assert _found(_patch("no")) == "e subject"
    other = parse_patch(
        "0002-y.patch",
        "Description: Something else\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
        + make_diff(PATH, "a\n", "b\n"),
    )
    assert _found(other) == "none"
