"""Run the three paths and collect typed results; everything here is torch-free.

Three paths, one long-lived worker process each (:mod:`overlay.equivalence.worker`), run in
parallel: (a) stock executorch, (b) stock + a runtime patch, (c) the diff-patched build.
Each worker gets a folder holding only the overlay package on its path (never the
controlling environment's site-packages) and runs in the output folder, where its log goes.
A request that times out or a worker that dies becomes a harness failure of that one item;
the worker is restarted and the run goes on. Every (a)/(b) difference is attributed to one
fix by re-running the item on (a) with that single runtime fix. Verdicts are decided in
:mod:`overlay.equivalence.verdict`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TypeVar

import overlay
from overlay import fixes, pins
from overlay.equivalence import corpus, probes
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    ErrorReply,
    InitReply,
    InitRequest,
    ItemId,
    ItemResult,
    ListReply,
    ListRequest,
    PathId,
    ProbeInfo,
    ProtocolError,
    QuitRequest,
    Reply,
    Request,
    RunReply,
    RunRequest,
    RunStatus,
    Stage,
    decode_reply,
    encode,
)
from overlay.equivalence.verdict import (
    DECLARED_DIVERGENCES,
    DeclaredDivergence,
    Verdict,
    compare,
    decide,
    needs_attribution,
)
from overlay.errors import EquivalenceError

DEFAULT_RUNTIME_PATCH = "overlay.runtime:apply_all"
WORKER_MODULE = "overlay.equivalence.worker"
PATHS = (PathId.STOCK, PathId.RUNTIME, PathId.PATCHED)
DEFAULT_TIMEOUT_S = 600.0
CALLER_DIR_ENV = "OVERLAY_CALLER_DIR"  # where relative --models / --runtime-patch are read from
Progress = Callable[[str], None]
R = TypeVar("R", bound=Reply)


class WorkerTimeoutError(EquivalenceError):
    """A worker did not answer one request in time (it was stopped)."""


class WorkerDiedError(EquivalenceError):
    """A worker process ended while a request was open."""


@dataclass(frozen=True)
class Options:
    """What to run and where."""

    stock_python: str
    patched_python: str
    runtime_patch: str = DEFAULT_RUNTIME_PATCH
    models: str | None = None
    fast: bool = False
    only: Sequence[str] = ()
    probes: bool = True
    parallel: bool = True
    attribute: bool = True
    keep_bytes: bool = False
    out_dir: Path = Path("reports")
    timeout: float = DEFAULT_TIMEOUT_S  # seconds per request (init, one item)
    patches_dir: Path | None = None  # the series folder workers read pins from
    pythonpath: dict[PathId, str] = field(default_factory=dict)  # extra entries per path
    worker_command: tuple[str, ...] = ("-m", WORKER_MODULE)  # after the path's python

    @property
    def log_dir(self) -> Path:
        """Return the folder for worker logs and the worker's package copy."""
        return self.out_dir / "equivalence-logs"


@dataclass(frozen=True)
class WorkerInfo:
    """What one path ran on."""

    path: PathId
    python: str
    runtime_patch: str | None
    init: InitReply | None


@dataclass(frozen=True)
class Report:
    """The outcome of one equivalence run."""

    options: Options
    workers: dict[PathId, WorkerInfo]
    verdicts: tuple[Verdict, ...]
    declared: tuple[DeclaredDivergence, ...]
    wall_seconds: float
    phase_seconds: dict[str, float]

    @property
    def failures(self) -> list[str]:
        """Return one line per problem that makes the run fail."""
        return [line for verdict in self.verdicts for line in verdict.failures]


def worker_library(folder: Path) -> Path:
    """Copy just the overlay package into ``folder`` (for a worker's path) and return it."""
    source = Path(overlay.__file__).resolve().parent
    target = folder / "overlay"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "patches")
    )
    return folder


