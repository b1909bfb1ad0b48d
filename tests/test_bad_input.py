"""Every bad input is one clear error (expected / found / next step) and leaves all untouched.

Each row of ``CASES`` breaks one input of a good world (series + pristine or in-place
patched tree), runs the CLI, and checks the exit code, the first line of the message, that
the message says what was expected, what was found and the next step, and that neither the
tree nor the series folder changed (no journal, no lock, no staging file left).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from overlay import _faults
from overlay.cli import invocation, main
from overlay.distribution.distinfo import ORIGINAL_FILE, ORIGINAL_RECORD
from overlay.distribution.provenance import PROVENANCE_FILE
from overlay.envs.verify_install import check_installed
from overlay.errors import (
    ApplyError,
    InstallCheckError,
    OverlayError,
    SeriesError,
    TargetError,
    UnfinishedRunError,
    UnsafePatchError,
    UnsupportedReleaseError,
    UsageError,
)
from overlay.in_place import transaction
from overlay.text.series import load_series
from overlay.tree import journal, locate

from scaffold import fast_tmp, make_diff, make_tree, patch_text, run_forked, snapshot, write_series

A = "backends/arm/a.py"
B = "backends/arm/sub/b.py"
A_OLD = "".join(f"a{i} = {i}\n" for i in range(30))
A_NEW = A_OLD.replace("a5 = 5\n", "a5 = 'five'\n")
B_OLD = "".join(f"def b{i}():\n    return {i}\n" for i in range(15))
B_NEW = B_OLD.replace("    return 7\n", "    return -7\n")
DIFF_A = make_diff(A, A_OLD, A_NEW)


@dataclass(frozen=True)
class World:
    root: Path  # site-packages-like tree
    patches: Path

    @property
    def dist_info(self) -> Path:
        return next(self.root.glob("executorch-*.dist-info"))

    def cli(self, *args: str) -> int:
        return main(["--patches", str(self.patches), *args])


def make_world(base: Path, *, patched: bool = False) -> World:
    root = make_tree(base / "site", {A: A_OLD.encode(), B: B_OLD.encode()})
    patches = {
        "0001-a.patch": patch_text("Change a", DIFF_A),
        "0002-b.patch": patch_text("Change b", make_diff(B, B_OLD, B_NEW)),
    }
    write_series(base / "patches", patches, {A: A_OLD.encode(), B: B_OLD.encode()})
    world = World(root, base / "patches")
    if patched:
        transaction.apply(load_series(world.patches), locate.find_target(root))
    return world


def append(path: Path, data: bytes) -> None:
    path.write_bytes(path.read_bytes() + data)


def write_journal(root: Path, data: bytes) -> None:
    journal.state_dir(root).mkdir()
    journal.journal_file(root).write_bytes(data)


def hostile_patch(diff: str) -> Callable[[World], None]:
    def mutate(world: World) -> None:
        (world.patches / "0001-a.patch").write_text(patch_text("Change a", diff))

    return mutate


def diff_git(extended: str, *, hunks: str = DIFF_A, path: str = A) -> str:
    return f"diff --git a/{path} b/{path}\n{extended}" + hunks


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Callable[[World], object]
    error: type[OverlayError]
    first_line: str  # start of the message's first line, after "error: "
    command: str = "apply"
    patched: bool = False  # start from an in-place patched tree


CASES = [
    Case(
        "patch not UTF-8",
        lambda w: append(w.patches / "0001-a.patch", b"# \xff\n"),
        SeriesError,
        "{patches}/0001-a.patch is not UTF-8 text",
    ),
    Case(
        "series not UTF-8",
        lambda w: append(w.patches / "series", b"# \xff\n"),
        SeriesError,
        "{patches}/series is not UTF-8 text",
    ),
    Case(
        "SHA256SUMS not UTF-8",
        lambda w: append(w.patches / "SHA256SUMS", b"# \xfe\n"),
        SeriesError,
        "{patches}/SHA256SUMS is not UTF-8 text",
    ),
    Case(
        "pins.toml not UTF-8",
        lambda w: append(w.patches / "pins.toml", b"# \xfe\n"),
        SeriesError,
        "cannot read {patches}/pins.toml",
    ),
    Case(
        "METADATA not UTF-8",
        lambda w: append(w.dist_info / "METADATA", b"Summary: \xff\n"),
        TargetError,
        "{dist_info}/METADATA is not UTF-8 text",
    ),
    Case(
        "RECORD not UTF-8",
        lambda w: append(w.dist_info / "RECORD", b"\xfe,,\n"),
        TargetError,
        "{dist_info}/RECORD is not UTF-8 text",
    ),
    Case(
        "RECORD malformed",
        lambda w: append(w.dist_info / "RECORD", b"executorch/x.py,md5=abc\n"),
        TargetError,
        "{dist_info}/RECORD is not a valid RECORD",
    ),
    Case(
        "provenance not UTF-8",
        lambda w: append(w.dist_info / PROVENANCE_FILE, b"\xff"),
        TargetError,
        "{dist_info}/ARM_OVERLAY.json is not UTF-8 text",
        command="revert",
        patched=True,
    ),
    Case(
        "saved original malformed",
        lambda w: (w.dist_info / ORIGINAL_FILE).write_text("{"),
        TargetError,
        "{dist_info}/ARM_OVERLAY_ORIGINAL.json is unreadable",
        command="revert",
        patched=True,
    ),
    Case(
        "saved original RECORD gone",
        lambda w: (w.dist_info / ORIGINAL_RECORD).unlink(),
        TargetError,
        "cannot read {dist_info}/ARM_OVERLAY_ORIGINAL_RECORD",
        command="revert",
        patched=True,
    ),
    Case(
        "journal unreadable",
        lambda w: write_journal(w.root, b"{\xff"),
        TargetError,
        "the journal {root}/.executorch-arm-overlay/journal.json is unreadable",
    ),
    Case(
        "lock path is a directory",
        lambda w: journal.lock_file(w.root).mkdir(parents=True),
        TargetError,
        "cannot take the lock of {root}",
    ),
    Case(
        "lock folder is a file",
        lambda w: journal.state_dir(w.root).write_text("not a folder"),
        TargetError,
        "cannot take the lock of {root}",
    ),
    Case(
        "mode change next to hunks",
        hostile_patch(diff_git("old mode 100644\nnew mode 100755\nindex 1111111..2222222\n")),
        UnsafePatchError,
        f"patch 0001-a.patch changes the file mode of {A}",
    ),
    Case(
        "mode change after the hunks",
        hostile_patch(DIFF_A + "old mode 100644\nnew mode 100755\n"),
        UnsafePatchError,
        f"patch 0001-a.patch changes the file mode of {A}",
    ),
    Case(
        "mode change alone",
        hostile_patch(diff_git("old mode 100644\nnew mode 100755\n", hunks="")),
        UnsafePatchError,
        f"patch 0001-a.patch changes the file mode of {A}",
    ),
    Case(
        "symlink mode on the index line",
        hostile_patch(diff_git("index 1111111..2222222 120000\n")),
        UnsafePatchError,
        f"patch 0001-a.patch renames or links {A}",
    ),
    Case(
        "new executable file",
        hostile_patch(
            diff_git(
                "new file mode 100755\n",
                hunks="--- /dev/null\n+++ b/backends/arm/new.py\n@@ -0,0 +1 @@\n+x = 1\n",
                path="backends/arm/new.py",
            )
        ),
        UnsafePatchError,
        "patch 0001-a.patch creates backends/arm/new.py",
    ),
    Case(
        "deletion",
        hostile_patch(f"--- a/{A}\n+++ /dev/null\n@@ -1 +0,0 @@\n-a0 = 0\n"),
        UnsafePatchError,
        f"patch 0001-a.patch deletes {A}",
    ),
    Case(
        "rename",
        hostile_patch(
            f"diff --git a/{A} b/backends/arm/c.py\nsimilarity index 100%\n"
            f"rename from {A}\nrename to backends/arm/c.py\n"
        ),
        UnsafePatchError,
        "patch 0001-a.patch renames or copies backends/arm/c.py",
    ),
    Case(
        "copy",
        hostile_patch(
            f"diff --git a/{A} b/backends/arm/c.py\ncopy from {A}\ncopy to backends/arm/c.py\n"
        ),
        UnsafePatchError,
        "patch 0001-a.patch copies backends/arm/c.py",
    ),
    Case(
        "binary (git binary patch)",
        hostile_patch(
            diff_git("index 1111111..2222222\nGIT binary patch\nliteral 1\nIcmZ?d00001\n", hunks="")
        ),
        UnsafePatchError,
        f"patch 0001-a.patch contains a binary diff for {A}",
    ),
    Case(
        "binary (files differ)",
        hostile_patch(
            diff_git(
                f"index 1111111..2222222 100644\nBinary files a/{A} and b/{A} differ\n", hunks=""
            )
        ),
        UnsafePatchError,
        f"patch 0001-a.patch contains a binary diff for {A}",
    ),
    Case(
        "complete rewrite (-B)",
        hostile_patch(diff_git("dissimilarity index 90%\nindex 1111111..2222222\n")),
        UnsafePatchError,
        f"patch 0001-a.patch rewrites (git diff -B) {A}",
    ),
    Case(
        "patched-wheel install, revert",
        lambda w: (w.dist_info / PROVENANCE_FILE).write_text("{}"),
        TargetError,
        "{dist_info_name} was installed from a patched wheel",
        command="revert",
    ),
    Case(
        "two dist-infos",
        lambda w: shutil.copytree(w.dist_info, w.root / "executorch-1.1.0.dist-info"),
        TargetError,
        "no single executorch installation at {root}",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clear_error(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path, patched=case.patched)
    case.mutate(world)
    before = snapshot(tmp_path)
    names = {
        "patches": world.patches,
        "root": world.root,
        "dist_info": world.dist_info,
        "dist_info_name": world.dist_info.name,
    }
    code = world.cli(case.command, "--target", str(world.root))
    err = capsys.readouterr().err
    assert code == case.error.exit_code, err
    assert err.splitlines()[0].startswith("error: " + case.first_line.format(**names)), err
    for part in ("\n  expected: ", "\n  found:    ", "\n  next step: "):
        assert part in err, f"{part.strip()} missing from:\n{err}"
    assert snapshot(tmp_path) == before


def test_two_site_packages_in_a_venv_are_refused_naming_both(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    for version in ("3.11", "3.12"):
        make_tree(venv / "lib" / f"python{version}" / "site-packages", {A: A_OLD.encode()})
    with pytest.raises(TargetError) as info:
        locate.find_target(venv)
    assert info.value.message == f"{venv} holds executorch in 2 site-packages folders"
    assert info.value.found == ", ".join(
        str(venv / "lib" / f"python{v}" / "site-packages") for v in ("3.11", "3.12")
    )


def test_a_lib64_link_is_not_a_second_site_packages(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    make_tree(venv / "lib" / "python3.11" / "site-packages", {A: A_OLD.encode()})
    (venv / "lib64").symlink_to("lib")
    assert locate.find_target(venv).root == venv / "lib" / "python3.11" / "site-packages"


def test_check_on_a_tree_with_a_journal_is_not_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path)
    child = run_forked(
        lambda: world.cli("apply", "--target", str(world.root)),
        {_faults.FAULT_ENV: "step 1/8:kill"},
    )
    assert child.code == -9
    assert world.cli("check", "--target", str(world.root)) == UnfinishedRunError.exit_code
    err = capsys.readouterr().err
    assert err.startswith(f"error: {world.root} is between pristine and patched: interrupted apply")
    assert world.cli("status", "--target", str(world.root)) == 0
    out = capsys.readouterr().out
    assert (
        "  state: interrupted apply (pid " in out
        and "1 of 8 steps done): run `apply` or `revert`" in out
    )
    assert "pristine  backends" not in out and "patched   backends" not in out  # no mix shown


def test_verify_install_refuses_non_utf8_metadata_and_an_interrupted_run(tmp_path: Path) -> None:
    world = make_world(tmp_path, patched=True)
    series = load_series(world.patches)
    assert check_installed(series, import_modules=False, search_path=world.root).files
    metadata = world.dist_info / "METADATA"
    good = metadata.read_bytes()
    append(metadata, b"Summary: \xff\n")
    with pytest.raises(InstallCheckError) as info:
        check_installed(series, import_modules=False, search_path=world.root)
    assert info.value.message == (
        f"the executorch installation in {world.root} cannot be read:"
        f" {world.dist_info}/METADATA is not UTF-8 text"
    )
    metadata.write_bytes(good)
    run_forked(
        lambda: world.cli("revert", "--target", str(world.root)),
        {_faults.FAULT_ENV: "step 2/8:kill"},
    )
    with pytest.raises(InstallCheckError) as info:
        check_installed(series, import_modules=False, search_path=world.root)
    assert info.value.message == f"an interrupted revert left {world.root} half-written"


def as_nobody(function: Callable[[], int]) -> Callable[[], int]:
    def run() -> int:
        os.setgid(65534)
        os.setuid(65534)
        return function()

    return run


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changes users (runs as root in CI)")


@pytest.fixture
def anyones_tmp(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder another user can enter (pytest's own is the owner's only)."""
    with fast_tmp(tmp_path) as folder:
        yield folder


