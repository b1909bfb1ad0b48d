"""The venv builder: what a venv needs (plan), building and skipping, and interrupted syncs.

The fault-injection tests stop a sync at random points with SIGINT (to the process group,
as Ctrl-C does), SIGTERM and SIGKILL (to the overlay's process alone, as a CI runner or
the OOM killer does; SIGKILL to the group too), then run it again plainly: the venv must
be verified every time, and no uv may outlive the killed run. ``OVERLAY_FAULT_RUNS`` sets
how many runs each case gets (default 2 with the fake uv, 1 with the real one;
docs/environments.md quotes a longer run).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_uv
import pytest

from overlay import _mutex
from overlay.envs import uv_process, venvs
from overlay.envs.stamp import (
    STAMP_FILE,
    Flavour,
    Origin,
    Stamp,
    SyncState,
    read_stamp,
    write_stamp,
)
from overlay.envs.venvs import Contents, VenvAction
from overlay.errors import BusyError, EnvError, InstallCheckError

from scaffold import write_files

TESTS = Path(__file__).resolve().parent
RUNS = int(os.environ.get("OVERLAY_FAULT_RUNS", "0"))  # 0: the defaults below
ORIGIN = Origin("1.2.0", "cp311-manylinux_2_28_x86_64", "ab" * 32, Flavour.STOCK)


def lock_text(packages: dict[str, str]) -> str:
    return "".join(f"{n}=={v} \\\n    --hash=sha256:{'0' * 64}\n" for n, v in packages.items())


def contents(packages: dict[str, str], **kwargs: object) -> Contents:
    return Contents("test.txt", "3.11", lock_text(packages), packages, **kwargs)  # type: ignore[arg-type]


def make_uv(tmp_path: Path) -> str:
    script = tmp_path / "uv"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {TESTS / "fake_uv.py"} "$@"\n')
    script.chmod(0o755)
    return str(script)


def whole(venv: venvs.Venv, packages: dict[str, str]) -> None:
    """The import check of a fake env: every package's last file is there."""
    for name in packages:
        if not (venv.site / fake_uv.module(name) / "core.py").is_file():
            raise InstallCheckError(f"No module named '{fake_uv.module(name)}.core'")


def fake_venv(root: Path, packages: dict[str, str], version: str = "3.11") -> venvs.Venv:
    site = root / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion_info = {version}.7\n")
    for name, ver in packages.items():
        fake_uv.install(site, name, ver, 0.0)
    return venvs.find_venv(root)


A = {f"pkg-{i:02}": "1.0" for i in range(4)}


# --- plan: one case per branch ----------------------------------------------------------


def test_a_new_folder_is_installed_not_reported_as_drift(tmp_path: Path) -> None:
    step = venvs.plan_venv(contents(A), tmp_path / "new")
    assert step == venvs.VenvPlan(VenvAction.INSTALL, "installing 4 packages into a new venv")


def test_an_empty_venv_says_installing_n_packages(tmp_path: Path) -> None:
    fake_venv(tmp_path / "v", {})
    assert venvs.plan_venv(contents(A), tmp_path / "v") == venvs.VenvPlan(
        VenvAction.INSTALL, "installing 4 packages"
    )


def test_an_interrupted_sync_recreates(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path / "v", A)
    write_stamp(venv.root, Stamp(SyncState.SYNCING, contents(A).key, ""))
    step = venvs.plan_venv(contents(A), venv.root)
    assert step.action is VenvAction.RECREATE and "interrupted" in step.reason


def test_a_syncing_stamp_wins_over_a_missing_pyvenv_cfg(tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "lib").mkdir()  # what a killed `uv venv` may leave beside the stamp
    write_stamp(root, Stamp(SyncState.SYNCING, "k", ""))
    assert venvs.plan_venv(contents(A), root).action is VenvAction.RECREATE


