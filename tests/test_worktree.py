"""Offline: the edit work tree round trip on a synthetic series (git, no wheel, no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlay import codec, worktree
from overlay._git import git
from overlay.cli import main
from overlay.errors import UnsafePatchError
from overlay.text.series import load_series

from scaffold import created_diff, make_diff, patch_text, snapshot, write_series

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


def test_a_created_file_round_trips_through_the_work_tree(tmp_path: Path) -> None:
    """`edit` lays the created file out in its commit; a new commit creating another file
    regenerates into a ``new file mode 100644`` patch whose checksums hold."""
    new = "backends/arm/shaders/new.glsl"
    patches = {
        "0001-a.patch": patch_text(
            "Change a", make_diff(A, A_OLD, A_OLD.replace("a3 ", "A3 ")) + created_diff(new, "x\n")
        ),
    }
    series = write_series(tmp_path / "patches", patches, {A: A_OLD.encode()})
    work = tmp_path / "work"
    worktree.create(series, {A: A_OLD.encode()}, work)
    assert (work / new).read_text() == "x\n"
    assert git(work, "show", "--format=", "--name-status", "HEAD").split() == ["M", A, "A", new]
    (work / "backends/arm/shaders/more.glsl").write_text("y\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "Add another shader")
    worktree.regenerate(work, tmp_path / "patches", today="2026-12-02")
    again = load_series(tmp_path / "patches")
    assert again.created == frozenset({new, "backends/arm/shaders/more.glsl"})
    assert "new file mode 100644\n" in again.patches[1].diff
    assert set(again.expected_patched_sha256()) == {A, new, "backends/arm/shaders/more.glsl"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("rm", f"patch 0002-drop.patch deletes {A}"),
        ("mv", f"patch 0002-drop.patch deletes {A}"),  # --no-renames: a deletion, then a creation
        ("binary", "patch 0002-drop.patch contains a binary diff for backends/arm/shader.spv"),
    ],
)
def test_a_commit_deleting_renaming_or_adding_binary_is_refused(
    tmp_path: Path, change: str, said: str
) -> None:
    patches = {"0001-a.patch": patch_text("Change a", make_diff(A, A_OLD, A_OLD + "a = 1\n"))}
    series = write_series(tmp_path / "patches", patches, {A: A_OLD.encode()})
    work = tmp_path / "work"
    worktree.create(series, {A: A_OLD.encode()}, work)
    if change == "binary":
        (work / "backends/arm/shader.spv").write_bytes(b"\x03\x02#\x07\x00\x00\x01\x00")
    else:
        git(work, *(["rm", "-q", A] if change == "rm" else ["mv", A, "backends/arm/c.py"]))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "Drop\n\nOverlay-Patch: 0002-drop.patch")
    before = snapshot(tmp_path / "patches")
    with pytest.raises(UnsafePatchError) as info:
        worktree.regenerate(work, tmp_path / "patches")
    assert info.value.message == said
    assert snapshot(tmp_path / "patches") == before