@needs_root
def test_a_tree_the_user_cannot_write_is_a_clear_error(anyones_tmp: Path) -> None:
    world = make_world(anyones_tmp)
    before = snapshot(world.root)
    target = ["--target", str(world.root)]
    for args in (["apply"], ["apply", "--dry-run"], ["check"]):  # the dry runs say it too
        child = run_forked(as_nobody(functools.partial(world.cli, *args, *target)))
        assert child.code == TargetError.exit_code, child.output
        first = child.output.splitlines()[0]
        assert first == (
            f"error: cannot write {world.root}: 4 path(s) are read-only; nothing was written"
        )
        assert f"found:    running as uid 65534; {world.root} belongs to uid 0" in child.output
        assert f"    {world.root}/executorch/backends/arm\n" in child.output
    # nothing to do is no error, read-only or not: a pristine tree reverted, a dry run of it
    for args in (["revert"], ["revert", "--dry-run"], ["check", "--reverse"]):
        child = run_forked(as_nobody(functools.partial(world.cli, *args, *target)))
        assert child.code == 0, child.output
        assert "nothing to do" in child.output
    assert snapshot(world.root) == before
    # its owner applies and reverts it (run here, in this process, this also lets mutmut see
    # that the test calls the transaction, which only the children above run read-only)
    assert world.cli("apply", *target) == 0
    assert snapshot(world.root) != before
    assert world.cli("revert", *target) == 0
    assert snapshot(world.root) == before