def test_another_python_recreates(tmp_path: Path) -> None:
    fake_venv(tmp_path / "v", A, version="3.12")
    step = venvs.plan_venv(contents(A), tmp_path / "v")
    assert step == venvs.VenvPlan(VenvAction.RECREATE, "it runs Python 3.12, not 3.11")


def test_broken_files_recreate(tmp_path: Path) -> None:
    fake_venv(tmp_path / "v", A)
    step = venvs.plan_venv(contents(A), tmp_path / "v", broken=lambda v: "core.py was rewritten")
    assert step == venvs.VenvPlan(VenvAction.RECREATE, "core.py was rewritten")


def test_a_venv_without_stamp_is_synced_and_its_drift_named(tmp_path: Path) -> None:
    fake_venv(tmp_path / "v", {"pkg-00": "1.0", "pkg-01": "0.9", "six": "1.17.0"})
    step = venvs.plan_venv(contents(A), tmp_path / "v")
    assert step.action is VenvAction.SYNC
    assert step.reason == (
        "no stamp of a finished sync; pkg-01 0.9 (locked 1.0), pkg-02 missing,"
        " pkg-03 missing, six 1.17.0 (not in the lock)"
    )


def test_current_then_a_lock_change_then_a_hand_change(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path / "v", A)
    key = venvs.installed_key(venvs.installed_versions(venv.site))
    write_stamp(venv.root, Stamp(SyncState.READY, contents(A).key, key))
    assert venvs.plan_venv(contents(A), venv.root).action is VenvAction.CURRENT
    assert venvs.plan_venv(contents(A), venv.root, force=True) == venvs.VenvPlan(
        VenvAction.RECREATE, "--force"
    )
    newer = {**A, "pkg-03": "2.0"}
    step = venvs.plan_venv(contents(newer), venv.root)
    assert step == venvs.VenvPlan(VenvAction.SYNC, "test.txt changed; pkg-03 1.0 (locked 2.0)")
    fake_uv.install(venv.site, "tabulate", "0.9.0", 0.0)
    step = venvs.plan_venv(contents(A), venv.root)
    assert step == venvs.VenvPlan(
        VenvAction.SYNC, "packages changed by hand: tabulate 0.9.0 (not in the lock)"
    )


def test_packages_on_top_are_not_drift(tmp_path: Path) -> None:
    fake_venv(tmp_path / "v", {**A, "pytest": "8.4.2"})
    step = venvs.plan_venv(contents(A, on_top=("pytest",)), tmp_path / "v")
    assert (
        step.reason
        == "no stamp of a finished sync; the same versions, installed since the last sync"
    )


def test_a_folder_that_is_not_a_venv_is_refused_not_removed(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    with pytest.raises(EnvError, match="is not a virtual environment and not empty") as info:
        venvs.plan_venv(contents(A), tmp_path / "project")
    assert info.value.found == "notes.txt"
    assert (tmp_path / "project" / "notes.txt").read_text() == "mine"


# --- ensure, with the fake uv ------------------------------------------------------------


def test_built_stamped_then_skipped_without_running_uv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "uv.log"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "no-python"))  # uv finds one
    said: list[str] = []
    wanted = contents(A, origin=ORIGIN)
    first = venvs.ensure_venv(
        wanted, tmp_path / "v", verify=lambda v: whole(v, A), uv=make_uv(tmp_path),
        progress=said.append,
    )  # fmt: skip
    assert [p.action for p in first.plans] == [VenvAction.INSTALL]
    assert said == [f"installing 4 packages into a new venv: {tmp_path / 'v'} from test.txt"]
    stamp = read_stamp(tmp_path / "v")
    assert stamp == Stamp(
        SyncState.READY,
        wanted.key,
        venvs.installed_key(venvs.installed_versions(first.venv.site)),
        ORIGIN,
    )
    assert (tmp_path / "v" / venvs.REQUIREMENTS_FILE).read_text() == wanted.requirements
    calls = log.read_text().splitlines()
    assert calls[0].startswith("venv --quiet --allow-existing --python 3.11 ")
    assert calls[1].startswith("pip sync --python ") and "--require-hashes" in calls[1]
    again = venvs.ensure_venv(
        wanted, tmp_path / "v", verify=lambda v: whole(v, A), uv="/nonexistent"
    )
    assert [p.action for p in again.plans] == [VenvAction.CURRENT] and again.verified is None
    assert log.read_text().splitlines() == calls  # uv not run


