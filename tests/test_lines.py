"""Release lines: which folders are lines, the default, the line of a version, where they live."""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

from overlay import lines
from overlay.errors import SeriesError, UnsupportedReleaseError, UsageError
from overlay.lines import Line
from overlay.lines.pins import load

from scaffold import pins_toml, run_forked

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = '[project]\nname = "executorch-arm-overlay"\nversion = "0"\n'


def make_line(root: Path, name: str, *, series: bool = True, pins: bool = True) -> Path:
    """Create ``root/name`` holding a series file and a pins.toml pinned to ``name``."""
    folder = root / name
    folder.mkdir(parents=True)
    if series:
        (folder / "series").write_text("# empty\n", encoding="utf-8")
    if pins:
        version = name if name[:1].isdigit() else "1.0.0"
        (folder / "pins.toml").write_text(pins_toml({}, version=version), encoding="utf-8")
    return folder


def make_checkout(folder: Path, pyproject: str = PYPROJECT) -> Path:
    """Create a checkout-like folder: a pyproject.toml and a patches/ folder with one line."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    make_line(folder / "patches", "1.2.0")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A lines root with 1.10.0, 1.2.0 and 1.9.1 plus folders that are not lines."""
    base = tmp_path / "patches"
    for name in ("1.10.0", "1.2.0", "1.9.1"):
        make_line(base, name)
    make_line(base, "ports")  # not a version
    make_line(base, "2.0.0", series=False)  # no series file
    make_line(base, "3.0.0", pins=False)  # no pins.toml
    (base / "9.9.9").write_text("a file, not a folder", encoding="utf-8")
    return base


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a folder outside any checkout, with no $OVERLAY_PATCHES, as a tool shipping no
    lines of its own (not run from a checkout either)."""
    monkeypatch.delenv(lines.PATCHES_ENV, raising=False)
    monkeypatch.setattr(lines, "packaged_root", lambda: None)
    monkeypatch.setattr(lines, "__file__", str(tmp_path / "site" / "overlay" / "lines" / "x.py"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    return outside


def test_a_series_folder_needs_both_files(tmp_path: Path) -> None:
    assert lines.is_series_folder(make_line(tmp_path, "a"))
    assert not lines.is_series_folder(make_line(tmp_path, "b", series=False))
    assert not lines.is_series_folder(make_line(tmp_path, "c", pins=False))
    folder = tmp_path / "d"
    (folder / "series").mkdir(parents=True)  # folders of those names are not the files
    (folder / "pins.toml").mkdir()
    assert not lines.is_series_folder(folder)


def test_lines_are_the_version_named_series_folders_oldest_first(root: Path) -> None:
    found = lines.all_lines(root)
    assert found == (
        Line("1.2.0", root / "1.2.0"),
        Line("1.9.1", root / "1.9.1"),
        Line("1.10.0", root / "1.10.0"),  # by version, not by text ("1.10" < "1.2")
    )
    assert [line.version for line in found] == [Version("1.2.0"), Version("1.9.1"), Version("1.10")]


def test_a_missing_or_empty_root_has_no_lines(tmp_path: Path) -> None:
    assert lines.all_lines(tmp_path / "absent") == ()
    assert lines.all_lines(tmp_path) == ()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert lines.all_lines(tmp_path / "file") == ()


def test_the_default_line_is_the_newest(root: Path) -> None:
    assert lines.default_line(root) == Line("1.10.0", root / "1.10.0")


def test_no_line_at_all_is_a_series_error(tmp_path: Path) -> None:
    with pytest.raises(SeriesError) as info:
        lines.default_line(tmp_path)
    exc = info.value
    assert exc.message == f"no release line in {tmp_path}"
    assert exc.expected == (
        "folders named after executorch releases (e.g. 1.5.1/) holding a series"
    )
    assert exc.found == "none"
    assert exc.hint == "restore patches/ from git, or pass --patches DIR"


def test_a_line_by_name(root: Path) -> None:
    assert lines.line_named(root, "1.9.1") == Line("1.9.1", root / "1.9.1")
    with pytest.raises(UsageError) as info:  # a name the user gave: a command-line mistake
        lines.line_named(root, "2.0.0")  # a folder, but not a line
    exc = info.value
    assert exc.message == "there is no release line 2.0.0"
    assert exc.expected == "one of the supported lines: 1.2.0, 1.9.1, 1.10.0"
    assert exc.found == "2.0.0"
    assert (
        exc.hint == "pick one of 1.2.0, 1.9.1, 1.10.0 (`executorch-arm-overlay lines` lists them)"
    )


def test_an_empty_root_supports_none(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        lines.line_named(tmp_path, "1.2.0")
    assert info.value.expected == "one of the supported lines: none"
    assert info.value.hint == "pick one of none (`executorch-arm-overlay lines` lists them)"


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("1.2.0", "1.2.0"),
        ("1.2.0+armfix.1b5ee9052a", "1.2.0"),  # the local label is ignored
        ("1.2", "1.2.0"),  # the same release, spelled short
        ("1.10.0", "1.10.0"),
        ("1.10.0+x", "1.10.0"),
    ],
)
def test_the_line_of_an_installed_version(root: Path, version: str, line: str) -> None:
    assert lines.line_for_version(root, version) == Line(line, root / line)


@pytest.mark.parametrize(
    ("version", "retarget"),
    [("1.4.1", "1.4.1"), ("1.4.1+armfix.abc", "1.4.1"), ("not a version", "not a version")],
)
def test_a_version_without_a_line_is_refused_with_the_releases_to_install(
    root: Path, version: str, retarget: str
) -> None:
    with pytest.raises(UnsupportedReleaseError) as info:
        lines.line_for_version(root, version)
    exc = info.value
    assert exc.message == f"executorch {version} has no release line here"
    assert exc.expected == "executorch at one of the supported lines: 1.2.0, 1.9.1, 1.10.0"
    assert exc.found == f"executorch {version}"
    assert exc.hint == (
        "install executorch at a supported release (`uv pip install executorch==1.10.0`), or"
        f" use a version of executorch-arm-overlay whose lines include {retarget}"
        " (`executorch-arm-overlay lines` lists this one's)"
    )  # never `retarget`: a maintainer's command of gigabytes


def test_a_root_without_lines_names_no_release_to_install(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedReleaseError) as info:
        lines.line_for_version(tmp_path, "1.4.1")
    assert info.value.hint == "use a version of executorch-arm-overlay whose lines include 1.4.1"


def test_a_line_reads_its_own_pins(root: Path) -> None:
    line = lines.line_named(root, "1.9.1")
    assert str(line.pins.executorch) == "1.9.1"
    assert line.pins.source == root / "1.9.1" / "pins.toml"


# --- where the lines are -------------------------------------------------------------------


def test_the_checkout_is_found_from_any_folder_inside_it(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "co")
    deep = checkout / "a" / "b"
    deep.mkdir(parents=True)
    assert lines.find_checkout(checkout) == checkout
    assert lines.find_checkout(deep) == checkout
    assert lines.find_checkout(checkout / "patches" / "1.2.0") == checkout


@pytest.mark.parametrize(
    "pyproject",
    [
        '[project]\nname = "another-project"\n',
        "[tool.x]\n",  # no [project]
        'project = "executorch-arm-overlay"\n',  # not a table
        "[project\nname = broken",  # not TOML
    ],
    ids=["other project", "no project", "project not a table", "bad toml"],
)
def test_a_folder_of_another_project_is_no_checkout(tmp_path: Path, pyproject: str) -> None:
    make_checkout(tmp_path / "co", pyproject)
    assert lines.find_checkout(tmp_path / "co") is None


def test_a_non_utf8_pyproject_is_skipped_and_the_search_goes_up(tmp_path: Path) -> None:
    outer = make_checkout(tmp_path / "outer")
    inner = make_checkout(outer / "inner")
    (inner / "pyproject.toml").write_bytes(b"[project]\nname = '\xff'\n")
    assert lines.find_checkout(inner) == outer


def test_a_checkout_needs_a_patches_folder_and_a_pyproject_file(tmp_path: Path) -> None:
    outer = make_checkout(tmp_path / "outer")
    no_patches = outer / "no-patches"
    no_patches.mkdir()
    (no_patches / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    assert lines.find_checkout(no_patches) == outer
    no_pyproject = outer / "no-pyproject"
    (no_pyproject / "patches").mkdir(parents=True)
    (no_pyproject / "pyproject.toml").mkdir()  # a folder, not the file
    assert lines.find_checkout(no_pyproject) == outer
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert lines.find_checkout(lonely) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="changes users (runs as root in CI)")
def test_a_folder_this_user_cannot_look_into_is_no_checkout(tmp_path: Path) -> None:
    """As a process that changed its user sees another user's private folder (a 0700 clone)."""
    private = make_checkout(tmp_path / "private")
    private.chmod(0o700)

    def as_nobody() -> int:
        os.setgid(65534)
        os.setuid(65534)
        return 0 if lines.find_checkout(private / "patches" / "1.2.0") is None else 1

    child = run_forked(as_nobody)
    assert child.code == 0, child.output


