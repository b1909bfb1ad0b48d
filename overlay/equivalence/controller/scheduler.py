"""Run what the cache cannot answer on worker processes, as parallel as the CPUs allow, and
attribute an item two neighbouring paths answered differently; progress as events."""

from __future__ import annotations

import enum
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from overlay import fixes
from overlay.equivalence import corpus, protocol
from overlay.equivalence.controller.options import DEFAULT_WORKER, Options
from overlay.equivalence.controller.processes import Plan, Slot
from overlay.equivalence.controller.result_cache import RunCache
from overlay.equivalence.protocol import PATHS, PathId
from overlay.equivalence.verdict import compare, judged_targets, rule_holds
from overlay.fixes import Divergence
from overlay.items import CaseInfo, ItemId, ItemKind, ProbeInfo
from overlay.text.series import load_series

MIN_ITEMS_PER_WORKER = 4.0  # another worker (a torch import) only for this many cases more
PROBE_WEIGHT = 0.1  # a probe costs milliseconds; a case seconds
Info = CaseInfo | ProbeInfo


class EventKind(enum.StrEnum):
    """What a progress event reports."""

    PLAN = "plan"  # a path's item count (total) and how many the cache answered (done)
    START = "start"  # a worker of the path is starting (imports torch and executorch)
    RUN = "run"  # an item starts on the path
    DONE = "done"  # an item finished on the path
    MORE = "more"  # one more run on the path (an attribution run)


@dataclass(frozen=True)
class Event:
    """One progress event of a run: the scheduler reports them, the CLI shows them."""

    kind: EventKind
    path: PathId
    item: ItemId | None = None
    total: int = 0
    done: int = 0


Progress = Callable[[Event], None]


def no_progress(_: Event) -> None:
    """Ignore progress."""


@dataclass(frozen=True)
class PathStats:
    """Where one path's time went, and what the cache answered."""

    workers: int = 0  # worker processes started
    start_seconds: float = 0.0  # sum over its workers (torch/executorch imports, init)
    ran: int = 0  # items run
    cached: int = 0  # items answered by the cache
    attribution_runs: int = 0  # single-fix runs made for attribution (paths (a) and (b))
    attribution_cached: int = 0  # single-fix results answered by the cache
    busy_seconds: float = 0.0  # sum of the items' own run times (attribution included)


@dataclass(frozen=True)
class Answers:
    """Every path's result of every item, the attributions and the statistics."""

    results: Mapping[PathId, Mapping[ItemId, protocol.ItemResult]]
    # by the path the single-fix runs were made on: (a) for (a)/(b), (b) for (b)/(c)
    attribution: Mapping[PathId, Mapping[ItemId, int | None]]
    stats: Mapping[PathId, PathStats]
    inits: Mapping[PathId, protocol.InitReply | None]


@dataclass(frozen=True)
class _Task:
    item: ItemId
    attribution: bool = False


def candidates(item: ItemId, carried: Sequence[int], first: Sequence[int] = ()) -> list[int]:
    """Return the line's fixes to try for an item's attribution: ``first``, the claimed, the rest.

    Example: a case fixes 3 and 5 claim, on a line that carries fixes 1, 3 and 7.
    Becomes: ``[3, 1, 7]``: the claimed fix first; fix 5 is not the line's, so not tried.
    """
    claimed = (
        [f.number for f, _ in fixes.triggers_of(item.name)] if item.kind is ItemKind.CASE else []
    )
    return [n for n in dict.fromkeys([*first, *claimed, *carried]) if n in carried]


def carried_fixes(patches_dir: Path) -> tuple[int, ...]:
    """Return the numbers of the fixes the series in ``patches_dir`` carries, in series order."""
    return tuple(p.number for p in load_series(patches_dir).patches)


def slot_counts(
    weights: Mapping[PathId, float], needed: set[PathId], jobs: int
) -> dict[PathId, int]:
    """Return how many workers each path gets: one per path that needs one, more on spare CPUs."""
    counts = {p: 1 if p in needed else 0 for p in PATHS}
    for _ in range(jobs - sum(counts.values())):  # each spare CPU
        best = min(needed, key=lambda p: (-weights[p] / counts[p], PATHS.index(p)), default=None)
        if best is None or weights[best] / (counts[best] + 1) < MIN_ITEMS_PER_WORKER:
            break
        counts[best] += 1
    return counts


def list_cases(
    plan: Plan, cache: RunCache | None, progress: Progress = no_progress
) -> tuple[protocol.ListReply, Slot | None]:
    """Return the cases and probes, and the started stock worker that listed them (a models
    file or another worker program needs one), for the run to use (None: the corpus)."""
    if plan.models is None and plan.worker_command == DEFAULT_WORKER:
        return protocol.ListReply(corpus.ALL_CASES, corpus.PROBES), None
    cached = cache.listing() if cache is not None else None
    if cached is not None:
        return cached, None
    slot = Slot(plan, 0)
    progress(Event(EventKind.START, plan.path))
    try:
        reply = slot.request(protocol.ListRequest(), protocol.ListReply, "list the cases")
    except BaseException:
        slot.close()
        raise
    if cache is not None:
        cache.put_listing(reply)
        if slot.init is not None:
            cache.put_init(plan.path, slot.init)
    return reply, slot


