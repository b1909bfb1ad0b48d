"""Run what the cache cannot answer on worker processes, as parallel as the CPUs allow.

Each path has a queue of items and one or more slots (worker processes, see
:mod:`overlay.equivalence.workers`) that take from it; a path whose results are all
cached starts no worker. A path gets more than one slot only when there are spare CPUs
and enough items to pay for another torch import (after one patch is edited, only (c)
runs, on every CPU). As soon as (a) and (b) have both answered an item and differ, its
attribution goes to the front of (a)'s queue, so it overlaps the other paths' work.

Attribution tries single runtime fixes on (a), the fixes the registry says the case
triggers first, and stops at the first one that turns (a)'s result into (b)'s. Every
result, single-fix runs included, is read from and written to the cache.
"""

from __future__ import annotations

import enum
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from overlay import fixes
from overlay.equivalence.cache import Keys, ResultCache
from overlay.equivalence.protocol import (
    CaseInfo,
    InitReply,
    ItemId,
    ItemKind,
    ItemResult,
    ListReply,
    ListRequest,
    PathId,
    ProbeInfo,
    RunRequest,
    Stage,
)
from overlay.equivalence.verdict import compare, needs_attribution
from overlay.equivalence.workers import Plan, Settings, Slot

PATHS = (PathId.STOCK, PathId.RUNTIME, PathId.PATCHED)
MIN_ITEMS_PER_WORKER = 4.0  # another worker (a torch import) only for this many cases more
PROBE_WEIGHT = 0.1  # a probe costs milliseconds; a case seconds


class EventKind(enum.StrEnum):
    """What a progress event reports."""

    PLAN = "plan"  # a path's item count (total) and how many the cache answered (done)
    START = "start"  # a worker of the path is starting (imports torch and executorch)
    RUN = "run"  # an item starts on the path
    DONE = "done"  # an item finished on the path
    MORE = "more"  # one more run on the path (an attribution run)


@dataclass(frozen=True)
class Event:
    """One progress event of a run."""

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
    attribution_runs: int = 0  # single-fix runs made for attribution (path (a) only)
    attribution_cached: int = 0  # single-fix results answered by the cache
    busy_seconds: float = 0.0  # sum of the items' own run times (attribution included)


@dataclass(frozen=True)
class Outcome:
    """Every path's result of every item, the attributions and the statistics."""

    results: Mapping[PathId, Mapping[ItemId, ItemResult]]
    attribution: Mapping[ItemId, int | None]
    stats: Mapping[PathId, PathStats]
    inits: Mapping[PathId, InitReply | None]


@dataclass(frozen=True)
class _Task:
    item: ItemId
    attribution: bool = False


@dataclass
class _Counts:
    workers: int = 0
    start_seconds: float = 0.0
    ran: int = 0
    cached: int = 0
    attribution_runs: int = 0
    attribution_cached: int = 0
    busy_seconds: float = 0.0


def candidates(item: ItemId) -> list[int]:
    """Return the fixes to try for an item's attribution: its claimed fixes first."""
    claimed = (
        [f.number for f, _ in fixes.triggers_of(item.name)] if item.kind is ItemKind.CASE else []
    )
    return [*dict.fromkeys(claimed), *(f.number for f in fixes.FIXES if f.number not in claimed)]


def case_timeout(info: CaseInfo | ProbeInfo) -> float | None:
    """Return a case's own per-path timeout in seconds (None: the run's ``--timeout``)."""
    return info.timeout if isinstance(info, CaseInfo) else None


def slot_counts(
    weights: Mapping[PathId, float], needed: set[PathId], jobs: int
) -> dict[PathId, int]:
    """Return how many workers each path gets: one per path that needs one, more on spare CPUs."""
    counts = {p: 1 if p in needed else 0 for p in PATHS}
    spare = jobs - sum(counts.values())
    while spare > 0:
        ranked = sorted(needed, key=lambda p: (-weights[p] / counts[p], PATHS.index(p)))
        if not ranked or weights[ranked[0]] / (counts[ranked[0]] + 1) < MIN_ITEMS_PER_WORKER:
            break
        counts[ranked[0]] += 1
        spare -= 1
    return counts


