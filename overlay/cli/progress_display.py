"""The equivalence run's progress on stderr: rich bars on a terminal, lines with --verbose."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress

from overlay.cli.output import progress
from overlay.equivalence.controller.scheduler import Event, EventKind, Progress, no_progress
from overlay.equivalence.protocol import PathId
from overlay.equivalence.render.cells import item_label


class BarProgress:
    """Per-path progress bars on stderr (rich): items done, elapsed, ETA, current item."""

    def __init__(self, console: Console) -> None:
        self.bars = RichProgress(
            TextColumn("{task.description:<30}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}"),
            console=console,
        )
        self.tasks: dict[PathId, TaskID] = {}

    def __enter__(self) -> BarProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def __call__(self, event: Event) -> None:
        """Show one event."""
        kind, path = event.kind, event.path
        if kind is EventKind.PLAN:
            current = "all cached" if event.done == event.total else ""
            self.tasks[path] = self.bars.add_task(
                f"({path.value}) {path.label}",
                total=event.total,
                completed=event.done,
                current=current,
            )
            return
        task = self.tasks.get(path)
        if task is None:  # a worker starting before the plan (listing a models file)
            return
        if kind is EventKind.START:
            self.bars.update(task, current="starting a worker (torch import)")
        elif kind is EventKind.RUN and event.item is not None:
            self.bars.update(task, current=item_label(event.item))
        elif kind is EventKind.DONE:
            self.bars.update(task, advance=1, current="")
        elif kind is EventKind.MORE:
            total = self.bars.tasks[self.tasks[path]].total or 0
            self.bars.update(task, total=total + 1)


class LineProgress:
    """One stderr line per finished item (--verbose when stderr is not a terminal)."""

    def __init__(self) -> None:
        self.done: dict[PathId, int] = {}
        self.total: dict[PathId, int] = {}

    def __call__(self, event: Event) -> None:
        """Print one line for a plan, a worker start or a finished item."""
        path = event.path
        if event.kind is EventKind.PLAN:
            self.done[path], self.total[path] = event.done, event.total
            progress(f"({path.value}) {event.total} items, {event.done} from the cache")
        elif event.kind is EventKind.START:
            progress(f"({path.value}) starting a worker")
        elif event.kind is EventKind.MORE:
            self.total[path] = self.total.get(path, 0) + 1
        elif event.kind is EventKind.DONE and event.item is not None:
            self.done[path] = self.done.get(path, 0) + 1
            progress(
                f"({path.value}) {self.done[path]}/{self.total.get(path, 0)} {event.item} done"
            )


def display(*, quiet: bool, verbose: bool) -> contextlib.AbstractContextManager[Progress]:
    """Return the progress display: bars on a terminal, lines with --verbose, else none."""
    console = Console(stderr=True)
    if quiet:
        return contextlib.nullcontext(no_progress)
    if console.is_terminal and not verbose:
        return BarProgress(console)
    if verbose:
        return contextlib.nullcontext(LineProgress())
    return contextlib.nullcontext(no_progress)
