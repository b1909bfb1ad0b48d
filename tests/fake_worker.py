"""A torch-free stand-in for the equivalence worker: the real protocol, scripted behaviour.

Case ``ok`` returns a fixed result, ``slow`` sleeps past any test timeout, ``patient``
works 6 s under its own 30 s timeout, ``crash`` kills the process, probe ``where`` reports
where ``overlay`` was imported from and the path.
"""

from __future__ import annotations

import os
import sys
import time

import overlay
from overlay.equivalence.protocol import (
    CaseInfo,
    InitReply,
    InitRequest,
    ItemKind,
    ItemResult,
    JsonValue,
    ListReply,
    ProbeInfo,
    RunRequest,
    RunStatus,
)
from overlay.equivalence.worker import serve

CASES = (
    CaseInfo("ok", "TOSA-1.0+INT", "a8w8", fast=True),
    CaseInfo("slow", "TOSA-1.0+INT", "a8w8", fast=True),
    CaseInfo("crash", "TOSA-1.0+INT", "a8w8", fast=True),
    CaseInfo("after", "TOSA-1.0+INT", "a8w8", fast=True),
    CaseInfo("patient", "TOSA-1.0+INT", "a8w8", timeout=30.0),
)


class FakeRunner:
    """Answers like a worker, without torch."""

    def init(self, request: InitRequest) -> InitReply:
        """Pretend to import and patch."""
        return InitReply(sys.executable, "1.2.0", "none", 0.0, ())

    def cases(self) -> ListReply:
        """Return the scripted cases ($FAKE_CASES selects some) and one probe."""
        wanted = os.environ.get("FAKE_CASES")
        default = [c.name for c in CASES if c.name != "patient"]
        names = wanted.split(",") if wanted is not None else default
        cases = tuple(c for c in CASES if c.name in names)
        return ListReply(cases, (ProbeInfo("where", "where overlay comes from"),))

    def run(self, request: RunRequest) -> ItemResult:
        """Behave as the item's name says."""
        if request.item.kind is ItemKind.PROBE:
            value: JsonValue = {
                "overlay": overlay.__file__,
                "path": list(sys.path),
                "cwd": os.getcwd(),
            }
            return ItemResult(RunStatus.OK, value=value)
        if request.item.name == "slow":
            time.sleep(60)
        if request.item.name == "patient":
            time.sleep(6)
        if request.item.name == "crash":
            os._exit(3)
        return ItemResult(RunStatus.OK, graph=("cpu: add",))


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout, FakeRunner())
