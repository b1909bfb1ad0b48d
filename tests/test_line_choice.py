"""Picking the release line of an in-place command: a tmp lines root holding two lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from overlay.errors import SeriesError, TargetError, UnsupportedReleaseError, UsageError
from overlay.in_place.line_choice import choose, every_line

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


def test_a_line_of_another_release_than_installed_is_refused_first(tmp_path: Path) -> None:
    """``--line 1.2.0`` on a 1.5.1 tree: one error whose next step is to drop --line, from
    `status`, `check` and `apply` alike (issue 36, item 6)."""
    root = two_lines(tmp_path / "lines")
    chosen = choose(root, "1.2.0", Version("1.2.0+armfix.abcdef0123"))
    assert (chosen.name, chosen.reason) == ("1.2.0", "--line 1.2.0")
    assert chosen.source == f"--patches {root}"
    with pytest.raises(TargetError) as info:
        choose(root, "1.2.0", Version("1.5.1"))
    assert info.value.message == (
        "line 1.2.0 is for executorch 1.2.0; the target holds executorch 1.5.1"
    )
    assert info.value.hint == "drop --line: the installed executorch has its own line, 1.5.1"
    with pytest.raises(TargetError) as unsupported:
        choose(root, "1.2.0", Version("1.4.1"))
    assert unsupported.value.hint == "install executorch==1.2.0 to use line 1.2.0, or drop --line"
    with pytest.raises(UsageError) as info2:
        choose(root, "1.3.0", Version("1.5.1"))
    assert info2.value.expected == "one of the supported lines: 1.2.0, 1.5.1"


def test_an_unsupported_release_lists_the_lines(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    with pytest.raises(UnsupportedReleaseError) as info:
        choose(root, None, Version("1.4.1"))
    assert info.value.message == "executorch 1.4.1 has no release line here"
    assert info.value.expected == "executorch at one of the supported lines: 1.2.0, 1.5.1"


def test_without_a_target_the_newest_line(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root, None, None)
    assert (chosen.name, chosen.reason) == ("1.5.1", "the newest line: no executorch to choose by")


def test_a_series_folder_is_used_as_given(tmp_path: Path) -> None:
    root = two_lines(tmp_path / "lines")
    chosen = choose(root / "1.2.0", None, Version("1.2.0"))
    assert (chosen.name, chosen.directory) == ("1.2.0", root / "1.2.0")
    with pytest.raises(TargetError) as info:
        choose(root / "1.2.0", None, Version("1.5.1"))  # refused before any file is read
    assert info.value.hint == "install executorch==1.2.0 to use line 1.2.0, or drop --patches"
    assert chosen.reason == f"--patches {root / '1.2.0'}"
    assert choose(root / "1.2.0", "1.2.0", None).name == "1.2.0"
    with pytest.raises(UsageError) as usage:
        choose(root / "1.2.0", "1.5.1", None)
    assert usage.value.expected == "the line of that series folder: 1.2.0"


def test_the_environment_names_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = two_lines(tmp_path / "lines")
    monkeypatch.setenv("OVERLAY_PATCHES", str(root))
    assert choose(None, None, Version("1.2.0")).directory == root / "1.2.0"
    monkeypatch.setenv("OVERLAY_PATCHES", str(root / "1.5.1"))
    chosen = choose(None, None, Version("1.5.1"))
    source = f"$OVERLAY_PATCHES ({root / '1.5.1'})"
    assert (chosen.directory, chosen.reason, chosen.source) == (root / "1.5.1", source, source)
    with pytest.raises(TargetError) as info:
        choose(None, None, Version("1.2.0"))
    assert (
        info.value.hint == "install executorch==1.5.1 to use line 1.5.1, or unset $OVERLAY_PATCHES"
    )


def test_a_folder_that_is_neither_is_refused_naming_who_named_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty or missing lines root is one error naming --patches or $OVERLAY_PATCHES,
    from `lines` and `status` alike (issue 36, item 11)."""
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        folder.parent.mkdir(exist_ok=True)
        if folder.name == "empty":
            folder.mkdir()
        with pytest.raises(SeriesError) as given:
            choose(folder, None, Version("1.2.0"))
        assert given.value.message == f"no release line in {folder}"
        assert given.value.found is not None
        assert given.value.found.endswith(f"named by --patches {folder}")
        assert given.value.hint == "pass --patches a lines root or one series folder, or drop it"
        monkeypatch.setenv("OVERLAY_PATCHES", str(folder))
        for refuse in (lambda: choose(None, None, None), lambda: every_line(None)):
            with pytest.raises(SeriesError) as named:
                refuse()
            assert named.value.found is not None
            assert named.value.found.endswith(f"named by $OVERLAY_PATCHES ({folder})")
            assert named.value.hint is not None
            assert named.value.hint.startswith("point $OVERLAY_PATCHES at a lines root")
        monkeypatch.delenv("OVERLAY_PATCHES")
    (tmp_path / "empty" / "series").write_text("")  # a series file: its loader says the rest
    assert choose(tmp_path / "empty", None, None).directory == tmp_path / "empty"
