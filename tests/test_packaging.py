"""The overlay as users install it: its own wheel, in a fresh venv, run outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from overlay.lines.listing import read_series_names

from scaffold import snapshot

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
    first_patch = read_series_names(ROOT / "patches" / str(newest))[0]
    assert f"  1. {first_patch}: " in status.stdout
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


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI installed as the README says, `uv tool install CHECKOUT`: its console script."""
    assert "uv tool install ./executorch-arm-overlay" in (ROOT / "README.md").read_text()
    scratch = tmp_path_factory.mktemp("tool")
    env = {**os.environ, "UV_TOOL_DIR": str(scratch / "tools"), "UV_TOOL_BIN_DIR": str(scratch)}
    done = subprocess.run(
        [sys.executable, "-m", "uv", "tool", "install", "--quiet", str(ROOT)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (scratch / "elsewhere").mkdir()
    return scratch / "executorch-arm-overlay"


def run_tool(tool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed tool from a folder outside any checkout."""
    return subprocess.run(
        [str(tool), *args], cwd=tool.parent / "elsewhere", capture_output=True, text=True,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["retire-line", "1.2.0"],
        ["retire-line", "1.2.0", "--yes"],
        ["retire-line", "1.2.0", "--dry-run"],
        ["retarget", "9.9.9", "--promote"],
        ["refresh"],
        ["regenerate", "--dir", "work"],
        ["lock", "--line", "1.2.0"],
    ],
    ids=" ".join,
)
def test_an_installed_tool_changes_no_line_of_its_own(tool: Path, argv: list[str]) -> None:
    (shipped,) = (tool.parent / "tools").glob("*/lib/python*/site-packages/overlay/patches")
    before = snapshot(shipped)
    command = argv[0] if argv[0] != "retarget" else "retarget --promote"
    for given in ([], ["--patches", str(shipped)]):  # found by itself, or named: refused
        done = run_tool(tool, *given, *argv)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"error: {command} changes the release lines: "), done.stderr
        assert "next step: cd into your clone of executorch-arm-overlay" in done.stderr
        assert "Traceback" not in done.stderr
    assert snapshot(shipped) == before
    assert run_tool(tool, "lines").returncode == 0  # still every line


def test_an_installed_tool_lists_its_lines_and_names_itself_as_typed(tool: Path) -> None:
    listed = run_tool(tool, "lines")
    assert listed.returncode == 0, listed.stderr
    for line in lines_of_checkout():
        assert f"\n{line}" in f"\n{listed.stdout}"
    assert "\n  fix 1 " in listed.stdout
    usage = run_tool(tool)  # by its absolute path: the usage line names the command only
    assert usage.returncode == 2 and usage.stderr.startswith("usage: executorch-arm-overlay [-h]")
    (python,) = (tool.parent / "tools").glob("*/bin/python")
    module = subprocess.run(
        ["python", "-m", "overlay", "--help"], cwd=tool.parent / "elsewhere",
        env={**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert module.returncode == 0 and module.stdout.startswith("usage: python -m overlay [-h]")