@dataclass
class _Board:
    """What the slots of a run share, guarded by one condition (``cond``)."""

    attribute: bool
    cond: threading.Condition = field(default_factory=threading.Condition)
    results: dict[PathId, dict[ItemId, protocol.ItemResult]] = field(
        default_factory=lambda: {p: {} for p in PATHS}
    )
    attribution: dict[PathId, dict[ItemId, int | None]] = field(
        default_factory=lambda: {PathId.STOCK: {}, PathId.RUNTIME: {}}
    )
    counts: dict[PathId, PathStats] = field(default_factory=lambda: {p: PathStats() for p in PATHS})
    queues: dict[PathId, deque[_Task]] = field(default_factory=lambda: {p: deque() for p in PATHS})
    open: dict[PathId, int] = field(default_factory=lambda: dict.fromkeys(PATHS, 0))
    judged: set[tuple[PathId, ItemId]] = field(default_factory=set)  # attributions decided
    failure: BaseException | None = None

    def count(self, path: PathId, **more: float) -> None:
        """Add ``more`` (field: amount) to a path's statistics."""
        now = self.counts[path]
        self.counts[path] = replace(now, **{k: getattr(now, k) + v for k, v in more.items()})

    def finished(self, path: PathId) -> bool:
        """Return True when no task is queued for ``path`` and none can come (lock held)."""
        if self.queues[path]:
            return False
        if path is not PathId.PATCHED and self.attribute:  # the next path's results can
            following = PATHS[PATHS.index(path) + 1]  # still ask for attribution runs here
            return self.open[path] == 0 and self.open[following] == 0
        return True

    def next(self, path: PathId) -> _Task | None:
        """Wait for the path's next task; None when there is none left or the run failed."""
        with self.cond:
            while self.failure is None and not self.queues[path] and not self.finished(path):
                self.cond.wait()
            if self.failure is not None or not self.queues[path]:
                return None
            return self.queues[path].popleft()

    def fail(self, exc: BaseException, slots: list[Slot]) -> None:
        """Record the first failure, wake every waiting slot and stop ``slots``' workers."""
        with self.cond:
            if self.failure is None:
                self.failure = exc
            self.cond.notify_all()
        for slot in slots:
            slot.kill()


def _priority(item: ItemId) -> int:
    """Probes (milliseconds) and the registry's trigger cases (likely attributed) first."""
    if item.kind is ItemKind.PROBE:
        return 0
    return 1 if fixes.triggers_of(item.name) else 2


