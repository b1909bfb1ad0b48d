"""What ``--json`` prints: typed reports of status, check, build-wheel, verify-install, errors."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING

from overlay.target.transaction import FileState, TreeState

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@dataclasses.dataclass(frozen=True)
class PatchInfo:
    """One patch of the series."""

    number: int
    name: str
    subject: str
    upstream: str | None


@dataclasses.dataclass(frozen=True)
class SeriesInfo:
    """The series and the patched wheel version it makes."""

    digest: str
    executorch: str
    wheel_version: str
    patches: tuple[PatchInfo, ...]


@dataclasses.dataclass(frozen=True)
class FileStatus:
    """One target file's state."""

    repo_path: str
    state: FileState


@dataclasses.dataclass(frozen=True)
class StatusReport:
    """``status``: the series and, with a target, each file's state."""

    series: SeriesInfo
    target: Path | None
    target_version: str | None
    state: TreeState | None  # the whole tree: pristine, patched, interrupted, ...
    summary: str | None  # the one-line state `status` prints
    files: tuple[FileStatus, ...]


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """``check``: what apply (or revert) would change; ``changes_due`` sets exit code 21."""

    target: Path
    reverse: bool
    changes_due: bool
    would_change: tuple[str, ...]
    unchanged: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class BuildReport:
    """``build-wheel --report``: the wheel, its sha256, the lock that pins it, the index."""

    wheel: Path
    version: str
    built: bool
    sha256: str
    lock: Path | None
    index: Path


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """An error, as ``--json`` prints it on stdout (the message still goes to stderr)."""

    error: str
    exit_code: int
    message: str
    expected: str | None
    found: str | None
    hint: str | None


def _default(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(report: DataclassInstance) -> str:
    """Render a report dataclass (nested dataclasses, enums, paths) as indented JSON."""
    return json.dumps(dataclasses.asdict(report), indent=2, default=_default) + "\n"
