"""The frame that opens its own chunk of CPython's frame stack (overlay/_frame_stack.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from overlay import _frame_stack
from overlay._frame_stack import in_own_chunk
from overlay.envs.verify_install import IMPORT_CHECK

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
    """A model of CPython's rule (push_chunk), not a measurement: the frame's own fields are
    counted as none where that makes the chunk smaller, as 16 where it leaves less room."""
    code = in_own_chunk.__code__
    slots = code.co_stacksize + code.co_nlocals
    assert _chunk_for(slots) >= 512 * 1024
    assert _chunk_for(slots) - WORD * (slots + 16) >= 256 * 1024  # for the call's own frames


def test_the_import_check_runs_in_another_python_with_the_standard_library_alone() -> None:
    """verify_install's check runs this file in another env's Python, where no overlay is
    installed: -I -S leaves only the standard library on the path."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, _frame_stack.__file__, "json", "nope.x"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["json"] == {"file": json.__file__}
    assert found["nope.x"]["missing"] == "nope"
