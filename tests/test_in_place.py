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
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from overlay import _faults, codec
from overlay._hashing import record_digest, sha256_bytes, sha256_file
from overlay.cli import exit_code_table, json_output, main
from overlay.distribution import provenance as prov
from overlay.distribution import wheels
from overlay.envs import lockfiles
from overlay.envs.verify_install import check_installed
from overlay.errors import (
    EXIT_CHANGES_DUE,
    EXIT_CLOSED_PIPE,
    BusyError,
    InstallCheckError,
    OverlayError,
    TargetError,
    UnfinishedRunError,
)
from overlay.in_place import deps, transaction
from overlay.lines.pins import WheelPin
from overlay.text.series import Series, load_series
from overlay.tree import journal, locate, state

from scaffold import (
    created_diff,
    make_diff,
    make_tree,
    patch_text,
    run_forked,
    snapshot,
    unowned,
    unpack,
    write_files,
    write_series,
)

N = 10
T = TypeVar("T")
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def repo_path(i: int) -> str:
    return f"backends/arm/p{i % 2}/m{i}.py"


def old_text(i: int) -> str:
    return f'"""Module {i}."""\n' + "".join(f"V{j} = {i * 100 + j}\n" for j in range(12))


def new_text(i: int) -> str:
    return old_text(i).replace(f"V3 = {i * 100 + 3}\n", f"V3 = 'patched {i}'\n")


def world_tree(tmp_path: Path) -> Path:
    """A pristine site-packages of the world series' files, in ``tmp_path/site``."""
    return make_tree(tmp_path / "site", {repo_path(i): old_text(i).encode() for i in range(N)})


def write_world_series(folder: Path) -> Series:
    patches = {
        f"{i + 1:04d}-fix.patch": patch_text(
            f"Fix {i + 1}", make_diff(repo_path(i), old_text(i), new_text(i))
        )
        for i in range(N)
    }
    return write_series(folder, patches, {repo_path(i): old_text(i).encode() for i in range(N)})


