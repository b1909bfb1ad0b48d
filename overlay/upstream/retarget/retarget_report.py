"""What one retarget found and wrote: ``retarget.json``, which ``promote`` reads.

Data only, encoded by :mod:`overlay.codec` directly; the per-patch results it is made of
(:class:`~overlay.upstream.results.PatchVerdict`, ...) are the engine's.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlay.upstream.results import REPORT_SCHEMA, PatchVerdict, PinAttempt, ReleaseRun


@dataclass(frozen=True)
class CaseMove:
    """One corpus case across the move: pinned patched build vs new patched build."""

    case: str
    old_patched: str  # quality
    new_patched: str
    changes: tuple[str, ...]  # observations that differ
    attribution: str  # "no change", "upstream change", "patch", "upstream change and patch"
    note: str
    covered_by: str = ""  # the existing target line's own fix of a lost case ("fix 7")

    @property
    def lost(self) -> bool:
        """Return True when the case was right with the pinned build and is not now."""
        return self.old_patched == "right" and self.new_patched != "right"


@dataclass(frozen=True)
class WheelRecord:
    """One wheel of a release for a pinned interpreter/platform."""

    file: str
    sha256: str  # "" when the release publishes no such wheel
    python: str
    platform: str
    note: str = ""


@dataclass(frozen=True)
class Retarget:
    """Everything one retarget found and wrote (``retarget.json``, which ``promote`` reads)."""

    old_version: str
    version: str
    candidate: str  # the candidate series folder
    fast: bool
    problems: tuple[str, ...]
    wheels: tuple[WheelRecord, ...]
    runtime: dict[str, str]
    attempts: tuple[PinAttempt, ...]
    patches: tuple[PatchVerdict, ...]  # on the pinned release (where measured), then the new
    runtime_form: str
    moves: tuple[CaseMove, ...]
    runs: dict[str, ReleaseRun]  # "old" / "new"
    timings: dict[str, float]
    worktree: str  # "" when none was written
    resume: str
    locks: tuple[str, ...]  # the candidate's locks (locks/<tag>.txt)
    schema: int = REPORT_SCHEMA

    @property
    def ready(self) -> bool:
        """Return True when the candidate can be promoted."""
        return not self.problems
