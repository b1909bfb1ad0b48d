"""The venv builder: the stamp deciding whether uv runs, building and skipping, and
interrupted syncs.

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
from collections.abc import Callable
from pathlib import Path

import fake_uv
import pytest

from overlay import _mutex
from overlay.envs import venvs
from overlay.envs.stamp import STAMP_FILE, Flavour, Origin, Stamp, read_stamp, write_stamp
from overlay.envs.venvs import Contents
from overlay.errors import BusyError, EnvError, InstallCheckError

from scaffold import write_files

TESTS = Path(__file__).resolve().parent
RUNS = int(os.environ.get("OVERLAY_FAULT_RUNS", "0"))  # 0: the defaults below
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
ORIGIN = Origin("1.2.0", "cp311-manylinux_2_28_x86_64", "ab" * 32, Flavour.STOCK)


def lock_text(packages: dict[str, str]) -> str:
    return "".join(f"{n}=={v} \\\n    --hash=sha256:{'0' * 64}\n" for n, v in packages.items())


def contents(packages: dict[str, str], **kwargs: object) -> Contents:
    return Contents("test.txt", "3.11", lock_text(packages), True, **kwargs)  # type: ignore[arg-type]


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


# --- stale: the stamp decides whether uv runs, uv what it installs ----------------------


def test_no_venv_or_another_python_is_a_new_venv(tmp_path: Path) -> None:
    assert venvs.stale(contents(A), tmp_path / "new") == "a new Python 3.11 venv"
    fake_venv(tmp_path / "v", A, version="3.12")
    write_stamp(tmp_path / "v", Stamp(contents(A).key))
    assert venvs.stale(contents(A), tmp_path / "v") == "a new Python 3.11 venv"


def test_a_half_made_venv_is_made_again_not_refused(tmp_path: Path) -> None:
    root = tmp_path / "v"
    (root / "lib").mkdir(parents=True)  # what a killed `uv venv` may leave
    (root / "CACHEDIR.TAG").write_text("")
    assert venvs.stale(contents(A), root) == "a new Python 3.11 venv"


def test_the_stamp_missing_of_other_contents_or_the_same(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path / "v", A)
    anew = "no stamp of a finished sync: a new venv"
    assert venvs.stale(contents(A), venv.root) == anew
    write_stamp(venv.root, Stamp(contents(A).key))
    assert venvs.stale(contents(A), venv.root) == ""
    assert venvs.stale(contents(A), venv.root, force=True) == "--force: a new venv"
    newer = contents({**A, "pkg-03": "2.0"})
    assert venvs.stale(newer, venv.root) == "test.txt changed since its last sync"
    old = '{"state": "ready", "contents": "k", "installed": "i"}'  # an older overlay's stamp
    (venv.root / STAMP_FILE).write_text(old)
    assert venvs.stale(contents(A), venv.root) == anew


def test_a_folder_that_is_not_a_venv_is_refused_not_removed(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    (tmp_path / "project" / "lib").mkdir()
    with pytest.raises(EnvError, match="is not a virtual environment and not empty") as info:
        venvs.ensure_venv(contents(A), tmp_path / "project", verify=lambda v: None, uv="/no")
    assert info.value.found == "notes.txt"
    assert (tmp_path / "project" / "notes.txt").read_text() == "mine"


# --- ensure, with the fake uv ------------------------------------------------------------


def verified(packages: dict[str, str]) -> Callable[[venvs.Venv], str]:
    def verify(venv: venvs.Venv) -> str:
        whole(venv, packages)
        return "verified"

    return verify


def test_built_stamped_last_then_skipped_without_running_uv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "uv.log"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "no-python"))  # uv finds one
    said: list[str] = []
    wanted = contents(A, origin=ORIGIN)
    root = tmp_path / "v"

    def verify(venv: venvs.Venv) -> str:
        assert read_stamp(root) is None  # the stamp comes last
        return verified(A)(venv)

    uv = make_uv(tmp_path)
    first = venvs.ensure_venv(wanted, root, verify=verify, uv=uv, progress=said.append)
    assert first == "verified"
    assert said == [f"syncing {root} to test.txt: a new Python 3.11 venv"]
    assert read_stamp(root) == Stamp(wanted.key, ORIGIN)
    assert (root / venvs.REQUIREMENTS_FILE).read_text() == wanted.requirements
    calls = log.read_text().splitlines()
    assert calls[0].startswith("venv --quiet --clear --python 3.11 ")
    assert calls[1].startswith("pip sync --python ") and "--require-hashes" in calls[1]
    again = venvs.ensure_venv(wanted, root, verify=verify, uv="/nonexistent")
    assert again is None
    assert log.read_text().splitlines() == calls  # uv not run


def test_uv_runs_as_the_stamp_says_and_decides_what_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Present and the same: no uv; another lock: a plain sync; missing: a new venv."""
    log = tmp_path / "uv.log"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    uv, root = make_uv(tmp_path), tmp_path / "v"
    newer = {**A, "pkg-03": "2.0"}

    def run(packages: dict[str, str], force: bool = False) -> list[str]:
        before = log.read_text().splitlines() if log.exists() else []
        venvs.ensure_venv(contents(packages), root, verify=verified(packages), uv=uv, force=force)
        return [call.split(" --python ")[0] for call in log.read_text().splitlines()[len(before) :]]

    assert run(A) == ["venv --quiet --clear", "pip sync"]
    assert run(A) == []
    assert run(newer) == ["pip sync"]
    site = venvs.find_venv(root).site
    assert venvs.installed_versions(site) == newer
    (root / STAMP_FILE).unlink()  # what a sync stopped after uv started leaves, with:
    (site / "pkg_00" / "core.py").unlink()  # a dist-info whole, a file missing
    assert run(newer) == ["venv --quiet --clear", "pip sync"]
    whole(venvs.find_venv(root), newer)
    (site / "mine.txt").write_text("")
    assert run(newer, force=True) == ["venv --quiet --clear", "pip sync"]
    assert not (site / "mine.txt").exists()


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