class Worker:
    """One worker process, spoken to in protocol lines, each request with a timeout."""

    def __init__(self, path: PathId, python: str, options: Options, library: Path) -> None:
        self.path = path
        self.python = python
        self.options = options
        options.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = options.log_dir / f"worker-{path.value}.log"
        self.log: IO[str] = self.log_path.open("a", encoding="utf-8")
        env = dict(os.environ)
        extra = options.pythonpath.get(path, "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra, str(library)) if p)
        env.setdefault("PYTHONHASHSEED", "0")
        env[pins.PATCHES_ENV] = str((options.patches_dir or pins.default_directory()).resolve())
        try:
            self.process = subprocess.Popen(
                [python, *options.worker_command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                env=env,
                cwd=str(options.log_dir),
            )
        except OSError as exc:
            self.log.close()
            raise EquivalenceError(
                f"cannot start the worker for path ({path.value}) {path.label}",
                expected="a Python with torch and executorch",
                found=f"{python}: {exc}",
                hint="pass --stock-python / --patched-python, or run `nox -s equivalence`",
            ) from exc
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")  # end of output

    def request(self, message: Request, reply_type: type[R], what: str) -> R:
        """Send one request; return its reply, or raise on timeout, death or an ErrorReply."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(encode(message) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader sees the end of output
        try:
            line = self.lines.get(timeout=self.options.timeout)
        except queue.Empty:
            self.kill()
            raise WorkerTimeoutError(
                f"path ({self.path.value}) {self.path.label} did not finish {what}",
                expected=f"a reply within {self.options.timeout:.0f} s",
                found="no reply; the worker was stopped",
                hint="raise --timeout, or run the item alone with --case",
            ) from None
        if not line:
            self.process.wait()
            raise WorkerDiedError(
                f"the worker of path ({self.path.value}) {self.path.label} died during {what}",
                expected="one reply per request",
                found=f"exit code {self.process.returncode}; last log lines:\n{self.log_tail()}",
                hint=f"read its log: {self.log_path}",
            )
        reply = decode_reply(line)
        if isinstance(reply, ErrorReply):
            raise EquivalenceError(
                f"path ({self.path.value}) {self.path.label} could not {what}",
                expected="a working environment and valid inputs",
                found=reply.error.first_line,
                hint="fix the environment, the --runtime-patch or the --models file",
                details=reply.error.traceback,
            )
        if not isinstance(reply, reply_type):
            raise ProtocolError(
                f"path ({self.path.value}) answered {what} with the wrong reply",
                expected=reply_type.__name__,
                found=type(reply).__name__,
            )
        return reply

    def log_tail(self, lines: int = 8) -> str:
        """Return the last lines of the worker's log."""
        self.log.flush()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """Stop the process now."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """Ask the worker to quit, wait for it, and close its pipes and log."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(encode(QuitRequest()) + "\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.reader.join(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.log.close()


@dataclass
class _Path:
    """One path's worker, restarted after a harness failure."""

    path: PathId
    python: str
    runtime_patch: str | None
    options: Options
    library: Path
    worker: Worker | None = None
    init: InitReply | None = None

    def start(self) -> InitReply:
        self.worker = Worker(self.path, self.python, self.options, self.library)
        request = InitRequest(runtime_patch=self.runtime_patch, models=self.options.models)
        self.init = self.worker.request(request, InitReply, "start")
        return self.init

    def run(self, request: RunRequest) -> ItemResult:
        """Run one item; a timeout or crash is a harness failure and restarts the worker."""
        assert self.worker is not None
        what = f"{request.item}"
        try:
            reply = self.worker.request(request, RunReply, what)
        except (WorkerTimeoutError, WorkerDiedError) as exc:
            self.close()
            self.start()
            kind = "WorkerTimeout" if isinstance(exc, WorkerTimeoutError) else "WorkerDied"
            return ItemResult(
                status=RunStatus.FAIL,
                error=ErrorInfo(kind, str(exc), Stage.HARNESS),
            )
        return reply.result

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _select(cases: Iterable[CaseInfo], options: Options) -> list[CaseInfo]:
    cases = list(cases)
    if options.only:
        known = {c.name for c in cases}
        unknown = [n for n in options.only if n not in known]
        if unknown:
            raise EquivalenceError(
                f"unknown case(s): {', '.join(unknown)}",
                expected=", ".join(sorted(known)),
                found=", ".join(unknown),
                hint="list them with `python -m overlay equivalence --list`",
            )
        return [c for c in cases if c.name in options.only]
    if options.fast:
        return [c for c in cases if c.fast]
    return cases


def list_items(options: Options) -> ListReply:
    """Return the corpus (plus user models, read by a stock worker) and the probes."""
    if options.models is None:
        return ListReply(cases=corpus.CASES, probes=probes.PROBES)
    library = worker_library(options.log_dir)
    path = _Path(PathId.STOCK, options.stock_python, None, options, library)
    try:
        path.start()
        assert path.worker is not None
        return path.worker.request(ListRequest(), ListReply, "list the cases")
    finally:
        path.close()


def _start(path: _Path) -> None:
    path.start()


def _each(paths: Sequence[_Path], job: Callable[[_Path], None], parallel: bool) -> None:
    if not parallel:
        for path in paths:
            job(path)
        return
    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        for future in [pool.submit(job, p) for p in paths]:
            future.result()  # re-raises the first failure


def run(options: Options, progress: Progress = lambda _: None) -> Report:
    """Run every selected case and probe on the three paths and judge them."""
    started = time.perf_counter()
    library = worker_library(options.log_dir)
    plans = {
        PathId.STOCK: (options.stock_python, None),
        PathId.RUNTIME: (options.stock_python, options.runtime_patch),
        PathId.PATCHED: (options.patched_python, None),
    }
    paths = [_Path(p, plans[p][0], plans[p][1], options, library) for p in PATHS]
    results: dict[PathId, dict[ItemId, ItemResult]] = {p: {} for p in PATHS}
    phases: dict[str, float] = {}
    try:
        _each(paths, _start, options.parallel)
        phases["start (import torch/executorch)"] = time.perf_counter() - started
        stock = paths[0]
        assert stock.worker is not None
        listing = stock.worker.request(ListRequest(), ListReply, "list the cases")
        infos: dict[ItemId, CaseInfo | ProbeInfo] = {
            c.item: c for c in _select(listing.cases, options)
        }
        if options.probes and not options.only:
            infos.update({p.item: p for p in listing.probes})
        progress(f"{len(infos)} items on 3 paths ({'parallel' if options.parallel else 'serial'})")

        def drive(path: _Path) -> None:
            for item in infos:
                request = RunRequest(item, keep_bytes=options.keep_bytes)
                result = path.run(request)
                results[path.path][item] = result
                progress(f"({path.path.value}) {item}: {result.status.value}")

        mark = time.perf_counter()
        _each(paths, drive, options.parallel)
        phases["cases and probes"] = time.perf_counter() - mark
        mark = time.perf_counter()
        attribution: dict[ItemId, int | None] = {}
        for item in infos:
            by_path = {p: results[p][item] for p in PATHS}
            if options.attribute and needs_attribution(by_path):
                attribution[item] = _attribute(stock, item, by_path[PathId.RUNTIME], progress)
        phases["attribution"] = time.perf_counter() - mark
        version = stock.init.executorch if stock.init is not None else None
        verdicts = tuple(
            decide(
                item,
                info,
                {p: results[p][item] for p in PATHS},
                attribution.get(item),
                version=version,
            )
            for item, info in infos.items()
        )
    finally:
        for path in paths:
            path.close()
    workers = {p.path: WorkerInfo(p.path, p.python, p.runtime_patch, p.init) for p in paths}
    return Report(
        options=options,
        workers=workers,
        verdicts=verdicts,
        declared=DECLARED_DIVERGENCES,
        wall_seconds=time.perf_counter() - started,
        phase_seconds=phases,
    )


def run_items(
    options: Options,
    path: PathId,
    python: str,
    items: Sequence[ItemId],
    *,
    runtime_patch: str | None = None,
    progress: Progress = lambda _: None,
) -> tuple[InitReply, dict[ItemId, ItemResult]]:
    """Run ``items`` on one worker of ``python`` (for callers that compare paths themselves).

    The same worker, timeouts and restarts as :func:`run`; the caller runs several of
    these in parallel (one per env) and judges the results.
    """
    library = worker_library(options.log_dir / f"library-{path.value}")
    runner = _Path(path, python, runtime_patch, options, library)
    results: dict[ItemId, ItemResult] = {}
    try:
        init = runner.start()
        for item in items:
            results[item] = runner.run(RunRequest(item, keep_bytes=options.keep_bytes))
            progress(f"({path.value}) {item}: {results[item].status.value}")
    finally:
        runner.close()
    return init, results


def _attribute(stock: _Path, item: ItemId, target: ItemResult, progress: Progress) -> int | None:
    """Return the one runtime fix that turns (a)'s result into (b)'s, or None."""
    for entry in fixes.FIXES:
        reply = stock.run(RunRequest(item, fixes=(entry.number,)))
        if not compare(reply, target):
            progress(f"{item}: attributed to patch {entry.number}")
            return entry.number
    return None


def options_from_env(
    stock_python: str | None, patched_python: str | None, **overrides: object
) -> Options:
    """Build checked Options from $OVERLAY_STOCK_PYTHON / $OVERLAY_PATCHED_PYTHON + overrides."""
    stock = stock_python or os.environ.get("OVERLAY_STOCK_PYTHON")
    patched = patched_python or os.environ.get("OVERLAY_PATCHED_PYTHON")
    if not stock or not patched:
        raise EquivalenceError(
            "no stock or patched Python to run the paths in",
            expected="--stock-python and --patched-python (or $OVERLAY_STOCK_PYTHON and"
            " $OVERLAY_PATCHED_PYTHON)",
            found=f"stock={stock!r}, patched={patched!r}",
            hint="run `nox -s equivalence`, which builds both venvs with uv",
        )
    options = replace(Options(stock_python=stock, patched_python=patched), **overrides)  # type: ignore[arg-type]
    # nox runs commands from the noxfile's folder; it passes the folder it was called from.
    return resolve_inputs(options, Path(os.environ.get(CALLER_DIR_ENV) or Path.cwd()))


def resolve_inputs(options: Options, base: Path) -> Options:
    """Make the user's files absolute (from ``base``) and check them before a worker starts.

    Workers run in the log folder, so a relative ``--models`` or ``--runtime-patch FILE.py``
    must be resolved from the caller's folder here, not from the worker's.
    """
    runtime_patch = options.runtime_patch
    target, sep, function = runtime_patch.partition(":")
    if target.endswith(".py"):
        runtime_patch = f"{_existing(base, target, '--runtime-patch')}{sep}{function}"
    elif not target or not all(part.isidentifier() for part in target.split(".")):
        raise EquivalenceError(
            f"--runtime-patch {runtime_patch!r} names neither a .py file nor a module",
            expected="FILE.py:FUNCTION or package.module:FUNCTION",
            found=runtime_patch,
            hint="pass --runtime-patch PATH/TO/patch.py:FUNCTION or a module:FUNCTION",
        )
    models = options.models
    if models is not None:
        models = str(_existing(base, models, "--models"))
    return replace(options, runtime_patch=runtime_patch, models=models)


def _existing(base: Path, name: str, option: str) -> Path:
    path = (base / name).resolve()
    if not path.is_file():
        raise EquivalenceError(
            f"{option} {name}: no such file",
            expected=f"a Python file (relative paths are read from {base})",
            found=f"{path} does not exist",
            hint=f"check the path given to {option}",
        )
    return path


def patch_name(number: int | None) -> str:
    """Return the patch file name for a fix number."""
    return fixes.by_number(number).patch if number is not None else "unattributed"
