"""executorch's Arm backend commit rules and the sign-off identity (checked before work)."""

from __future__ import annotations

import pytest

from overlay import _git
from overlay.errors import UpstreamError, UsageError
from overlay.upstream.commit_rules import (
    Identity,
    check_license,
    check_message,
    check_signer,
    hook_verbs,
    parse_identity,
    signer,
)

SIGNER = Identity("Jane Doe", "jane.doe@example.org")


# The hook's VERBS assignment, in its own form (a string continued over lines).
HOOK_TEXT = """set -eu
VERBS="Add|Fix|Update|"\\
"Handle|Don't|"\\
"Review"

# Remote branch
REMOTE=x
"""


def test_the_verbs_are_read_from_the_hook() -> None:
    assert hook_verbs(HOOK_TEXT) == {"Add", "Fix", "Update", "Handle", "Don't", "Review"}
    with pytest.raises(UpstreamError, match="no VERBS in upstream's backends/arm/scripts/pre-push"):
        hook_verbs("#!/bin/bash\n")


def test_check_message_applies_the_pre_push_hook_rules() -> None:
    good = "Arm backend: Fix it\n\nBody.\n\nSigned-off-by: A <a@b.c>\n"
    verbs = hook_verbs(HOOK_TEXT)
    assert check_message(good, verbs) == []
    assert "does not start with" in check_message(good.replace("Arm backend: ", ""))[0]
    # The hook knows a fixed list of verbs: "Keep" is not one of them.
    for subject in ("Fixes it", "Fixed it", "Keep it", "fix it"):
        found = check_message(good.replace("Fix it", subject), verbs)
        assert len(found) == 1 and "imperative verb" in found[0], subject
        assert check_message(good.replace("Fix it", subject)) == []  # no verbs: not checked
    assert check_message(good.replace("Fix it", "Handle it"), verbs) == []
    assert check_message(good.replace("Fix it", "Don't fold it"), verbs) == []
    assert "subject is 85" in check_message(good.replace("Fix it", "Fix " + "x" * 68))[0]
    assert "line 3 is 73" in check_message(good.replace("Body.", "b" * 73))[0]
    assert check_message(good.replace("Body.", "https://x.org/" + "b" * 80)) == []
    long_trailer = good.replace("A <a@b.c>", "A Very Long Name <" + "x" * 60 + "@example.org>")
    assert "> 72 characters" in check_message(long_trailer)[0]
    assert "Signed-off-by" in check_message(good.replace("Signed-off-by", "Signed"))[0]
    assert "line 2" in check_message(good.replace("\n\nBody", "\nBody"))[0]


def test_license_year_of_touched_arm_files() -> None:
    files = {
        "a.py": b"# Copyright 2024-2026 Arm Limited and/or its affiliates.\nx = 1\n",
        "b.py": b"# Copyright 2025 Arm Limited and/or its affiliates.\nx = 1\n",
        "c.py": b"# Copyright (c) Meta Platforms, Inc.\nx = 1\n",
    }
    assert check_license(files, 2026) == ["b.py: the Arm copyright header lacks '2026 Arm'"]


def test_parse_identity() -> None:
    assert parse_identity("Jane Doe <jane.doe@example.org>") == SIGNER
    with pytest.raises(UsageError, match="not a sign-off identity") as info:
        parse_identity("jane")
    assert info.value.exit_code == 2


def test_the_signer_is_checked_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    check_signer(SIGNER)
    long_signer = Identity("A Very Long Maintainer Name", "maintainers@" + "x" * 40 + ".org")
    with pytest.raises(UpstreamError, match="breaks the Arm backend commit rules") as info:
        check_signer(long_signer)
    assert "> 72 characters" in (info.value.found or "")
    assert "--signoff" in (info.value.hint or "")
    assert signer("Jane Doe <jane.doe@example.org>") == SIGNER
    with pytest.raises(UpstreamError, match="breaks the Arm backend commit rules"):
        signer(str(long_signer))
    monkeypatch.setattr(_git, "identity", lambda cwd=None: ("Git User", "g@x.org"))
    assert signer(None) == Identity("Git User", "g@x.org")
    monkeypatch.setattr(_git, "identity", lambda cwd=None: ("", ""))
    with pytest.raises(UpstreamError, match="no identity for the Signed-off-by trailer"):
        signer(None)