class Pool:
    """The worker slots of one run: each takes its path's queue, attribution overlapping."""

    def __init__(
        self,
        plans: Mapping[PathId, Plan],
        cache: RunCache,
        options: Options,
        *,
        progress: Progress = no_progress,
        rules: Sequence[Divergence] = (),  # the line's: their fixes are tried first
    ) -> None:
        self.plans, self.cache = plans, cache
        self.rules, self.progress = rules, progress
        self.attribute, self.parallel, self.jobs = options.attribute, options.parallel, options.jobs
        self.board = _Board(self.attribute)
        self.infos: Mapping[ItemId, Info] = {}
        self.carried = carried_fixes(plans[PathId.STOCK].patches_dir)

    def run(self, infos: Mapping[ItemId, Info], spare: Slot | None = None) -> Answers:
        """Answer every item on every path, from the cache or by running it (``spare``: the
        started stock worker that listed the cases, used first)."""
        self.infos, board = infos, self.board
        order = sorted(infos, key=_priority)
        for path in PATHS:
            for item in order:
                result = self.cache.result(path, infos[item])
                if result is not None:
                    board.results[path][item] = result
                    board.count(path, cached=1)
                else:
                    board.queues[path].append(_Task(item))
                    board.open[path] += 1
            cached = board.counts[path].cached
            self.progress(Event(EventKind.PLAN, path, total=len(infos), done=cached))
        with board.cond:
            for item in order:
                self._after(item)
        slots = self._slots(spare)
        try:
            self._drive(slots)
        finally:
            for slot in (*slots, *([spare] if spare else [])):
                slot.close()
        if board.failure is not None:
            raise board.failure
        started = {s.plan.path: s.init for s in reversed(slots) if s.init is not None}
        return Answers(
            results=board.results,
            attribution=board.attribution,
            stats=dict(board.counts),
            inits={p: started.get(p) or self.cache.init(p) for p in PATHS},
        )

    def _slots(self, spare: Slot | None) -> list[Slot]:
        """Return the run's slots: one per path with work, more where CPUs and work allow."""
        queues = self.board.queues
        needed = {p for p in PATHS if queues[p]}
        if self.attribute and queues[PathId.RUNTIME]:
            needed.add(PathId.STOCK)  # (b)'s new results may need attribution runs on (a)
        jobs = self.jobs or os.cpu_count() or 1
        # each path's queued work: a probe weighs little, an attribution run is a case
        weights = {
            p: sum(PROBE_WEIGHT if t.item.kind is ItemKind.PROBE else 1.0 for t in queues[p])
            for p in PATHS
        }
        counts = slot_counts(weights, needed, jobs if self.parallel else 1)
        if self.attribute and queues[PathId.PATCHED] and not counts[PathId.RUNTIME]:
            counts[PathId.RUNTIME] = 1  # on standby: it starts a worker only if (b)/(c) differ
        slots = [Slot(self.plans[p], i) for p in PATHS for i in range(counts[p])]
        if spare is not None and counts[PathId.STOCK]:
            slots[0] = spare  # (a) comes first
            self.board.count(PathId.STOCK, workers=1, start_seconds=spare.start_seconds)
        return slots

    def _drive(self, slots: list[Slot]) -> None:
        if not self.parallel:
            # Backwards: every result of the next path is known by then, so an attribution
            # never waits for a path that has not run.
            for path in reversed(PATHS):
                for slot in (s for s in slots if s.plan.path is path):
                    self._serve(slot, slots)
            return
        with ThreadPoolExecutor(max_workers=max(len(slots), 1)) as pool:
            futures = [pool.submit(self._serve, slot, slots) for slot in slots]
            try:
                for future in futures:
                    future.result()
            except BaseException as exc:  # Ctrl-C while waiting: stop every worker
                self.board.fail(exc, slots)
                raise

    def _serve(self, slot: Slot, slots: list[Slot]) -> None:
        try:
            while (task := self.board.next(slot.plan.path)) is not None and not slot.stopped:
                if slot.worker is None:
                    self._start(slot)
                if task.attribution:
                    self._attribute(task.item, slot.plan.path, slot)
                else:
                    result = self._execute(slot, task.item)
                    with self.board.cond:
                        self.board.results[slot.plan.path][task.item] = result
                        self.board.open[slot.plan.path] -= 1
                        self._after(task.item)
                        self.board.cond.notify_all()
        except BaseException as exc:
            self.board.fail(exc, [s for s in slots if s is not slot])
        finally:
            slot.close()

    def _start(self, slot: Slot) -> None:
        path, board = slot.plan.path, self.board
        with board.cond:
            self.progress(Event(EventKind.START, path))
        before = slot.start_seconds
        self.cache.put_init(path, slot.start())
        with board.cond:
            board.count(path, workers=1, start_seconds=slot.start_seconds - before)

    def _execute(
        self, slot: Slot, item: ItemId, fixes: tuple[int, ...] = ()
    ) -> protocol.ItemResult:
        """Run one request on the slot's worker (with single runtime fixes: an attribution
        run), count it and store its result in the cache."""
        path, board, info = slot.plan.path, self.board, self.infos[item]
        with board.cond:
            if fixes:
                self.progress(Event(EventKind.MORE, path, item))
            self.progress(Event(EventKind.RUN, path, item))
        request = protocol.RunRequest(item, fixes=fixes, keep_bytes=self.cache.keep_bytes)
        result = slot.run(request, info.timeout if isinstance(info, CaseInfo) else None)
        self.cache.put_result(path, info, fixes, result)
        counted = "attribution_runs" if fixes else "ran"
        with board.cond:
            board.count(path, busy_seconds=result.seconds, **{counted: 1})
            self.progress(Event(EventKind.DONE, path, item))
        return result

    def _after(self, item: ItemId) -> None:
        """Attribute an item from the cache once two neighbouring paths are known and differ,
        or queue the single-fix runs it needs (lock held)."""
        board = self.board
        for path in (PathId.STOCK, PathId.RUNTIME):
            following = PATHS[PATHS.index(path) + 1]
            x, y = board.results[path].get(item), board.results[following].get(item)
            if not self.attribute or x is None or y is None or (path, item) in board.judged:
                continue
            board.judged.add((path, item))
            if compare(x, y) and not self._attribute(item, path):
                board.queues[path].appendleft(_Task(item, attribution=True))

    def _attribute(self, item: ItemId, path: PathId, slot: Slot | None = None) -> bool:
        """Try single fixes on ``path`` until one gives the next path's result (without a slot
        only the cache is read, lock held: False when a run is needed)."""
        board, info = self.board, self.infos[item]
        following = PATHS[PATHS.index(path) + 1]
        target = board.results[following][item]
        first: list[int] = []
        if path is PathId.RUNTIME:
            # the fixes whose divergence rules hold on its (b) and (c) results
            results = {path: board.results[path][item], following: target}
            targets = judged_targets(info, results)
            first = [r.fix for r in self.rules if rule_holds(r, info, results, targets)]
        found: int | None = None
        for number in candidates(item, self.carried, first):
            single = self.cache.result(path, info, (number,))
            if single is None:
                if slot is None:
                    return False
                single = self._execute(slot, item, (number,))
            elif slot is None:
                board.count(path, attribution_cached=1)
            if not compare(single, target):
                found = number
                break
        with board.cond:
            board.attribution[path][item] = found
            board.cond.notify_all()
        return True
