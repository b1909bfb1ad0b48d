"""The ready venv and the proof envs: what they are synced from, and the next step an error
gives (in a checkout, outside one; uv or pip), through ``verify-install`` and ``sync``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from overlay.cli import main
from overlay.distribution.provenance import local_version
from overlay.envs import lockfiles, ready_venv, venvs
from overlay.envs.stamp import Flavour, Origin, read_stamp
from overlay.envs.venvs import Venv, find_venv
from overlay.errors import InstallCheckError, TargetError, UnsupportedReleaseError, UsageError
from overlay.text.series import Series, load_series

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


def request(series: Series, flavour: Flavour) -> ready_venv.EnvRequest:
    pin = series.pins.wheel_for("cp311-manylinux_2_28_x86_64")
    lock = lockfiles.check_current(series, pin)
    return ready_venv.EnvRequest(series, pin, lock, flavour, (Path("/links"),), ("pytest",))


def test_the_patched_env_is_the_committed_lock_and_records_it(series: Series) -> None:
    wanted = request(series, Flavour.PATCHED).contents()
    lock = PATCHES / "locks" / "cp311-manylinux_2_28_x86_64.txt"
    assert wanted.requirements == lock.read_text()
    assert wanted.label == lock.name
    assert (wanted.locked, wanted.python, wanted.find_links, wanted.on_top) == (
        True,
        "3.11",
        (Path("/links"),),
        ("pytest",),
    )
    assert wanted.origin is not None and wanted.origin.describe() == (
        "1.2.0/locks/cp311-manylinux_2_28_x86_64.txt (patched) sha256"
        f" {hashlib.sha256(lock.read_bytes()).hexdigest()}"
    )


def test_the_stock_env_is_the_same_lock_with_stock_executorch(series: Series) -> None:
    patched = request(series, Flavour.PATCHED).contents()
    stock = request(series, Flavour.STOCK).contents()
    assert stock.label == "cp311-manylinux_2_28_x86_64.txt (stock)"
    pin = series.pins.wheel_for("cp311-manylinux_2_28_x86_64")
    assert f"executorch==1.2.0 \\\n    --hash=sha256:{pin.sha256}\n" in stock.requirements
    differ = set(stock.requirements.splitlines()) ^ set(patched.requirements.splitlines())
    assert {line.split()[0] for line in differ if "==" in line} == {
        "executorch==1.2.0",
        f"executorch=={local_version(series)}",
    }
    assert stock.origin is not None and patched.origin is not None
    assert stock.origin == Origin(
        patched.origin.line, patched.origin.tag, patched.origin.lock_sha256, Flavour.STOCK
    )
    assert stock.key != patched.key


def venv(root: Path, *, uv: bool, dists: dict[str, str] | None = None) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(
        "home = /usr/bin\nversion_info = 3.11.7\n" + ("uv = 0.13.9\n" if uv else "")
    )
    for name, version in (dists or {}).items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


def a_checkout(tmp_path: Path) -> Path:
    """Return a folder the overlay takes for its checkout (patches/ and its pyproject.toml)."""
    checkout = tmp_path / "clone"
    (checkout / "patches").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "executorch-arm-overlay"\n')
    return checkout


def test_in_a_checkout_the_next_step_is_the_build_or_sync(
    tmp_path: Path, series: Series, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = a_checkout(tmp_path)
    monkeypatch.chdir(checkout / "patches")
    ready = venv(checkout / ".nox" / ready_venv.ready_name("1.2.0", "3.11"), uv=True)
    assert ready_venv.repair_command(series, None, ready) == (
        "nox -s build_patched_executorch-3.11 -- --line 1.2.0"
    )
    other = venv(tmp_path / "mine", uv=True)
    assert ready_venv.repair_command(series, None, other) == (
        f"executorch-arm-overlay sync --target {other} --line 1.2.0"
    )
    assert ready_venv.repair_command(series, None, other, stock=True).endswith(" --stock")
    named_like = venv(checkout / "elsewhere" / ready_venv.ready_name("1.2.0", "3.11"), uv=True)
    named_hint = ready_venv.repair_command(series, None, named_like)
    assert named_hint.startswith("executorch-arm-overlay sync")


def test_a_new_ready_venv_that_fails_its_check_names_the_build_as_next_step(
    tmp_path: Path, series: Series, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is empty when sync starts: the next step is named once uv has made the venv."""
    checkout = a_checkout(tmp_path)
    monkeypatch.chdir(checkout)
    root = checkout / ".nox" / ready_venv.ready_name("1.2.0", "3.11")
    hints: list[str] = []

    def made_then_verified(
        contents: object, folder: Path, *, verify: Callable[[Venv], object], **_: object
    ) -> None:
        assert not folder.exists()  # the run starts from nothing
        venv(folder, uv=True)
        verify(find_venv(folder))

    def check(*_: object, repair: str, **__: object) -> None:
        hints.append(repair)

    monkeypatch.setattr(venvs, "ensure_venv", made_then_verified)
    monkeypatch.setattr(ready_venv, "check_installed", check)
    ready_venv.sync(request(series, Flavour.PATCHED), root)
    assert hints == ["nox -s build_patched_executorch-3.11 -- --line 1.2.0"]


