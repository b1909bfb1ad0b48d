"""Child processes that never outlive the overlay: run, refuse a failure, decode a JSON line."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TypeVar

from overlay import codec
from overlay.errors import OverlayError

T = TypeVar("T")
Refuse = Callable[[str], OverlayError]  # what was found -> the caller's error
TAIL = 2000  # characters of a failed child's output kept in the error
_PR_SET_PDEATHSIG = 1


def run(
    command: Sequence[str],
    refuse: Refuse,
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    quiet: bool = True,
) -> str:
    """Run ``command``; return its stdout, or raise ``refuse(what was found)`` on a failure.

    ``quiet=False`` shows the child's output instead of capturing it ("" is returned).
    """
    pipe = subprocess.PIPE if quiet else None
    try:
        with _child(
            list(command), env=env, cwd=cwd, stdout=pipe, stderr=pipe, text=True,
            preexec_fn=_die_with_us(),
        ) as proc:  # fmt: skip
            out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise refuse(f"no answer within {timeout:.0f} s: {named(command)}") from exc
    except OSError as exc:
        raise refuse(f"cannot run {command[0]}: {exc}") from exc
    if proc.returncode != 0:
        shown = (err or out or "").strip()[-TAIL:] if quiet else "the output above"
        raise refuse(f"exit code {proc.returncode}" + (f": {shown}" if shown else ""))
    return out or ""


def named(command: Sequence[str]) -> str:
    """Return ``command`` as an error names it, a script argument (one of several lines) as
    ``<script>``.

    Example: ``["python", "-c", "import x\\nx.run()", "a"]`` gives ``python -c <script> a``.
    """
    return " ".join("<script>" if "\n" in word else word for word in command)


def json_line(
    cls: type[T],
    command: Sequence[str],
    refuse: Refuse,
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> T:
    """Run ``command``; decode the last line it prints as a ``cls`` (lines before it: noise)."""
    lines = run(command, refuse, timeout=timeout, env=env, cwd=cwd).strip().splitlines()
    try:
        return codec.loads(cls, lines[-1] if lines else "", cls.__name__)
    except codec.CodecError as exc:
        raise refuse(f"not one JSON line of {cls.__name__}: {exc.message}: {exc.found}") from exc


class _Terminated(BaseException):
    """SIGTERM arrived while a child ran (raised by the handler, so the child is reaped)."""


@contextmanager
def _child(command: list[str], **kwargs: object) -> Iterator[subprocess.Popen[str]]:
    """Run a child that never outlives this process: killed on any exception or SIGTERM.

    On SIGTERM the child is killed and reaped, then this process gets SIGTERM again with
    the handler it had before (by default: it dies of it, as it would have).
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else signal.SIG_IGN

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise _Terminated  # Popen.wait holds a lock: reap the child outside this handler

    handled = previous is not signal.SIG_IGN
    with subprocess.Popen(command, **kwargs) as proc:  # type: ignore[call-overload]
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
