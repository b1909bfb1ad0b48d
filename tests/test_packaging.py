"""The overlay as users install it: its own wheel, in a fresh venv, run outside the checkout."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from overlay.lines.listing import read_series_names

from scaffold import make_diff, make_tree, patch_text, snapshot, write_series

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


def readme_install_line() -> list[str]:
    """The README's install command ("Just patch my venv"), as words, its comment dropped."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Just patch my venv", 1)[1].split("```sh\n", 1)[1].split("```")[0]
    line = next(line for line in block.splitlines() if line.startswith("uv tool install"))
    command, _, comment = line.partition("#")
    assert f"pipx install {shlex.split(command)[-1]}" in comment  # the same spec for pipx
    return shlex.split(command)


def fresh_clone(folder: Path) -> Path:
    """Copy what a clone of this checkout holds (tracked files and new ones git would add)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI installed as the README says, run inside a fresh clone: its console script
    (issue 36, item 2: the line works as written from inside the clone, with uv)."""
    scratch = tmp_path_factory.mktemp("tool")
    clone = fresh_clone(scratch / "clone")
    env = {**os.environ, "UV_TOOL_DIR": str(scratch / "tools"), "UV_TOOL_BIN_DIR": str(scratch)}
    words = readme_install_line()
    assert words[:3] == ["uv", "tool", "install"]
    done = subprocess.run(
        [sys.executable, "-m", "uv", *words[1:], "--quiet"],
        cwd=clone, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (scratch / "elsewhere").mkdir()
    return scratch / "executorch-arm-overlay"


def test_the_readme_install_line_works_inside_a_fresh_clone(tool: Path) -> None:
    assert tool.is_file()
    (own,) = (tool.parent / "tools").glob("*/lib/python*/site-packages/overlay/patches")
    assert sorted(p.name for p in own.iterdir() if p.is_dir()) == sorted(lines_of_checkout())


def run_tool(
    tool: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed tool (default: from a folder outside any checkout, no venv active)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "OVERLAY_PATCHES")}
    return subprocess.run(
        [str(tool), *args], cwd=cwd or tool.parent / "elsewhere", capture_output=True,
        text=True, check=False, env={**clean, **(env or {})},
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
        ["edit", "--dir", "work"],
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
        assert done.stderr.startswith(
            f"error: {command} works on the release lines of a checkout"
        ), done.stderr
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


A = "backends/arm/a.py"
A_OLD = "".join(f"a{i} = {i}\n" for i in range(20))
A_NEW = A_OLD.replace("a4 = 4\n", "a4 = 'four'\n")


def venv_with_executorch(venv: Path, patches: Path) -> Path:
    """A venv whose site-packages holds a synthetic executorch 1.2.0, and its series."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    make_tree(site, {A: A_OLD.encode()})
    diff = make_diff(A, A_OLD, A_NEW)
    write_series(patches, {"0001-a.patch": patch_text("Change a", diff)}, {A: A_OLD.encode()})
    return site


def test_the_installed_tool_acts_on_the_active_venv_never_its_own(
    tool: Path, tmp_path: Path
) -> None:
    """With a venv activated, and separately a .venv in the working folder, status, apply
    and revert act on it; the tool's own venv is never a target (issue 36, item 1)."""
    site = venv_with_executorch(tmp_path / "mine", tmp_path / "patches")
    patched = site / "executorch" / A
    series = {"OVERLAY_PATCHES": str(tmp_path / "patches")}
    active = {**series, "VIRTUAL_ENV": str(tmp_path / "mine")}
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    for where, env in ((tool.parent / "elsewhere", active), (project / "src", series)):
        if env is series:
            shutil.move(tmp_path / "mine", project / ".venv")
            site = project / ".venv" / site.relative_to(tmp_path / "mine")
            patched = site / "executorch" / A
        status = run_tool(tool, "status", cwd=where, env=env)
        assert status.returncode == 0, status.stderr
        assert f"\ntarget {site} (executorch 1.2.0)\n" in status.stdout
        applied = run_tool(tool, "apply", cwd=where, env=env)
        assert applied.returncode == 0, applied.stderr
        assert patched.read_text() == A_NEW
        reverted = run_tool(tool, "revert", cwd=where, env=env)
        assert reverted.returncode == 0, reverted.stderr
        assert patched.read_text() == A_OLD
    (own,) = (tool.parent / "tools").glob("*/bin/python")
    refused = run_tool(tool, "apply", env={**series, "VIRTUAL_ENV": str(own.parent.parent)})
    assert refused.returncode == 4
    assert refused.stderr.startswith("error: no environment to patch: no venv is active here\n")
    assert "install" not in refused.stderr  # never into the tool's own venv


def test_the_installed_tool_names_another_clone_and_keeps_its_own_lines(
    tool: Path, tmp_path: Path
) -> None:
    """Run inside a clone of another overlay version: the tool's own series, the clone named
    (issue 36, item 3); that clone's lines may not even be readable by this version."""
    other = tmp_path / "other-clone"
    shutil.copytree(ROOT / "patches", other / "patches")
    shutil.copy2(ROOT / "pyproject.toml", other / "pyproject.toml")
    for evidence in (other / "patches").glob("*/evidence.toml"):
        evidence.write_text("[format of another version]\nfix = 'the entry by hand'\n")
    listed = run_tool(tool, "lines", cwd=other)
    assert listed.returncode == 0, listed.stderr
    assert "[overlay] release lines: this tool's own lines (version " in listed.stderr
    assert f"[overlay] note: the checkout {other} holds other release lines than these" in (
        listed.stderr
    )
    status = run_tool(tool, "status", "--series-only", cwd=other)
    assert status.returncode == 0, status.stderr
    assert ", from this tool's own lines (version " in status.stdout


@pytest.mark.parametrize("extra", ["vgf", "ethos-u"])
def test_upstreams_own_pins_pass_check_and_apply_with_a_warning(
    tool: Path, tmp_path: Path, extra: str
) -> None:
    """A venv made with upstream's own ``executorch[vgf]==1.5.1`` (model converter 0.10.0)
    or ``executorch[ethos-u]==1.5.1`` (no converter): check and apply pass, warning about the
    line's pins; revert restores every file (issue 36, item 5)."""
    newest = max(lines_of_checkout(), key=Version)
    venv = tmp_path / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    spec = f"executorch[{extra}]=={newest}"
    uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), spec)
    before = snapshot(venv)
    env = {"VIRTUAL_ENV": str(venv)}
    checked = run_tool(tool, "check", env=env)
    assert checked.returncode == 21, checked.stderr  # every check passed, files would change
    assert f"[overlay] warning: the environment differs from the pins line {newest}" in (
        checked.stderr
    )
    applied = run_tool(tool, "apply", env=env)
    assert applied.returncode == 0, applied.stderr
    (info,) = venv.glob("lib/python*/site-packages/executorch-*.dist-info")
    metadata = (info / "METADATA").read_text()
    assert f"Provides-Extra: {extra}" in metadata  # upstream's extras, as installed
    reverted = run_tool(tool, "revert", env=env)
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(venv) == before