@needs_root
def test_files_of_another_owner_are_refused_before_any_write(anyones_tmp: Path) -> None:
    world = make_world(anyones_tmp)
    for folder in [world.root, *(p for p in world.root.rglob("*") if p.is_dir())]:
        folder.chmod(0o777)  # anyone may create files here, but the files are root's
    before = snapshot(world.root)
    child = run_forked(as_nobody(lambda: world.cli("apply", "--target", str(world.root))))
    assert child.code == TargetError.exit_code, child.output
    assert child.output.startswith(f"error: cannot keep the owner of {world.root}/executorch/{A}")
    assert snapshot(world.root) == before


@needs_root
def test_owner_and_mode_are_kept_when_root_patches_a_users_tree(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    for path in [world.root, *world.root.rglob("*")]:
        os.chown(path, 1234, 2345)
    (world.root / "executorch" / A).chmod(0o640)
    series = load_series(world.patches)
    transaction.apply(series, locate.find_target(world.root))
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [world.root, *world.root.rglob("*")]}
    assert owners == {(1234, 2345)}  # sources, new dist-info files, the renamed folder
    assert (world.root / "executorch" / A).stat().st_mode & 0o777 == 0o640
    transaction.apply(series, locate.find_target(world.root), reverse=True)
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [world.root, *world.root.rglob("*")]}
    assert owners == {(1234, 2345)}


