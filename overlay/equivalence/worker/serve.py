"""The worker's protocol loop: one reply line per request line; nothing raised escapes.

Torch-free, so tests drive it with a scripted runner (``tests/fake_worker.py``).
"""

from __future__ import annotations

import re
import sys
import sysconfig
import traceback
from typing import Protocol, TextIO

from overlay.equivalence import protocol

_ADDRESS_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_MESSAGE_LIMIT = 4000


class Runner(Protocol):
    """What a worker process does with each request."""

    def init(self, request: protocol.InitRequest) -> protocol.InitReply:
        """Prepare the process (imports, runtime patch, user models)."""

    def cases(self) -> protocol.ListReply:
        """Return the items this worker can run."""

    def run(self, request: protocol.RunRequest) -> protocol.ItemResult:
        """Run one item; a failure of the model is data in the result."""


class InputError(Exception):
    """The user's runtime patch or models file cannot be used (replied with Stage.INPUT)."""


def _site_prefixes() -> list[str]:
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix}
    return sorted(paths, key=len, reverse=True)


def normalise_message(message: str) -> str:
    """Strip what differs between environments but not between behaviours."""
    for prefix in _site_prefixes():
        message = message.replace(prefix, "<env>")
    return _ADDRESS_RE.sub("0x?", message)[:_MESSAGE_LIMIT]


def error_info(exc: BaseException, stage: protocol.Stage) -> protocol.ErrorInfo:
    """Return an exception as protocol data; a wrapped error leads with its root cause.

    executorch's pass manager re-raises a pass's error as ``Exception: An error occurred
    when running ... after the following passes: [...]``; the root cause is what differs.
    """
    message, root, seen = str(exc), exc, {id(exc)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:  # the innermost
        root = root.__cause__
        seen.add(id(root))
    if root is not exc:
        message = f"{type(root).__name__}: {root}\n(raised as: {message[:300]})"
    return protocol.ErrorInfo(
        type=type(exc).__name__,
        message=normalise_message(message),
        stage=stage,
        traceback=normalise_message("".join(traceback.format_exception(exc))[-3000:]),
    )


def handle(runner: Runner, line: str) -> protocol.Reply | None:
    """Answer one request line; None means quit. Nothing raised escapes."""
    try:
        request = protocol.decode_request(line)
    except protocol.ProtocolError as exc:
        return protocol.ErrorReply(error_info(exc, protocol.Stage.REQUEST))
    if isinstance(request, protocol.QuitRequest):
        return None
    try:
        if isinstance(request, protocol.InitRequest):
            return runner.init(request)
        if isinstance(request, protocol.ListRequest):
            return runner.cases()
        return protocol.RunReply(request.item, runner.run(request))
    except InputError as exc:
        return protocol.ErrorReply(error_info(exc, protocol.Stage.INPUT))
    except Exception as exc:
        stage = (
            protocol.Stage.INIT
            if isinstance(request, protocol.InitRequest)
            else protocol.Stage.REQUEST
        )
        return protocol.ErrorReply(error_info(exc, stage))


def serve(requests: TextIO, replies: TextIO, runner: Runner) -> None:
    """Answer requests until a quit request or the end of input."""
    for line in requests:
        if not line.strip():
            continue
        reply = handle(runner, line)
        if reply is None:
            break
        replies.write(protocol.encode(reply) + "\n")
        replies.flush()