def test_a_command_that_changes_lines_works_on_a_checkout_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(lines.PATCHES_ENV, raising=False)
    checkout = make_checkout(tmp_path / "co")
    (checkout / "sub").mkdir()
    monkeypatch.chdir(checkout / "sub")
    assert lines.root_to_change(None, "refresh") == checkout / "patches"
    given = tmp_path / "elsewhere"
    assert lines.root_to_change(given, "refresh") == given  # named: used as given
    monkeypatch.setenv(lines.PATCHES_ENV, str(given))
    assert lines.root_to_change(None, "refresh") == given
    monkeypatch.delenv(lines.PATCHES_ENV)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as none:
        lines.root_to_change(None, "retire-line")
    assert none.value.message == (
        "retire-line works on the release lines of a checkout, and there is none here"
    )
    assert none.value.expected == (
        "a checkout of executorch-arm-overlay (pyproject.toml and patches/) at or above"
        " the current folder, or --patches DIR"
    )
    assert none.value.found == f"no checkout at or above {tmp_path}"
    assert none.value.hint == (
        "cd into your clone of executorch-arm-overlay, or pass --patches CLONE/patches, and run"
        " it again (the lines inside the installed tool are read-only)"
    )
    shipped = Path(lines.__file__).resolve().parent.parent / "patches"  # the package's own
    monkeypatch.chdir(checkout / "sub")  # named, even in a checkout: refused, not replaced
    with pytest.raises(UsageError) as named:
        lines.root_to_change(shipped, "lock")
    assert named.value.found == f"{shipped} is inside the installed package"
    assert named.value.exit_code == 2


