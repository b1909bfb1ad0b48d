"""Run the three paths and collect typed results (torch-free; it prints nothing)."""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import overlay
from overlay import _mutex, fixes, lines
from overlay._hashing import sha256_file, tree_digest
from overlay.equivalence import corpus, protocol, sources
from overlay.equivalence.controller import processes, scheduler
from overlay.equivalence.controller.options import Options, check_cases, resolve_inputs
from overlay.equivalence.controller.outcome import Report, WorkerInfo
from overlay.equivalence.controller.result_cache import Keys, ResultCache, RunCache, key
from overlay.equivalence.controller.scheduler import Progress, no_progress
from overlay.equivalence.protocol import PATHS, PathId
from overlay.equivalence.verdict import decide
from overlay.equivalence.worker import vgf_run
from overlay.equivalence.worker.envinfo import EnvInfo
from overlay.errors import EquivalenceInputError
from overlay.items import CaseInfo, ItemId, ProbeInfo
from overlay.lines import pins


def list_items(options: Options) -> protocol.ListReply:
    """Return the corpus (plus user models, read by a stock worker) and the probes."""
    listing, slot = scheduler.list_cases(
        _plans(options, processes.worker_library())[PathId.STOCK], None
    )
    if slot is not None:
        slot.close()
    return listing


def select(
    listing: protocol.ListReply, options: Options
) -> tuple[dict[ItemId, CaseInfo | ProbeInfo], tuple[ItemId, ...]]:
    """Return this run's items (this shard's part) and the whole selection's item ids; probes
    belong to the core group and run on a line that carries their fix."""
    cases = list(listing.cases)
    user_only = options.models is not None and not options.with_corpus
    if options.only:  # a models file built at run time: its names are known only now
        check_cases(options.only, {c.name for c in cases}, options.models)
        cases = [c for c in cases if c.name in options.only]
    elif user_only:
        cases = [c for c in cases if c.source != "corpus"]
    else:  # the selected group's corpus cases (None: core, and with --fast the fast ones)
        group = options.group
        cases = [
            c
            for c in cases
            if c.source != "corpus"
            or group == "all"
            or c.group == (group or "core")
            or (group is None and options.fast and c.fast)
        ]
    if options.fast and not options.only:
        cases = [c for c in cases if c.fast]
    infos: dict[ItemId, CaseInfo | ProbeInfo] = {c.item: c for c in cases}
    core = options.group in (None, "core", "all")
    if options.probes and not options.only and not user_only and core:
        carried = (0, *scheduler.carried_fixes(options.patches_dir or lines.series_directory()))
        infos.update({p.item: p for p in listing.probes if p.fix in carried})
    selected = tuple(infos)
    if options.shard is not None:
        infos = {item: info for item, info in infos.items() if options.shard.owns(item)}
    return infos, selected


def _plans(options: Options, library: Path) -> dict[PathId, processes.Plan]:
    return {
        path: processes.Plan(
            path=path,
            python=options.patched_python if path is PathId.PATCHED else options.stock_python,
            runtime_patch=options.runtime_patch if path is PathId.RUNTIME else None,
            pythonpath=options.pythonpath.get(path, ""),
            log_dir=options.log_dir,
            library=library,
            patches_dir=(options.patches_dir or lines.series_directory()).resolve(),
            timeout=options.timeout,
            worker_command=options.worker_command,
            models=options.models,
        )
        for path in PATHS
    }


def _environments(plans: Mapping[PathId, processes.Plan]) -> dict[PathId, EnvInfo]:
    """Describe each path's env; its digest covers the sources where the fixes land."""
    package = pins.load(plans[PathId.STOCK].patches_dir).package_dir
    subtree = posixpath.commonpath(
        [posixpath.dirname(p) for f in fixes.FIXES for p in f.repo_paths]
    )
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        futures = {
            p: pool.submit(processes.env_info, plan, package, subtree) for p, plan in plans.items()
        }
        return {p: future.result() for p, future in futures.items()}


