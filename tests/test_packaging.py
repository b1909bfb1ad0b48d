"""The overlay as users install it: its own wheel, in a fresh venv, run outside the checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent


def uv(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "uv", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    scratch = tmp_path_factory.mktemp("packaging")
    uv("build", "--wheel", "--out-dir", str(scratch / "dist"), str(ROOT))
    (wheel,) = (scratch / "dist").glob("executorch_arm_overlay-*.whl")
    venv = scratch / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel))
    outside = scratch / "elsewhere"
    outside.mkdir()
    return wheel, venv


def test_the_wheel_ships_the_series_as_package_data(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {
        n.removeprefix("overlay/patches/") for n in names if n.startswith("overlay/patches/")
    }
    on_disk = {
        str(p.relative_to(ROOT / "patches")) for p in (ROOT / "patches").rglob("*") if p.is_file()
    }
    assert shipped == on_disk
    assert "overlay/py.typed" in names
    assert not any(n.startswith(("tests/", "patches/")) for n in names)


def lines_of_checkout() -> list[str]:
    """Return the names of the checkout's release lines."""
    root = Path(__file__).resolve().parent.parent / "patches"
    return [p.name for p in root.iterdir() if (p / "series").is_file()]


def test_status_and_equivalence_list_run_outside_the_checkout(
    installed: tuple[Path, Path],
) -> None:
    _, venv = installed
    outside = venv.parent / "elsewhere"
    status = subprocess.run(
        [str(venv / "bin" / "executorch-arm-overlay"), "status", "--series-only"],
        cwd=outside,
        capture_output=True,
        text=True,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    newest = max(lines_of_checkout(), key=Version)  # the packaged default is the newest line
    assert lines[0].endswith(f"against executorch {newest}")
    assert "  1. 0001-keep-terminal-int16-quantize.patch: " in status.stdout
    listing = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "overlay", "equivalence", "--list"],
        cwd=outside,
        capture_output=True,
        text=True,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    assert any(
        line.startswith(
            "case  conv_relu_cat_mixed_qparams: TOSA-1.0+INT+FP a8w8 [fast] claims fixed by patch 3"
        )
        for line in listing.stdout.splitlines()
    )
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import overlay.lines as p; print(p.series_directory())",
        ],
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv)