# --- the flags of apply / revert / check / status: one clear error before any write -----------

A_AGAIN = A_NEW.replace("a5 = 'five'\n", "a5 = 'FIVE'\n")  # a third fix, on top of the first


def add_dependent_fix(world: World) -> None:
    """Make the series three fixes: fix 3 edits the line fix 1 wrote."""
    patches = {p.name: p.read_text() for p in sorted(world.patches.glob("*.patch"))}
    patches["0003-a-again.patch"] = patch_text("Change a again", make_diff(A, A_NEW, A_AGAIN))
    write_series(world.patches, patches, {A: A_OLD.encode(), B: B_OLD.encode()})


def as_lines_root(world: World) -> None:
    """Put the world's series into a lines root (``lines/1.2.0``) beside it."""
    shutil.copytree(world.patches, world.patches.parent / "lines" / "1.2.0")


def installed_at(version: str) -> Callable[[World], None]:
    def mutate(world: World) -> None:
        as_lines_root(world)
        metadata = world.dist_info / "METADATA"
        metadata.write_text(metadata.read_text().replace("Version: 1.2.0", f"Version: {version}"))

    return mutate


def in_a_venv(world: World) -> None:
    """Move the tree into a venv's site-packages (where the dependency check runs)."""
    site = world.root.parent / "venv" / "lib" / "python3.11" / "site-packages"
    site.parent.mkdir(parents=True)
    shutil.move(world.root, site)