def synthetic_wheel(folder: Path) -> Path:
    """An executorch 1.2.0 wheel with the series' files and one file the series leaves alone."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = "executorch-1.2.0.dist-info"
    return write_files(
        folder / "executorch-1.2.0-py3-none-any.whl",
        {
            **{f"executorch/{repo_path(i)}": old_text(i).encode() for i in range(N)},
            "executorch/backends/arm/untouched.py": b"U = 1\n",
            f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: executorch\nVersion: 1.2.0\n",
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        },
    )


def synthetic_dist(folder: Path, name: str, version: str) -> Path:
    """A wheel of an empty package ``name`` at ``version`` (for the dependency check)."""
    dist = f"{name}-{version}.dist-info"
    return write_files(
        folder / f"{name}-{version}-py3-none-any.whl",
        {
            f"{name}/__init__.py": b"",
            f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            "".encode(),
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        },
    )


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
    torch = synthetic_dist(built[0].parent, "torch", "2.11.0")  # what the synthetic line needs
    pip(base / "stock", "install", "--no-deps", "--no-index", str(built[0]), str(torch))
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
    assert [p for p in unowned(site) if not p.startswith(("torch/", "torch-"))] == []


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
    provenance = codec.loads(prov.Provenance, dist.read_text(prov.PROVENANCE_FILE) or "")
    assert provenance.series_digest == env.series.digest
    assert provenance.files[f"executorch/{repo_path(0)}"] == prov.FileRecord(
        sha256_bytes(old_text(0).encode()), sha256_bytes(new_text(0).encode())
    )
    shown = pip(env.venv, "show", "executorch").stdout
    assert f"\nVersion: {version}\n" in shown
    status = state.inspect(env.series, locate.find_target(env.venv))
    assert status.complete and status.record.state is state.MetadataState.IN_PLACE
    assert (
        check_installed(env.series, import_modules=False, search_path=env.site).version == version
    )
    assert env.cli("revert") == 0
    said = capsys.readouterr().out
    after = snapshot(env.site)
    # every file as before but the .pyc apply deleted, which the revert names (issue 36,
    # item 10); RECORD byte for byte, its rows of them included
    gone = {k for k in before if k not in after}
    assert gone == {k for k in before if "/__pycache__/m" in k} and len(gone) == N
    assert {k: v for k, v in before.items() if k not in gone} == after
    record = f"{info.name}/RECORD"
    assert after[record] == before[record]
    assert all(path.encode() in before[record] for path in gone)
    assert f"  not restored: {N} .pyc file(s) RECORD lists (apply deleted them;" in said
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
    child = run_forked(lambda: env.cli("apply"), {_faults.FAULT_ENV: f"{checkpoint}:kill"})
    assert child.code == -9
    capsys.readouterr()
    assert env.cli(command) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert said in first and first.startswith("recovered: "), first
    status = state.inspect(env.series, locate.find_target(env.venv))
    wanted = state.TreeState.PATCHED if command == "apply" else state.TreeState.PRISTINE
    assert status.state is wanted
    assert status.complete == (command == "apply")
    assert not journal.state_dir(env.site).exists()
    record_is_true(env.site)  # includes: nothing a RECORD-driven uninstall would leave
    if real_pip:  # ~3 s a call on a busy 2-core machine: a few cases only
        pip(env.venv, "uninstall", "--yes", "executorch")
        assert snapshot(env.site) == env.empty


def test_the_cli_says_what_recovery_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = world_tree(tmp_path)
    write_world_series(tmp_path / "patches")
    args = ["--patches", str(tmp_path / "patches")]
    child = run_forked(
        lambda: main([*args, "apply", "--target", str(root)]), {_faults.FAULT_ENV: "step 4/16:kill"}
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
        {_faults.FAULT_ENV: "step 12/16:kill"},
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
    root = world_tree(tmp_path)
    write_world_series(tmp_path / "patches")
    before = snapshot(root)
    args = ["--patches", str(tmp_path / "patches"), "apply", "--target", str(root)]
    for action, code in (("sigint", 130), ("sigterm", 143)):
        child = run_forked(lambda: main(args), {_faults.FAULT_ENV: f"step 7/16:{action}"})
        assert child.code == code
        first = child.output.splitlines()[0]
        name = "SIGINT" if action == "sigint" else "SIGTERM"
        assert first == (
            f"error: interrupted by {name} after 7 of 16 steps of the apply;"
            f" rolled back: every file of {root} is as before"
        )
        assert snapshot(root) == before
    child = run_forked(lambda: main(args), {_faults.FAULT_ENV: "committed:sigint"})
    assert child.code == 130
    assert child.output.splitlines()[-1] == (
        f"error: interrupted by SIGINT after the apply had finished: {root} is patched"
    )
    status = state.inspect(load_series(tmp_path / "patches"), locate.find_target(root))
    assert status.state is state.TreeState.PATCHED


@pytest.mark.parametrize("mode", list(py_compile.PycInvalidationMode), ids=lambda m: m.name)
def test_no_stale_bytecode_runs_after_apply_or_revert(
    tmp_path: Path, mode: py_compile.PycInvalidationMode
) -> None:
    root = world_tree(tmp_path)
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
    transaction.apply(series, locate.find_target(root))
    for flags in ((), ("-O",), ("-OO",)):
        assert imported(*flags) == "patched 0"
    compile_all()
    transaction.apply(series, locate.find_target(root), reverse=True)
    for flags in ((), ("-O",), ("-OO",)):
        assert imported(*flags) == "3"


def test_the_lock_excludes_runs_whatever_their_home_and_cache(tmp_path: Path) -> None:
    root = world_tree(tmp_path)
    series = write_world_series(tmp_path / "patches")
    before = snapshot(root)
    other = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "OVERLAY_CACHE_DIR": str(tmp_path / "cache"),
    }
    command = [sys.executable, "-m", "overlay", "--patches", str(tmp_path / "patches")]
    with transaction.locked(locate.find_target(root)):
        proc = subprocess.Popen([*command, "apply", "--target", str(root)], env=other)
        time.sleep(2.0)
        assert proc.poll() is None  # waiting for the lock
        now = snapshot(root)
        assert {k: v for k, v in now.items() if not k.startswith(journal.STATE_DIR)} == before
    assert proc.wait(timeout=60) == 0
    assert state.inspect(series, locate.find_target(root)).state is state.TreeState.PATCHED
    assert not journal.state_dir(root).exists()  # the lock is gone with the last run


def test_apply_tells_its_listener_that_it_waits_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = locate.find_target(world_tree(tmp_path))
    monkeypatch.setattr(transaction, "LOCK_TIMEOUT_S", 0.2)
    heard: list[str] = []
    with transaction.locked(target), pytest.raises(BusyError):
        transaction.apply(write_world_series(tmp_path / "p"), target, waiting=heard.append)
    assert heard == [f"waiting up to 0 s for the lock of {target.root}, held by pid {os.getpid()}"]


def test_a_tree_that_takes_no_lock_is_previewed_with_the_fixes_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world_tree(tmp_path)
    series = write_world_series(tmp_path / "patches")
    target = locate.find_target(root)
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # a read-only tree
    said = []
    for run in (transaction.apply, transaction.preview):
        with pytest.raises(TargetError) as info:  # the plan names what it cannot write
            run(series, target, fixes=frozenset({2}))
        said.append(str(info.value))
    assert said[0] == said[1]
    assert f"{repo_path(1)}\n" in said[0] and repo_path(0) not in said[0]  # fix 2's file only
    assert not journal.state_dir(root).exists()


def test_status_and_verify_install_agree_in_every_state(tmp_path: Path) -> None:
    files = {repo_path(i): old_text(i).encode() for i in range(N)}
    series = write_world_series(tmp_path / "patches")
    states: dict[str, Path] = {}

    def tree(name: str) -> Path:
        states[name] = make_tree(tmp_path / name, files)
        return states[name]

    tree("pristine")
    transaction.apply(series, locate.find_target(tree("in place")))
    legacy = tree("legacy in place (files only)")
    for i in range(N):
        (legacy / "executorch" / repo_path(i)).write_text(new_text(i))
    files_only = tree("fix 1 in the files only")
    (files_only / "executorch" / repo_path(0)).write_text(new_text(0))
    subset = locate.find_target(tree("fixes 1, 3 in place"))
    transaction.apply(series, subset, fixes=frozenset({1, 3}))
    completed = locate.find_target(tree("fixes 1, 3, then all"))
    transaction.apply(series, completed, fixes=frozenset({1, 3}))
    transaction.apply(series, locate.find_target(completed.root))
    drifted = tree("drifted")
    (drifted / "executorch" / repo_path(1)).write_text("x = 1\n")
    interrupted = tree("interrupted")

    def killed_apply() -> int:
        transaction.apply(series, locate.find_target(interrupted))
        return 0

    assert run_forked(killed_apply, {_faults.FAULT_ENV: "step 3/16:kill"}).code == -9
    source = synthetic_wheel(tmp_path / "src")
    pin = series.pins.wheels[0]
    pin = WheelPin(source.name, sha256_file(source), pin.python, pin.platform)
    built = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    states["patched wheel"] = unpack(built.path, tmp_path / "wheel")
    summaries = {}
    for name, root in states.items():
        status = state.inspect(series, locate.find_target(root))
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
        "fix 1 in the files only": ("partial", False),
        "fixes 1, 3 in place": ("partial", False),
        "fixes 1, 3, then all": ("patched", True),
        "drifted": ("drifted", False),
        "interrupted": ("interrupted", False),
        "patched wheel": ("patched", True),
    }


def test_apply_records_a_legacy_in_place_patch_and_revert_restores_its_dist_info(
    tmp_path: Path,
) -> None:
    root = world_tree(tmp_path)
    series = write_world_series(tmp_path / "patches")
    stock = snapshot(root)
    for i in range(N):  # what an older overlay left: patched files, stock dist-info
        (root / "executorch" / repo_path(i)).write_text(new_text(i))
    plan = transaction.apply(series, locate.find_target(root))
    assert plan.changes == () and plan.metadata is not None
    assert state.inspect(series, locate.find_target(root)).complete
    transaction.apply(series, locate.find_target(root), reverse=True)
    assert snapshot(root) == stock


def test_a_patched_wheel_install_is_not_reverted_in_place(tmp_path: Path) -> None:
    series = write_world_series(tmp_path / "patches")
    source = synthetic_wheel(tmp_path / "src")
    base = series.pins.wheels[0]
    pin = WheelPin(source.name, sha256_file(source), base.python, base.platform)
    built = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    root = unpack(built.path, tmp_path / "site")
    assert transaction.apply(series, locate.find_target(root)).is_noop
    before = snapshot(root)
    with pytest.raises(OverlayError) as info:
        transaction.apply(series, locate.find_target(root), reverse=True)
    assert info.value.message.endswith("was installed from a patched wheel")
    assert snapshot(root) == before
    assert (
        json.loads((dist_info(root) / prov.PROVENANCE_FILE).read_text())["base_sha256"]
        == pin.sha256
    )


# --- fixes by number, dry runs, JSON, release lines, the CLI's edges ---------------------------


def test_a_subset_is_applied_recorded_verified_as_a_subset_and_completed(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    stock = snapshot(env.site)
    assert env.cli("apply", "--fix", "1,3") == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("  patched: ")] == [
        f"  patched: {repo_path(0)}",
        f"  patched: {repo_path(2)}",
    ]
    assert out[-1] == f"done: {env.site} holds fixes 1, 3 of line 1.2.0"
    version = f"1.2.0+armfix.{env.series.short_digest}.fix.1.3"
    assert f"\nVersion: {version}\n" in pip(env.venv, "show", "executorch").stdout
    record_is_true(env.site)
    dist = next(iter(importlib.metadata.distributions(name="executorch", path=[str(env.site)])))
    provenance = codec.loads(prov.Provenance, dist.read_text(prov.PROVENANCE_FILE) or "")
    assert [p.name for p in provenance.patches] == ["0001-fix.patch", "0003-fix.patch"]
    assert set(provenance.files) == {f"executorch/{repo_path(i)}" for i in (0, 2)}
    assert env.cli("status") == 0
    shown = capsys.readouterr().out
    assert (
        "  1. 0001-fix.patch: Fix 1 [applied]\n  2. 0002-fix.patch: Fix 2 [not applied]\n" in shown
    )
    assert f"  state: partial: fixes 1, 3 (patched in place, executorch {version})" in shown
    with pytest.raises(InstallCheckError) as info:
        check_installed(env.series, import_modules=False, search_path=env.site)
    assert info.value.message == f"executorch in {env.site} holds fixes 1, 3 of this series"
    assert info.value.found == f"fixes 1, 3 (executorch {version})"
    assert env.cli("apply", "--fix", "3") == 0  # already there: nothing to do
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"nothing to do: {env.site} already holds fixes 1, 3"
    )
    assert env.cli("apply") == 0  # the rest
    full = f"1.2.0+armfix.{env.series.short_digest}"
    assert check_installed(env.series, import_modules=False, search_path=env.site).version == full
    assert env.cli("revert", "--fix", "2") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"done: {env.site} holds fixes 1, 3, 4, 5, 6, 7, 8, 9, 10 of line 1.2.0"
    )
    record_is_true(env.site)
    assert env.cli("revert") == 0
    compiled = {k for k in stock if "/__pycache__/m" in k}  # deleted with their sources
    assert snapshot(env.site) == {k: v for k, v in stock.items() if k not in compiled}
    pip(env.venv, "uninstall", "--yes", "executorch")
    assert snapshot(env.site) == env.empty


def test_dry_run_checks_and_plans_but_writes_nothing(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(env.site)
    assert env.cli("apply", "--dry-run", "--fix", "2") == 0  # exit 0 (check's is 21)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"  would patch: {repo_path(1)}"
    assert not [line for line in out if line.startswith("  already")]  # others: not in the run
    assert out[-2:] == ["  would hold: fix 2", "1 file(s) would change"]
    assert any(line.startswith("  dist-info: executorch-1.2.0.dist-info -> ") for line in out)
    assert env.cli("revert", "--dry-run") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to do"
    assert snapshot(env.site) == before
    assert not journal.state_dir(env.site).exists()


def test_json_reports_of_apply_revert_and_dry_runs_are_typed(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    def report(kind: type[T], *args: str) -> T:
        assert env.cli(*args, "--json") == 0
        return codec.decode(kind, json.loads(capsys.readouterr().out))  # strict: every field

    dry = report(json_output.CheckReport, "apply", "--fix", "1", "--dry-run")
    assert (dry.changes_due, dry.would_change, dry.reverse) == (True, (repo_path(0),), False)
    assert dry.plan is not None and (dry.plan.fixes, dry.plan.after) == ((1,), (1,))
    assert dry.plan.deps == deps.DepsCheck(("torch==2.11.*",), None)
    assert dry.plan.line.name == "1.2.0" and dry.plan.line.reason == f"--patches {env.patches}"
    assert dry.plan.line.directory == env.patches  # a path, written as text
    done = report(json_output.ApplyReport, "apply")
    assert done.changed == tuple(repo_path(i) for i in range(N)) and done.recovered is None
    meta = done.plan.dist_info
    assert meta is not None and meta.version == f"1.2.0+armfix.{env.series.short_digest}"
    assert done.plan.stale_bytecode == N
    back = report(json_output.ApplyReport, "revert", "--fix", "4,5")
    assert (back.reverse, back.plan.before, back.plan.deps) == (True, tuple(range(1, 11)), None)
    assert back.changed == (repo_path(3), repo_path(4))
    status = report(json_output.StatusReport, "status")
    assert (status.applied, status.recorded, status.complete) == (
        (1, 2, 3, 6, 7, 8, 9, 10),
        (1, 2, 3, 6, 7, 8, 9, 10),
        False,
    )
    assert [p.state for p in status.series.patches][2:5] == [
        "applied",
        "not applied",
        "not applied",
    ]
    for kind in (json_output.StatusReport, json_output.CheckReport, json_output.ApplyReport):
        assert codec.schema(kind, title=kind.__name__)["additionalProperties"] is False


def test_a_kill_during_a_subset_apply_is_finished_by_the_rerun(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2 sources, their 2 .pyc, METADATA, RECORD, provenance, the original (2), the rename
    child = run_forked(
        lambda: env.cli("apply", "--fix", "2,4"), {_faults.FAULT_ENV: "step 2/10:kill"}
    )
    assert child.code == -9, child.output
    assert env.cli("status") == 0
    assert f"  state: interrupted apply of fixes 2, 4 (pid {child_pid_of(env)}" in (
        capsys.readouterr().out
    )
    assert env.cli("apply", "--fix", "2,4") == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(
        "recovered: an interrupted apply of 0002-fix.patch, 0004-fix.patch (pid "
    )
    assert first.endswith(", 2 of 10 steps done) was finished")
    status = state.inspect(env.series, locate.find_target(env.venv))
    assert status.state is state.TreeState.PARTIAL and status.record.fixes == frozenset({2, 4})
    record_is_true(env.site)


def child_pid_of(env: Env) -> int:
    interrupted = journal.read_journal(env.site)
    assert interrupted is not None
    return interrupted.pid


def test_an_environment_that_differs_from_the_lines_pins_is_patched_with_a_warning(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The environment's packages are the user's: the line's pins are advice, never a refusal
    (issue 36, item 5)."""
    pip(env.venv, "uninstall", "--yes", "torch")
    for args, code in ((["check"], EXIT_CHANGES_DUE), (["apply", "--dry-run"], 0), (["apply"], 0)):
        assert env.cli(*args) == code
        err = capsys.readouterr().err
        assert (
            "[overlay] warning: the environment differs from the pins line 1.2.0 was proven with"
            " (patching anyway): torch missing (line: torch==2.11.*)\n"
        ) in err
        python = env.venv / "bin" / "python"
        assert (
            f"[overlay]   to match them: uv pip install --python {python} 'torch==2.11.*'\n" in err
        )
    assert env.cli("revert") == 0
    assert env.cli("apply", "--no-deps-check") == 0  # no comparison, no warning
    assert "warning" not in capsys.readouterr().err