def _keys(options: Options, plan: processes.Plan, envs: Mapping[PathId, EnvInfo]) -> Keys:
    package = plan.library / "overlay"
    base = key(
        "base",
        overlay.__version__,
        tree_digest(package, sources.worker_sources(package)),
        sha256_file(plan.patches_dir / pins.PINS_FILE),
    )
    # the runtime patch's code: its file's digest (or its module's) and function
    target, _, function = options.runtime_patch.partition(":")
    runtime = f"{target}@{envs[PathId.RUNTIME].module_sha256}:{function}"
    if target.endswith(".py"):
        runtime = f"{sha256_file(Path(target))}:{function}"
    paths = {
        path: key(
            "path", base, path.value, envs[path].digest, runtime if path is PathId.RUNTIME else ""
        )
        for path in PATHS
    }
    return Keys(
        base=base,
        paths=paths,
        models=sha256_file(Path(options.models)) if options.models else None,
        corpus=tree_digest(package / "equivalence" / "corpus"),
    )


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """Hold the output folder for this run: two runs into one folder would mix their logs."""
    with contextlib.ExitStack() as held:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            held.enter_context(
                _mutex.held(
                    folder / ".lock",
                    timeout=0,
                    busy=f"another equivalence run is writing to {folder}",
                    hint="wait for it, or pass another --out",
                )
            )
        except OSError as exc:
            raise EquivalenceInputError(
                f"cannot write the output folder {folder}",
                expected="a folder this user can write",
                found=str(exc),
                hint="pass --out DIR",
            ) from exc
        yield


def _open_cache(options: Options) -> ResultCache:
    if options.cache_dir is None:
        return ResultCache(None)
    try:
        options.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EquivalenceInputError(
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
        shutil.rmtree(options.log_dir / vgf_run.RUNS, ignore_errors=True)  # this run's only
        plans = _plans(options, processes.worker_library())
        envs = _environments(plans)
        keys = _keys(options, plans[PathId.STOCK], envs)
        cache = RunCache(_open_cache(options), keys, options.keep_bytes)
        listing, spare = scheduler.list_cases(plans[PathId.STOCK], cache, progress)
        try:
            infos, selected = select(listing, options)
        except BaseException:
            if spare is not None:
                spare.close()
            raise
        prepared = time.perf_counter()
        stock = envs[PathId.STOCK].distributions  # fix triggers are scoped by its executorch
        version = next((d.version for d in stock if d.name.lower() == "executorch"), "")
        rules = fixes.divergences(version or None)
        pool = scheduler.Pool(plans, cache, options, progress=progress, rules=rules)
        answers = pool.run(infos, spare)
    verdicts = tuple(
        decide(
            item,
            info,
            {p: answers.results[p][item] for p in PATHS},
            answers.attribution[PathId.STOCK].get(item),
            rules,
            bc_fix=answers.attribution[PathId.RUNTIME].get(item),
            version=version or None,
            attributed=options.attribute,
            required=options.require_executed,
        )
        for item, info in infos.items()
    )
    workers = {
        p: WorkerInfo(p, plans[p].python, plans[p].runtime_patch, answers.inits[p], envs[p].lock)
        for p in PATHS
    }
    ended = time.perf_counter()
    return Report(
        options=options.recorded(),
        workers=workers,
        verdicts=verdicts,
        declared=rules,
        wall_seconds=ended - started,
        phase_seconds={
            "prepare (environments, cache keys, listing)": prepared - started,
            "run (workers, items, attribution)": ended - prepared,
        },
        stats=dict(answers.stats),
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
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[protocol.InitReply, dict[ItemId, protocol.ItemResult]]:
    """Run ``items`` on one worker of ``python``, as :func:`run` does but without the cache,
    for callers that compare paths themselves (one call per env, in parallel)."""
    options = resolve_inputs(options, Path.cwd())
    # no runtime patch: the caller's envs hold what they are to be compared on
    plan = dataclasses.replace(
        _plans(options, processes.worker_library())[path], python=python, runtime_patch=None
    )
    slot = processes.Slot(plan, 0)
    timeouts = {c.item: c.timeout for c in corpus.ALL_CASES}  # a corpus case's own
    results: dict[ItemId, protocol.ItemResult] = {}
    try:
        init = slot.start()
        for item in items:
            request = protocol.RunRequest(item, keep_bytes=options.keep_bytes)
            results[item] = slot.run(request, timeouts.get(item))
            progress(f"({path.value}) {item}: {results[item].status.value}")
    finally:
        slot.close()
    return init, results
