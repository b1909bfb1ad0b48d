"""Release envs: built once with uv, keyed by what is in them, rebuilt after a crash."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from overlay.envs import release_venvs
from overlay.envs.release_venvs import ensure, env_contents, folder_for
from overlay.envs.stamp import read_stamp
from overlay.errors import EnvError

FAKE_UV = Path(__file__).resolve().parent / "fake_uv.py"


@pytest.fixture
def uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    log = tmp_path / "uv.log"
    monkeypatch.setenv("FAKE_UV_LOG", str(log))
    script = tmp_path / "uv"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_UV} "$@"\n')
    script.chmod(0o755)
    return str(script), log


def test_built_once_then_reused(tmp_path: Path, uv: tuple[str, Path]) -> None:
    command, log = uv
    spec = env_contents("executorch-9.9.9-stock", "3.11", ("executorch==9.9.9", "torch==2.13.0"))
    said: list[str] = []
    first = ensure(spec, tmp_path / "envs", uv=command, progress=said.append)
    assert first.python.exists()
    assert first.folder == folder_for(spec, tmp_path / "envs")
    assert said == [f"syncing {first.folder} to {spec.label}: a new Python 3.11 venv"]
    assert log.read_text().splitlines()[-1].startswith("pip install --python ")
    requirements = (first.folder / "overlay-requirements.txt").read_text()
    assert requirements == "executorch==9.9.9\ntorch==2.13.0\n"
    calls = len(log.read_text().splitlines())
    assert ensure(spec, tmp_path / "envs", uv=command) == first
    assert len(log.read_text().splitlines()) == calls  # the stamp matched: uv not run


def test_key_follows_local_wheel_content(tmp_path: Path) -> None:
    wheel = tmp_path / "executorch-1.5.1+armfix.x-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"one")
    before = env_contents("e", "3.11", (str(wheel),))
    wheel.write_bytes(b"two")
    after = env_contents("e", "3.11", (str(wheel),))
    assert after.salt != before.salt  # the folder's name
    assert after.key != before.key  # what the venv's stamp records
    assert env_contents("e", "3.12", (str(wheel),)).salt != after.salt


def test_failed_install_says_why_and_the_next_call_repairs_it(
    tmp_path: Path, uv: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    command, _ = uv
    spec = env_contents("bad", "3.11", ("torch==0.0.1",))
    monkeypatch.setenv("FAKE_UV_FAIL", "no such version")
    with pytest.raises(EnvError) as info:
        ensure(spec, tmp_path, uv=command)
    assert info.value.message == "`uv pip install` failed"
    assert info.value.found == "exit code 2: no such version"
    assert (
        info.value.hint
        == "check the pins (a version may not exist for this interpreter), then retry"
    )
    assert read_stamp(folder_for(spec, tmp_path)) is None
    monkeypatch.delenv("FAKE_UV_FAIL")
    assert ensure(spec, tmp_path, uv=command).python.exists()
    assert read_stamp(folder_for(spec, tmp_path)) is not None


def test_envs_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(release_venvs.ENVS_ENV, str(tmp_path))
    assert release_venvs.envs_root() == tmp_path
    monkeypatch.delenv(release_venvs.ENVS_ENV)
    monkeypatch.setenv("OVERLAY_CACHE_DIR", os.fspath(tmp_path / "c"))
    assert release_venvs.envs_root() == tmp_path / "c" / "envs"


def test_the_same_wheel_elsewhere_is_the_same_env(tmp_path: Path) -> None:
    name = "executorch-1.2.0+armfix.x-cp311-cp311-linux_x86_64.whl"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_bytes(b"same bytes")
    first = env_contents("e", "3.11", (str(tmp_path / "a" / name),))
    second = env_contents("e", "3.11", (str(tmp_path / "b" / name),))
    assert first.salt == second.salt
    assert folder_for(first, tmp_path) == folder_for(second, tmp_path)
