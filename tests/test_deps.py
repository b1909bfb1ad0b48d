"""The dependency check of an in-place apply: the line's requirements in the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import TargetError
from overlay.lines import pins
from overlay.target import deps
from overlay.target.locate import find_target
from overlay.text.series import Series, load_series

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


def test_required_is_the_plain_pins_and_the_arm_extra(series: Series) -> None:
    wanted = [str(r) for r in deps.required(series)]
    runtime = pins.load(PATCHES).runtime
    extras = pins.load(PATCHES).extras
    optional = {n for e, names in extras.items() if e not in deps.REQUIRED_EXTRAS for n in names}
    assert {r.split("=")[0] for r in wanted} == set(runtime) - optional
    assert 'tosa-tools==2026.2.*; extra == "arm"' in wanted
    assert not any("vgf" in r or "ethos" in r for r in wanted)


def everything(series: Series) -> dict[str, str]:
    return {
        r.name: next(iter(r.specifier)).version.replace("*", "0") for r in deps.required(series)
    }


def test_an_environment_holding_every_requirement_passes(tmp_path: Path, series: Series) -> None:
    site = site_with(tmp_path, everything(series))
    checked = deps.check(series, find_target(site))
    assert checked.skipped is None
    assert len(checked.checked) == len(deps.required(series))


def test_a_missing_or_other_version_is_refused_naming_each(tmp_path: Path, series: Series) -> None:
    installed = everything(series)
    del installed["tosa-tools"]
    installed["torch"] = "2.12.0"
    site = site_with(tmp_path, installed)
    before = snapshot(site)
    with pytest.raises(TargetError) as info:
        deps.check(series, find_target(site))
    assert info.value.message.startswith(f"the environment at {site} lacks what the patched")
    assert info.value.expected == "torch==2.11.*, tosa-tools==2026.2.* (executorch[arm])"
    assert info.value.found == "torch 2.12.0, tosa-tools missing"
    python = tmp_path / "venv" / "bin" / "python"
    assert info.value.hint is not None and "--no-deps-check" in info.value.hint
    assert f"--python {python}" not in info.value.hint  # no interpreter there in this tree
    assert snapshot(site) == before


def test_an_unpacked_wheel_is_not_checked(tmp_path: Path, series: Series) -> None:
    root = make_tree(tmp_path / "unpacked", {A: b"a\n"})
    checked = deps.check(series, find_target(root))
    assert checked == deps.DepsCheck((), f"{root} is not an environment's site-packages")
