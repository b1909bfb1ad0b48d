"""Progress of a run as events: the controller reports them, the CLI shows them."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from overlay.equivalence.protocol import PathId
from overlay.items import ItemId


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
