"""A lock file that its holder deletes on release, safe against the unlink race.

The lock lives inside its target and must not survive ``revert`` or ``pip uninstall`` (as
filelock's would); a process that wins ``flock`` re-checks that the path still names the
inode it locked, else retries. The file holds the holder's pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from overlay.errors import BusyError

POLL_S = 0.05
_RETRY = -1  # the path names another inode now: open it again


def _try_lock(path: Path) -> int | None:
    """Lock ``path`` (creating it) without waiting; return the fd, or None if it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            on_disk = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            on_disk = None
        held = os.fstat(fd)
        if on_disk is None or (on_disk.st_dev, on_disk.st_ino) != (held.st_dev, held.st_ino):
            os.close(fd)  # the holder before us deleted it: try again on the new file
            return _RETRY
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def holder(path: Path) -> int | None:
    """Return the pid the lock file at ``path`` names (None: absent, empty or unreadable)."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def acquire(path: Path, *, timeout: float, poll: Callable[[], None] | None = None) -> int | None:
    """Return the fd holding the lock at ``path``, or None after ``timeout`` seconds.

    The parent folder is created when missing (and again if a releasing holder removed it).
    ``poll`` is called each time the lock is found held (it may raise to stop waiting).
    OSError (permissions, a directory at ``path``) goes to the caller.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            # mkdir(exist_ok=True) raises FileExistsError when a releasing holder removes
            # the folder between its EEXIST and its own is_dir() check: just try again.
            path.parent.mkdir(exist_ok=True)
            fd = _try_lock(path)
        except (FileNotFoundError, FileExistsError):
            if path.parent.exists() and not path.parent.is_dir():
                raise  # a file where the folder belongs: the caller reports it
            continue  # the folder went away between mkdir and open
        if fd == _RETRY:
            continue
        if fd is not None:
            return fd
        if time.monotonic() >= deadline:
            return None
        if poll is not None:
            poll()
        time.sleep(POLL_S)


def release(path: Path, fd: int, *, remove_folder: bool) -> None:
    """Delete the lock file (and, with ``remove_folder``, its folder when empty), then unlock."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        if remove_folder:
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # only succeeds when nothing else (a journal) is in it
    finally:
        os.close(fd)


@contextlib.contextmanager
def held(
    path: Path,
    *,
    timeout: float,
    busy: str,
    hint: str,
    remove_folder: bool = False,
    poll: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Hold the lock at ``path`` for the block; raise BusyError(``busy``) after ``timeout``.

    An OSError taking the lock (permissions, a directory at ``path``) goes to the caller;
    ``poll`` as for :func:`acquire`.
    """
    fd = acquire(path, timeout=timeout, poll=poll)
    if fd is None:
        pid = holder(path)
        raise BusyError(
            busy,
            expected=f"the lock within {timeout:.0f} s",
            found=f"{path} still held" + (f" by pid {pid}" if pid else ""),
            hint=hint,
        )
    try:
        yield
    finally:
        release(path, fd, remove_folder=remove_folder)
