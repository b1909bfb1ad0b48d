"""Release envs: built once with uv, keyed by what is in them, rebuilt after a crash."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from overlay.envs import release_venvs
from overlay.envs.release_venvs import EnvSpec, ensure, folder_for
from overlay.errors import EnvError

FAKE_UV = """#!/bin/sh
echo "$@" >> "{log}"
if [ "$1" = venv ]; then
  for last; do :; done
  mkdir -p "$last/bin" && ln -sf "{python}" "$last/bin/python"
fi
if [ "$1" = pip ] && [ -n "$FAIL_INSTALL" ]; then echo "no such version" >&2; exit 2; fi
"""


@pytest.fixture
def uv(tmp_path: Path) -> tuple[str, Path]:
    log = tmp_path / "uv.log"
    script = tmp_path / "uv"
    script.write_text(FAKE_UV.format(log=log, python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), log


def test_built_once_then_reused(tmp_path: Path, uv: tuple[str, Path]) -> None:
    command, log = uv
    spec = EnvSpec("executorch-9.9.9-stock", "3.11", ("executorch==9.9.9", "torch==2.13.0"))
    first = ensure(spec, tmp_path / "envs", uv=command)
    assert first.created and first.python.exists()
    assert first.folder == folder_for(spec, tmp_path / "envs")
    assert log.read_text().splitlines()[-1].endswith("executorch==9.9.9 torch==2.13.0")
    calls = len(log.read_text().splitlines())
    again = ensure(spec, tmp_path / "envs", uv=command)
    assert not again.created
    assert len(log.read_text().splitlines()) == calls  # the stamp matched: uv not run


def test_key_follows_local_wheel_content(tmp_path: Path) -> None:
    wheel = tmp_path / "executorch-1.5.1+armfix.x-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"one")
    spec = EnvSpec("e", "3.11", (str(wheel),))
    before = spec.key
    wheel.write_bytes(b"two")
    assert spec.key != before
    assert EnvSpec("e", "3.12", (str(wheel),)).key != spec.key


def test_failed_install_leaves_no_stamp_and_says_why(
    tmp_path: Path, uv: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    command, _ = uv
    spec = EnvSpec("bad", "3.11", ("torch==0.0.1",))
    monkeypatch.setenv("FAIL_INSTALL", "1")
    with pytest.raises(EnvError, match="uv pip failed") as info:
        ensure(spec, tmp_path, uv=command)
    assert "no such version" in str(info.value)
    assert release_venvs.read_stamp(folder_for(spec, tmp_path)) is None
    monkeypatch.delenv("FAIL_INSTALL")
    assert ensure(spec, tmp_path, uv=command).created  # the next call repairs it


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
    first = EnvSpec("e", "3.11", (str(tmp_path / "a" / name),))
    second = EnvSpec("e", "3.11", (str(tmp_path / "b" / name),))
    assert first.key == second.key and first.as_dict() == second.as_dict()
