"""``evidence.toml``: why a promoted line carries, ports or drops each patch."""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from overlay import codec
from overlay._files import write_text_atomic
from overlay.errors import SeriesError

EVIDENCE_FILE = "evidence.toml"
SCHEMA = 1


class Status(enum.StrEnum):
    """How a line holds a patch."""

    CARRIED = "carried"  # the same diff (perhaps at an offset)
    PORTED = "ported"  # rewritten for the line's release
    BACKPORTED = "backported"  # cherry-picked from upstream (its Origin: is the commit)
    DROPPED = "dropped"  # not in the line; the reason says why


@dataclass(frozen=True)
class CaseResult:
    """One trigger case of the patch, on the line's stock release and with the patch."""

    case: str
    stock: str
    patched: str = ""  # "" when the patched build did not run it (the patch was dropped)


@dataclass(frozen=True)
class PatchEvidence:
    """What the retarget measured for one patch of the older line."""

    patch: str  # the file name on the older line
    status: Status
    reason: str
    cases: tuple[CaseResult, ...] = ()
    upstream_test: str = ""  # "stock 1 failed -> patched 1 passed (fails before, passes after)"
    applied_upstream: str = ""  # the patch's Applied-Upstream header


@dataclass(frozen=True)
class LineEvidence:
    """The evidence a line was promoted with."""

    schema: int
    retargeted_from: str  # the older line
    measured: str  # ISO date of the promote
    corpus: str  # "fast" or "full"
    patches: tuple[PatchEvidence, ...]


def write(line_dir: Path, evidence: LineEvidence) -> Path:
    """Write ``evidence.toml`` into ``line_dir`` (with a header saying where it came from)."""
    document = tomlkit.document()
    document.add(
        tomlkit.comment(
            f"Written by `retarget --promote` from {evidence.retargeted_from}"
            " (overlay.lines.evidence); regenerate, do not edit."
        )
    )
    encoded = codec.encode(evidence)
    assert isinstance(encoded, dict)
    document.update(encoded)
    path = line_dir / EVIDENCE_FILE
    write_text_atomic(path, tomlkit.dumps(document))
    return path


def load(line_dir: Path) -> LineEvidence | None:
    """Return the line's evidence, or None for a line that was not promoted (the first)."""
    path = line_dir / EVIDENCE_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SeriesError(
            f"cannot read {path}",
            expected="the TOML `retarget --promote` wrote",
            found=str(exc),
            hint=f"restore it from git (`git checkout -- {path}`)",
        ) from exc
    return codec.decode(LineEvidence, data, where=str(path))


def dropped(evidence: LineEvidence | None) -> Sequence[PatchEvidence]:
    """Return the patches the line dropped."""
    return [p for p in evidence.patches if p.status is Status.DROPPED] if evidence else []
