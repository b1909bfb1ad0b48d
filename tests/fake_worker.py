"""A torch-free stand-in for the equivalence worker: the real protocol, scripted behaviour.

Which path it plays: (b) when started with a runtime patch, (c) when a folder named
``fake-patched`` is on its path, else (a). Case ``ok`` returns a fixed result, ``slow``
sleeps past any test timeout, ``patient`` works 6 s (past the tests' 5 s) under its own
30 s timeout, ``crash`` kills the process; ``fixed2``, ``regress1`` and ``changed3`` differ
between (a) and (b)/(c) the way a real fix does, and (a) given that single runtime fix
behaves like (b); ``lacks4`` fails on (a) and on (b), whose runtime patch lacks fix 4, unless
the request puts fix 4 in place; ``unrun`` lowers for VGF, which is not executed here; any
other name in ``$FAKE_CASES`` acts like ``ok``.
Probe ``where`` reports where ``overlay`` was imported from. A models file whose name
starts with ``invalid`` is refused at init as the real worker refuses a bad ``CASES``.
Every start and run is appended to ``$FAKE_LOG`` (path, item, fixes, process id) when it
is set: tests count them.
With ``$FAKE_BARRIER`` set to ``DIR:N``, no worker finishes its first item before N workers
of its path have been given one, so tests of work sharing do not depend on start-up timing.
"""

from __future__ import annotations

import os
import sys
import time

import overlay
from overlay.codec import JsonValue
from overlay.equivalence.protocol import (
    ErrorInfo,
    InitReply,
    InitRequest,
    ItemResult,
    ListReply,
    Numerics,
    OutputDigest,
    Payload,
    RunRequest,
    RunStatus,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.equivalence.worker.serve import InputError, serve
from overlay.items import CaseInfo, ItemKind, ProbeInfo

CASES = (
    *(
        CaseInfo(name, "TOSA-1.0+INT", "a8w8", fast=True)
        for name in (
            *("ok", "slow", "crash", "after", "fixed2", "regress1", "changed3", "lacks4"),
            "unrun",
        )
    ),
    CaseInfo("patient", "TOSA-1.0+INT", "a8w8", timeout=30.0),
)
DEFAULT_CASES = "ok,slow,crash,after"
GOOD = Numerics((OutputDigest("o1", "torch.float32", (1, 4)),), (0.01,), (0.001,), (2.0,))
LAVAPIPE = "not installed: lavapipe (apt-get install mesa-vulkan-drivers)"
WRONG = Numerics((OutputDigest("o2", "torch.float32", (1, 4)),), (1.5,), (1.5,), (2.0,))


def _barrier(path: str) -> None:
    """Register this worker, then wait until N workers of ``path`` have."""
    spec = os.environ.get("FAKE_BARRIER")
    if not spec:
        return
    folder, count = spec.rsplit(":", 1)
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"{path}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(n.startswith(f"{path}-") for n in os.listdir(folder)) >= int(count):
            return
        time.sleep(0.02)


def _log(text: str) -> None:
    name = os.environ.get("FAKE_LOG")
    if name:
        with open(name, "a", encoding="utf-8") as log:
            log.write(text + "\n")


class FakeRunner:
    """Answers like a worker, without torch."""

    def __init__(self) -> None:
        self.path = "c" if any(p.endswith("fake-patched") for p in sys.path) else "a"
        self.ran = False

    def init(self, request: InitRequest) -> InitReply:
        """Pretend to import and patch."""
        if request.runtime_patch:
            self.path = "b"
        if request.models and os.path.basename(request.models).startswith("invalid"):
            raise InputError(f"invalid models file {request.models}:\nx: CASES is empty")
        _log(f"init {self.path}")
        return InitReply(sys.executable, "1.2.0", "none", 0.0, ())

    def cases(self) -> ListReply:
        """Return the scripted cases ($FAKE_CASES selects some) and one probe."""
        wanted = os.environ.get("FAKE_CASES", DEFAULT_CASES).split(",")
        known = {c.name: c for c in CASES}
        cases = tuple(known.get(n, CaseInfo(n, "TOSA-1.0+INT", "a8w8", fast=True)) for n in wanted)
        return ListReply(cases, (ProbeInfo("where", "where overlay comes from"),))

    def run(self, request: RunRequest) -> ItemResult:
        """Behave as the item's name says."""
        if not self.ran:
            self.ran = True
            _barrier(self.path)
        _log(f"run {self.path} {request.item} {list(request.fixes)} {os.getpid()}")
        if request.item.kind is ItemKind.PROBE:
            value: JsonValue = {
                "overlay": overlay.__file__,
                "path": list(sys.path),
                "cwd": os.getcwd(),
            }
            return ItemResult(RunStatus.OK, value=value)
        name = request.item.name
        if name == "slow":
            time.sleep(60)
        if name == "patient":
            time.sleep(6)
        if name == "crash":
            os._exit(3)
        fixed = self.path != "a" or any(f"{n}" in name for n in request.fixes)
        if name == "lacks4" and self.path != "c" and 4 not in request.fixes:
            return ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "stock", Stage.LOWER))
        if name == "fixed2" and not fixed:
            return ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "stock", Stage.LOWER))
        if name == "regress1" and fixed:
            return ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "int16", Stage.LOWER))
        if name == "unrun":
            payloads = (Payload("VgfBackend", 3, "v"),)
            vgf = VgfResult(TargetState.COMPARED, payloads, run_reason=LAVAPIPE)
            return ItemResult(RunStatus.OK, graph=("cpu: add",), numerics=GOOD, vgf=vgf)
        if name == "changed3":
            graph = ("delegate[0] TOSABackend: aten.full",) if fixed else ("cpu: aten.full",)
            return ItemResult(RunStatus.OK, graph=graph, numerics=GOOD if fixed else WRONG)
        return ItemResult(RunStatus.OK, graph=("cpu: add",), numerics=GOOD)


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout, FakeRunner())