class Pool:
    """The worker slots of one run and the state they share (guarded by one condition)."""

    def __init__(
        self,
        plans: Mapping[PathId, Plan],
        settings: Settings,
        cache: ResultCache | None,
        keys: Keys,
        *,
        attribute: bool = True,
        keep_bytes: bool = False,
        parallel: bool = True,
        jobs: int = 0,
        progress: Progress = no_progress,
    ) -> None:
        self.plans = plans
        self.settings = settings
        self.cache = cache
        self.keys = keys
        self.attribute = attribute
        self.keep_bytes = keep_bytes
        self.parallel = parallel
        self.jobs = jobs  # worker processes to aim for; 0: one per CPU
        self.progress = progress
        self._spare: Slot | None = None
        self._cond = threading.Condition()
        self.infos: Mapping[ItemId, CaseInfo | ProbeInfo] = {}
        self.results: dict[PathId, dict[ItemId, ItemResult]] = {p: {} for p in PATHS}
        self.attribution: dict[ItemId, int | None] = {}
        self.counts = {p: _Counts() for p in PATHS}
        self.queues: dict[PathId, deque[_Task]] = {p: deque() for p in PATHS}
        self.open = dict.fromkeys(PATHS, 0)
        self.judged: set[ItemId] = set()
        self.failure: BaseException | None = None

    def listing(self) -> ListReply:
        """Return the cases and probes a stock worker lists (cached; the worker is kept)."""
        digest = self.keys.listing()
        cached = self.cache.get(digest, ListReply) if self.cache else None
        if cached is not None:
            return cached
        slot = Slot(self.plans[PathId.STOCK], self.settings, 0)
        self.progress(Event(EventKind.START, PathId.STOCK))
        try:
            reply = slot.request(ListRequest(), ListReply, "list the cases")
        except BaseException:
            slot.close()
            raise
        if self.cache:
            self.cache.put(digest, reply)
        self._started(slot)
        self._spare = slot
        return reply

    def close(self) -> None:
        """Stop a worker started for the listing and never used."""
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    # --- the run ---------------------------------------------------------------------------

    def run(self, infos: Mapping[ItemId, CaseInfo | ProbeInfo]) -> Outcome:
        """Answer every item on every path, from the cache or by running it."""
        self.infos = infos
        order = sorted(infos, key=_priority)
        for path in PATHS:
            for item in order:
                result = self._cached(path, infos[item], ())
                if result is not None:
                    self.results[path][item] = result
                    self.counts[path].cached += 1
                else:
                    self.queues[path].append(_Task(item))
                    self.open[path] += 1
            self.progress(
                Event(EventKind.PLAN, path, total=len(infos), done=self.counts[path].cached)
            )
        with self._cond:
            for item in order:
                self._after(item)
        slots = self._slots()
        try:
            self._drive(slots)
        finally:
            for slot in slots:
                slot.close()
            self.close()
        if self.failure is not None:
            raise self.failure
        return Outcome(
            results=self.results,
            attribution=self.attribution,
            stats={p: PathStats(**vars(self.counts[p])) for p in PATHS},
            inits={p: self._init(p, slots) for p in PATHS},
        )

    def _cached(
        self, path: PathId, info: CaseInfo | ProbeInfo, fixes: tuple[int, ...]
    ) -> ItemResult | None:
        if self.cache is None:
            return None
        return self.cache.get(self.keys.result(path, info, fixes, self.keep_bytes), ItemResult)

    def _store(
        self, path: PathId, info: CaseInfo | ProbeInfo, fixes: tuple[int, ...], result: ItemResult
    ) -> None:
        harness = result.error is not None and result.error.stage is Stage.HARNESS
        if self.cache is not None and not harness:
            self.cache.put(self.keys.result(path, info, fixes, self.keep_bytes), result)

    def _init(self, path: PathId, slots: list[Slot]) -> InitReply | None:
        """Return what a path's worker said at start, from this run or the cache."""
        started = [s.init for s in slots if s.plan.path is path and s.init is not None]
        if started:
            return started[0]
        return self.cache.get(self.keys.init(path), InitReply) if self.cache else None

    def _started(self, slot: Slot) -> None:
        if self.cache is not None and slot.init is not None:
            self.cache.put(self.keys.init(slot.plan.path), slot.init)

    def _slots(self) -> list[Slot]:
        weights = {
            p: sum(PROBE_WEIGHT if t.item.kind is ItemKind.PROBE else 1.0 for t in self.queues[p])
            for p in PATHS
        }
        needed = {p for p in PATHS if self.queues[p]}
        if self.attribute and self.queues[PathId.RUNTIME]:
            needed.add(PathId.STOCK)  # (b)'s new results may need attribution runs on (a)
        jobs = self.jobs or os.cpu_count() or 1
        counts = slot_counts(weights, needed, jobs if self.parallel else 1)
        slots = []
        for path in PATHS:
            for index in range(counts[path]):
                if path is PathId.STOCK and index == 0 and self._spare is not None:
                    slots.append(self._spare)
                    self.counts[path].workers += 1
                    self.counts[path].start_seconds += self._spare.start_seconds
                    self._spare = None
                else:
                    slots.append(Slot(self.plans[path], self.settings, index))
        return slots

    def _drive(self, slots: list[Slot]) -> None:
        if not slots:
            return
        if not self.parallel:
            # (a) last: every (b) result is known by then, so its attribution needs no wait.
            for path in (PathId.RUNTIME, PathId.PATCHED, PathId.STOCK):
                for slot in (s for s in slots if s.plan.path is path):
                    self._serve(slot, slots)
            return
        with ThreadPoolExecutor(max_workers=len(slots)) as pool:
            futures = [pool.submit(self._serve, slot, slots) for slot in slots]
            try:
                for future in futures:
                    future.result()
            except BaseException as exc:  # Ctrl-C while waiting: stop every worker
                self._fail(exc, slots)
                raise

    def _fail(self, exc: BaseException, slots: list[Slot]) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = exc
            self._cond.notify_all()
        for slot in slots:
            slot.kill()

    def _finished(self, path: PathId) -> bool:
        """Return True when no task is queued for ``path`` and none can come (lock held)."""
        if self.queues[path]:
            return False
        if path is PathId.STOCK and self.attribute:
            return self.open[PathId.STOCK] == 0 and self.open[PathId.RUNTIME] == 0
        return True

    def _serve(self, slot: Slot, slots: list[Slot]) -> None:
        path = slot.plan.path
        try:
            while True:
                with self._cond:
                    while (
                        self.failure is None and not self.queues[path] and not self._finished(path)
                    ):
                        self._cond.wait()
                    if self.failure is not None or not self.queues[path]:
                        return
                    task = self.queues[path].popleft()
                if slot.stopped:
                    return
                if slot.worker is None:
                    self._start(slot)
                if task.attribution:
                    self._attribute(slot, task.item)
                else:
                    self._run(slot, task.item)
        except BaseException as exc:
            self._fail(exc, [s for s in slots if s is not slot])
        finally:
            slot.close()

    def _start(self, slot: Slot) -> None:
        path = slot.plan.path
        with self._cond:
            self.progress(Event(EventKind.START, path))
        before = slot.start_seconds
        slot.start()
        self._started(slot)
        with self._cond:
            self.counts[path].workers += 1
            self.counts[path].start_seconds += slot.start_seconds - before

    def _run(self, slot: Slot, item: ItemId) -> None:
        path, info = slot.plan.path, self.infos[item]
        with self._cond:
            self.progress(Event(EventKind.RUN, path, item))
        result = slot.run(RunRequest(item, keep_bytes=self.keep_bytes), case_timeout(info))
        self._store(path, info, (), result)
        with self._cond:
            self.results[path][item] = result
            self.open[path] -= 1
            self.counts[path].ran += 1
            self.counts[path].busy_seconds += result.seconds
            self.progress(Event(EventKind.DONE, path, item))
            self._after(item)
            self._cond.notify_all()

    def _after(self, item: ItemId) -> None:
        """Queue the attribution of an item once (a) and (b) are known and differ (lock held)."""
        a, b = self.results[PathId.STOCK].get(item), self.results[PathId.RUNTIME].get(item)
        if not self.attribute or a is None or b is None or item in self.judged:
            return
        self.judged.add(item)
        if not needs_attribution({PathId.STOCK: a, PathId.RUNTIME: b}):
            return
        info = self.infos[item]
        for number in candidates(item):
            single = self._cached(PathId.STOCK, info, (number,))
            if single is None:
                self.queues[PathId.STOCK].appendleft(_Task(item, attribution=True))
                return
            self.counts[PathId.STOCK].attribution_cached += 1
            if not compare(single, b):
                self.attribution[item] = number
                return
        self.attribution[item] = None

    def _attribute(self, slot: Slot, item: ItemId) -> None:
        info = self.infos[item]
        target = self.results[PathId.RUNTIME][item]
        found: int | None = None
        for number in candidates(item):
            single = self._cached(PathId.STOCK, info, (number,))
            if single is None:
                with self._cond:
                    self.progress(Event(EventKind.MORE, PathId.STOCK, item))
                    self.progress(Event(EventKind.RUN, PathId.STOCK, item))
                request = RunRequest(item, fixes=(number,), keep_bytes=self.keep_bytes)
                single = slot.run(request, case_timeout(info))
                self._store(PathId.STOCK, info, (number,), single)
                with self._cond:
                    self.counts[PathId.STOCK].attribution_runs += 1
                    self.counts[PathId.STOCK].busy_seconds += single.seconds
                    self.progress(Event(EventKind.DONE, PathId.STOCK, item))
            if not compare(single, target):
                found = number
                break
        with self._cond:
            self.attribution[item] = found
            self._cond.notify_all()


def _priority(item: ItemId) -> int:
    """Probes (milliseconds) and the registry's trigger cases (likely attributed) first."""
    if item.kind is ItemKind.PROBE:
        return 0
    return 1 if fixes.triggers_of(item.name) else 2
