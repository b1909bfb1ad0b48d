"""What each release line holds, fix by fix: `lines` (and the generated tables of the docs,
tests/docs_tables.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from overlay.fixes import Registry
from overlay.fixes.model import Fix
from overlay.lines import Line, evidence
from overlay.lines.evidence import LineEvidence, PatchEvidence, Status
from overlay.lines.listing import patch_number
from overlay.lines.pins import LOCKS_DIR
from overlay.text.series import Patch, load_series


@dataclass(frozen=True)
class HeldFix:
    """How a line holds one fix."""

    number: int
    title: str
    status: Status


@dataclass(frozen=True)
class LineSummary:
    """One release line as `lines` lists it."""

    name: str
    default: bool  # the newest line: what a command uses without --line
    executorch: str
    torch: str
    fixes: tuple[HeldFix, ...]  # by number; a fix never on the line or its parent is left out
    locks: tuple[str, ...]  # the wheel tags it has a committed lock for


def summaries(registry: Registry, all_lines: Sequence[Line]) -> tuple[LineSummary, ...]:
    """Return every line, newest (the default) first."""
    found = []
    for line in reversed(all_lines):
        proof = evidence.load(line.directory)
        held = ((fix, held_by(line, fix, proof)[0]) for fix in registry.fixes)
        found.append(
            LineSummary(
                line.name,
                line == all_lines[-1],
                str(line.pins.executorch),
                line.pins.runtime.get("torch", "-"),
                tuple(HeldFix(f.number, f.title, s) for f, s in held if s is not None),
                tuple(sorted(p.stem for p in (line.directory / LOCKS_DIR).glob("*.txt"))),
            )
        )
    return tuple(found)


UPSTREAM_COMMIT = "github.com/pytorch/executorch/commit/"
Held = tuple[Status | None, Patch | None, PatchEvidence | None]


def held_by(line: Line, fix: Fix, found: LineEvidence | None) -> Held:
    """Return how ``line`` holds ``fix`` (None: the fix was never on the line or its parent),
    its patch there and its evidence."""
    patch = next((p for p in load_series(line.directory).patches if p.number == fix.number), None)
    mine = (p for p in found.patches if patch_number(p.patch) == fix.number) if found else ()
    own = next(iter(mine), None)
    if patch is None:
        return (Status.DROPPED if own is not None else None), None, own
    if UPSTREAM_COMMIT in patch.header.get("Origin", ""):
        return Status.BACKPORTED, patch, own
    return (own.status if own is not None else Status.CARRIED), patch, own
