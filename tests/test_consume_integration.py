"""Integration: the patched executorch outside its ready venv (real pinned wheel, uv cache).

Each issue-8 failure, shown gone: the wheel installed alone never resolves to an untested
torch; a drifted venv is named, with a next step that works in a checkout and outside one,
and re-synced; ``--find-links``/the index serve only the current series; ``pip freeze``
holds no local path; and each recipe of docs/environments.md (pip with hashes, a uv project
with the index, the Dockerfile's commands) installs exactly the lock.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from overlay import lines
from overlay.cli import invocation
from overlay.distribution import index, wheels
from overlay.envs import lockfiles, venvs
from overlay.lines.pins import WheelPin
from overlay.text.series import Series, load_series

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "environments.md").read_text(encoding="utf-8")
LINE = lines.default_line(ROOT / "patches")  # the docs' recipes are on the default line
V = LINE.name
RUNTIME = LINE.pins.runtime


def run(
    *command: str | Path, cwd: Path | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    # uv must act only on the paths a command names: no session venv, no project override.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX")
    }
    proc = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def uv(
    *args: str | Path, cwd: Path | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    return run(venvs.find_uv(), *args, cwd=cwd, ok=ok)


def overlay(
    *args: str | Path, ok: bool = True, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run the overlay (from a checkout by default, as a user of its build would)."""
    return run(
        sys.executable, "-m", "overlay", "--patches", LINE.directory, *args,
        ok=ok, cwd=cwd,
    )  # fmt: skip


def freeze(venv: Path) -> dict[str, str]:
    lines = uv("pip", "freeze", "--python", venv / "bin" / "python").stdout.splitlines()
    return dict(line.split("==", 1) for line in lines)


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(LINE.directory)


@pytest.fixture(scope="module")
def pin(series: Series) -> WheelPin:
    return series.pins.host_wheel()


@pytest.fixture(scope="module")
def locked(series: Series, pin: WheelPin) -> lockfiles.Lock:
    return lockfiles.check_current(series, pin)


@pytest.fixture(scope="module")
def dist(
    series: Series, pin: WheelPin, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, wheels.BuildResult]:
    folder = tmp_path_factory.mktemp("dist")
    built = wheels.build_patched_wheel(
        series, wheels.fetch_wheel(pin), pin, folder, cache=wheels.patched_cache()
    )
    index.publish(folder, built.version)
    return folder, built


def test_the_wheel_is_deterministic_and_the_one_the_lock_pins(
    series: Series,
    pin: WheelPin,
    locked: lockfiles.Lock,
    dist: tuple[Path, wheels.BuildResult],
    tmp_path: Path,
) -> None:
    _, built = dist
    assert locked.get("executorch").hashes == (built.sha256,)
    again = wheels.build_patched_wheel(series, wheels.fetch_wheel(pin), pin, tmp_path, force=True)
    assert again.built and again.sha256 == built.sha256
    assert again.provenance.requires == series.pins.wheel_requirements()


def test_the_wheel_installed_alone_never_resolves_to_an_untested_torch(
    dist: tuple[Path, wheels.BuildResult], tmp_path: Path
) -> None:
    _, built = dist
    uv("venv", "--quiet", "--python", sys.executable, tmp_path / "v")
    python = tmp_path / "v" / "bin" / "python"
    alone = uv("pip", "install", "--dry-run", "--python", python, built.path).stderr
    assert f" + torch=={RUNTIME['torch']}" in alone and f" + torchao=={RUNTIME['torchao']}" in alone
    assert "tosa-tools" not in alone
    arm = uv(
        "pip",
        "install",
        "--dry-run",
        "--python",
        python,
        f"executorch[arm] @ {built.path.as_uri()}",
    )
    for name in LINE.pins.extras["arm"]:
        assert f" + {name}=={RUNTIME[name]}" in arm.stderr
    newer = uv(
        "pip", "install", "--dry-run", "--python", python, built.path, "torch==2.15.0", ok=False
    )
    assert newer.returncode != 0 and "unsatisfiable" in newer.stderr


def test_find_links_and_the_index_serve_the_current_series_only(
    dist: tuple[Path, wheels.BuildResult], tmp_path: Path
) -> None:
    folder, built = dist
    shutil.copytree(folder, tmp_path / "dist")
    work = tmp_path / "dist"
    older = built.path.name.replace(built.version, f"{V}+armfix.ffffffffff")  # sorts highest
    shutil.copyfile(built.path, work / older)
    assert index.publish(work, built.version).moved == (older,)
    uv("venv", "--quiet", "--python", sys.executable, tmp_path / "v")
    python = tmp_path / "v" / "bin" / "python"
    for source in (["--find-links", str(work)], ["--default-index", (work / "simple").as_uri()]):
        picked = uv(
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--python",
            python,
            *source,
            f"executorch=={V}",
        )
        assert f" + executorch=={built.version}" in picked.stderr, source


def drift(venv: Path, pin: WheelPin) -> Path:
    """Move tabulate back, add six, rewrite a patched file; return that file."""
    uv("pip", "install", "--python", venv / "bin" / "python", "tabulate==0.9.0", "six")
    patched = (
        venv
        / "lib"
        / f"python{pin.python}"
        / "site-packages"
        / "executorch/backends/arm/_passes/rewrite_conv_pass.py"
    )
    drifted = patched.read_text() + "# drift\n"
    patched.unlink()  # a new file: writing in place would write through uv's hardlinked cache
    patched.write_text(drifted)
    return patched


