"""The file-system applier: checks before writes, atomic commit, rollback, bad-input matrix."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay.cli import invocation, main
from overlay.errors import (
    ApplyError,
    BusyError,
    ChecksumMismatchError,
    DriftError,
    OverlayError,
    RollbackError,
    SeriesError,
    TargetError,
    UnsafePatchError,
)
from overlay.in_place import transaction
from overlay.in_place.plan import Plan
from overlay.text.applier import HunkMismatchError
from overlay.text.series import load_series
from overlay.tree import journal, locate, state
from overlay.tree.locate import Target

from scaffold import make_diff, make_tree, patch_text, sha, snapshot, write_series

A = "backends/arm/a.py"
B = "backends/arm/sub/b.py"
A_OLD = "".join(f"a{i} = {i}\n" for i in range(30)).encode()
B_OLD = "".join(f"def b{i}():\n    return {i}\n" for i in range(15)).encode()
A_NEW = A_OLD.replace(b"a5 = 5\n", b"a5 = 'five'\n")
B_NEW = B_OLD.replace(b"    return 7\n", b"    return -7\n").replace(b"def b12", b"def b_twelve")


def good_patches() -> dict[str, str]:
    return {
        "0001-a.patch": patch_text("Change a", make_diff(A, A_OLD.decode(), A_NEW.decode())),
        "0002-b.patch": patch_text("Change b", make_diff(B, B_OLD.decode(), B_NEW.decode())),
    }


def setup(tmp_path: Path, patches: dict[str, str] | None = None) -> tuple[Target, Path]:
    root = make_tree(tmp_path / "site", {A: A_OLD, B: B_OLD, "backends/arm/other.py": b"x\n"})
    write_series(tmp_path / "patches", patches or good_patches(), {A: A_OLD, B: B_OLD})
    return locate.find_target(root), tmp_path / "patches"


def run_apply(target: Target, patches: Path, *, reverse: bool = False) -> Plan:
    return transaction.apply(load_series(patches), target, reverse=reverse)


def test_apply_is_exact_and_rerun_is_noop(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    first = run_apply(target, patches)
    assert [c.repo_path for c in first.changes] == [A, B]
    assert target.file(A).read_bytes() == A_NEW
    assert target.file(B).read_bytes() == B_NEW
    before = snapshot(target.root)
    second = run_apply(target, patches)
    assert second.is_noop and second.unchanged == (A, B)
    assert snapshot(target.root) == before


def test_revert_restores_pristine_bytes(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    before = snapshot(target.root)
    run_apply(target, patches)
    run_apply(target, patches, reverse=True)
    assert snapshot(target.root) == before
    assert run_apply(target, patches, reverse=True).is_noop


def test_apply_never_writes_through_hardlinks(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    cache_copy = tmp_path / "uv-cache-a.py"
    os.link(target.file(A), cache_copy)  # what uv's hardlink install looks like
    run_apply(target, patches)
    assert cache_copy.read_bytes() == A_OLD
    assert target.file(A).read_bytes() == A_NEW


def test_file_mode_is_kept(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(A).chmod(0o640)
    run_apply(target, patches)
    assert target.file(A).stat().st_mode & 0o777 == 0o640


def test_partial_state_completes(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(A).write_bytes(A_NEW)  # a file already patched, the other pristine
    plan = run_apply(target, patches)
    assert [c.repo_path for c in plan.changes] == [B] and plan.unchanged == (A,)
    assert target.file(B).read_bytes() == B_NEW


def test_status_states(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(A).write_bytes(A_NEW)
    target.file(B).write_bytes(b"something else\n")
    states = {p: r.state for p, r in state.read_files(load_series(patches), target).items()}
    assert states == {A: state.FileState.PATCHED, B: state.FileState.DRIFTED}


# --- bad input: each must raise a clear error and leave the tree byte-identical ----------


def expect_refusal(
    target: Target, patches: Path, error: type[OverlayError], *words: str
) -> OverlayError:
    before = snapshot(target.root)
    with pytest.raises(error) as info:
        run_apply(target, patches)
    assert snapshot(target.root) == before
    text = str(info.value)
    for word in words:
        assert word in text, text
    return info.value


def test_drifted_target(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(B).write_bytes(B_OLD.replace(b"b3", b"bee3"))
    error = expect_refusal(target, patches, DriftError, "neither pristine nor patched", B)
    assert error.hint and "reinstall" in error.hint


def test_wrong_version(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "site", {A: A_OLD, B: B_OLD}, version="1.3.1")
    write_series(tmp_path / "patches", good_patches(), {A: A_OLD, B: B_OLD})
    target = locate.find_target(root)
    expect_refusal(target, tmp_path / "patches", TargetError, "expected: executorch 1.2.0", "1.3.1")


def test_local_version_of_the_pin_is_accepted(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "site", {A: A_OLD, B: B_OLD}, version="1.2.0+armfix.abc")
    write_series(tmp_path / "patches", good_patches(), {A: A_OLD, B: B_OLD})
    run_apply(locate.find_target(root), tmp_path / "patches")
    assert (root / "executorch" / A).read_bytes() == A_NEW


def hostile(path: str) -> str:
    diff = make_diff(A, A_OLD.decode(), A_NEW.decode())
    return patch_text("Evil", diff.replace(f"a/{A}", path).replace(f"b/{A}", path))


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("a/../../etc/passwd", "'..', '.' or empty components"),
        ("a/backends/../../../x.py", "'..', '.' or empty components"),
        ("/etc/passwd", "an absolute path"),
        ("C:/Windows/x.py", "an absolute path"),
        ("a/backends\\arm\\x.py", "NUL or backslash"),
    ],
)
def test_hostile_paths_refused_at_load(tmp_path: Path, path: str, problem: str) -> None:
    folder = tmp_path / "patches"
    write_series(folder, good_patches(), {A: A_OLD, B: B_OLD})
    (folder / "series").write_text("0001-a.patch\n0002-b.patch\n0003-evil.patch\n")
    (folder / "0003-evil.patch").write_text(hostile(path))
    before = snapshot(tmp_path)
    with pytest.raises(UnsafePatchError) as info:
        load_series(folder)
    assert info.value.message == "patch 0003-evil.patch names an unsafe path"
    assert info.value.found is not None and problem in info.value.found
    assert repr(path) in info.value.found
    assert snapshot(tmp_path) == before


def test_symlink_escape_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.py").write_bytes(B_OLD)
    target, patches = setup(tmp_path)
    sub = target.root / "executorch" / "backends" / "arm" / "sub"
    (sub / "b.py").unlink()
    sub.rmdir()
    sub.symlink_to(outside)
    before_outside = snapshot(outside)
    error = expect_refusal(target, patches, TargetError)  # the tree's fault, not the series'
    assert error.exit_code == 4
    # The tmp folder's name holds "symlink" too: assert the fields, not a word in the text.
    link = target.root.resolve() / "executorch" / "backends" / "arm" / "sub"
    assert error.message == f"executorch/{B} goes through a symlink at {link}"
    assert error.found == f"{link} -> {outside}"
    assert snapshot(outside) == before_outside


def test_file_not_in_record_refused(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    record = target.dist_info / "RECORD"
    kept = [line for line in record.read_text().splitlines() if "sub/b.py" not in line]
    record.write_text("\n".join(kept))
    expect_refusal(locate.find_target(target.root), patches, UnsafePatchError, "RECORD", "sub/b.py")


def test_missing_file_refused(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(B).unlink()
    expect_refusal(target, patches, DriftError, "missing")


def test_binary_patch_refused(tmp_path: Path) -> None:
    binary = (
        f"diff --git a/{A} b/{A}\nindex 1111111..2222222 100644\n"
        f"Binary files a/{A} and b/{A} differ\n"
    )
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "series").write_text("0001-p.patch\n")
    (folder / "0001-p.patch").write_text(patch_text("bin", binary))
    with pytest.raises(UnsafePatchError, match="binary"):
        load_series(folder)


@pytest.mark.parametrize("cut", [40, 90, -8])
def test_truncated_patch_refused(tmp_path: Path, cut: int) -> None:
    text = good_patches()["0001-a.patch"]
    header_len = text.index("---\n") + 4
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "series").write_text("0001-p.patch\n")
    (folder / "0001-p.patch").write_text(text[: header_len + cut] if cut > 0 else text[:cut])
    with pytest.raises(SeriesError, match=r"0001-p\.patch"):
        load_series(folder)


def test_malformed_header_refused(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "series").write_text("0001-p.patch\n")
    (folder / "0001-p.patch").write_text("Just some words\n---\n" + make_diff(A, "a\n", "b\n"))
    with pytest.raises(SeriesError, match="not a DEP-3 field"):
        load_series(folder)


def test_unknown_series_entry_refused(tmp_path: Path) -> None:
    _, patches = setup(tmp_path)
    (patches / "series").write_text("0001-a.patch\n0002-b.patch\n0009-ghost.patch\n")
    with pytest.raises(SeriesError, match=r"0009-ghost\.patch"):
        load_series(patches)


def test_unlisted_patch_refused(tmp_path: Path) -> None:
    _, patches = setup(tmp_path)
    (patches / "series").write_text("0001-a.patch\n")
    with pytest.raises(SeriesError, match=r"not in the series: 0002-b\.patch"):
        load_series(patches)


def test_stale_checksums_refused(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    text = (patches / "0001-a.patch").read_text().replace("Change a", "Change a!")
    (patches / "0001-a.patch").write_text(text)
    expect_refusal(target, patches, SeriesError, "stale", "refresh")


def test_hunk_mismatch_in_second_file_writes_nothing(tmp_path: Path) -> None:
    # B is "pristine" by its pin but the second patch no longer matches it: the plan
    # fails on B after A's new bytes were computed, and nothing reaches the disk.
    other_b = B_OLD.replace(b"    return 7\n", b"    return 70\n")
    root = make_tree(tmp_path / "site", {A: A_OLD, B: other_b})
    write_series(
        tmp_path / "patches", good_patches(), {A: A_OLD, B: B_OLD}, pinned={A: A_OLD, B: other_b}
    )
    target = locate.find_target(root)
    before = snapshot(root)
    with pytest.raises(HunkMismatchError) as info:
        transaction.apply(load_series(tmp_path / "patches"), target)
    assert info.value.hunk == 1
    assert info.value.message.startswith(f"patch 0002-b.patch, file {B}: hunk 1")
    assert snapshot(root) == before


def test_stale_checksum_entry_is_a_checksum_error(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    sums = patches / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    lines[-1] = "f" * 64 + lines[-1][64:]  # B's recorded post-series hash is wrong
    sums.write_text("\n".join(lines) + "\n")
    before = snapshot(target.root)
    with pytest.raises(ChecksumMismatchError) as info:
        run_apply(target, patches)
    assert info.value.message.startswith(f"{B}: ")
    assert (info.value.expected, info.value.found) == (f"sha256 {'f' * 64}", f"sha256 {sha(B_NEW)}")
    assert snapshot(target.root) == before


def test_a_failed_rename_rolls_back_from_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, patches = setup(tmp_path)
    before = snapshot(target.root)
    real_replace = os.replace
    renames: list[str] = []

    def failing_replace(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == target.file(B):  # the first file is in place; the disk "fails"
            raise OSError(28, "No space left on device")
        real_replace(src, dst)
        renames.append(str(dst))

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ApplyError) as info:
        run_apply(target, patches)
    assert str(target.file(A)) in renames  # it really was half-written
    assert info.value.message.endswith(
        "No space left on device; rolled back: every file is as before"
    )
    assert info.value.found == "1 of 8 done before the failure"
    monkeypatch.setattr(os, "replace", real_replace)
    assert snapshot(target.root) == before  # no staging file, no journal, no lock left


def test_a_failed_roll_back_names_the_files_and_the_command_that_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target, patches = setup(tmp_path)
    before = snapshot(target.root)
    real_replace = os.replace

    def failing_replace(src: str | Path, dst: str | Path) -> None:
        staged = ".executorch-arm-overlay" in str(src)
        writing_b = Path(dst) == target.file(B)
        restoring_a = Path(dst) == target.file(A) and Path(src).name.endswith(".old")
        if staged and (writing_b or restoring_a):
            raise OSError(5, "Input/output error")  # B cannot be written, A not restored
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    code = main(["--patches", str(patches), "apply", "--target", str(target.root)])
    err = capsys.readouterr().err
    assert code == RollbackError.exit_code
    assert err.startswith(
        f"error: writing {target.root} failed: [Errno 5] Input/output error;"
        " could not roll back the apply: 1 path(s) are in neither state"
    )
    assert "    executorch/backends/arm/a.py: done, step 1 (write, old sha256 " in err
    assert (
        f"next step: fix the cause, then run `{invocation.command('revert')} --target"
        f" {target.root}`" in err
    )
    assert journal.read_journal(target.root) is not None  # kept for the command that finishes
    monkeypatch.setattr(os, "replace", real_replace)
    assert main(["--patches", str(patches), "revert", "--target", str(target.root)]) == 0
    assert "was rolled back" in capsys.readouterr().out
    assert snapshot(target.root) == before


def test_status_and_check_while_another_run_holds_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, patches = setup(tmp_path)
    with transaction.locked(target):
        status = state.inspect(load_series(patches), target)
        assert status.state is state.TreeState.BUSY and status.files == {}
        pid = os.getpid()  # the holder, named (issue 36, item 14)
        assert status.summary == f"busy: another overlay run (pid {pid}) is writing this tree"
        code = main(["--patches", str(patches), "check", "--target", str(target.root)])
        assert code == BusyError.exit_code
        err = capsys.readouterr().err
        assert err.startswith(f"error: another overlay run is writing {target.root}")
        assert f"  found:    {journal.lock_file(target.root)} held by pid {pid}\n" in err
    assert state.inspect(load_series(patches), target).state is state.TreeState.PRISTINE


def test_concurrent_applies_are_serialised(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            run_apply(target, patches)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.file(A).read_bytes() == A_NEW and target.file(B).read_bytes() == B_NEW


def test_a_relative_target_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target, _ = setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--patches", "patches", "apply", "--target", "site"]) == 0
    assert main(["--patches", "patches", "status", "--target", "site"]) == 0
    assert f"target {tmp_path / 'site'} (executorch 1.2.0+armfix." in capsys.readouterr().out
    assert target.file(A).read_bytes() == A_NEW


def test_find_target_accepts_venv_layout(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    make_tree(site, {A: A_OLD})
    assert locate.find_target(tmp_path / "venv").root == site
    assert locate.find_target(site / "executorch").root == site
    with pytest.raises(TargetError, match="executorch is not installed in") as info:
        locate.find_target(tmp_path)  # not a venv: which folder holds executorch?
    assert (
        info.value.hint == "pass --target the venv (or site-packages folder) that holds executorch"
    )


texts = st.lists(st.sampled_from(["x = 1", "y = 2", "pass", "", "# c"]), min_size=1, max_size=25)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(old=texts, new=texts)
def test_tree_apply_revert_identity(
    tmp_path_factory: pytest.TempPathFactory, old: list[str], new: list[str]
) -> None:
    base = tmp_path_factory.mktemp("prop")
    old_b = ("\n".join(old) + "\n").encode()
    new_b = ("\n".join(new) + "\n").encode()
    if old_b == new_b:
        return
    root = make_tree(base / "site", {A: old_b})
    write_series(
        base / "patches",
        {"0001-p.patch": patch_text("p", make_diff(A, old_b.decode(), new_b.decode()))},
        {A: old_b},
    )
    target = locate.find_target(root)
    before = snapshot(root)
    series = load_series(base / "patches")
    transaction.apply(series, target)
    assert target.file(A).read_bytes() == new_b
    transaction.apply(series, target, reverse=True)
    assert snapshot(root) == before


def test_crlf_target_file_keeps_crlf(tmp_path: Path) -> None:
    a_crlf = A_OLD.replace(b"\n", b"\r\n")
    root = make_tree(tmp_path / "site", {A: a_crlf, B: B_OLD})
    write_series(tmp_path / "patches", good_patches(), {A: a_crlf, B: B_OLD})  # LF patches
    target = locate.find_target(root)
    transaction.apply(load_series(tmp_path / "patches"), target)
    assert target.file(A).read_bytes() == A_NEW.replace(b"\n", b"\r\n")
    transaction.apply(load_series(tmp_path / "patches"), target, reverse=True)
    assert target.file(A).read_bytes() == a_crlf


def test_crlf_converted_checkout_is_drift(tmp_path: Path) -> None:
    target, patches = setup(tmp_path)
    target.file(A).write_bytes(A_OLD.replace(b"\n", b"\r\n"))  # e.g. a Windows checkout
    expect_refusal(target, patches, DriftError, "backends/arm/a.py: drifted")


def test_a_hand_edit_in_a_file_the_run_does_not_write_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand edit in fix 2's file blocks no run of fix 1; a run that would write it says
    that reinstalling discards the edit (issue 36, item 7)."""
    target, patches = setup(tmp_path)
    edited = B_OLD + b"# mine\n"
    target.file(B).write_bytes(edited)
    row = next(line for line in (target.dist_info / "RECORD").read_text().splitlines() if B in line)
    args = ["--patches", str(patches)]
    assert main([*args, "apply", "--fix", "1", "--target", str(target.root)]) == 0
    out = capsys.readouterr().out
    assert f"  left alone: {B} (edited by hand; this run does not write it)\n" in out
    assert target.file(A).read_bytes() == A_NEW and target.file(B).read_bytes() == edited
    (info,) = target.root.glob("executorch-*.dist-info")
    assert row in (info / "RECORD").read_text().splitlines()  # RECORD says what was installed
    assert main([*args, "revert", "--target", str(target.root)]) == 0  # fix 2 is not held
    assert target.file(A).read_bytes() == A_OLD and target.file(B).read_bytes() == edited
    capsys.readouterr()
    assert main([*args, "apply", "--target", str(target.root)]) == DriftError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: 1 file(s) are neither pristine nor patched; nothing was written")
    assert (
        "  next step: reinstall executorch (`uv pip install --reinstall executorch==1.2.0`: this"
        " discards the edits in those files), then apply again; or leave them alone: --fix 1\n"
    ) in err


def test_a_second_run_says_it_waits_and_for_whom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not 120 s of silence: the wait is said, with the holder's pid (issue 36, item 14)."""
    target, patches = setup(tmp_path)
    monkeypatch.setattr(transaction, "LOCK_TIMEOUT_S", 1.0)
    with transaction.locked(target):
        code = main(["--patches", str(patches), "apply", "--target", str(target.root)])
    assert code == BusyError.exit_code
    err = capsys.readouterr().err
    pid = os.getpid()
    assert f"[overlay] waiting up to 1 s for the lock of {target.root}, held by pid {pid}\n" in err
    assert f"  found:    {journal.lock_file(target.root)} still held by pid {pid}\n" in err