def test_a_venv_that_fails_its_check_is_not_stamped_and_the_next_run_makes_it_anew(
    tmp_path: Path,
) -> None:
    def never(venv: venvs.Venv) -> None:
        raise InstallCheckError("nope", expected="a", found="b", hint="h")

    uv, root = make_uv(tmp_path), tmp_path / "v"
    with pytest.raises(InstallCheckError, match="nope"):
        venvs.ensure_venv(contents(A), root, verify=never, uv=uv)
    assert read_stamp(root) is None
    assert venvs.stale(contents(A), root) == "no stamp of a finished sync: a new venv"
    assert venvs.ensure_venv(contents(A), root, verify=verified(A), uv=uv) == "verified"


def test_a_failing_uv_says_why_and_leaves_no_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "v"
    venvs.ensure_venv(contents(A), root, verify=lambda v: None, uv=make_uv(tmp_path))
    monkeypatch.setenv("FAKE_UV_FAIL", "no such version")
    with pytest.raises(EnvError) as info:
        venvs.ensure_venv(
            contents({**A, "pkg-03": "9"}, quiet=True), root, verify=lambda v: None,
            uv=make_uv(tmp_path),
        )  # fmt: skip
    assert info.value.message == "`uv pip sync` failed"
    assert info.value.found == "exit code 2: no such version"
    assert "stale lock" in (info.value.hint or "")
    assert read_stamp(root) is None


def test_a_held_venv_is_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(venvs, "LOCK_TIMEOUT_S", 0.05)
    lock = _mutex.held(tmp_path / ".v.sync-lock", timeout=1, busy="", hint="")
    busy = pytest.raises(BusyError, match=f"another overlay run is syncing {tmp_path / 'v'}")
    with lock, busy:
        venvs.ensure_venv(contents(A), tmp_path / "v", verify=lambda v: None, uv="/nonexistent")