def test_packages_on_top_are_held_to_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "uv.log"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    wanted = contents(A, on_top=("pkg-00", "extra"))
    venvs.ensure_venv(wanted, tmp_path / "v", verify=lambda v: None, uv=make_uv(tmp_path))
    top = log.read_text().splitlines()[-1]
    assert top.startswith("pip install --python ")
    assert top.endswith(f"-c {tmp_path / 'v' / venvs.REQUIREMENTS_FILE} pkg-00 extra")


def test_a_sync_that_verifies_badly_recreates_once(tmp_path: Path) -> None:
    uv = make_uv(tmp_path)
    venv = fake_venv(tmp_path / "v", {})
    fake_uv.install(venv.site, "pkg-00", "1.0", 0.0)
    (venv.site / "pkg_00" / "core.py").unlink()  # looks installed, does not import
    said: list[str] = []
    done = venvs.ensure_venv(
        contents(A), venv.root, verify=lambda v: whole(v, A), uv=uv, progress=said.append
    )
    assert [p.action for p in done.plans] == [VenvAction.SYNC, VenvAction.RECREATE]
    assert said[1] == (
        f"recreating {venv.root}: the synced venv fails its check: No module named 'pkg_00.core'"
    )
    whole(done.venv, A)


def test_a_fresh_venv_that_fails_its_check_is_an_error(tmp_path: Path) -> None:
    def never(venv: venvs.Venv) -> None:
        raise InstallCheckError("nope", expected="a", found="b", hint="h")

    with pytest.raises(InstallCheckError) as info:
        venvs.ensure_venv(
            contents(A), tmp_path / "v", verify=never, uv=make_uv(tmp_path), force=True
        )
    assert info.value.message == "a venv freshly synced from test.txt fails its check: nope"
    assert read_stamp(tmp_path / "v") == Stamp(SyncState.SYNCING, contents(A).key, "")


def test_a_failing_uv_says_why_and_leaves_the_syncing_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_UV_FAIL", "no such version")
    with pytest.raises(EnvError) as info:
        venvs.ensure_venv(
            contents(A, quiet=True), tmp_path / "v", verify=lambda v: None, uv=make_uv(tmp_path)
        )
    assert info.value.message == "`uv pip sync` failed"
    assert info.value.found == "exit code 2: no such version"
    assert "stale lock" in (info.value.hint or "")
    stamp = read_stamp(tmp_path / "v")
    assert stamp is not None and stamp.state is SyncState.SYNCING


def test_a_held_venv_is_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(venvs, "LOCK_TIMEOUT_S", 0.05)
    lock = _mutex.held(tmp_path / ".v.sync-lock", timeout=1, busy="", hint="")
    busy = pytest.raises(BusyError, match=f"another overlay run is syncing {tmp_path / 'v'}")
    with lock, busy:
        venvs.ensure_venv(contents(A), tmp_path / "v", verify=lambda v: None, uv="/nonexistent")


def test_recreate_keeps_the_interpreter_the_venv_was_made_from(tmp_path: Path) -> None:
    root = tmp_path / "v"
    fake_venv(root, A)
    home = tmp_path / "home"
    home.mkdir()
    (home / "python3.11").write_text("")
    (root / "pyvenv.cfg").write_text(f"home = {home}\nversion_info = 3.11.7\n")
    assert venvs._same_interpreter(root, "3.11") == str(home / "python3.11")
    assert venvs._same_interpreter(root, "3.12") == "3.12"


