"""Worker processes as the controller sees them: start, request with a timeout, restart
(a timeout or a crash fails only that one item)."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

import overlay
from overlay import _process, lines
from overlay._cache import cache_dir
from overlay._hashing import tree_digest
from overlay.equivalence import protocol
from overlay.equivalence.worker.envinfo import EnvInfo
from overlay.errors import EquivalenceError, EquivalenceInputError

ENVINFO_MODULE = "overlay.equivalence.worker.envinfo"
NO_PYTHON_HINT = (
    "pass --stock-python / --patched-python (the python of a venv with stock executorch and"
    " of one with the patched build), or, in a checkout, run `nox -s equivalence`"
)
R = TypeVar("R", bound=protocol.Reply)
LIBRARY_DAYS = 7  # a worker library copy unused this long is removed


class WorkerTimeoutError(EquivalenceError):
    """A worker did not answer one request in time (it was stopped)."""


class WorkerDiedError(EquivalenceError):
    """A worker process ended while a request was open."""


@dataclass(frozen=True)
class Plan:
    """How one path's workers are started: the path's own, then what every path shares."""

    path: protocol.PathId
    python: str
    runtime_patch: str | None  # only path (b) has one
    pythonpath: str  # extra entries before the overlay package copy ("" for none)
    log_dir: Path
    library: Path  # the folder holding only the overlay package (:func:`worker_library`)
    patches_dir: Path
    timeout: float
    worker_command: tuple[str, ...]
    models: str | None


def worker_library(root: Path | None = None) -> Path:
    """Return a copy of only the overlay package's sources, for a worker's path, shared by
    runs of the same overlay (``root``: ``<cache>/worker-library``; old copies are removed)."""
    source = Path(overlay.__file__).resolve().parent
    digest = tree_digest(source)[:16]
    root = root or cache_dir() / "worker-library"
    folder = root / digest
    if not (folder / "overlay").is_dir():
        scratch = root / f".{digest}-{os.getpid()}-{threading.get_ident()}"
        for path in source.rglob("*.py"):
            copy = scratch / "overlay" / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
        try:
            scratch.rename(folder)
        except OSError:  # another run made it first
            shutil.rmtree(scratch)
        stale = time.time() - LIBRARY_DAYS * 86400
        for old in root.iterdir():
            if old != folder and old.stat().st_mtime < stale:
                shutil.rmtree(old, ignore_errors=True)
    os.utime(folder)  # in use: not stale
    return folder


def _environment(plan: Plan) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (plan.pythonpath, str(plan.library)) if p)
    env.setdefault("PYTHONHASHSEED", "0")
    env[lines.PATCHES_ENV] = str(plan.patches_dir.resolve())
    return env


def env_info(plan: Plan, package: str, subtree: str) -> EnvInfo:
    """Describe the environment a path's workers get; a ``module:FUNCTION`` runtime patch
    is looked up there, not imported, and refused before any worker starts if missing."""
    target, _, function = (plan.runtime_patch or "").partition(":")
    module = (
        [f"{target}:{function or 'apply_all'}"] if target and not target.endswith(".py") else []
    )
    command = [plan.python, "-m", ENVINFO_MODULE, package, subtree, *module]
    where = f"path ({plan.path.value}) {plan.path.label}"

    def refuse(found: str) -> EquivalenceInputError:
        return EquivalenceInputError(
            f"cannot run the Python of {where}",
            expected=f"a Python with torch and executorch: python -m {ENVINFO_MODULE} prints"
            " one line",
            found=f"{plan.python}: {found}",
            hint=f"check that {plan.python} runs (Python >= 3.11); " + NO_PYTHON_HINT,
        )

    info = _process.json_line(
        EnvInfo,
        command,
        refuse,
        timeout=120,
        env=_environment(plan),
        cwd=plan.log_dir,
    )
    if info.module_error and not info.module_sha256:
        raise EquivalenceInputError(
            f"--runtime-patch {plan.runtime_patch}: the module is not importable in {where}",
            expected=f"module {target} in {plan.python}'s environment",
            found=info.module_error[:400],
            hint="pass --runtime-patch FILE.py:FUNCTION, or install the module in that env",
        )
    if info.module_error:
        names = info.module_functions
        some = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") or "none"
        raise EquivalenceInputError(
            f"--runtime-patch {plan.runtime_patch}: no such function in {where}",
            expected=f"a top-level function {function or 'apply_all'} in {target}",
            found=f"{info.module_error}; its functions: {some}",
            hint=f"name the function that applies the patch: --runtime-patch {target}:FUNCTION",
        )
    return info


class Slot:
    """One worker process of a path, spoken to in protocol lines, each request with a
    timeout; started on first use, and again after a timeout or a crash (a harness failure)."""

    def __init__(self, plan: Plan, index: int) -> None:
        self.plan = plan
        suffix = "" if index == 0 else f"-{index + 1}"
        self.log_path = plan.log_dir / f"worker-{plan.path.value}{suffix}.log"
        self.label = f"path ({plan.path.value}) {plan.path.label}"
        self.worker: subprocess.Popen[str] | None = None  # None: not started (or stopped)
        self.log: IO[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader: threading.Thread | None = None
        self.init: protocol.InitReply | None = None
        self.start_seconds = 0.0
        self.stopped = False

    def start(self) -> protocol.InitReply:
        """Start the process and initialise it (imports torch/executorch, runtime patch)."""
        started = time.perf_counter()
        plan = self.plan
        plan.log_dir.mkdir(parents=True, exist_ok=True)
        self.log = self.log_path.open("a", encoding="utf-8")
        try:
            self.worker = subprocess.Popen(
                [plan.python, *plan.worker_command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                env=_environment(plan),
                cwd=str(plan.log_dir),
            )
        except OSError as exc:
            self.log.close()
            raise EquivalenceInputError(
                f"cannot start the worker for {self.label}",
                expected="a Python with torch and executorch",
                found=f"{plan.python}: {exc}",
                hint=NO_PYTHON_HINT,
            ) from exc
        self.lines = queue.Queue()  # this process's lines, read by a thread of its own
        self.reader = threading.Thread(target=_read, args=(self.worker, self.lines), daemon=True)
        self.reader.start()
        request = protocol.InitRequest(runtime_patch=plan.runtime_patch, models=plan.models)
        self.init = self.request(request, protocol.InitReply, "start")
        self.start_seconds += time.perf_counter() - started
        return self.init

    def request(
        self,
        message: protocol.Request,
        reply_type: type[R],
        what: str,
        timeout: float | None = None,
    ) -> R:
        """Send one request (starting the worker if needed) and return its reply; raise on
        timeout, death or an ErrorReply. ``timeout``: a case's own, instead of the run's."""
        if self.worker is None:
            self.start()
        process = self.worker
        assert process is not None and process.stdin is not None
        limit = timeout or self.plan.timeout
        with contextlib.suppress(OSError):  # a closed pipe: the reader sees the end of output
            process.stdin.write(protocol.encode(message) + "\n")
            process.stdin.flush()
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            _stop(process)
            raise WorkerTimeoutError(
                f"{self.label} did not finish {what}",
                expected=f"a reply within {limit:.0f} s",
                found="no reply; the worker was stopped",
                hint=(
                    "the case sets its own timeout ('timeout' on its entry in a --models file's"
                    " CASES): raise it there, or run the item alone with --case"
                    if timeout
                    else "raise --timeout, or run the item alone with --case"
                ),
            ) from None
        if not line:
            process.wait()
            raise WorkerDiedError(
                f"the worker of {self.label} died during {what}",
                expected="one reply per request",
                found=f"exit code {process.returncode}; last log lines:\n{self.log_tail()}",
                hint=f"read its log: {self.log_path}",
            )
        reply = protocol.decode_reply(line)
        if isinstance(reply, protocol.ErrorReply) and reply.error.stage is protocol.Stage.INPUT:
            raise EquivalenceInputError(
                f"{self.label} could not {what}: an input is wrong",
                expected="a --runtime-patch and a --models file that load",
                found=reply.error.message,
                hint="fix the file named above (its traceback is in the worker's log:"
                f" {self.log_path})",
            )
        if isinstance(reply, protocol.ErrorReply):
            raise EquivalenceError(
                f"{self.label} could not {what}",
                expected="a Python with torch and executorch, and a runtime patch that applies",
                found=reply.error.first_line,
                hint=f"read the traceback below and the worker's log ({self.log_path})",
                details=reply.error.traceback,
            )
        if not isinstance(reply, reply_type):
            raise protocol.ProtocolError(
                f"{self.label} answered {what} with the wrong reply",
                expected=reply_type.__name__,
                found=type(reply).__name__,
            )
        return reply

    def run(
        self, request: protocol.RunRequest, timeout: float | None = None
    ) -> protocol.ItemResult:
        """Run one item; a timeout or crash is a harness failure (the worker is closed)."""
        try:
            reply = self.request(request, protocol.RunReply, str(request.item), timeout)
        except (WorkerTimeoutError, WorkerDiedError) as exc:
            self.close()
            kind = "WorkerTimeout" if isinstance(exc, WorkerTimeoutError) else "WorkerDied"
            return protocol.ItemResult(
                status=protocol.RunStatus.FAIL,
                error=protocol.ErrorInfo(kind, str(exc), protocol.Stage.HARNESS),
            )
        return reply.result

    def log_tail(self, lines: int = 8) -> str:
        """Return the last lines of the worker's log."""
        if self.log is not None:
            self.log.flush()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """Stop the worker now (another worker failed: the run is over)."""
        self.stopped = True
        if self.worker is not None:
            _stop(self.worker)

    def close(self) -> None:
        """Ask the worker to quit, wait for it, and close its pipes and log (if one runs)."""
        process = self.worker
        if process is None:
            return
        if process.poll() is None:
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.write(protocol.encode(protocol.QuitRequest()) + "\n")
                process.stdin.flush()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _stop(process)
        if self.reader is not None:
            self.reader.join(timeout=30)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self.log is not None:
            self.log.close()
        self.worker = None


def _read(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """Put each line the process writes into ``lines``, then "" at the end of its output."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put("")


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop a process now."""
    if process.poll() is None:
        process.kill()
    process.wait()