def two_lines(base: Path) -> Path:
    """A lines root: 1.2.0 and 1.5.1, each changing m0.py its own way."""
    for version in ("1.2.0", "1.5.1"):
        new = old_text(0).replace("V3 = 3\n", f"V3 = '{version}'\n")
        patches = {
            "0001-m0.patch": patch_text(f"On {version}", make_diff(repo_path(0), old_text(0), new))
        }
        write_series(base / version, patches, {repo_path(0): old_text(0).encode()}, version=version)
    return base


def test_each_tree_gets_the_line_of_its_executorch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = two_lines(tmp_path / "lines")
    trees = {
        v: make_tree(tmp_path / v, {repo_path(0): old_text(0).encode()}, version=v)
        for v in ("1.2.0", "1.5.1", "1.4.1")
    }
    for version in ("1.2.0", "1.5.1"):
        args = ["--patches", str(lines), "apply", "--target", str(trees[version])]
        assert main(args) == 0
        captured = capsys.readouterr()
        series = load_series(lines / version)
        assert captured.err == (
            f"[overlay] release line {version} (the installed executorch {version}): series"
            f" {series.short_digest} of --patches {lines}\n"
        )
        assert f"V3 = '{version}'" in (trees[version] / "executorch" / repo_path(0)).read_text()
        assert main(["--patches", str(lines), "status", "--target", str(trees[version])]) == 0
        shown = capsys.readouterr().out.splitlines()
        assert shown[1].startswith(f"release line {version} (the installed executorch {version}+")
    before = snapshot(trees["1.4.1"])
    assert main(["--patches", str(lines), "apply", "--target", str(trees["1.4.1"])]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: executorch 1.4.1 has no release line here\n")
    assert "supported lines: 1.2.0, 1.5.1" in err
    assert snapshot(trees["1.4.1"]) == before
    assert (
        main(
            ["--patches", str(lines), "revert", "--line", "1.5.1", "--target", str(trees["1.5.1"])]
        )
        == 0
    )
    assert capsys.readouterr().err.startswith("[overlay] release line 1.5.1 (--line 1.5.1): series")
    assert (trees["1.5.1"] / "executorch" / repo_path(0)).read_text() == old_text(0)


def test_a_closed_stdout_is_silent(tmp_path: Path) -> None:
    root = world_tree(tmp_path)
    write_world_series(tmp_path / "patches")
    command = [sys.executable, "-m", "overlay", "--patches", str(tmp_path / "patches")]
    proc = subprocess.Popen(
        [*command, "status", "--json", "--target", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write, as `| head -0` would be
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == EXIT_CLOSED_PIPE
    assert err == ""
    piped = subprocess.run(  # `status --series-only --json | head -1`
        f"{shlex.join([*command, 'status', '--series-only', '--json'])} | head -1",
        shell=True, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (piped.stdout, piped.stderr) == ("{\n", "")


def test_output_left_in_the_buffer_is_dropped_with_the_pipe(tmp_path: Path) -> None:
    code = (
        "import io, sys\n"
        "from overlay.cli import _closed_stdout\n"
        "sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)))\n"
        "sys.stdout.write('still buffered when the reader went away\\n')\n"
        "sys.exit(_closed_stdout())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == EXIT_CLOSED_PIPE
    assert err == ""  # no "Exception ignored ... BrokenPipeError" from the flush at exit


# `python -m overlay` with a signal while a module of the CLI is still being imported.
SIGNAL_AT_IMPORT = """\
import os, runpy, signal, sys
HOW = sys.argv[1]
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == "overlay.cli.build":
            if HOW == "int":
                raise KeyboardInterrupt  # what Ctrl-C raises wherever the program is
            os.kill(os.getpid(), signal.SIGTERM)
sys.meta_path.insert(0, Stop())
sys.argv = ["overlay", "status", "--series-only"]
runpy.run_module("overlay", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    ("how", "code", "said"), [("int", 130, "interrupted"), ("term", 143, "terminated")]
)
def test_a_signal_during_start_up_is_one_line(how: str, code: int, said: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_AT_IMPORT, how], capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stderr, proc.stdout) == (code, f"{said}\n", "")


# `python -m overlay ARGS` with SIGTERM arriving while apply plans, under the target's lock.
SIGTERM_WHILE_PLANNING = """\
import os, runpy, signal, sys
from overlay.in_place import transaction
planned = transaction.plan
def plan(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return planned(*args, **kwargs)
transaction.plan = plan
sys.argv = ["overlay", *sys.argv[1:]]
runpy.run_module("overlay", run_name="__main__", alter_sys=True)
"""


def test_sigterm_before_the_transaction_leaves_no_lock(tmp_path: Path) -> None:
    root = world_tree(tmp_path)
    write_world_series(tmp_path / "patches")
    before = snapshot(root)
    proc = subprocess.run(
        [sys.executable, "-c", SIGTERM_WHILE_PLANNING, "--patches", str(tmp_path / "patches"),
         "apply", "--target", str(root)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    said = proc.stderr.splitlines()[-1]
    assert (proc.returncode, said) == (
        143,
        f"error: interrupted by SIGTERM: nothing was changed in {root}",
    ), proc.stderr
    assert snapshot(root) == before  # no lock file, no state folder: status is not misled
    assert not journal.state_dir(root).exists()


def test_the_docs_show_the_exit_codes_as_help_lists_them() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "in-place.md").read_text()
    block = docs.split("<!-- exit-codes: generated by `python -m overlay --help` -->\n```\n")[1]
    assert block.split("\n```")[0] == exit_code_table()
    # what a closed pipe gives, as test_a_closed_stdout_is_silent measures it (issue 36, item 16)
    said = " ".join(docs.split("When stdout's reader goes away early")[1].split()[:30])
    assert f"nothing on stderr, exit {EXIT_CLOSED_PIPE}" in said, said


# --- the transaction's own edges ------------------------------------------------------------


def test_the_original_record_is_kept_as_a_hardlink_and_restored_as_one(tmp_path: Path) -> None:
    root = world_tree(tmp_path)
    series = write_world_series(tmp_path / "patches")
    stock_record = (dist_info(root) / "RECORD").stat().st_ino
    transaction.apply(series, locate.find_target(root))
    kept = dist_info(root) / "ARM_OVERLAY_ORIGINAL_RECORD"
    assert kept.stat().st_ino == stock_record  # the stock RECORD itself, not a copy
    kept_inode = kept.stat().st_ino
    transaction.apply(series, locate.find_target(root), reverse=True)
    assert (dist_info(root) / "RECORD").stat().st_ino == kept_inode


def test_a_kill_among_a_reverts_deletes_is_undone_by_apply(tmp_path: Path) -> None:
    root = world_tree(tmp_path)
    series = write_world_series(tmp_path / "patches")
    transaction.apply(series, locate.find_target(root))
    patched = snapshot(root)

    def killed_revert() -> int:
        transaction.apply(series, locate.find_target(root), reverse=True)
        return 0

    # 10 sources, METADATA, RECORD, then the three overlay files deleted, then the rename
    assert run_forked(killed_revert, {_faults.FAULT_ENV: "step 15/16:kill"}).code == -9
    assert state.inspect(series, locate.find_target(root)).state is state.TreeState.INTERRUPTED
    plan = transaction.apply(series, locate.find_target(root))
    assert plan.recovery is not None
    assert snapshot(root) == patched


def test_a_dry_run_refuses_a_busy_interrupted_or_mixed_tree(tmp_path: Path) -> None:
    files = {repo_path(i): old_text(i).encode() for i in range(N)}
    series = write_world_series(tmp_path / "patches")
    pristine = locate.find_target(make_tree(tmp_path / "pristine", files))
    assert [c.path for c in transaction.preview(series, pristine).changes] == [
        pristine.root / "executorch" / repo_path(i) for i in range(N)
    ]
    with transaction.locked(pristine), pytest.raises(BusyError):
        transaction.preview(series, locate.find_target(pristine.root))

    interrupted = make_tree(tmp_path / "interrupted", files)

    def killed_apply() -> int:
        transaction.apply(series, locate.find_target(interrupted))
        return 0

    assert run_forked(killed_apply, {_faults.FAULT_ENV: "step 3/16:kill"}).code == -9
    with pytest.raises(UnfinishedRunError) as info:
        transaction.preview(series, locate.find_target(interrupted))
    assert (info.value.expected, info.value.found, info.value.hint) == (
        "a tree that is pristine or patched",
        f"the journal {journal.journal_file(interrupted)}",
        f"`executorch-arm-overlay apply --target {interrupted}` finishes it,"
        f" `executorch-arm-overlay revert --target {interrupted}` undoes it",
    )

    both = make_diff(repo_path(0), old_text(0), new_text(0))
    both += make_diff(repo_path(1), old_text(1), new_text(1))
    two_files = write_series(tmp_path / "two", {"0001-fix.patch": patch_text("Fix", both)}, files)
    mixed = make_tree(tmp_path / "mixed", files)
    (mixed / "executorch" / repo_path(0)).write_text(new_text(0))
    with pytest.raises(UnfinishedRunError) as info:
        transaction.preview(two_files, locate.find_target(mixed))
    assert info.value.found == f"{repo_path(0)}: patched, {repo_path(1)}: pristine"


def test_the_lock_error_says_who_owns_the_tree(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "site", {})
    lock = journal.lock_file(root)
    denied = transaction._lock_error(lock, PermissionError(13, "Permission denied"))
    assert denied.found == (
        f"permission denied (running as uid {os.geteuid()}, the tree belongs to"
        f" {root.stat().st_uid})"
    )
    assert denied.hint == "run as the owner of the environment, or with sudo"
    full = transaction._lock_error(lock, OSError(28, "No space left on device"))
    assert full.found == "OSError: [Errno 28] No space left on device"
    assert full.hint == f"make {lock.parent} a writable folder"


# --- where a command works, what it accepts and what it says (issue 36) -----------------------


def as_tool_venv(monkeypatch: pytest.MonkeyPatch, venv: Path) -> Path:
    """Run as a tool installed in ``venv`` (a `uv tool` venv: no executorch there)."""
    site = new_venv(venv)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(site)})
    return site


def test_without_target_the_active_venv_then_the_nearest_venv_never_the_tools_own(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As pip and uv: ``$VIRTUAL_ENV``, then the nearest ``.venv``; the tool's own venv is
    never a target and never told to install executorch (issue 36, item 1)."""
    tool = tmp_path / "tool"
    as_tool_venv(monkeypatch, tool)
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    monkeypatch.chdir(project / "src")
    patches = ["--patches", str(env.patches)]
    monkeypatch.setenv("VIRTUAL_ENV", str(env.venv))
    assert main([*patches, "apply"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"[overlay] target: {env.venv} ($VIRTUAL_ENV)\n")
    assert f"done: {env.site} holds all {N} fixes" in captured.out
    assert main([*patches, "revert"]) == 0
    assert f"done: {env.site} holds no fix" in capsys.readouterr().out
    monkeypatch.setenv("VIRTUAL_ENV", str(tool))  # what `uv run` sets: the tool's own venv
    shutil.move(env.venv, project / ".venv")
    site = project / ".venv" / "lib" / PY / "site-packages"
    assert main([*patches, "status"]) == 0
    captured = capsys.readouterr()
    assert f"[overlay] target: {project / '.venv'} (the .venv in {project})\n" in captured.err
    assert f"\ntarget {site} (executorch 1.2.0)\n" in captured.out
    shutil.move(project / ".venv", env.venv)
    for command in ("apply", "check", "revert", "verify-install"):
        assert main([*patches, command]) == TargetError.exit_code
        err = capsys.readouterr().err
        assert err.startswith("error: no environment to patch: no venv is active here\n"), err
        assert (
            f"  found:    no .venv in {project / 'src'} or above; {tool} is this tool's own"
            " environment, without executorch\n"
        ) in err
        assert "install" not in err  # nothing is ever installed into the tool's venv
    assert main([*patches, "status"]) == 0  # the series, saying why there is no target
    captured = capsys.readouterr()
    assert captured.err.startswith(f"[overlay] no target (no .venv in {project / 'src'} or")
    assert "is this tool's own environment, without executorch): the series only" in captured.err
    assert captured.out.startswith(f"series {env.series.short_digest} against executorch 1.2.0")


def test_a_tool_installed_beside_executorch_works_on_its_own_environment(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.chdir(env.venv.parent)
    monkeypatch.setattr(sys, "prefix", str(env.venv))
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(env.site)})
    found = locate.default_environment()
    assert found == locate.Environment(env.site, "the environment this tool runs in")


def test_a_target_given_as_the_venvs_python_or_a_dist_info_is_that_venv(
    env: Env, built: tuple[Path, Path]
) -> None:
    """What was given is named, never the base interpreter it links to (issue 36, item 4)."""
    site = env.site.resolve()
    assert locate.find_target(env.venv / "bin" / "python").root == site
    assert locate.find_target(dist_info(env.site)).root == site
    wheel = built[0]
    with pytest.raises(TargetError) as as_wheel:
        locate.find_target(wheel)
    assert as_wheel.value.message == f"--target {wheel} is a wheel file"
    assert as_wheel.value.hint is not None and "python -m zipfile -e" in as_wheel.value.hint
    other = env.venv / "pyvenv.cfg"
    with pytest.raises(TargetError) as as_file:
        locate.find_target(other)
    assert as_file.value.message == f"--target {other} is a file"
    assert as_file.value.found == f"the file {other}"
    assert as_file.value.hint == (
        "pass the venv folder (the one holding bin/ and pyvenv.cfg) or its bin/python"
    )


def test_apply_keeps_the_installed_requirements_and_extras(tmp_path: Path) -> None:
    """Upstream's extras stay as installed; only the version says the tree is patched
    (issue 36, item 5)."""
    requires = (
        "Requires-Dist: torch>=2.0\n"
        "Provides-Extra: ethos-u\n"
        'Requires-Dist: tosa-tools==2026.5.0; extra == "ethos-u"\n'
    )
    root = make_tree(
        tmp_path / "site",
        {repo_path(i): old_text(i).encode() for i in range(N)},
        metadata=requires,
    )
    series = write_world_series(tmp_path / "patches")
    before = (next(root.glob("executorch-*.dist-info")) / "METADATA").read_text()
    transaction.apply(series, locate.find_target(root))
    after = (next(root.glob("executorch-*.dist-info")) / "METADATA").read_text()
    version = f"Version: 1.2.0+armfix.{series.short_digest}"
    assert after == before.replace("Version: 1.2.0", version)


# `python -m overlay ... apply` with SIGINT after the commit: while it prints, or at exit.
SIGNAL_AFTER_COMMIT = """\
import atexit, os, runpy, signal, sys
from overlay.cli import in_place
WHEN = sys.argv.pop(1)
said = in_place.out
def out(text=""):
    said(text)
    if text.startswith("done: "):
        if WHEN == "printing":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            atexit.register(os.kill, os.getpid(), signal.SIGINT)
in_place.out = out
sys.argv = ["overlay", *sys.argv[1:]]
runpy.run_module("overlay", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("when", ["printing", "exiting"])
def test_a_signal_after_the_commit_says_the_tree_is_patched(tmp_path: Path, when: str) -> None:
    """Once committed: exit 0, or the one line that says so (issue 36, item 9)."""
    root = world_tree(tmp_path)
    write_world_series(tmp_path / "patches")
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_AFTER_COMMIT, when, "--patches", str(tmp_path / "patches"),
         "apply", "--target", str(root)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert f"done: {root} holds all {N} fixes" in proc.stdout
    if when == "printing":
        assert (proc.returncode, proc.stderr.splitlines()[-1]) == (
            130,
            f"error: interrupted by SIGINT after the apply had finished: {root} is patched",
        ), proc.stderr
    else:
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    status = state.inspect(load_series(tmp_path / "patches"), locate.find_target(root))
    assert status.state is state.TreeState.PATCHED


def test_a_path_the_streams_cannot_encode_is_escaped_not_a_traceback(tmp_path: Path) -> None:
    """``PYTHONIOENCODING=ascii`` and a folder named in another script (issue 36, item 15)."""
    folder = tmp_path / "Prüfung-検証"
    root = make_tree(folder / "site", {repo_path(i): old_text(i).encode() for i in range(N)})
    write_world_series(tmp_path / "patches")
    proc = subprocess.run(
        [sys.executable, "-m", "overlay", "--patches", str(tmp_path / "patches"), "apply",
         "--target", str(root)],
        capture_output=True, check=False, env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    escaped = str(root).encode("ascii", "backslashreplace")
    assert b"done: " + escaped + b" holds all" in proc.stdout
    assert b"Traceback" not in proc.stderr


def test_verify_install_of_an_in_place_venv_lists_the_lock_differences(env: Env) -> None:
    """One line a difference, and a next step that fits a venv patched in place: check
    executorch alone (issue 36, item 12)."""
    assert env.cli("apply") == 0
    lock = env.venv.parent / "lock.txt"
    lock.write_text(
        "# inputs-key: k\ntorch==2.13.0 --hash=sha256:aaaa\nsympy==1.14.0 --hash=sha256:bbbb\n"
    )
    with pytest.raises(InstallCheckError) as info:
        check_installed(
            env.series,
            import_modules=False,
            search_path=env.site,
            lock=lockfiles.read(lock),
            repair="sync it",
        )
    assert info.value.details == (
        "    torch: 2.11.0 (locked 2.13.0)\n    sympy: missing (locked 1.14.0)"
    )
    assert info.value.hint is not None
    assert info.value.hint.startswith("this environment was patched in place, not made from")
    assert info.value.hint.endswith("; to make it the lock exactly: sync it")


CREATED = {  # a module and a text file the synthetic release lacks, in folders it ships
    "backends/arm/p0/created.py": "CREATED = 'new'\n",
    "backends/arm/p1/nearest.spirv.b64": "AwIjBwAAAQA=\n",
}


def test_a_created_file_is_installed_recorded_reverted_and_uninstalled(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`apply` creates the files (RECORD rows, provenance without a pristine hash), `status`
    says which files the series creates, `revert` leaves the site byte for byte as before
    (bytecode of the created module included), and pip uninstalls the rest."""
    patches = dict(
        {p.name: p.text for p in env.series.patches},
        **{
            "0100-create.patch": patch_text(
                "Create", "".join(created_diff(p, t) for p, t in CREATED.items())
            )
        },
    )
    files = {repo_path(i): old_text(i).encode() for i in range(N)}
    series = write_series(tmp_path / "patches", patches, files)
    args = ["--patches", str(series.directory)]
    before = snapshot(env.site)
    assert main([*args, "apply", "--target", str(env.venv)]) == 0
    said = capsys.readouterr().out
    assert "patched: backends/arm/p0/created.py (a new file)" in said
    record_is_true(env.site)
    for path, text in CREATED.items():
        assert (env.site / "executorch" / path).read_text() == text
    dist = next(iter(importlib.metadata.distributions(name="executorch", path=[str(env.site)])))
    provenance = codec.loads(prov.Provenance, dist.read_text(prov.PROVENANCE_FILE) or "")
    assert provenance.files["executorch/backends/arm/p0/created.py"] == prov.FileRecord(
        None, sha256_bytes(CREATED["backends/arm/p0/created.py"].encode())
    )
    assert main([*args, "status", "--target", str(env.venv)]) == 0
    assert "  patched   backends/arm/p0/created.py (a file the series creates)" in (
        capsys.readouterr().out
    )
    assert check_installed(series, import_modules=False, search_path=env.site).files[
        "executorch/backends/arm/p1/nearest.spirv.b64"
    ] == sha256_bytes(CREATED["backends/arm/p1/nearest.spirv.b64"].encode())
    assert compileall.compile_dir(env.site / "executorch" / "backends/arm/p0", quiet=1)
    assert list(env.site.rglob("__pycache__/created.*.pyc"))
    assert main([*args, "revert", "--target", str(env.venv)]) == 0
    assert "reverted: backends/arm/p0/created.py (removed)" in capsys.readouterr().out
    after = snapshot(env.site)
    compiled = {k for k in before if "/__pycache__/m" in k}  # pip's, of the replaced modules
    assert {k: v for k, v in before.items() if k not in compiled} == after
    status = state.inspect(series, locate.find_target(env.venv))
    assert status.state is state.TreeState.PRISTINE
    assert status.files["backends/arm/p0/created.py"] is state.FileState.PRISTINE
    assert status.digests["backends/arm/p0/created.py"] == "missing"
    pip(env.venv, "uninstall", "--yes", "executorch")
    assert snapshot(env.site) == env.empty


def test_a_created_file_that_exists_or_has_no_folder_is_refused(env: Env, tmp_path: Path) -> None:
    files = {repo_path(i): old_text(i).encode() for i in range(N)}
    create = {"0100-create.patch": patch_text("Create", created_diff(*next(iter(CREATED.items()))))}
    series = write_series(tmp_path / "patches", create, files)
    there = env.site / "executorch" / "backends/arm/p0/created.py"
    there.write_text("someone else's\n")
    before = snapshot(env.site)
    with pytest.raises(OverlayError) as info:
        transaction.apply(series, locate.find_target(env.venv))
    assert info.value.message == "1 file(s) are neither pristine nor patched; nothing was written"
    assert info.value.details == "    backends/arm/p0/created.py: drifted"
    assert snapshot(env.site) == before
    there.unlink()
    elsewhere = {
        "0100-create.patch": patch_text("Create", created_diff("backends/arm/nx/n.py", "N = 1\n"))
    }
    series = write_series(tmp_path / "elsewhere", elsewhere, files)
    before = snapshot(env.site)
    with pytest.raises(OverlayError) as info:
        transaction.apply(series, locate.find_target(env.venv))
    assert info.value.message == (
        "executorch/backends/arm/nx/n.py cannot be created: its folder does not exist;"
        " nothing was written"
    )
    assert snapshot(env.site) == before
