"""Run the three paths and collect typed results; everything here is torch-free.

Three paths: (a) stock executorch, (b) stock + a runtime patch, (c) the diff-patched build,
each run by worker processes (:mod:`overlay.equivalence.workers`). A run:

1. checks the user's inputs (files, names, shard) before anything starts;
2. describes each path's environment (:mod:`overlay.equivalence.envinfo`, no torch) and
   builds the cache keys from it (:class:`overlay.equivalence.cache.Keys`);
3. selects the items (corpus groups, probes, user cases; ``--shard K/N`` keeps one stable
   part);
4. answers each item from the result cache or runs it (:mod:`overlay.equivalence.pool`:
   only paths with uncached items start workers; attribution overlaps the other paths; a
   case may set its own timeout per path, a zoo network does);
5. judges every item (:mod:`overlay.equivalence.verdict`) and returns a typed
   :class:`Report`. ``run(options)`` is a library call: it prints nothing.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import posixpath
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import filelock

import overlay
from overlay import fixes, lines
from overlay._hashing import sha256_file
from overlay.equivalence import cache, corpus, probes
from overlay.equivalence.cache import Keys, ResultCache
from overlay.equivalence.envinfo import EnvInfo
from overlay.equivalence.pool import (
    PATHS,
    Event,
    EventKind,
    PathStats,
    Pool,
    Progress,
    case_timeout,
    no_progress,
)
from overlay.equivalence.protocol import (
    CaseInfo,
    InitReply,
    ItemId,
    ItemResult,
    ListReply,
    ListRequest,
    PathId,
    ProbeInfo,
    RunRequest,
)
from overlay.equivalence.verdict import Verdict, decide
from overlay.equivalence.workers import (
    WORKER_MODULE,
    Plan,
    Settings,
    Slot,
    WorkerDiedError,
    WorkerTimeoutError,
    env_info,
    worker_library,
)
from overlay.errors import EquivalenceError
from overlay.fixes import DECLARED_DIVERGENCES, DeclaredDivergence
from overlay.lines import pins

__all__ = [
    "PATHS",
    "Event",
    "EventKind",
    "Options",
    "PathStats",
    "Progress",
    "Report",
    "Shard",
    "WorkerDiedError",
    "WorkerInfo",
    "WorkerTimeoutError",
    "list_items",
    "no_progress",
    "options_from_env",
    "resolve_inputs",
    "run",
]

DEFAULT_RUNTIME_PATCH = "overlay.runtime:apply_all"
DEFAULT_TIMEOUT_S = 600.0
CALLER_DIR_ENV = "OVERLAY_CALLER_DIR"  # where relative --models / --runtime-patch are read from
DEFAULT_WORKER = ("-m", WORKER_MODULE)


@dataclass(frozen=True, order=True)
class Shard:
    """Part ``index`` of ``count`` (1-based): the items whose id hashes to it."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Parse ``K/N`` (1 <= K <= N)."""
        index, sep, count = text.partition("/")
        if sep and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count):
            return cls(int(index), int(count))
        raise EquivalenceError(
            f"--shard {text!r} is not K/N",
            expected="K/N with 1 <= K <= N, e.g. 2/4",
            found=text,
            hint="pass --shard 1/2 on one runner and --shard 2/2 on the other",
        )

    def owns(self, item: ItemId) -> bool:
        """Return True when ``item`` belongs to this shard (stable on every machine)."""
        digest = hashlib.sha256(str(item).encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Options:
    """What to run and where."""

    stock_python: str
    patched_python: str
    runtime_patch: str = DEFAULT_RUNTIME_PATCH
    models: str | None = None
    with_corpus: bool = False  # with models: the built-in corpus and probes too
    fast: bool = False
    only: Sequence[str] = ()
    group: str | None = None  # corpus group: "core", "zoo" or "all"; None: core (+ fast zoo)
    probes: bool = True
    parallel: bool = True
    attribute: bool = True
    keep_bytes: bool = False
    out_dir: Path = Path("reports")
    timeout: float = DEFAULT_TIMEOUT_S  # seconds per request; a case may set its own
    patches_dir: Path | None = None  # the series folder workers read pins from
    pythonpath: dict[PathId, str] = field(default_factory=dict)  # extra entries per path
    worker_command: tuple[str, ...] = DEFAULT_WORKER  # after the path's python
    shard: Shard | None = None
    cache_dir: Path | None = None  # None: no result cache
    use_cache: bool = True  # False: ignore cached results (fresh ones still refresh it)
    jobs: int = 0  # worker processes to aim for; 0: one per CPU (never fewer than needed)

    @property
    def log_dir(self) -> Path:
        """Return the folder for worker logs and the worker's package copy."""
        return self.out_dir / "equivalence-logs"


@dataclass(frozen=True)
class WorkerInfo:
    """What one path ran on (``init`` from the cache when no worker had to start)."""

    path: PathId
    python: str
    runtime_patch: str | None
    init: InitReply | None


@dataclass(frozen=True)
class Report:
    """The outcome of one equivalence run (or of merged shards)."""

    options: Options
    workers: dict[PathId, WorkerInfo]
    verdicts: tuple[Verdict, ...]
    declared: tuple[DeclaredDivergence, ...]
    wall_seconds: float
    phase_seconds: dict[str, float]
    stats: dict[PathId, PathStats] = field(default_factory=dict)
    keys: Keys | None = None  # what the results were keyed by (shards must agree)
    created: str = ""  # ISO 8601, UTC
    selection: tuple[ItemId, ...] = ()  # every item selected, before sharding
    shards: tuple[Shard, ...] = ()  # the shards this report covers; (): the whole selection
    merged: bool = False  # made by merging shard reports: it must cover the selection
    executorch: str = ""  # the stock env's executorch version: fix triggers are scoped by it

    @property
    def failures(self) -> list[str]:
        """Return one line per problem that makes the run fail."""
        problems = [line for verdict in self.verdicts for line in verdict.failures]
        if self.merged and self.missing:
            count = self.shards[0].count if self.shards else 1
            have = {s.index for s in self.shards}
            lost = [str(Shard(i, count)) for i in range(1, count + 1) if i not in have]
            problems.append(
                f"{len(self.missing)} of {len(self.selection)} selected items have no result"
                f" (shards missing: {', '.join(lost) or 'none'})"
            )
        return problems

    @property
    def missing(self) -> list[ItemId]:
        """Return the selected items this report has no verdict for."""
        have = {v.item for v in self.verdicts}
        return [item for item in self.selection if item not in have]


def list_items(options: Options) -> ListReply:
    """Return the corpus (plus user models, read by a stock worker) and the probes."""
    if options.models is None:
        return ListReply(cases=corpus.ALL_CASES, probes=probes.PROBES)
    library = worker_library(options.log_dir)
    settings = _settings(options, library)
    slot = Slot(_plans(options)[PathId.STOCK], settings, 0)
    try:
        return slot.request(ListRequest(), ListReply, "list the cases")
    finally:
        slot.close()


def select(
    listing: ListReply, options: Options
) -> tuple[dict[ItemId, CaseInfo | ProbeInfo], tuple[ItemId, ...]]:
    """Return this run's items (this shard's part) and the whole selection's item ids.

    Groups: without ``--group`` the core corpus (with ``--fast``: the fast cases of every
    group, one zoo case among them), ``zoo`` the real networks, ``all`` both; a models
    file's cases are always in. Probes belong to the core group.
    """
    cases = list(listing.cases)
    user_only = options.models is not None and not options.with_corpus
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
        cases = [c for c in cases if c.name in options.only]
    else:
        if user_only:
            cases = [c for c in cases if c.source != "corpus"]
        else:
            cases = [c for c in cases if c.source != "corpus" or _in_group(c, options)]
        if options.fast:
            cases = [c for c in cases if c.fast]
    infos: dict[ItemId, CaseInfo | ProbeInfo] = {c.item: c for c in cases}
    core = options.group in (None, "core", "all")
    if options.probes and not options.only and not user_only and core:
        infos.update({p.item: p for p in listing.probes})
    selected = tuple(infos)
    if options.shard is not None:
        infos = {item: info for item, info in infos.items() if options.shard.owns(item)}
    return infos, selected


def _in_group(case: CaseInfo, options: Options) -> bool:
    """Return True when a corpus case belongs to the selected group (see :func:`select`)."""
    if options.group == "all":
        return True
    if options.group is None:
        return case.group == "core" or (options.fast and case.fast)
    return case.group == options.group


def _plans(options: Options) -> dict[PathId, Plan]:
    pythons = {PathId.STOCK: options.stock_python, PathId.RUNTIME: options.stock_python}
    return {
        path: Plan(
            path=path,
            python=pythons.get(path, options.patched_python),
            runtime_patch=options.runtime_patch if path is PathId.RUNTIME else None,
            pythonpath=options.pythonpath.get(path, ""),
        )
        for path in PATHS
    }


def _settings(options: Options, library: Path) -> Settings:
    return Settings(
        log_dir=options.log_dir,
        library=library,
        patches_dir=(options.patches_dir or lines.series_directory()).resolve(),
        timeout=options.timeout,
        worker_command=options.worker_command,
        models=options.models,
    )


def watched_sources(patches_dir: Path) -> tuple[str, str]:
    """Return (package, subtree) whose sources an env's digest covers: where fixes land."""
    folders = [posixpath.dirname(p) for f in fixes.FIXES for p in f.repo_paths]
    return pins.load(patches_dir).package_dir, posixpath.commonpath(folders)


def _environments(plans: Mapping[PathId, Plan], settings: Settings) -> dict[PathId, EnvInfo]:
    package, subtree = watched_sources(settings.patches_dir)
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        futures = {
            p: pool.submit(env_info, plan, settings, package, subtree) for p, plan in plans.items()
        }
        return {p: future.result() for p, future in futures.items()}


def _runtime_source(runtime_patch: str, env: EnvInfo) -> str:
    """Return what identifies the runtime patch's code: its file's digest and function."""
    target, _, function = runtime_patch.partition(":")
    if target.endswith(".py"):
        return f"{sha256_file(Path(target))}:{function}"
    return f"{target}@{env.module_sha256}:{function}"


def _keys(options: Options, settings: Settings, envs: Mapping[PathId, EnvInfo]) -> Keys:
    package = settings.library / "overlay"
    base = cache.key(
        "base",
        overlay.__version__,
        cache.sources_digest(package, cache.worker_sources(package)),
        sha256_file(settings.patches_dir / pins.PINS_FILE),
    )
    runtime = _runtime_source(options.runtime_patch, envs[PathId.RUNTIME])
    paths = {
        path: cache.key(
            "path", base, path.value, envs[path].digest, runtime if path is PathId.RUNTIME else ""
        )
        for path in PATHS
    }
    return Keys(
        base=base,
        paths=paths,
        models=sha256_file(Path(options.models)) if options.models else None,
        corpus=sha256_file(package / "equivalence" / "corpus.py"),
        probes=sha256_file(package / "equivalence" / "probes.py"),
    )


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """Hold the output folder for this run: two runs into one folder would mix their logs."""
    lock = filelock.FileLock(str(folder / ".lock"), timeout=0)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except filelock.Timeout:  # before OSError: it is a TimeoutError
        raise EquivalenceError(
            f"another equivalence run is writing to {folder}",
            expected="one run per output folder",
            found=f"{folder / '.lock'} is held",
            hint="wait for it, or pass another --out",
        ) from None
    except OSError as exc:
        raise EquivalenceError(
            f"cannot write the output folder {folder}",
            expected="a folder this user can write",
            found=str(exc),
            hint="pass --out DIR",
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _open_cache(options: Options) -> ResultCache | None:
    if options.cache_dir is None:
        return None
    try:
        options.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EquivalenceError(
            f"cannot use the result cache folder {options.cache_dir}",
            expected="a folder this user can write",
            found=str(exc),
            hint="pass --cache-dir DIR (or set $OVERLAY_CACHE_DIR)",
        ) from exc
    return ResultCache(options.cache_dir, read=options.use_cache)


def run(options: Options, progress: Progress = no_progress) -> Report:
    """Run every selected case and probe on the three paths (or read them from the cache)."""
    started = time.perf_counter()
    options = resolve_inputs(options, Path.cwd())
    with _exclusive(options.log_dir):
        settings = _settings(options, worker_library(options.log_dir))
        plans = _plans(options)
        envs = _environments(plans, settings)
        keys = _keys(options, settings, envs)
        pool = Pool(
            plans,
            settings,
            _open_cache(options),
            keys,
            attribute=options.attribute,
            keep_bytes=options.keep_bytes,
            parallel=options.parallel,
            jobs=options.jobs,
            progress=progress,
        )
        try:
            # The corpus is known here, torch-free, from the very sources workers import;
            # a models file (or another worker program) needs a worker to list its cases.
            builtin = options.models is None and options.worker_command == DEFAULT_WORKER
            listing = ListReply(corpus.ALL_CASES, probes.PROBES) if builtin else pool.listing()
            infos, selected = select(listing, options)
            prepared = time.perf_counter()
            outcome = pool.run(infos)
        finally:
            pool.close()
    version = stock_version(envs)
    verdicts = tuple(
        decide(
            item,
            info,
            {p: outcome.results[p][item] for p in PATHS},
            outcome.attribution.get(item),
            version=version or None,
        )
        for item, info in infos.items()
    )
    workers = {
        p: WorkerInfo(p, plans[p].python, plans[p].runtime_patch, outcome.inits[p]) for p in PATHS
    }
    ended = time.perf_counter()
    return Report(
        options=options,
        workers=workers,
        verdicts=verdicts,
        declared=DECLARED_DIVERGENCES,
        wall_seconds=ended - started,
        phase_seconds={
            "prepare (environments, cache keys, listing)": prepared - started,
            "run (workers, items, attribution)": ended - prepared,
        },
        stats=dict(outcome.stats),
        keys=keys,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        selection=selected,
        executorch=version,
        shards=(options.shard,) if options.shard else (),
    )


def run_items(
    options: Options,
    path: PathId,
    python: str,
    items: Sequence[ItemId],
    *,
    runtime_patch: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[InitReply, dict[ItemId, ItemResult]]:
    """Run ``items`` on one worker of ``python`` (for callers that compare paths themselves).

    The same worker, timeouts and restarts as :func:`run`, without the cache; the caller
    runs several of these in parallel (one per env) and judges the results.
    """
    options = resolve_inputs(options, Path.cwd())
    settings = _settings(options, worker_library(options.log_dir / f"library-{path.value}"))
    plan = Plan(
        path=path,
        python=python,
        runtime_patch=runtime_patch,
        pythonpath=options.pythonpath.get(path, ""),
    )
    slot = Slot(plan, settings, 0)
    known = {c.item: c for c in corpus.ALL_CASES}
    results: dict[ItemId, ItemResult] = {}
    try:
        init = slot.start()
        for item in items:
            request = RunRequest(item, keep_bytes=options.keep_bytes)
            results[item] = slot.run(request, case_timeout(known[item]) if item in known else None)
            progress(f"({path.value}) {item}: {results[item].status.value}")
    finally:
        slot.close()
    return init, results


def stock_version(envs: Mapping[PathId, EnvInfo]) -> str:
    """Return the stock env's executorch version (fix triggers are scoped by release)."""
    for dist in envs[PathId.STOCK].distributions:
        if dist.name.lower() == "executorch":
            return dist.version
    return ""


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
    """Make the user's paths absolute (from ``base``) and check them before a worker starts.

    Workers run in the log folder, so a relative ``--models``, ``--runtime-patch FILE.py``,
    ``--out`` or ``--cache-dir`` is resolved from the caller's folder here. The files are
    parsed (not run): the runtime patch must define its function and the models file
    ``CASES``; a module runtime patch is looked up in the stock env before any worker starts.
    """
    runtime_patch = options.runtime_patch
    target, sep, function = runtime_patch.partition(":")
    if target.endswith(".py"):
        path = _existing(base, target, "--runtime-patch")
        _check_defines(path, function or "apply_all", "--runtime-patch")
        runtime_patch = f"{path}{sep}{function}"
    elif not target or not all(part.isidentifier() for part in target.split(".")):
        raise EquivalenceError(
            f"--runtime-patch {runtime_patch!r} names neither a .py file nor a module",
            expected="FILE.py:FUNCTION or package.module:FUNCTION",
            found=runtime_patch,
            hint="pass --runtime-patch PATH/TO/patch.py:FUNCTION or a module:FUNCTION",
        )
    if function and not function.isidentifier():
        raise EquivalenceError(
            f"--runtime-patch {options.runtime_patch!r}: {function!r} is not a function name",
            expected="FILE.py:FUNCTION or package.module:FUNCTION",
            found=function,
            hint="name the function that applies the patch after the colon",
        )
    if options.timeout <= 0 or options.jobs < 0:
        raise EquivalenceError(
            "--timeout must be positive and --jobs not negative",
            expected="--timeout SECONDS > 0, --jobs N >= 0 (0: one per CPU)",
            found=f"--timeout {options.timeout}, --jobs {options.jobs}",
            hint="drop the option to use the default",
        )
    if options.group not in (None, "all", *corpus.GROUPS):
        raise EquivalenceError(
            f"unknown group {options.group!r}",
            expected=", ".join((*corpus.GROUPS, "all")),
            found=str(options.group),
            hint="pass --group core, --group zoo or --group all",
        )
    models = options.models
    if models is not None:
        models_path = _existing(base, models, "--models")
        _check_defines(models_path, "CASES", "--models")
        models = str(models_path)
    return replace(
        options,
        runtime_patch=runtime_patch,
        models=models,
        out_dir=(base / options.out_dir).resolve(),
        cache_dir=(base / options.cache_dir).resolve() if options.cache_dir else None,
    )


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


def _bound_names(body: list[ast.stmt]) -> Iterator[str]:
    """Yield the names a module body binds at top level (into if/try/with blocks too)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield "*" if alias.name == "*" else (alias.asname or alias.name.split(".")[0])
        else:
            for block in ("body", "orelse", "finalbody"):
                inner = getattr(node, block, None)
                if isinstance(inner, list):
                    yield from _bound_names([s for s in inner if isinstance(s, ast.stmt)])
            for handler in getattr(node, "handlers", []):
                yield from _bound_names(handler.body)


def _check_defines(path: Path, name: str, option: str) -> None:
    """Refuse a file that does not parse or never binds ``name`` (read, not run)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise EquivalenceError(
            f"{option} {path}: not valid Python",
            expected="a Python file",
            found=f"line {exc.lineno}: {exc.msg}",
            hint=f"fix the syntax error in {path.name}",
        ) from exc
    except OSError as exc:
        raise EquivalenceError(
            f"{option} {path}: cannot read it", expected="a readable file", found=str(exc)
        ) from exc
    names = set(_bound_names(tree.body))
    if name not in names and "*" not in names:
        raise EquivalenceError(
            f"{option} {path}: defines no {name}",
            expected=f"a top-level {name} in {path.name}",
            found=", ".join(sorted(names)) or "no top-level names",
            hint=f"check the name given to {option}"
            if option == "--runtime-patch"
            else "define CASES = {...} (see the README's user models section)",
        )


def patch_name(number: int | None) -> str:
    """Return the patch file name for a fix number."""
    return fixes.by_number(number).patch if number is not None else "unattributed"