@dataclass(frozen=True)
class FlagCase:
    id: str
    args: tuple[str, ...]  # after the command; {root}, {patches}, {lines} are filled in
    error: type[OverlayError]
    first_line: str
    mutate: Callable[[World], object] = lambda world: None
    command: str = "apply"
    patches: str = "{patches}"  # what --patches names


FLAG_CASES = [
    FlagCase("unknown fix number", ("--fix", "3"), UsageError, "line 1.2.0 does not carry fix 3"),
    FlagCase("unknown fix name", ("--fix", "1,c"), UsageError, "line 1.2.0 has no fix named 'c'"),
    FlagCase("empty --fix", ("--fix", ","), UsageError, "--fix names no fix"),
    FlagCase(
        "unknown fix, revert",
        ("--fix", "b.patch"),
        UsageError,
        "line 1.2.0 has no fix named 'b.patch'",
        command="revert",
    ),
    FlagCase("unknown fix, dry run", ("--fix", "9", "--dry-run"), UsageError, "line 1.2.0 does"),
    FlagCase("unknown fix, check", ("--fix", "0"), UsageError, "line 1.2.0 does", command="check"),
    FlagCase(
        "target does not exist",
        ("--target", "{root}/does/not/exist"),
        TargetError,
        "{root}/does/not/exist does not exist",
    ),
    FlagCase(
        "target does not exist, status",
        ("--target", "/does/not/exist"),
        TargetError,
        "/does/not/exist does not exist",
        command="status",
    ),
    FlagCase(
        "installed release without a line",
        (),
        UnsupportedReleaseError,
        "executorch 1.4.1 has no release line here",
        mutate=installed_at("1.4.1"),
        patches="{lines}",
    ),
    FlagCase(
        "installed release without a line, status",
        (),
        UnsupportedReleaseError,
        "executorch 1.4.1 has no release line here",
        mutate=installed_at("1.4.1"),
        patches="{lines}",
        command="status",
    ),
    FlagCase(
        "no such --line",
        ("--line", "9.9.9"),
        UsageError,
        "there is no release line 9.9.9",
        mutate=as_lines_root,
        patches="{lines}",
    ),
    FlagCase(
        "--line against one series folder",
        ("--line", "1.5.1"),
        UsageError,
        "there is no release line 1.5.1 in {patches}",
    ),
    FlagCase(
        "--line of another release than installed",
        ("--line", "1.2.0"),
        TargetError,
        "line 1.2.0 is for executorch 1.2.0; the target holds executorch 1.5.1",
        mutate=installed_at("1.5.1"),
        patches="{lines}",
    ),
    FlagCase(
        "a fix that needs another",
        ("--fix", "3"),
        ApplyError,
        f"{A}: fix 3 cannot be applied without fix 1",
        mutate=add_dependent_fix,
    ),
]