def test_a_new_venv_keeps_the_python_it_was_made_from_else_the_running_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, none = tmp_path / "base", tmp_path / "none"
    monkeypatch.setattr(sys, "base_prefix", str(base))
    monkeypatch.setattr(sys, "version_info", (3, 11, 7, "final", 0))
    assert venvs._interpreter(none, "3.11") == "3.11"  # no such file: uv searches
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    assert venvs._interpreter(none, "3.11") == str(base / "bin" / "python3.11")
    assert venvs._interpreter(none, "3.12") == "3.12"
    assert venvs._interpreter(none, "3.1") == "3.1"
    root, home = tmp_path / "v", tmp_path / "home"
    fake_venv(root, A)
    home.mkdir()
    (home / "python3.11").write_text("")
    (root / "pyvenv.cfg").write_text(f"home = {home}\nversion_info = 3.11.7\n")
    assert venvs._interpreter(root, "3.11") == str(home / "python3.11")
    assert venvs._interpreter(root, "3.12") == "3.12"


# --- interrupted syncs -------------------------------------------------------------------

DRIVER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import fake_uv
from overlay.envs import venvs
from overlay.errors import InstallCheckError
root, lock, uv = sys.argv[1:4]
locked = fake_uv.parse(Path(lock))
def verify(venv):
    for name in locked:
        if not (venv.site / fake_uv.module(name) / "core.py").is_file():
            raise InstallCheckError(f"No module named '{{fake_uv.module(name)}}.core'")
    return "verified"
wanted = venvs.Contents("lock.txt", sys.argv[4], Path(lock).read_text(), True,
                        find_links=tuple(Path(p) for p in sys.argv[5:]))
done = venvs.ensure_venv(wanted, Path(root), verify=verify, uv=uv, progress=print)
print("result:", done or "up to date")
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
            PYTHON,
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
    assert stamp == Stamp(Contents("", PYTHON, lock.read_text(), True).key)
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
        left = "a stamp" if read_stamp(root) else "no stamp"
        first = settle(root, locks[1], uv, env, *links).splitlines()[0]
        done = first.rpartition(": ")[2]  # why the re-run synced, or "up to date"
        if left == "no stamp":  # stopped inside a sync, or before the first one finished
            assert done in ("a new venv", f"a new Python {PYTHON} venv"), first
        else:  # stopped before the stamp went, or after the new one was written
            assert done in ("lock.txt changed since its last sync", "up to date"), first
        results.append(f"{sig.name}/{target} exit {proc.returncode}, left {left}: {done}")
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
    uv = shutil.which("uv") or venvs.find_uv()
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
    write_stamp(tmp_path, Stamp("k", ORIGIN))
    data = json.loads((tmp_path / STAMP_FILE).read_text())
    assert data == {
        "sha256": "k",
        "origin": {
            "flavour": "stock",
            "line": "1.2.0",
            "lock_sha256": "ab" * 32,
            "tag": "cp311-manylinux_2_28_x86_64",
        },
    }
    assert ORIGIN.describe() == (
        f"1.2.0/locks/cp311-manylinux_2_28_x86_64.txt (stock) sha256 {'ab' * 32}"
    )
    (tmp_path / STAMP_FILE).write_text('{"key": "an older overlay"}')
    assert read_stamp(tmp_path) is None


def test_a_venv_uv_was_stopped_making_is_removed_and_nothing_else(tmp_path: Path) -> None:
    """A kill during ``uv venv`` leaves its parts and no pyvenv.cfg, which uv will not
    clear: that folder goes; one with pyvenv.cfg or a file of the user's stays."""
    unfinished = tmp_path / "unfinished"
    (unfinished / "bin").mkdir(parents=True)
    (unfinished / "lib" / "python3.11").mkdir(parents=True)
    (unfinished / ".gitignore").write_text("*\n")
    assert venvs.remove_unfinished_venv(unfinished) and not unfinished.exists()
    finished = tmp_path / "finished"
    (finished / "bin").mkdir(parents=True)
    (finished / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert not venvs.remove_unfinished_venv(finished) and finished.is_dir()
    theirs = tmp_path / "theirs"
    (theirs / "bin").mkdir(parents=True)
    (theirs / "notes.txt").write_text("mine")
    assert not venvs.remove_unfinished_venv(theirs) and (theirs / "notes.txt").is_file()
    assert not venvs.remove_unfinished_venv(tmp_path / "absent")
