"""What to run and where: the options of one equivalence run, and its shard."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from overlay.equivalence.protocol import PathId
from overlay.errors import EquivalenceInputError
from overlay.items import ItemId

DEFAULT_RUNTIME_PATCH = "overlay.runtime:apply_all"
DEFAULT_TIMEOUT_S = 600.0
CALLER_DIR_ENV = "OVERLAY_CALLER_DIR"  # where relative --models / --runtime-patch are read from
WORKER_MODULE = "overlay.equivalence.worker"
DEFAULT_WORKER = ("-m", WORKER_MODULE)
Group = Literal["core", "zoo", "all"]


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
        raise EquivalenceInputError(
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
class RunChoices:
    """What ran and how it was selected: recorded in every report."""

    stock_python: str
    patched_python: str
    runtime_patch: str = DEFAULT_RUNTIME_PATCH
    models: str | None = None
    with_corpus: bool = False  # with models: the built-in corpus and probes too
    fast: bool = False
    only: tuple[str, ...] = ()
    group: Group | None = None  # corpus group; None: core (+ with --fast one zoo case)
    probes: bool = True
    parallel: bool = True
    attribute: bool = True
    keep_bytes: bool = False
    shard: Shard | None = None
    require_executed: tuple[str, ...] = ()  # targets that must run ("tosa", "vgf"), or fail

    def recorded(self) -> RunChoices:
        """Return just these fields (an :class:`Options` without how this machine runs it)."""
        return RunChoices(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RunChoices)})


@dataclass(frozen=True)
class Options(RunChoices):
    """What to run and where: the recorded choices, then this machine's settings."""

    out_dir: Path = Path("reports")
    timeout: float = DEFAULT_TIMEOUT_S  # seconds per request; a case may set its own
    patches_dir: Path | None = None  # the series folder workers read pins from
    pythonpath: dict[PathId, str] = field(default_factory=dict)  # extra entries per path
    worker_command: tuple[str, ...] = DEFAULT_WORKER  # after the path's python
    cache_dir: Path | None = None  # None: no result cache
    use_cache: bool = True  # False: ignore cached results (fresh ones still refresh it)
    jobs: int = 0  # worker processes to aim for; 0: one per CPU (never fewer than needed)

    @property
    def log_dir(self) -> Path:
        """Return the folder for the workers' logs (they run there)."""
        return self.out_dir / "equivalence-logs"

    @property
    def builtin_worker(self) -> bool:
        """Return True when the workers are the overlay's own (they run the corpus)."""
        return self.worker_command == DEFAULT_WORKER