@pytest.mark.parametrize("case", FLAG_CASES, ids=[c.id for c in FLAG_CASES])
def test_bad_flags_are_one_clear_error_before_any_write(
    case: FlagCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path)
    case.mutate(world)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    root = site if site.is_dir() else world.root
    names = {"root": root, "patches": world.patches, "lines": tmp_path / "lines", "site": site}
    args = [a.format(**names) for a in case.args]
    if "--target" not in args:
        args += ["--target", str(root)]
    before = snapshot(tmp_path)
    patches = case.patches.format(**names)
    code = main(["--patches", patches, case.command, *args])
    err = capsys.readouterr().err
    assert code == case.error.exit_code, err
    message = [line for line in err.splitlines() if not line.startswith("[overlay] ")]
    assert message[0].startswith("error: " + case.first_line.format(**names)), err
    for part in ("\n  expected: ", "\n  found:    ", "\n  next step: "):
        assert part in err, f"{part.strip()} missing from:\n{err}"
    assert snapshot(tmp_path) == before
    code = main(["--patches", patches, case.command, *args, "--json"])  # the same, as JSON
    report = json.loads(capsys.readouterr().out)
    assert (report["error"], report["exit_code"]) == (case.error.__name__, code)


def add_line_151(world: World) -> Path:
    """Beside the world's 1.2.0 line (``lines/1.2.0``), a 1.5.1 line; return the lines root."""
    root = world.patches.parent / "lines"
    if not (root / "1.2.0").exists():
        as_lines_root(world)
    shutil.copytree(world.patches, root / "1.5.1")
    (root / "1.5.1" / "pins.toml").write_text(
        (world.patches / "pins.toml").read_text().replace('"1.2.0"', '"1.5.1"')
    )
    return root


def test_unsupported_release_lists_the_supported_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path)
    installed_at("1.4.1")(world)
    lines = add_line_151(world)
    code = main(["--patches", str(lines), "apply", "--target", str(world.root)])
    assert code == UnsupportedReleaseError.exit_code
    err = capsys.readouterr().err
    assert "  expected: executorch at one of the supported lines: 1.2.0, 1.5.1\n" in err
    assert "  found:    executorch 1.4.1\n" in err
    assert "uv pip install executorch==1.5.1" in err  # what to install, never `retarget`
    assert "retarget" not in err