def test_outside_a_checkout_the_next_step_is_uv_or_pip_with_the_lock(
    tmp_path: Path, series: Series, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    wheel = tmp_path / "cache" / "patched" / "k" / f"executorch-{local_version(series)}-cp311-x.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"the patched wheel")
    digest = hashlib.sha256(b"the patched wheel").hexdigest()
    lock_file = tmp_path / "lock.txt"
    lock_file.write_text(
        f"# inputs-key: k\nexecutorch=={local_version(series)} --hash=sha256:{digest}\n"
    )
    lock = lockfiles.read(lock_file)
    made_by_uv = venv(tmp_path / "uv-venv", uv=True)
    assert ready_venv.repair_command(series, lock, made_by_uv) == (
        f"uv pip sync --python {made_by_uv}/bin/python --require-hashes --reinstall-package"
        f" executorch --find-links {wheel.parent} {lock_file}"
    )
    made_by_pip = venv(tmp_path / "pip-venv", uv=False)
    wheel.write_bytes(b"another build")  # the cache no longer holds the pinned bytes
    pip = f"{made_by_pip}/bin/python -m pip"
    assert ready_venv.repair_command(series, lock, made_by_pip) == (
        f"{pip} uninstall --yes executorch && {pip} install --require-hashes"
        f" --find-links DIR_WITH_THE_PATCHED_WHEEL -r {lock_file}"
    )
    system = ready_venv.repair_command(series, lock, Path("/usr"), Path("/usr/bin/python3"))
    assert system.startswith("/usr/bin/python3 -m pip uninstall --yes executorch && ")


def test_verify_install_of_a_pip_venv_outside_a_checkout_names_the_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    target = venv(tmp_path / "venv", uv=False, dists={"torch": "2.15.0"})
    code = main(["--patches", str(PATCHES), "verify-install", "--target", str(target), "--json"])
    assert code == InstallCheckError.exit_code
    report = json.loads(capsys.readouterr().out)
    lock = PATCHES / "locks" / "cp311-manylinux_2_28_x86_64.txt"
    pip = f"{target}/bin/python -m pip"
    assert report["hint"] == (
        f"{pip} uninstall --yes executorch && {pip} install --require-hashes"
        f" --find-links DIR_WITH_THE_PATCHED_WHEEL -r {lock}"
    )
    assert "nox" not in report["hint"]


def two_lines(tmp_path: Path) -> Path:
    """A lines root with the real 1.2.0 line and a copy of it posing as 1.5.1."""
    root = tmp_path / "patches"
    shutil.copytree(PATCHES, root / "1.2.0")
    shutil.copytree(PATCHES, root / "1.5.1")
    pins = root / "1.5.1" / "pins.toml"
    text = pins.read_text()
    pins.write_text(text.replace('executorch = "1.2.0"', 'executorch = "1.5.1"'))
    assert pins.read_text() != text
    return root


def test_verify_install_checks_an_env_against_the_line_of_its_executorch(
    tmp_path: Path, series: Series, capsys: pytest.CaptureFixture[str]
) -> None:
    root = two_lines(tmp_path)  # the newest line is 1.5.1; the env holds 1.2.0's build
    target = venv(tmp_path / "venv", uv=True, dists={"executorch": local_version(series)})
    args = ["--patches", str(root), "verify-install", "--target", str(target), "--no-lock"]
    assert main([*args, "--no-import"]) == InstallCheckError.exit_code
    err = capsys.readouterr().err
    assert f"release line 1.2.0 (the installed executorch {local_version(series)})" in err
    assert "cannot be read" in err  # checked as 1.2.0's: the fake env has no files
    assert main([*args, "--no-import", "--line", "1.5.1"]) == TargetError.exit_code
    err = capsys.readouterr().err  # another release's line: as status, check and apply say it
    assert err.startswith("error: line 1.5.1 is for executorch 1.5.1; the target holds")
    assert "next step: drop --line: the installed executorch has its own line, 1.2.0" in err
    stock = venv(tmp_path / "stock", uv=True, dists={"executorch": "1.4.1"})
    code = main(["--patches", str(root), "verify-install", "--target", str(stock), "--no-lock"])
    assert code == UnsupportedReleaseError.exit_code
    assert "executorch 1.4.1 has no release line here" in capsys.readouterr().err


def test_sync_refuses_an_unknown_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = two_lines(tmp_path)
    monkeypatch.chdir(tmp_path)  # the default --dist, dist/<line>, would be made here
    argv = ["--patches", str(root), "sync", "--target", str(tmp_path / "v"), "--line", "1.4.1"]
    code = main(argv)
    assert code == UsageError.exit_code
    err = capsys.readouterr().err
    assert "expected: one of the supported lines: 1.2.0, 1.5.1" in err
    assert not (tmp_path / "v").exists() and not (tmp_path / "dist").exists()


def test_the_ready_venv_is_named_by_line_and_python() -> None:
    assert ready_venv.ready_name("1.5.1", "3.12") == "ready-1.5.1-py3.12"


# `python -m overlay` with Ctrl-C as from a terminal: a background job (CI under nohup)
# inherits SIGINT ignored, and Python then keeps ignoring it.
AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    " sys.argv[0] = 'overlay'; runpy.run_module('overlay', run_name='__main__', alter_sys=True)"
)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGKILL, False)],
    ids=["SIGINT-group", "SIGTERM", "SIGKILL"],
)
def test_a_ready_venv_sync_stopped_mid_install_is_repaired_by_running_it_again(
    tmp_path: Path, sig: signal.Signals, group: bool
) -> None:
    """The real lock and wheel: stopped while uv installs, then `sync` again: verified."""
    venv = tmp_path / "venv"
    command = [
        sys.executable, "-m", "overlay", "--patches", str(PATCHES),
        "sync", "--target", str(venv), "--dist", str(tmp_path / "dist"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, *command[3:]],
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, cwd=ROOT,
    )  # fmt: skip
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    while proc.poll() is None and len(list(site.glob("*.dist-info"))) < 30:
        time.sleep(0.02)  # polling for a state, not asserting a time
    assert proc.poll() is None, "the sync ended before uv had installed 30 packages"
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.communicate(timeout=600)
    # The signal may land after uv finished, once the stamp is written: the sync then
    # completed (a stamp) instead of stopping half-way (no stamp).
    interrupted = read_stamp(venv) is None
    again = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    anew = ": no stamp of a finished sync: a new venv" in again.stderr
    assert anew is interrupted
    said = "ok" if interrupted else "up to date"
    assert again.stdout.startswith(f"{said}: {venv} is exactly cp311-manylinux_2_28_x86_64.txt")
    assert read_stamp(venv) is not None
