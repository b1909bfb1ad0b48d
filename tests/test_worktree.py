"""Offline: the edit work tree round trip on a synthetic series (git, no wheel, no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlay import codec, worktree
from overlay._git import git
from overlay.cli import main
from overlay.text.series import load_series

from scaffold import make_diff, patch_text, snapshot, write_series

A = "backends/arm/a.py"
B = "backends/arm/b.py"
A_OLD = "".join(f"a{i} = {i}\n" for i in range(12))
B_OLD = "".join(f"b{i} = {i}\n" for i in range(12))


def test_regenerate_touches_last_update_only_of_changed_patches(tmp_path: Path) -> None:
    patches = {
        "0001-a.patch": patch_text("Change a", make_diff(A, A_OLD, A_OLD.replace("a3 ", "A3 "))),
        "0002-b.patch": patch_text("Change b", make_diff(B, B_OLD, B_OLD.replace("b7 ", "B7 "))),
    }
    series = write_series(tmp_path / "patches", patches, {A: A_OLD.encode(), B: B_OLD.encode()})
    work = tmp_path / "work"
    worktree.create(series, {A: A_OLD.encode(), B: B_OLD.encode()}, work)
    # The first regenerate rewrites the scaffold's difflib diffs as git diffs (same edits).
    worktree.regenerate(work, tmp_path / "patches", today="2026-12-02")
    series = load_series(tmp_path / "patches")
    assert worktree.regenerate(work, tmp_path / "patches", today="2030-01-01").written == ()
    (work / B).write_text(B_OLD.replace("b7 ", "B7 ").replace("b9 ", "B9 "), encoding="utf-8")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")
    result = worktree.regenerate(work, tmp_path / "patches", today="2030-01-01")
    new = load_series(tmp_path / "patches")
    assert set(result.written) == {"0002-b.patch", "SHA256SUMS"}
    assert [p.header["Last-Update"] for p in new.patches] == ["2026-12-02", "2030-01-01"]
    assert new.patches[0].text == series.patches[0].text
    assert "+B9 = 9\n" in new.patches[1].diff


def test_regenerate_dry_run_says_what_would_change_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patches = {
        "0001-a.patch": patch_text("Change a", make_diff(A, A_OLD, A_OLD.replace("a3 ", "A3 "))),
    }
    series = write_series(tmp_path / "patches", patches, {A: A_OLD.encode()})
    work = tmp_path / "work"
    worktree.create(series, {A: A_OLD.encode()}, work)
    worktree.regenerate(work, tmp_path / "patches")
    (work / A).write_text(A_OLD.replace("a3 ", "A3 ").replace("a9 ", "A9 "), encoding="utf-8")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")
    before = snapshot(tmp_path / "patches")
    argv = ["--patches", str(tmp_path / "patches"), "regenerate", "--dir", str(work)]
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == "2 would be written, 1 unchanged"
    assert "  would write 0001-a.patch" in said
    assert main([*argv, "--dry-run", "--json"]) == 0
    report = codec.loads(worktree.Regenerated, capsys.readouterr().out)  # strict: every field
    assert (report.patches, report.dry_run, report.removed) == (tmp_path / "patches", True, ())
    assert sorted(report.written) == ["0001-a.patch", "SHA256SUMS"]
    assert snapshot(tmp_path / "patches") == before
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is False
    assert "+A9 = 9\n" in load_series(tmp_path / "patches").patches[0].diff
