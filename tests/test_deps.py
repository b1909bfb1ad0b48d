"""The dependency check of an in-place apply: the line's requirements in the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.in_place import deps
from overlay.text.series import Series, load_series
from overlay.tree.locate import find_target

from scaffold import make_tree, snapshot

A = "backends/arm/a.py"
PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


def dist(site: Path, name: str, version: str) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def site_with(tmp_path: Path, installed: dict[str, str]) -> Path:
    site = make_tree(tmp_path / "venv" / "lib" / "python3.11" / "site-packages", {A: b"a\n"})
    for name, version in installed.items():
        dist(site, name, version)
    return site


def pinned(series: Series) -> dict[str, str]:
    """Every runtime pin of the line at the version it names (``2.11.*`` -> ``2.11.0``)."""
    return {name: version for name, version in series.pins.runtime.items()}


def test_an_environment_holding_every_pin_has_nothing_to_say(
    tmp_path: Path, series: Series
) -> None:
    site = site_with(tmp_path, pinned(series))
    checked = deps.check(series, find_target(site))
    assert (checked.skipped, checked.differ, checked.install) == (None, (), None)
    assert len(checked.checked) == len(series.pins.runtime)


def test_a_missing_or_other_version_is_named_with_the_command_to_match_never_refused(
    tmp_path: Path, series: Series
) -> None:
    """Upstream's own pins (another converter, no torch) are the user's: advice only."""
    installed = pinned(series)
    extra_of = {n: e for e, names in series.pins.extras.items() for n in names}
    tool = next(iter(extra_of))  # a tool of an extra: at another version it is named ...
    other = next(n for n in extra_of if n != tool)  # ... and missing it is no difference
    installed[tool] = "0.0.1"
    del installed[other]
    del installed["torch"]
    site = site_with(tmp_path, installed)
    before = snapshot(site)
    checked = deps.check(series, find_target(site))
    torch_pin = f"torch=={'.'.join(series.pins.runtime['torch'].split('.')[:2])}.*"
    tool_pin = next(r.split(";")[0] for r in series.pins.wheel_requirements() if r.startswith(tool))
    assert sorted(checked.differ) == sorted(
        [f"{tool} 0.0.1 (line: {tool_pin})", f"torch missing (line: {torch_pin})"]
    )  # not the tool that is missing: the user did not ask for that target
    assert checked.install is not None
    assert f"'{torch_pin}'" in checked.install and f"'{tool_pin}'" in checked.install
    assert "--python" not in checked.install  # no interpreter there in this tree
    assert snapshot(site) == before


def test_an_unpacked_wheel_is_not_checked(tmp_path: Path, series: Series) -> None:
    root = make_tree(tmp_path / "unpacked", {A: b"a\n"})
    checked = deps.check(series, find_target(root))
    assert checked == deps.DepsCheck((), f"{root} is not an environment's site-packages")