def test_the_packaged_lines_are_used_only_when_the_package_has_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = importlib.resources.files("overlay") / "patches"
    has_lines = isinstance(shipped, Path) and bool(lines.all_lines(shipped))
    assert lines.packaged_root() == (shipped if has_lines else None)  # wheel: yes; editable: no

    package = tmp_path / "overlay"
    monkeypatch.setattr(importlib.resources, "files", lambda name: package)
    make_line(package / "patches", "1.2.0", series=False)
    assert lines.packaged_root() is None  # a folder, but no line in it
    make_line(package / "patches", "1.5.1")
    assert lines.packaged_root() == package / "patches"


def test_the_default_root_prefers_the_environment(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(make_checkout(tmp_path / "co"))
    monkeypatch.setenv(lines.PATCHES_ENV, str(tmp_path / "mine"))
    assert lines.default_root() == tmp_path / "mine"  # taken as it is, even if absent
    assert lines.default_source().source == f"$OVERLAY_PATCHES ({tmp_path / 'mine'})"
    monkeypatch.setenv(lines.PATCHES_ENV, "")
    assert lines.default_root() == tmp_path / "co" / "patches"  # empty means unset
    assert lines.default_source().source == f"the checkout {tmp_path / 'co'}"


def test_the_tools_own_lines_come_before_the_checkout_of_the_current_folder(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed tool run inside another clone reads its own lines (issue 36, item 3)."""
    checkout = make_checkout(tmp_path / "co")
    (checkout / "sub").mkdir()
    monkeypatch.chdir(checkout / "sub")
    assert lines.default_root() == checkout / "patches"  # no lines of the tool's own
    packaged = make_line(tmp_path / "pkg" / "patches", "1.2.0").parent
    (packaged / "1.2.0" / "series").write_text("# another version of the overlay\n")
    monkeypatch.setattr(lines, "packaged_root", lambda: packaged)
    found = lines.default_source()
    assert found.path == packaged
    assert found.source.startswith("this tool's own lines (version ")
    assert lines.other_checkout(packaged) == checkout  # its lines differ: named
    shutil.rmtree(checkout / "patches")
    shutil.copytree(packaged, checkout / "patches")
    assert lines.other_checkout(packaged) is None  # the same bytes: nothing to say


def test_outside_a_checkout_the_packaged_lines_then_the_editable_checkout(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = make_line(tmp_path / "pkg" / "patches", "1.2.0").parent
    monkeypatch.setattr(lines, "packaged_root", lambda: packaged)
    assert lines.default_root() == packaged
    monkeypatch.setattr(lines, "packaged_root", lambda: None)
    editable = make_checkout(tmp_path / "editable")
    module = editable / "overlay" / "lines" / "__init__.py"
    monkeypatch.setattr(lines, "__file__", str(module))
    assert lines.default_root() == editable / "patches"
    assert lines.default_source().source == f"the checkout {editable} this tool runs from"


def test_no_lines_anywhere_is_a_series_error(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines, "packaged_root", lambda: None)
    monkeypatch.setattr(lines, "__file__", str(tmp_path / "site" / "overlay" / "lines" / "x.py"))
    with pytest.raises(SeriesError) as info:
        lines.default_root()
    exc = info.value
    assert exc.message == "no patch series found"
    assert exc.expected == (
        "$OVERLAY_PATCHES, a checkout of executorch-arm-overlay, or the lines in the package"
    )
    assert exc.found == "none of them"
    assert exc.hint == "pass --patches DIR (a line folder holding 'series' and 'pins.toml')"


def test_the_series_directory_of_a_root_a_line_or_anything_else(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lines.series_directory(root) == root / "1.10.0"  # a lines root: its newest line
    assert lines.series_directory(root / "1.2.0") == root / "1.2.0"  # a line: itself
    (root / "series").write_text("", encoding="utf-8")
    assert lines.series_directory(root) == root  # a series folder is never searched
    empty = tmp_path / "empty"
    assert lines.series_directory(empty) == empty  # neither: itself, to report its own errors
    monkeypatch.setenv(lines.PATCHES_ENV, str(root / "1.9.1"))
    assert lines.series_directory() == root / "1.9.1"


def test_the_checkout_lines_are_the_committed_ones() -> None:
    names = [line.name for line in lines.all_lines(ROOT / "patches")]
    assert names and names == sorted(names, key=Version)
    assert lines.default_line(ROOT / "patches").name == names[-1]


def test_the_checkout_is_found_whatever_the_locale(tmp_path: Path) -> None:
    """pyproject.toml is read as UTF-8, not in the locale's encoding (here: ASCII)."""
    checkout = make_checkout(tmp_path / "co", PYPROJECT + "# café\n")
    assert lines.find_checkout(checkout) == checkout
    package = Path(lines.__file__).resolve().parents[2]  # the overlay these tests import
    code = (
        "import pathlib, sys; from overlay import lines;"
        " print(lines.find_checkout(pathlib.Path(sys.argv[1])))"
    )
    env = {
        **os.environ,
        "LC_ALL": "C",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONUTF8": "0",
        "PYTHONPATH": str(package),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, str(checkout)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == str(checkout)


def test_a_retarget_starts_from_the_newest_line_before_its_release(root: Path) -> None:
    names = [line.name for line in lines.all_lines(root)]
    assert lines.line_before(root, "99.0.0").name == names[-1]
    assert lines.line_before(root, names[-1]).name == names[-2]
    with pytest.raises(UnsupportedReleaseError) as older:
        lines.line_before(root, names[0])
    assert (older.value.message, older.value.expected, older.value.found, older.value.hint) == (
        f"no release line older than executorch {names[0]}",
        f"a line before {names[0]} among: {', '.join(names)}",
        names[0],
        "retarget to a release newer than the oldest line",
    )
    with pytest.raises(UnsupportedReleaseError) as bad:
        lines.line_before(root, "not-a-version")
    assert (bad.value.message, bad.value.expected, bad.value.found, bad.value.hint) == (
        "'not-a-version' is not an executorch release",
        "a version such as 1.5.1",
        "not-a-version",
        "name a release published on PyPI",
    )
    assert isinstance(bad.value.__cause__, InvalidVersion)


def test_the_checkout_retargets_151_from_120() -> None:
    root = Path(__file__).resolve().parent.parent / "patches"
    assert lines.line_before(root, "1.5.1").name == "1.2.0"
    assert lines.line_before(root, "1.6.0").name == "1.5.1"


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("upstream_repo = 3", ("pins.toml.upstream_repo: a str", "3")),
        ('upstream_repo = ""', ("non-empty strings", "empty: upstream_repo")),
        ("", ("pins.toml.upstream_repo: a value for Pins.upstream_repo", None)),
    ],
)
def test_a_pin_that_is_not_a_string_is_said_plainly(
    tmp_path: Path, line: str, found: tuple[str, str | None]
) -> None:
    folder = tmp_path / "1.2.0"
    make_line(tmp_path, "1.2.0")
    pins = (folder / "pins.toml").read_text(encoding="utf-8")
    (folder / "pins.toml").write_text(
        pins.replace('upstream_repo = "pytorch/executorch"', line), encoding="utf-8"
    )
    with pytest.raises(SeriesError) as info:
        load(folder)
    assert info.value.message == f"{folder / 'pins.toml'} is not a valid pins file"
    expected, shown = found
    assert info.value.expected == expected
    assert shown is None or info.value.found == shown
    assert info.value.hint == "restore it from git, or fix the entry by hand"


def test_no_patch_file_is_stored_twice() -> None:
    """One copy of each patch: a port is the newer line's patch itself, never a second file."""
    by_digest: dict[str, list[str]] = {}
    for top in ("patches", "tests", "overlay", "docs"):  # the committed folders (not build/)
        for path in (ROOT / top).rglob("*.patch"):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            by_digest.setdefault(digest, []).append(str(path.relative_to(ROOT)))
    copies = [names for names in by_digest.values() if len(names) > 1]
    assert len(by_digest) > 1 and not copies, f"the same bytes stored more than once: {copies}"
