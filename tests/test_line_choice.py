"""Picking the release line of an in-place command: a tmp lines root holding two lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from overlay.errors import SeriesError, UnsupportedReleaseError, UsageError
from overlay.target.line_choice import choose

from scaffold import make_diff, patch_text, write_series

A = "backends/arm/a.py"
OLD = "".join(f"a{i} = {i}\n" for i in range(10))


def two_lines(root: Path) -> Path:
    for version in ("1.2.0", "1.5.1"):
        new = OLD.replace("a3 = 3\n", f"a3 = '{version}'\n")
        patches = {"0001-a.patch": patch_text(f"Fix a on {version}", make_diff(A, OLD, new))}
        write_series(root / version, patches, {A: OLD.encode()}, version=version)
    (root / "notes").mkdir()  # not a line: no series
    return root


@pytest.mark.parametrize(
    ("version", "line"),
    [("1.2.0", "1.2.0"), ("1.5.1", "1.5.1"), ("1.2.0+armfix.abcdef0123.fix.1", "1.2.0")],
)
def test_the_installed_version_picks_its_line(tmp_path: Path, version: str, line: str) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root, None, Version(version))
    assert (chosen.name, chosen.directory) == (line, root / line)
    assert chosen.reason == f"the installed executorch {version}"


def test_line_overrides_the_installed_version(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root, "1.2.0", Version("1.5.1"))
    assert (chosen.name, chosen.reason) == ("1.2.0", "--line 1.2.0")
    with pytest.raises(UsageError) as info:
        choose(root, "1.3.0", Version("1.5.1"))
    assert info.value.expected == "one of the supported lines: 1.2.0, 1.5.1"


def test_an_unsupported_release_lists_the_lines(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    with pytest.raises(UnsupportedReleaseError) as info:
        choose(root, None, Version("1.4.1"))
    assert info.value.message == "executorch 1.4.1 has no release line here"
    assert info.value.expected == "executorch at one of the supported lines: 1.2.0, 1.5.1"


def test_without_a_target_the_newest_line(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root, None, None)
    assert (chosen.name, chosen.reason) == ("1.5.1", "the newest line (no executorch to choose by)")


def test_a_series_folder_is_used_as_given(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root / "1.2.0", None, Version("1.5.1"))  # plan() refuses the version later
    assert (chosen.name, chosen.directory) == ("1.2.0", root / "1.2.0")
    assert chosen.reason == f"--patches {root / '1.2.0'}"
    assert choose(root / "1.2.0", "1.2.0", None).name == "1.2.0"
    with pytest.raises(UsageError) as info:
        choose(root / "1.2.0", "1.5.1", None)
    assert info.value.expected == "the line of that series folder: 1.2.0"


def test_the_environment_names_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = two_lines(tmp_path / "lines")
    monkeypatch.setenv("OVERLAY_PATCHES", str(root))
    assert choose(None, None, Version("1.2.0")).directory == root / "1.2.0"
    monkeypatch.setenv("OVERLAY_PATCHES", str(root / "1.5.1"))
    chosen = choose(None, None, Version("1.2.0"))
    assert (chosen.directory, chosen.reason) == (root / "1.5.1", "$OVERLAY_PATCHES")


def test_a_folder_that_is_neither_is_left_to_the_series_loader(tmp_path: Path) -> None:
    chosen = choose(tmp_path, None, Version("1.2.0"))
    assert chosen.directory == tmp_path  # load_series says "no series file in ..."
    with pytest.raises(SeriesError):
        from overlay.text.series import load_series

        load_series(chosen.directory)
