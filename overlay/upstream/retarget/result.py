"""What a retarget is asked (:class:`Request`) and what it found (:class:`Retarget`)."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from overlay.upstream.behaviour import ReleaseRun, ReleaseRunJson
from overlay.upstream.facts import CaseMove
from overlay.upstream.releases import WheelRecord
from overlay.upstream.retarget.pin_check import PinAttempt
from overlay.upstream.verdicts import PatchVerdict, PatchVerdictJson

REPORT_SCHEMA = 1  # retarget.json


@dataclass(frozen=True)
class Request:
    """What to retarget and how."""

    version: str
    patches_dir: Path
    out_dir: Path
    fast: bool = True
    behaviour: bool = True
    equivalence: bool = True
    torch: tuple[str, ...] = ()
    upstream_clone: Path | None = None
    envs_root: Path | None = None
    resume: bool = False  # continue after a conflict was resolved in <out>/worktree
    locks: bool = True  # resolve the candidate's locks (uv, the index) when it is complete
    today: str = field(default_factory=lambda: datetime.date.today().isoformat())


@dataclass(frozen=True)
class Retarget:
    """Everything one retarget found and wrote."""

    old_version: str
    version: str
    candidate: Path  # the candidate series folder
    wheels: tuple[WheelRecord, ...]
    runtime: dict[str, str]
    attempts: tuple[PinAttempt, ...]
    verdicts: tuple[PatchVerdict, ...]
    runtime_form: str
    moves: tuple[CaseMove, ...]
    runs: dict[str, ReleaseRun]  # "old" / "new"
    timings: dict[str, float]
    worktree: Path | None
    resume: str
    fast: bool
    problems: tuple[str, ...]
    wheel: Path = Path()  # the release's wheel the sources were read from
    release_tests: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    locks: tuple[Path, ...] = ()  # the candidate's locks (locks/<tag>.txt)

    @property
    def ready(self) -> bool:
        """Return True when the candidate can be promoted."""
        return not self.problems

    def as_json(self) -> RetargetJson:
        """Return the JSON form (``retarget.json``, which ``promote`` reads)."""
        return RetargetJson(
            old_version=self.old_version,
            version=self.version,
            candidate=str(self.candidate),
            ready=self.ready,
            problems=self.problems,
            fast=self.fast,
            wheels=self.wheels,
            runtime=self.runtime,
            attempts=self.attempts,
            patches=tuple(v.as_json() for v in self.verdicts),
            runtime_form=self.runtime_form,
            moves=self.moves,
            runs={k: r.as_json() for k, r in self.runs.items()},
            timings={k: round(v, 1) for k, v in self.timings.items()},
            worktree=str(self.worktree) if self.worktree else None,
            resume=self.resume,
            locks=tuple(str(path) for path in self.locks),
        )


@dataclass(frozen=True)
class RetargetJson:
    """A retarget's report as JSON (``retarget.json``): ready or the problems, and why."""

    old_version: str
    version: str
    candidate: str
    ready: bool
    problems: tuple[str, ...]
    fast: bool
    wheels: tuple[WheelRecord, ...]
    runtime: dict[str, str]
    attempts: tuple[PinAttempt, ...]
    patches: tuple[PatchVerdictJson, ...]
    runtime_form: str
    moves: tuple[CaseMove, ...]
    runs: dict[str, ReleaseRunJson]  # "old" / "new"
    timings: dict[str, float]
    worktree: str | None
    resume: str
    locks: tuple[str, ...]
    schema: int = REPORT_SCHEMA


class Clock:
    """Seconds per step of a run, in the order the steps ran."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time one step (added to the step's earlier time)."""
        mark = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - mark

    def done(self) -> dict[str, float]:
        """Return the timings with the total."""
        return {**self.timings, "total": time.perf_counter() - self.started}