@pytest.mark.parametrize("command", ["status", "check", "apply"])
def test_a_line_of_another_release_is_one_error_saying_drop_line(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--line 1.2.0` on a 1.5.1 tree: the same error from every command, exit 4, and a next
    step that drops --line (issue 36, item 6)."""
    world = make_world(tmp_path)
    installed_at("1.5.1")(world)
    lines = add_line_151(world)
    before = snapshot(tmp_path)
    args = ["--patches", str(lines), command, "--line", "1.2.0", "--target", str(world.root)]
    assert main(args) == TargetError.exit_code
    err = capsys.readouterr().err
    assert err == (
        "error: line 1.2.0 is for executorch 1.2.0; the target holds executorch 1.5.1\n"
        "  expected: executorch 1.2.0 (--line 1.2.0)\n"
        "  found:    executorch 1.5.1\n"
        "  next step: drop --line: the installed executorch has its own line, 1.5.1\n"
    )
    assert snapshot(tmp_path) == before


def test_a_fix_no_line_carries_is_refused_before_the_target_is_looked_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command-line mistake is exit 2 even where executorch is missing (issue 36, item 8)."""
    world = make_world(tmp_path)
    lines = add_line_151(world)
    empty = tmp_path / "no-executorch"
    empty.mkdir()
    for args, said in (
        (["--line", "1.5.1", "--fix", "99"], "line 1.5.1 does not carry fix 99"),
        (["--fix", "99"], "no release line carries fix 99"),
        (["--fix", "1,nope"], "no release line has fix named 'nope'"),
    ):
        for command in ("apply", "revert", "check"):
            code = main(["--patches", str(lines), command, *args, "--target", str(empty)])
            assert code == UsageError.exit_code
            assert capsys.readouterr().err.startswith(f"error: {said}\n")


def documented_families() -> dict[int, type[OverlayError]]:
    """The exit code table of docs/errors.md: each code and the error class defining it."""
    from overlay import errors

    doc = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    found = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit() and cells[2].startswith("`"):
            found[int(cells[0])] = getattr(errors, cells[2].strip("`").split("`")[0])
    return found


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*args, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["exit_code"] == code
    return code, report["error"]


def test_each_case_exits_with_the_code_docs_errors_md_gives_its_family(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases of docs/errors.md, each run: its code is the one the generated table gives
    the family of the error raised (issue 36, item 16)."""
    from overlay import errors
    from overlay.lines import pins
    from overlay.upstream import releases, upstream_pins

    families = documented_families()

    def check(code: int, name: str, family: type[OverlayError]) -> None:
        assert families[code] is family, (code, name)
        assert issubclass(getattr(errors, name), family), (code, name)

    world = make_world(tmp_path / "link")  # a symlink inside the tree: the tree's fault
    sub = world.root / "executorch" / "backends" / "arm" / "sub"
    shutil.move(sub, tmp_path / "elsewhere")
    sub.symlink_to(tmp_path / "elsewhere")
    check(
        *run_json(["--patches", str(world.patches), "apply", "--target", str(world.root)], capsys),
        TargetError,
    )
    world = make_world(tmp_path / "series")  # a patch naming a path RECORD does not list
    record = world.dist_info / "RECORD"
    record.write_text(
        "".join(r for r in record.read_text().splitlines(True) if "sub/b.py" not in r)
    )
    check(
        *run_json(["--patches", str(world.patches), "apply", "--target", str(world.root)], capsys),
        SeriesError,
    )

    world = make_world(tmp_path / "immutable")  # root meets an immutable file: 4, before writing
    a_file = world.root / "executorch" / A
    chattr = shutil.which("chattr")  # not on every file system (tmpfs): then not this case
    if (
        os.geteuid() == 0
        and chattr
        and subprocess.run([chattr, "+i", str(a_file)], check=False).returncode == 0
    ):
        try:
            args = ["--patches", str(world.patches), "apply", "--target", str(world.root)]
            check(*run_json(args, capsys), TargetError)
        finally:
            subprocess.run([chattr, "-i", str(a_file)], check=True)

    def no_wheel(pin: object) -> Path:
        raise errors.WheelError("cannot download executorch 1.6.0", found="no such version")

    monkeypatch.setattr(releases, "fetch_wheel", no_wheel)  # `retarget 1.6.0` before 1.6.0
    line = make_world(tmp_path / "wheel").patches
    shared = upstream_pins.load(
        Path(__file__).resolve().parent.parent / "patches" / "upstream.toml"
    )
    with pytest.raises(errors.WheelError) as fetched:
        releases.load_release(pins.load(line), shared, "1.6.0")
    assert families[fetched.value.exit_code] is errors.WheelError


def test_a_dependency_check_can_be_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_world(tmp_path)
    in_a_venv(world)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    args = ["apply", "--target", str(tmp_path / "venv")]
    assert world.cli(*args, "--no-deps-check") == 0
    assert (site / "executorch" / A).read_text() == A_NEW
    assert world.cli("revert", "--target", str(tmp_path / "venv")) == 0  # revert never checks
    assert (site / "executorch" / A).read_text() == A_OLD
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["apply", "--dryrun"], "(did you mean --dry-run?)"),
        (["revert", "--fixes", "1"], "(did you mean --fix?)"),
        (["status", "--jsn"], "(did you mean --json?)"),
        (["check", "--reversed"], "(did you mean --reverse?)"),
        (["apply", "extra"], "unrecognized arguments: extra"),
        (["sync"], "one of the arguments --target --ready-in is required"),
        (["apply", "--fix"], "argument --fix: expected one argument"),
        (["matrix", "--format", "xml"], "invalid choice: 'xml'"),
        (["build-wheel", "--wheel", "w", "--tag", "t"], "not allowed with argument --wheel"),
    ],
)
def test_a_misspelt_flag_prints_the_subcommands_usage(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"usage: {invocation.usage()} {argv[0]} "), captured.err
    assert said in captured.err.splitlines()[-1]
    assert captured.out == ""
    assert main([*argv, "--json"]) == 2  # under --json, the same refusal as a typed report
    report = json.loads(capsys.readouterr().out)
    assert (report["error"], report["exit_code"]) == ("UsageError", 2)
    assert said in report["message"]
