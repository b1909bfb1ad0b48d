"""The shared upstream pins (patches/upstream.toml): found, read strictly, a release recorded."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest
from packaging.version import Version

from overlay.errors import SeriesError
from overlay.lines import pins
from overlay.upstream.upstream_pins import UPSTREAM_FILE, for_series, load, with_release

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "patches" / UPSTREAM_FILE


def test_the_lines_share_one_file_and_a_candidate_carries_its_own(tmp_path: Path) -> None:
    shared = for_series(ROOT / "patches" / "1.2.0")
    assert shared.source == SHARED
    assert shared.matrix_versions == ("1.1.0", "1.2.0", "1.3.1", "1.4.1", "1.5.1")
    assert (shared.python, shared.platform) == ("3.11", "manylinux_2_28_x86_64")
    assert shared.torch["1.5.1"] == "2.13.0" and shared.torch["1.2.0"] == "2.11.0"
    assert [r.split("==")[0] for r in shared.test_requirements] == ["pytest", "pytest-xdist"]
    assert "lintrunner==0.12.7" in shared.lint_requirements
    candidate = tmp_path / "out" / "patches"
    candidate.mkdir(parents=True)
    with pytest.raises(SeriesError, match=r"no upstream\.toml for the series"):
        for_series(candidate)
    shutil.copy(SHARED, candidate / UPSTREAM_FILE)
    assert for_series(candidate).source == candidate / UPSTREAM_FILE


def test_a_line_holds_only_its_own_pins(tmp_path: Path) -> None:
    line = tmp_path / "1.2.0"
    line.mkdir()
    text = (ROOT / "patches" / "1.2.0" / "pins.toml").read_text()
    (line / "pins.toml").write_text(text + '\n[torch]\n"1.2.0" = "2.11.0"\n')
    with pytest.raises(SeriesError, match="not a valid pins file") as info:
        pins.load(line)
    assert info.value.expected == "pins.toml: only the fields of Pins"
    assert info.value.found == "['torch']"


def test_a_bad_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / UPSTREAM_FILE
    path.write_text('matrix_versions = "1.2.0"\npython = "3.11"\nplatform = "x"\n')
    with pytest.raises(SeriesError, match="not a valid upstream pins file"):
        load(path)
    path.write_text('matrix_versions = []\npython = "3.11"\nplatform = "x"\n[torch]\n"1" = 2\n')
    with pytest.raises(SeriesError, match="not a valid upstream pins file"):
        load(path)
    path.write_text('matrix_versions = []\npython = ""\nplatform = "x"\n')
    with pytest.raises(SeriesError, match="not a valid upstream pins file") as info:
        load(path)
    assert info.value.found == "empty: python"
    path.write_text("[torch\n")
    with pytest.raises(SeriesError, match="cannot read"):
        load(path)


def test_with_release_records_a_release_and_keeps_the_rest(tmp_path: Path) -> None:
    text = SHARED.read_text()
    after = with_release(text, "1.6.0", sha256="ab" * 32, torch="2.14.0")
    assert after.startswith(text.split("matrix_versions")[0])  # the comments before stay
    assert "# Upstream's torch pin per release" in after
    (tmp_path / UPSTREAM_FILE).write_text(after)
    loaded = load(tmp_path / UPSTREAM_FILE)
    assert loaded.matrix_versions[-1] == "1.6.0"
    assert (loaded.sha256["1.6.0"], loaded.torch["1.6.0"]) == ("ab" * 32, "2.14.0")
    assert loaded.torch["1.5.1"] == "2.13.0"
    again = with_release(after, "1.6.0", sha256="cd" * 32, torch="2.15.0")
    assert again == after  # recorded once: a re-run changes nothing
    assert with_release(text, "1.5.1") == text  # known release, nothing new to record


def test_every_recorded_release_has_the_day_it_was_published() -> None:
    """The export holds a main older than the release it sends against (gate rule 2)."""
    shared = load(SHARED)
    assert set(shared.released) == set(shared.sha256)
    assert all(date.fromisoformat(day) for day in shared.released.values())
    days = [shared.released[v] for v in sorted(shared.released, key=Version)]
    assert days == sorted(days)  # a newer release was published later
    assert shared.released["1.5.1"] == "2026-09-22"  # PyPI: first upload 2026-09-22T17:40Z
