"""In-place patching of an installed executorch: honest metadata, clean uninstall, no stale code.

A synthetic executorch wheel is installed with a real pip into a scratch venv (pip writes
INSTALLER, REQUESTED, compiles bytecode and records it in RECORD); the overlay then patches
that venv in place, is killed on the way, recovers, and pip uninstalls it.
"""

from __future__ import annotations

import compileall
import importlib.metadata
import json
import os
import py_compile
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from overlay._hashing import record_digest, sha256_bytes, sha256_file
from overlay.cli import main
from overlay.dist import wheels
from overlay.envs.verify_install import check_installed
from overlay.errors import InstallCheckError, OverlayError
from overlay.lines.pins import WheelPin
from overlay.target import journal, transaction
from overlay.text.series import Series, load_series

from scaffold import make_diff, make_tree, patch_text, run_forked, snapshot, unowned, write_series

N = 10
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def repo_path(i: int) -> str:
    return f"backends/arm/p{i % 2}/m{i}.py"


def old_text(i: int) -> str:
    return f'"""Module {i}."""\n' + "".join(f"V{j} = {i * 100 + j}\n" for j in range(12))


def new_text(i: int) -> str:
    return old_text(i).replace(f"V3 = {i * 100 + 3}\n", f"V3 = 'patched {i}'\n")


def write_world_series(folder: Path) -> Series:
    patches = {
        f"{i:04d}.patch": patch_text(f"Fix {i}", make_diff(repo_path(i), old_text(i), new_text(i)))
        for i in range(N)
    }
    return write_series(folder, patches, {repo_path(i): old_text(i).encode() for i in range(N)})