def test_docker_recipe_then_drift_is_named_and_repaired_where_the_user_is(
    pin: WheelPin, locked: lockfiles.Lock, dist: tuple[Path, wheels.BuildResult], tmp_path: Path
) -> None:
    folder, _ = dist
    venv = tmp_path / "venv"
    # the Dockerfile's RUN line, with /wheels -> dist and /opt/venv -> venv
    docker = (
        "uv venv --python {python} /opt/venv \\\n && uv pip sync --python /opt/venv/bin/python"
        " --require-hashes --find-links /wheels /tmp/executorch.lock"
    )
    assert docker.format(python=pin.python) in DOCS
    uv("venv", "--python", sys.executable, venv)
    uv(
        "pip",
        "sync",
        "--python",
        venv / "bin" / "python",
        "--require-hashes",
        "--find-links",
        folder,
        locked.path,
    )
    wanted = {p.name: p.version for p in locked.packages}
    installed = freeze(venv)
    assert {
        k.lower().replace("_", "-").replace(".", "-"): v for k, v in installed.items()
    } == wanted
    text = "\n".join(f"{k}=={v}" for k, v in installed.items())
    assert "file:" not in text and "executorch-arm-overlay" not in text
    assert not list(
        (venv / "lib").glob("python*/site-packages/executorch-*.dist-info/direct_url.json")
    )
    report = json.loads(overlay("verify-install", "--target", venv, "--json").stdout)
    assert report["locked"] == len(locked.packages) and report["unlocked"] == []
    assert "executorch.backends.arm.tosa.partitioner" in report["modules"]

    patched = drift(venv, pin)
    in_checkout = overlay("verify-install", "--target", venv, "--no-import", ok=False)
    assert in_checkout.returncode == 8
    assert "    tabulate: 0.9.0 (locked 0.10.0)" in in_checkout.stderr
    tool = invocation.prefix(argv=[sys.executable, "-m", "overlay"], cwd=ROOT)
    assert f"next step: {tool} sync --target {venv} --line {V}" in in_checkout.stderr
    outside = overlay("verify-install", "--target", venv, "--no-import", "--json", ok=False,
                      cwd=tmp_path)  # fmt: skip
    hint = json.loads(outside.stdout)["hint"]
    assert hint.startswith(f"uv pip sync --python {venv}/bin/python --require-hashes ")
    assert hint.endswith(f" {locked.path}")
    run(*shlex.split(hint), cwd=tmp_path)  # the next step, as given, where it was given
    overlay("verify-install", "--target", venv, "--no-import", cwd=tmp_path)
    assert not patched.read_text().endswith("# drift\n")

    patched = drift(venv, pin)  # no stamp (uv made it), a patched file rewritten: made anew
    resync = overlay("sync", "--target", venv, "--dist", folder)
    assert f"{venv} to {locked.path.name}: no stamp of a finished sync: a new venv" in resync.stderr
    assert resync.stdout.startswith(f"ok: {venv} is exactly {locked.path.name}")
    assert freeze(venv) == installed  # six removed, tabulate back, executorch reinstalled
    assert not patched.read_text().endswith("# drift\n")
    warm = overlay("sync", "--target", venv, "--dist", folder)
    assert warm.stdout.startswith("up to date: ")  # the stamp: uv not run


def test_pip_recipe_resolves_exactly_the_lock_with_hashes(
    locked: lockfiles.Lock, dist: tuple[Path, wheels.BuildResult], tmp_path: Path
) -> None:
    folder, built = dist
    recipe = f"pip install --require-hashes --find-links dist/{V} -r patches/{V}/locks/{{tag}}.txt"
    assert recipe.format(tag="cp311-manylinux_2_28_x86_64") in DOCS
    assert recipe.format(tag="cp311-manylinux_2_28_x86_64") in (ROOT / "README.md").read_text()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip.conf adds local indexes
    command = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
        "--require-hashes", "--find-links", str(folder), "-r", str(locked.path),
        "--report", str(tmp_path / "report.json"),
    ]  # fmt: skip
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    resolved = {i["metadata"]["name"].lower(): i for i in report["install"]}
    assert len(resolved) == len(locked.packages)
    executorch = resolved["executorch"]
    assert executorch["metadata"]["version"] == built.version
    assert executorch["download_info"]["archive_info"]["hashes"] == {"sha256": built.sha256}
    assert resolved["torch"]["metadata"]["version"] == RUNTIME["torch"]


def test_uv_project_recipe_takes_executorch_from_the_index_only(
    dist: tuple[Path, wheels.BuildResult], tmp_path: Path
) -> None:
    folder, built = dist
    template = DOCS.split("<!-- uv-project-recipe -->")[1].split("```toml\n")[1].split("```")[0]
    project = tmp_path / "app"
    project.mkdir()
    url = (folder / "simple").as_uri()
    (project / "pyproject.toml").write_text(
        template.replace(f"file:///path/to/executorch-arm-overlay/dist/{V}/simple", url)
    )
    uv("lock", cwd=project)
    uv_lock = (project / "uv.lock").read_text()
    entry = f'name = "executorch"\nversion = "{built.version}"\nsource = {{ registry = "'
    assert entry + str(folder / "simple") + '" }' in uv_lock  # from the index, never stock
    assert built.sha256 in uv_lock
    # A version request, never this venv's interpreter: given a venv's python, uv may sync
    # that very venv (the test session's own) instead of creating the project's .venv.
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    uv("sync", "--frozen", "--python", python, cwd=project)
    assert (project / ".venv" / "bin" / "python").exists()
    installed = freeze(project / ".venv")
    assert installed["executorch"] == built.version
    assert (installed["torch"], installed["tosa-tools"]) == (
        RUNTIME["torch"],
        RUNTIME["tosa-tools"],
    )
