"""``python -m overlay`` and the ``executorch-arm-overlay`` script: the command-line interface.

The signals are set before the commands are imported, so SIGTERM and Ctrl-C unwind (every
lock released, exit 143 or 130) even while the modules load. Once the command has returned
both are ignored: an apply that committed and said so is not turned into "interrupted".
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def run() -> int:
    """Run the CLI; return the exit code (130 after Ctrl-C, 143 after SIGTERM)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # not when started with it ignored
        signal.signal(signal.SIGTERM, _terminate)
    try:
        from overlay.cli import main

        code = main(process=True)
        for sig in (signal.SIGINT, signal.SIGTERM):  # the command is over: its exit code stands
            signal.signal(sig, signal.SIG_IGN)
        return code
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)


if __name__ == "__main__":
    raise SystemExit(run())
