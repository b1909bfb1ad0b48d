"""uv as a child process that never outlives the overlay, and where to find uv.

A sync stopped by SIGINT, SIGTERM or SIGKILL must not leave uv writing into the venv while
the next run repairs it. SIGINT and SIGTERM kill and reap uv before the overlay goes on
dying; on Linux the kernel kills uv when the overlay dies of SIGKILL
(``PR_SET_PDEATHSIG``, set with ctypes: the standard library has no wrapper for prctl).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from overlay.errors import EnvError

_PR_SET_PDEATHSIG = 1


def find_uv() -> str:
    """Return the uv executable: the ``uv`` package's binary, else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        pass
    else:
        try:
            return str(find_uv_bin())
        except FileNotFoundError:
            pass
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise EnvError(
        "uv is not available",
        expected="the uv package in this Python, or uv on PATH",
        found="neither",
        hint=f"{sys.executable} -m pip install uv",
    )


def run_uv(uv: str, args: list[str], *, quiet: bool, what: str, hint: str) -> None:
    """Run ``uv ARGS`` (its output shown unless ``quiet``); refuse a failure with ``hint``."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    pipe = subprocess.PIPE if quiet else None
    try:
        with _child(
            [uv, *args], env=env, stdout=pipe, stderr=pipe, text=True, preexec_fn=_die_with_us()
        ) as proc:
            out, err = proc.communicate()
    except OSError as exc:
        raise EnvError(f"cannot run uv: {exc}", hint=f"{sys.executable} -m pip install uv") from exc
    if proc.returncode != 0:
        raise EnvError(
            f"`uv {' '.join(args[:2])}` failed (exit code {proc.returncode})",
            expected=f"uv {what}",
            found=(_said(err or out or "")[-2000:] if quiet else "") or "the uv output above",
            hint=hint,
        )


def _said(output: str) -> str:
    """Return what uv said, without its ``Using Python ... environment at: ...`` preamble."""
    lines = output.strip().splitlines()
    return "\n".join(x for x in lines if not x.startswith("Using Python ")).strip()


class _Terminated(BaseException):
    """SIGTERM arrived while a child ran (raised by the handler, so the child is reaped)."""


@contextmanager
def _child(command: list[str], **kwargs: object) -> Iterator[subprocess.Popen[str]]:
    """Run a child that never outlives this process: killed on any exception or SIGTERM.

    On SIGTERM the child is killed and reaped, then this process gets SIGTERM again with
    the handler it had before (by default: it dies of it, as it would have).
    """
    proc: subprocess.Popen[str] = subprocess.Popen(command, **kwargs)  # type: ignore[call-overload]
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else signal.SIG_IGN

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise _Terminated  # Popen.wait holds a lock: reap the child outside this handler

    handled = previous is not signal.SIG_IGN
    if handled:
        signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield proc
    except BaseException as exc:
        proc.kill()
        proc.wait()
        if handled:
            signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
            handled = False
        if isinstance(exc, _Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        if handled:
            signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def _die_with_us() -> Callable[[], None] | None:
    """Return a pre-exec hook that makes the child die with this process (Linux), or None.

    prctl(PR_SET_PDEATHSIG) has no standard-library wrapper; ctypes calls it directly.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: do not run at all
            os._exit(1)

    return hook
