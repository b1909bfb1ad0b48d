"""Named points of a run where the fault-injection tests kill, interrupt or fail it.

A no-op unless the tests set ``$OVERLAY_TEST_FAULT`` (``<point>:<action>``, ``step 3/*``
for step 3 of however many) or ``$OVERLAY_TEST_TRACE`` (a file each point is written to).
"""

from __future__ import annotations

import errno
import os
import signal
import time

FAULT_ENV = "OVERLAY_TEST_FAULT"
TRACE_ENV = "OVERLAY_TEST_TRACE"


def fault_point(name: str) -> None:
    """Name a point of a run for the fault-injection tests; a no-op unless they set the env."""
    trace = os.environ.get(TRACE_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(name + "\n")
    where, _, action = os.environ.get(FAULT_ENV, "").rpartition(":")
    # "step 3/*" names step 3 of however many the transaction has
    if where == name or (where.endswith("/*") and name.startswith(where[:-1])):
        _fire(action, name)


def _fire(action: str, name: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # never reached: SIGKILL is not deferred
    elif action in ("sigint", "sigterm"):
        os.kill(os.getpid(), signal.SIGINT if action == "sigint" else signal.SIGTERM)
    elif action == "raise":
        raise OSError(errno.EIO, f"injected fault after {name}")
    else:
        raise ValueError(f"{FAULT_ENV}: unknown action {action!r}")
