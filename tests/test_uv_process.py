"""uv as a child: found (package, then PATH), and never outliving a killed overlay."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overlay.envs import venvs
from overlay.errors import EnvError, LockfileError

SLOW_UV = """#!/bin/sh
echo $$ > "{pids}"
exec sleep 300
"""
DRIVER = """
import signal
import sys
# Ctrl-C as from a terminal: a background job (CI under nohup) inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
from overlay.envs.venvs import run_uv
from overlay.errors import EnvError
run_uv(sys.argv[1], ["pip", "sync"], EnvError, quiet=False)
"""


def test_find_uv_prefers_the_uv_package_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uv

    assert venvs.find_uv() == str(uv.find_uv_bin())
    monkeypatch.setitem(sys.modules, "uv", None)  # the package missing: uv on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    script = tmp_path / "uv"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert venvs.find_uv() == str(script)
    script.unlink()
    with pytest.raises(EnvError, match="uv is not available"):
        venvs.find_uv()


def test_a_failing_uv_is_the_callers_error_with_its_output(tmp_path: Path) -> None:
    script = tmp_path / "uv"
    preamble = "Using Python 3.11.7 environment at: .venv"  # uv's first line: not its answer
    script.write_text(f"#!/bin/sh\necho '{preamble}' >&2\necho 'no such version' >&2\nexit 2\n")
    script.chmod(0o755)

    def refuse(found: str) -> LockfileError:
        return LockfileError("uv could not resolve", found=found, hint="h")

    with pytest.raises(LockfileError) as info:
        venvs.run_uv(str(script), ["pip", "compile", "x"], refuse)
    assert (info.value.message, info.value.found, info.value.hint) == (
        "uv could not resolve",
        "exit code 2: no such version",
        "h",
    )


def alive(pid: int) -> bool:
    """Wait (bounded) for a process to end; False once it has (a zombie counts as ended)."""
    for _ in range(200):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PDEATHSIG")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_uv_dies_with_the_overlay(tmp_path: Path, sig: signal.Signals) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "uv"
    script.write_text(SLOW_UV.format(pids=pids))
    script.chmod(0o755)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(script)])
    while not pids.exists() or not pids.read_text().strip():
        assert driver.poll() is None
        time.sleep(0.02)
    child = int(pids.read_text())
    driver.send_signal(sig)
    # a hang guard, not a speed target (a loaded 2-core machine took over 60 s once)
    assert driver.wait(timeout=600) == -sig  # it dies of the signal it got, as before
    assert not alive(child), f"uv {child} outlived the overlay after {sig.name}"