def synthetic_wheel(folder: Path) -> Path:
    """An executorch 1.2.0 wheel with the series' files and one file the series leaves alone."""
    path = folder / "executorch-1.2.0-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with WheelFile(path, "w") as archive:
        for i in range(N):
            archive.writestr(f"executorch/{repo_path(i)}", old_text(i).encode())
        archive.writestr("executorch/backends/arm/untouched.py", b"U = 1\n")
        dist = "executorch-1.2.0.dist-info"
        archive.writestr(
            f"{dist}/METADATA", b"Metadata-Version: 2.1\nName: executorch\nVersion: 1.2.0\n"
        )
        archive.writestr(
            f"{dist}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
    return path


def pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    command += ["--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True)


@dataclass(frozen=True)
class Env:
    venv: Path
    site: Path
    patches: Path
    series: Series
    empty: dict[str, bytes | str]  # site-packages after a stock install + pip uninstall

    def cli(self, *args: str) -> int:
        return main(["--patches", str(self.patches), *args, "--target", str(self.venv)])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("wheel")
    return synthetic_wheel(base / "dist"), base / "patches"


def new_venv(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "lib" / PY / "site-packages"


@pytest.fixture(scope="module")
def installed(
    built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, bytes | str]]:
    """A venv pip installed the wheel into, and what a stock pip uninstall leaves there.

    pip leaves the namespace folders it did not fully own (executorch/, executorch/backends/);
    "clean" means exactly that, whatever the overlay did in between.
    """
    base = tmp_path_factory.mktemp("stock")
    site = new_venv(base / "stock")
    pip(base / "stock", "install", "--no-deps", "--no-index", str(built[0]))
    template = base / "template"
    shutil.copytree(base / "stock", template, symlinks=True)
    pip(base / "stock", "uninstall", "--yes", "executorch")
    return template, snapshot(site)


@pytest.fixture
def env(
    tmp_path: Path,
    built: tuple[Path, Path],
    installed: tuple[Path, dict[str, bytes | str]],
) -> Iterator[Env]:
    _, patches = built
    series = write_world_series(patches) if not patches.exists() else load_series(patches)
    venv = tmp_path / "venv"
    shutil.copytree(installed[0], venv, symlinks=True)
    yield Env(venv, venv / "lib" / PY / "site-packages", patches, series, installed[1])


def dist_info(site: Path) -> Path:
    return next(site.glob("executorch-*.dist-info"))


def record_is_true(site: Path) -> None:
    """Every hashed RECORD row matches its file; every installed file is listed."""
    dist = importlib.metadata.distributions(name="executorch", path=[str(site)])
    files = next(iter(dist)).files or []
    for entry in files:
        path = site / str(entry)
        if entry.hash is not None:
            assert path.is_file(), entry
            assert entry.hash.value == record_digest(path.read_bytes()), entry
            assert entry.size == path.stat().st_size, entry
    assert unowned(site) == []


def test_pip_installed_tree_is_patched_honestly_and_uninstalls_clean(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    info = dist_info(env.site)
    before = snapshot(env.site)
    compiled = sorted(p.name for p in env.site.rglob("__pycache__/m*.pyc"))
    assert len(compiled) == N  # pip compiled every module and recorded it
    assert env.cli("apply") == 0
    version = f"1.2.0+armfix.{env.series.short_digest}"
    assert f"dist-info: {info.name} -> executorch-{version}.dist-info" in capsys.readouterr().out
    record_is_true(env.site)
    assert list(env.site.rglob("__pycache__/m*.pyc")) == []  # stale bytecode gone
    dist = next(iter(importlib.metadata.distributions(name="executorch", path=[str(env.site)])))
    assert dist.version == version
    provenance = wheels.Provenance.from_json(dist.read_text(wheels.PROVENANCE_FILE) or "")
    assert provenance.series_digest == env.series.digest
    assert provenance.files[f"executorch/{repo_path(0)}"] == wheels.FileRecord(
        sha256_bytes(old_text(0).encode()), sha256_bytes(new_text(0).encode())
    )
    shown = pip(env.venv, "show", "executorch").stdout
    assert f"\nVersion: {version}\n" in shown
    status = transaction.inspect(env.series, transaction.find_target(env.venv))
    assert status.complete and status.metadata is transaction.MetadataState.IN_PLACE
    assert (
        check_installed(env.series, import_modules=False, search_path=env.site).version == version
    )
    assert env.cli("revert") == 0
    after = snapshot(env.site)
    compiled_paths = {k for k in before if "/__pycache__/m" in k}
    assert {k: v for k, v in before.items() if k not in compiled_paths} == after
    pip(env.venv, "uninstall", "--yes", "executorch")
    assert snapshot(env.site) == env.empty


@pytest.mark.parametrize(
    "case",
    [
        # before the journal: only tx/ to remove
        ("kept 3/22", "revert", "recovered: removed 18 leftover file(s) of a killed run", False),
        ("step 5/26", "apply", "steps done) was finished", False),  # half the sources patched
        ("step 26/26", "revert", "steps done) was rolled back", True),  # the dist-info renamed
        ("committed", "apply", "recovered: removed ", False),  # done; tx/ left over
    ],
    ids=lambda case: f"{case[0]}, then {case[1]}",
)
def test_killed_apply_then_next_command_then_pip_uninstall_is_clean(
    env: Env, capsys: pytest.CaptureFixture[str], case: tuple[str, str, str, bool]
) -> None:
    checkpoint, command, said, real_pip = case
    child = run_forked(lambda: env.cli("apply"), {journal.FAULT_ENV: f"{checkpoint}:kill"})
    assert child.code == -9
    capsys.readouterr()
    assert env.cli(command) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert said in first and first.startswith("recovered: "), first
    status = transaction.inspect(env.series, transaction.find_target(env.venv))
    wanted = transaction.TreeState.PATCHED if command == "apply" else transaction.TreeState.PRISTINE
    assert status.state is wanted
    assert status.complete == (command == "apply")
    assert not journal.state_dir(env.site).exists()
    record_is_true(env.site)  # includes: nothing a RECORD-driven uninstall would leave
    if real_pip:  # ~3 s a call on a busy 2-core machine: a few cases only
        pip(env.venv, "uninstall", "--yes", "executorch")
        assert snapshot(env.site) == env.empty


def test_the_cli_says_what_recovery_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    write_world_series(tmp_path / "patches")
    args = ["--patches", str(tmp_path / "patches")]
    child = run_forked(
        lambda: main([*args, "apply", "--target", str(root)]), {journal.FAULT_ENV: "step 4/16:kill"}
    )
    assert child.code == -9
    assert main([*args, "revert", "--target", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        f"recovered: an interrupted apply (pid {child_pid(lines[0])}, started "
    )
    assert lines[0].endswith(", 4 of 16 steps done) was rolled back")
    assert lines[-1] == f"nothing to do: {root} is already pristine"
    child = run_forked(
        lambda: main([*args, "apply", "--target", str(root)]),
        {journal.FAULT_ENV: "step 12/16:kill"},
    )
    assert main([*args, "apply", "--target", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(", 12 of 16 steps done) was finished")
    assert lines[-1] == f"nothing to do: {root} is already patched"


def child_pid(line: str) -> str:
    return line.split("(pid ", 1)[1].split(",", 1)[0]


def test_sigint_and_sigterm_messages_match_the_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    write_world_series(tmp_path / "patches")
    before = snapshot(root)
    args = ["--patches", str(tmp_path / "patches"), "apply", "--target", str(root)]
    for action, code in (("sigint", 130), ("sigterm", 143)):
        child = run_forked(lambda: main(args), {journal.FAULT_ENV: f"step 7/16:{action}"})
        assert child.code == code
        first = child.output.splitlines()[0]
        name = "SIGINT" if action == "sigint" else "SIGTERM"
        assert first == (
            f"error: interrupted by {name} after 7 of 16 steps of the apply;"
            f" rolled back: every file of {root} is as before"
        )
        assert snapshot(root) == before
    child = run_forked(lambda: main(args), {journal.FAULT_ENV: "committed:sigint"})
    assert child.code == 130
    assert child.output.splitlines()[-1] == (
        f"error: interrupted by SIGINT after the apply had finished: {root} is patched"
    )
    status = transaction.inspect(load_series(tmp_path / "patches"), transaction.find_target(root))
    assert status.state is transaction.TreeState.PATCHED


@pytest.mark.parametrize("mode", list(py_compile.PycInvalidationMode), ids=lambda m: m.name)
def test_no_stale_bytecode_runs_after_apply_or_revert(
    tmp_path: Path, mode: py_compile.PycInvalidationMode
) -> None:
    root = make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    series = write_world_series(tmp_path / "patches")
    module = "executorch." + repo_path(0).removesuffix(".py").replace("/", ".")

    def imported(*flags: str) -> str:
        code = f"import {module} as m; print(m.V3)"
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [sys.executable, "-S", *flags, "-c", code]  # -S: not the installed executorch
        run = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return run.stdout.strip()

    def compile_all() -> None:
        for level in (0, 1, 2):
            assert compileall.compile_dir(
                root / "executorch", quiet=1, optimize=level, invalidation_mode=mode
            )

    compile_all()
    transaction.apply(series, transaction.find_target(root))
    for flags in ((), ("-O",), ("-OO",)):
        assert imported(*flags) == "patched 0"
    compile_all()
    transaction.apply(series, transaction.find_target(root), reverse=True)
    for flags in ((), ("-O",), ("-OO",)):
        assert imported(*flags) == "3"


def test_the_lock_excludes_runs_whatever_their_home_and_cache(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    series = write_world_series(tmp_path / "patches")
    before = snapshot(root)
    other = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "OVERLAY_CACHE_DIR": str(tmp_path / "cache"),
    }
    command = [sys.executable, "-m", "overlay", "--patches", str(tmp_path / "patches")]
    with transaction.locked(transaction.find_target(root)):
        proc = subprocess.Popen([*command, "apply", "--target", str(root)], env=other)
        time.sleep(2.0)
        assert proc.poll() is None  # waiting for the lock
        now = snapshot(root)
        assert {k: v for k, v in now.items() if not k.startswith(journal.STATE_DIR)} == before
    assert proc.wait(timeout=60) == 0
    assert (
        transaction.inspect(series, transaction.find_target(root)).state
        is transaction.TreeState.PATCHED
    )
    assert not journal.state_dir(root).exists()  # the lock is gone with the last run


def test_status_and_verify_install_agree_in_every_state(tmp_path: Path) -> None:
    files = {repo_path(i): old_text(i).encode() for i in range(N)}
    series = write_world_series(tmp_path / "patches")
    states: dict[str, Path] = {}

    def tree(name: str) -> Path:
        states[name] = make_tree(tmp_path / name, files)
        return states[name]

    tree("pristine")
    transaction.apply(series, transaction.find_target(tree("in place")))
    legacy = tree("legacy in place (files only)")
    for i in range(N):
        (legacy / "executorch" / repo_path(i)).write_text(new_text(i))
    mixed = tree("mixed")
    (mixed / "executorch" / repo_path(0)).write_text(new_text(0))
    drifted = tree("drifted")
    (drifted / "executorch" / repo_path(1)).write_text("x = 1\n")
    interrupted = tree("interrupted")

    def killed_apply() -> int:
        transaction.apply(series, transaction.find_target(interrupted))
        return 0

    assert run_forked(killed_apply, {journal.FAULT_ENV: "step 3/16:kill"}).code == -9
    source = synthetic_wheel(tmp_path / "src")
    pin = series.pins.wheels[0]
    pin = WheelPin(source.name, sha256_file(source), pin.python, pin.platform)
    built = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    states["patched wheel"] = wheels.unpack_wheel(built.path, tmp_path / "wheel")
    summaries = {}
    for name, root in states.items():
        status = transaction.inspect(series, transaction.find_target(root))
        try:
            check_installed(series, import_modules=False, search_path=root)
            verified = True
        except InstallCheckError:
            verified = False
        assert status.complete == verified, name
        summaries[name] = (status.state.value, status.complete)
    assert summaries == {
        "pristine": ("pristine", False),
        "in place": ("patched", True),
        "legacy in place (files only)": ("patched", False),
        "mixed": ("mixed", False),
        "drifted": ("drifted", False),
        "interrupted": ("interrupted", False),
        "patched wheel": ("patched", True),
    }


def test_apply_records_a_legacy_in_place_patch_and_revert_restores_its_dist_info(
    tmp_path: Path,
) -> None:
    root = make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    series = write_world_series(tmp_path / "patches")
    stock = snapshot(root)
    for i in range(N):  # what an older overlay left: patched files, stock dist-info
        (root / "executorch" / repo_path(i)).write_text(new_text(i))
    plan = transaction.apply(series, transaction.find_target(root))
    assert plan.changes == () and plan.metadata is not None
    assert transaction.inspect(series, transaction.find_target(root)).complete
    transaction.apply(series, transaction.find_target(root), reverse=True)
    assert snapshot(root) == stock


def test_a_patched_wheel_install_is_not_reverted_in_place(tmp_path: Path) -> None:
    series = write_world_series(tmp_path / "patches")
    source = synthetic_wheel(tmp_path / "src")
    base = series.pins.wheels[0]
    pin = WheelPin(source.name, sha256_file(source), base.python, base.platform)
    built = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    root = wheels.unpack_wheel(built.path, tmp_path / "site")
    assert transaction.apply(series, transaction.find_target(root)).is_noop
    before = snapshot(root)
    with pytest.raises(OverlayError) as info:
        transaction.apply(series, transaction.find_target(root), reverse=True)
    assert info.value.message.endswith("was installed from a patched wheel")
    assert snapshot(root) == before
    assert (
        json.loads((dist_info(root) / wheels.PROVENANCE_FILE).read_text())["base_sha256"]
        == pin.sha256
    )
