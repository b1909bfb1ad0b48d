"""A lock file that names its holder's pid and that the holder deletes on release.

Not filelock: its flock file stays after release, and a tree's lock must not survive
``revert`` or ``pip uninstall``. A process that wins ``flock`` re-checks that the path still
names the inode it locked (a releasing holder deletes it), else opens it again.
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


def _names(path: Path, fd: int) -> bool:
    """Return True when ``path`` still names the file open at ``fd``."""
    try:
        return os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        return False


def holder(path: Path) -> int | None:
    """Return the pid the lock file at ``path`` names (None: absent, empty or unreadable)."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def acquire(path: Path, *, timeout: float, poll: Callable[[], None] | None = None) -> int | None:
    """Return the fd holding the lock at ``path`` (its folder made), or None after ``timeout`` s.

    ``poll`` is called each time the lock is found held (it may raise to stop waiting).
    OSError (permissions, a directory at ``path``) goes to the caller.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            # a releasing holder may remove the folder between mkdir and open (or between
            # mkdir's EEXIST and its is_dir() check): just try again
            path.parent.mkdir(exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except (FileNotFoundError, FileExistsError):
            if path.parent.exists() and not path.parent.is_dir():
                raise  # a file where the folder belongs: the caller reports it
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _names(path, fd):
                os.close(fd)  # the holder before us deleted it: try again on the new file
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        except BlockingIOError:
            os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
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
    """Hold the lock at ``path`` for the block (see :func:`acquire`); raise BusyError(``busy``),
    naming the holder's pid, after ``timeout``."""
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
