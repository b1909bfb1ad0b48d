"""The frame that opens its own chunk of CPython's frame stack (overlay/_frame_stack.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from overlay import _frame_stack
from overlay._frame_stack import in_own_chunk

WORD = 8  # bytes of a frame slot on the 64-bit builds executorch ships wheels for
CHUNK = 16 * 1024  # CPython's first chunk size; a chunk doubles until the frame fits
HEADROOM = 1000  # slots a new chunk keeps beyond the frame that opened it


def _chunk_for(slots: int) -> int:
    size = CHUNK
    while size < WORD * (slots + HEADROOM):
        size *= 2
    return size


def test_the_call_is_made_with_its_arguments_and_its_result_returned() -> None:
    assert in_own_chunk(divmod, 17, 5) == (3, 2)
    assert in_own_chunk(lambda: "no arguments") == "no arguments"


def test_the_frame_opens_a_chunk_with_room_for_a_deep_import_after_it() -> None:
    code = in_own_chunk.__code__
    slots = code.co_stacksize + code.co_nlocals + 10  # 10: more than a frame's own fields
    chunk = _chunk_for(slots)
    assert chunk >= 512 * 1024
    assert chunk - WORD * slots >= 256 * 1024  # what the call's own frames may fill


def test_another_pythons_import_check_runs_the_source_as_a_script() -> None:
    """verify_install runs the module's source in another env's Python, before its check."""
    source = Path(_frame_stack.__file__).read_text(encoding="utf-8")
    script = source + "\nprint(in_own_chunk(sum, [1, 2, 3]))\n"
    done = subprocess.run(
        [sys.executable, "-s", "-P", "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout == "6\n"
