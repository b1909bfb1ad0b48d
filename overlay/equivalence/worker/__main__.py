"""``python -m overlay.equivalence.worker``: serve the protocol on stdin and stdout (what a
library prints goes to stderr, the worker's log, so it cannot corrupt the replies)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from overlay._frame_stack import in_own_chunk
from overlay.equivalence.worker.runner import TorchRunner
from overlay.equivalence.worker.serve import serve


def main() -> None:
    """Serve on stdin/stdout, with library output moved to stderr."""
    # this interpreter's bin folder on PATH, as activating its venv would: tools installed
    # beside executorch (``model_converter`` for VGF) are found on PATH
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    channel = os.dup(1)
    os.dup2(2, 1)  # anything printed by libraries goes to stderr
    sys.stdout = sys.stderr
    replies = io.TextIOWrapper(os.fdopen(channel, "wb"), encoding="utf-8", write_through=True)
    # torch is imported already (runner, lowering); the Arm backend's import and every
    # lowering run inside the chunk
    in_own_chunk(serve, sys.stdin, replies, TorchRunner())


if __name__ == "__main__":
    main()