def test_a_new_venv_is_made_from_the_running_python_when_it_is_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    monkeypatch.setattr(sys, "base_prefix", str(base))
    monkeypatch.setattr(sys, "version_info", (3, 11, 7, "final", 0))
    assert venvs._running_interpreter("3.11") == "3.11"  # no such file: uv searches
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    assert venvs._running_interpreter("3.11") == str(base / "bin" / "python3.11")
    assert venvs._running_interpreter("3.12") == "3.12"
    assert venvs._running_interpreter("3.1") == "3.1"


# --- interrupted syncs -------------------------------------------------------------------

DRIVER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import fake_uv
from overlay.envs import uv_process, venvs
from overlay.errors import InstallCheckError
root, lock, uv = sys.argv[1:4]
locked = fake_uv.parse(Path(lock))
def verify(venv):
    for name in locked:
        if not (venv.site / fake_uv.module(name) / "core.py").is_file():
            raise InstallCheckError(f"No module named '{{fake_uv.module(name)}}.core'")
    return "verified"
wanted = venvs.Contents("lock.txt", sys.argv[4], Path(lock).read_text(), locked,
                        find_links=tuple(Path(p) for p in sys.argv[5:]))
done = venvs.ensure_venv(wanted, Path(root), verify=verify, uv=uv, progress=print)
print("result:", done.plans[-1].action.value)
"""


def drive(
    root: Path, lock: Path, uv: str, env: dict[str, str], *links: Path
) -> subprocess.Popen[str]:
    code = DRIVER.format(tests=str(TESTS))
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            str(root),
            str(lock),
            uv,
            f"{sys.version_info[0]}.{sys.version_info[1]}",
            *map(str, links),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: a group signal reaches it and its uv only
    )


def gone(pid: int) -> bool:
    """Wait (bounded) for a process to end; True when it did (a zombie counts as ended)."""
    for _ in range(200):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def settle(root: Path, lock: Path, uv: str, env: dict[str, str], *links: Path) -> str:
    """Run the sync plainly; return its output after checking the venv is whole."""
    proc = drive(root, lock, uv, env, *links)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert "result:" in out
    venv = venvs.find_venv(root)
    locked = fake_uv.parse(lock)
    assert venvs.installed_versions(venv.site) == locked
    for name in locked:
        assert (venv.site / fake_uv.module(name) / "core.py").is_file(), name
    stamp = read_stamp(root)
    assert stamp is not None and stamp.state is SyncState.READY
    return out


CASES = [
    (signal.SIGINT, "group"),  # Ctrl-C in a terminal
    (signal.SIGTERM, "process"),  # a CI runner's cancel, `kill PID`
    (signal.SIGKILL, "process"),  # the OOM killer
    (signal.SIGKILL, "group"),
]


def interrupt_then_rerun(
    tmp_path: Path, uv: str, env: dict[str, str], locks: list[Path], *, span: float, seed: int,
    runs: int, links: tuple[Path, ...] = (),
) -> list[str]:  # fmt: skip
    """Run interrupted syncs (fresh venv or an update) with a plain re-run after each."""
    rng = random.Random(seed)
    results = []
    for run in range(runs):
        root = tmp_path / f"venv{run}"
        sig, target = CASES[seed % len(CASES)]
        if rng.random() < 0.5:  # an update: the venv holds the first lock, finished
            settle(root, locks[0], uv, env, *links)
        pids = tmp_path / f"pids{run}"
        proc = drive(root, locks[1], uv, {**env, "FAKE_UV_PIDS": str(pids)}, *links)
        time.sleep(rng.uniform(0, span))
        if target == "group":
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        proc.communicate(timeout=120)
        for pid in pids.read_text().split() if pids.exists() else ():
            assert gone(int(pid)), f"uv {pid} outlived the killed run"
        left = read_stamp(root)
        state = left.state.value if left else "no stamp"
        out = settle(root, locks[1], uv, env, *links)
        if left is not None and left.state is SyncState.SYNCING:  # stopped inside a sync
            assert out.splitlines()[0].endswith(
                ": its last sync was interrupted (files may be half-written)"
            )
        results.append(
            f"{sig.name}/{target} exit {proc.returncode}, left {state}: {out.splitlines()[-1]}"
        )
    return results


@pytest.fixture
def fake_locks(tmp_path: Path) -> list[Path]:
    first = {f"pkg-{i:02}": "1.0" for i in range(12)}
    second = {
        **{f"pkg-{i:02}": "2.0" for i in range(6)},
        **{f"new-{i:02}": "1.0" for i in range(6)},
    }
    paths = []
    for name, packages in (("a.txt", first), ("b.txt", {**first, **second})):
        (tmp_path / name).write_text(lock_text(packages))
        paths.append(tmp_path / name)
    return paths


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{s.name}-{t}" for s, t in CASES])
def test_a_sync_stopped_anywhere_is_repaired_by_running_it_again(
    tmp_path: Path, fake_locks: list[Path], case: int
) -> None:
    uv = make_uv(tmp_path)
    env = {**os.environ, "FAKE_UV_DELAY": "0.002"}
    runs = RUNS or 2
    results = interrupt_then_rerun(tmp_path, uv, env, fake_locks, span=0.6, seed=case, runs=runs)
    assert len(results) == runs
    print("\n".join(results))


def tiny_wheels(folder: Path, count: int, files: int) -> dict[str, str]:
    """Write ``count`` wheels of ``files`` modules each; return their ``name==ver --hash`` lines."""
    folder.mkdir()
    lines = {}
    for index in range(count):
        name = f"overlaytest_{index:02}"
        path = folder / f"{name}-1.0-py3-none-any.whl"
        info = f"{name}-1.0.dist-info"
        members = {f"{name}/m{number:03}.py": b"X = 1\n" * 200 for number in range(files)}
        members[f"{name}/core.py"] = b"X = 1\n"
        members[f"{info}/METADATA"] = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
        )
        members[f"{info}/WHEEL"] = (
            b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        write_files(path, members)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines[name.replace("_", "-")] = f"{name}==1.0 --hash=sha256:{digest}"
    return lines


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{s.name}-{t}" for s, t in CASES])
def test_a_real_uv_sync_stopped_anywhere_is_repaired_by_running_it_again(
    tmp_path: Path, case: int
) -> None:
    uv = shutil.which("uv") or uv_process.find_uv()
    lines = tiny_wheels(tmp_path / "wheels", 12, 40)
    names = sorted(lines)
    locks = []
    for name, chosen in (("a.txt", names[:8]), ("b.txt", names)):
        (tmp_path / name).write_text("".join(lines[n] + "\n" for n in chosen))
        locks.append(tmp_path / name)
    env = {
        **os.environ,
        "UV_OFFLINE": "1",
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_LINK_MODE": "copy",  # slower, so the kill lands inside the install more often
    }
    runs = RUNS or 1
    results = interrupt_then_rerun(
        tmp_path, uv, env, locks, span=0.4, seed=case, runs=runs, links=(tmp_path / "wheels",)
    )
    assert len(results) == runs
    print("\n".join(results))


def test_the_stamp_is_codec_json(tmp_path: Path) -> None:
    write_stamp(tmp_path, Stamp(SyncState.READY, "k", "i", ORIGIN))
    data = json.loads((tmp_path / STAMP_FILE).read_text())
    assert data == {
        "contents": "k",
        "installed": "i",
        "origin": {
            "flavour": "stock",
            "line": "1.2.0",
            "lock_sha256": "ab" * 32,
            "tag": "cp311-manylinux_2_28_x86_64",
        },
        "state": "ready",
    }
    assert ORIGIN.describe() == (
        f"1.2.0/locks/cp311-manylinux_2_28_x86_64.txt (stock) sha256 {'ab' * 32}"
    )
    (tmp_path / STAMP_FILE).write_text('{"key": "an older overlay"}')
    assert read_stamp(tmp_path) is None
