"""Run a call in its own 512 KiB chunk of CPython's frame stack.

CPython 3.11 and 3.12 keep Python frames in chunks of 16 KiB and unmap a chunk as soon as
the frame that opened it returns, so a recursion that keeps crossing a chunk's end maps and
unmaps one at each crossing (python/cpython#142183, fixed for 3.13 and 3.14 in 2026 by
caching one chunk). Importing executorch's Arm backend parses exir's ``edge.yaml`` with
ruamel.yaml's recursive composer: from some call depths that is 130,000 ``mmap``/``munmap``
pairs and a second of system time (docs/notes/measurements.md).

Stdlib only: :mod:`overlay.envs.verify_install` also runs this file in another environment's
Python. The frame opens a chunk only where the current one lacks room for it: a call nested
in another ``in_own_chunk`` fits in the outer chunk and gains nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def in_own_chunk(function: Callable[..., T], *args: object) -> T:
    """Return ``function(*args)``, called from a frame that opens a 512 KiB chunk: the
    call's own frames fill the 263 KiB this frame leaves free in it (deeper, they go on in
    16 KiB chunks again)."""
    return function(*args)


# A frame needs its slots plus 1,000 of headroom in one chunk; chunks double from 16 KiB.
# 2**15 - 999 slots (8 bytes each) is just over 256 KiB with the headroom: a 512 KiB chunk.
in_own_chunk.__code__ = in_own_chunk.__code__.replace(co_stacksize=(1 << 15) - 999)
