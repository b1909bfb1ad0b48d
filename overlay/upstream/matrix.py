"""The executorch version matrix: how each patch (and its port) fares on each release.

Pure: given the Arm backend sources of each release (read by ``overlay.upstream.releases``),
every patch of the series is tried with the strict applier: exact, at an offset, already
contained (the reverse applies), target missing or moved, or conflict. The newest
release's result plus the patch's ``Applied-Upstream`` header give the verdict (drop it,
send it upstream, or port it), decided in :func:`overlay.upstream.verdicts.text_verdict`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import Version
from unidiff.patch import PatchedFile

from overlay.errors import UpstreamError
from overlay.text.applier import HunkMismatchError, apply_file, apply_patch, decode
from overlay.text.series import PATCH_SUFFIX, Patch, Series
from overlay.upstream.facts import (
    APPLYING,
    RANK,
    Cell,
    CellJson,
    Check,
    Status,
    UpstreamInfo,
    parse_applied_upstream,
)
from overlay.upstream.verdicts import PatchBehaviour, PatchBehaviourJson, Verdict, text_verdict

__all__ = [
    "APPLYING",
    "ARM_PREFIX",
    "PORTS_DIR",
    "Cell",
    "Check",
    "Matrix",
    "MatrixJson",
    "PatchRow",
    "Release",
    "Status",
    "UpstreamInfo",
    "Verdict",
    "build_matrix",
    "check_file",
    "check_patch",
    "parse_applied_upstream",
    "port_for",
]
# Check, Cell, Status, UpstreamInfo, parse_applied_upstream live in facts (re-exported).
PORTS_DIR = "ports"
ARM_PREFIX = "backends/arm/"


@dataclass(frozen=True)
class Release:
    """One executorch release's Arm backend sources, read from its wheel."""

    version: str
    wheel: Path
    sha256: str
    pinned: bool  # the sha256 was checked against MATRIX_WHEELS
    files: dict[str, bytes] = field(repr=False)  # repository path -> bytes, backends/arm/**

    @property
    def texts(self) -> dict[str, str]:
        """Return the files decoded losslessly."""
        return {path: decode(data) for path, data in self.files.items()}


@dataclass(frozen=True)
class PatchRow:
    """One patch's row of the matrix."""

    name: str
    subject: str
    upstream: UpstreamInfo
    cells: dict[str, Cell]
    verdict: Verdict


@dataclass(frozen=True)
class Matrix:
    """The whole version matrix."""

    series_digest: str
    versions: tuple[str, ...]
    releases: dict[str, Release]
    rows: tuple[PatchRow, ...]
    pins_file: str  # where releases' wheel hashes are recorded
    # patch -> release -> behaviour, where it was measured
    behaviour: Mapping[str, Mapping[str, PatchBehaviour]] = field(default_factory=dict)

    @property
    def newest(self) -> str:
        """Return the newest release in the matrix."""
        return self.versions[-1]

    def row(self, name: str) -> PatchRow:
        """Return the row of patch ``name``."""
        for row in self.rows:
            if name in (row.name, row.name.removesuffix(PATCH_SUFFIX)):
                return row
        raise UpstreamError(f"no patch {name!r} in the matrix")

    def as_json(self) -> MatrixJson:
        """Return the JSON form (what ``matrix --json`` writes)."""
        return MatrixJson(
            series=self.series_digest,
            versions=self.versions,
            wheels={
                v: WheelJson(r.wheel.name, r.sha256, r.pinned) for v, r in self.releases.items()
            },
            behaviour={
                name: {version: found.as_json() for version, found in by_release.items()}
                for name, by_release in self.behaviour.items()
            },
            patches=tuple(
                PatchRowJson(
                    name=row.name,
                    subject=row.subject,
                    applied_upstream=row.upstream.text,
                    cells={v: cell.as_json() for v, cell in row.cells.items()},
                    verdict=row.verdict,
                )
                for row in self.rows
            ),
        )


@dataclass(frozen=True)
class WheelJson:
    """A release's wheel in the matrix JSON."""

    file: str
    sha256: str
    pinned: bool


@dataclass(frozen=True)
class PatchRowJson:
    """One patch's row of the matrix JSON."""

    name: str
    subject: str
    applied_upstream: str
    cells: dict[str, CellJson]
    verdict: Verdict


@dataclass(frozen=True)
class MatrixJson:
    """The version matrix as JSON: wheels, behaviour where measured, each patch's row."""

    series: str
    versions: tuple[str, ...]
    wheels: dict[str, WheelJson]
    behaviour: dict[str, dict[str, PatchBehaviourJson]]
    patches: tuple[PatchRowJson, ...]


def _single_hunk(patched_file: PatchedFile, index: int) -> PatchedFile:
    one = PatchedFile(
        source=patched_file.source_file, target=patched_file.target_file, patch_info=None
    )
    one.append(patched_file[index])
    return one


def _hunk_states(text: str, patched_file: PatchedFile) -> list[str]:
    """Classify each hunk alone: ``applies``, ``contained`` or ``conflicts``."""
    states = []
    for index in range(len(patched_file)):
        one = _single_hunk(patched_file, index)
        state = "conflicts"
        for reverse, name in ((False, "applies"), (True, "contained")):
            try:
                apply_file(text, one, reverse=reverse, allow_offset=True)
            except HunkMismatchError:
                continue
            state = name
            break
        states.append(state)
    return states


def _moved_to(path: str, names: Collection[str]) -> list[str]:
    base = PurePosixPath(path).name
    return sorted(n for n in names if n.startswith(ARM_PREFIX) and PurePosixPath(n).name == base)


def check_file(text: str | None, patched_file: PatchedFile, names: Collection[str]) -> Check:
    """Try one file diff on one release file (None: the file is not in the release)."""
    path = str(patched_file.path)
    if text is None:
        moved = _moved_to(path, names)
        if moved:
            return Check(Status.MOVED, f"{path} -> {', '.join(moved)}")
        return Check(Status.MISSING, f"{path} is not in the release")
    try:
        apply_file(text, patched_file)
        return Check(Status.APPLIES)
    except HunkMismatchError:
        pass
    try:
        apply_file(text, patched_file, reverse=True)
        return Check(Status.CONTAINED, "the reverse diff applies")
    except HunkMismatchError:
        pass
    try:
        result = apply_file(text, patched_file, allow_offset=True)
        offsets = ",".join(f"{o:+d}" for o in result.offsets)
        return Check(Status.OFFSET, f"{offsets} lines")
    except HunkMismatchError as exc:
        first_bad = exc.hunk
    try:
        apply_file(text, patched_file, reverse=True, allow_offset=True)
        return Check(Status.CONTAINED, "the reverse diff applies at an offset")
    except HunkMismatchError:
        pass
    states = _hunk_states(text, patched_file)
    summary = ", ".join(f"{n} {s}" for n, s in enumerate(states, start=1))
    return Check(Status.CONFLICT, f"hunk {first_bad}/{len(states)} fails in {path} ({summary})")


def check_patch(
    patch: Patch, texts: Mapping[str, str], names: Collection[str]
) -> tuple[Check, dict[str, str]]:
    """Try a whole patch; return its result and the texts after it (changed only if it applies)."""
    checks = [check_file(texts.get(f.path), f, names) for f in patch.files]
    statuses = {c.status for c in checks}
    if statuses <= APPLYING:
        worst = max(checks, key=lambda c: RANK[c.status])
        return worst, apply_patch(patch, texts, allow_offset=True)
    if (
        len(statuses) > 1
        and Status.CONTAINED in statuses
        and statuses
        <= {
            *APPLYING,
            Status.CONTAINED,
        }
    ):
        return Check(Status.CONFLICT, "partly contained: " + _join(checks, patch)), dict(texts)
    worst = max(checks, key=lambda c: RANK[c.status])
    if len(checks) > 1:
        worst = Check(worst.status, _join(checks, patch))
    return worst, dict(texts)


def _join(checks: Sequence[Check], patch: Patch) -> str:
    return "; ".join(
        f"{f.path}: {c.status.value} {c.detail}".strip()
        for f, c in zip(patch.files, checks, strict=True)
    )


def port_for(
    ports: Mapping[str, Mapping[str, Patch]], name: str, version: str
) -> tuple[str, Patch] | None:
    """Return the newest port of ``name`` made for ``version`` or an older release."""
    usable = [v for v in ports if name in ports[v] and Version(v) <= Version(version)]
    if not usable:
        return None
    best = max(usable, key=Version)
    return best, ports[best][name]


def build_matrix(
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    releases: Sequence[Release],
    pins_file: str = "patches/upstream.toml",
) -> Matrix:
    """Try every patch (cumulatively, in series order) and its port on every release.

    ``pins_file`` names where release wheel hashes are recorded (for the report).
    """
    ordered = sorted(releases, key=lambda r: Version(r.version))
    versions = tuple(r.version for r in ordered)
    cells: dict[str, dict[str, Cell]] = {p.name: {} for p in series.patches}
    for release in ordered:
        texts = release.texts
        names = frozenset(release.files)
        for patch in series.patches:
            check, after = check_patch(patch, texts, names)
            found = port_for(ports, patch.name, release.version)
            if found is None:
                cells[patch.name][release.version] = Cell(release.version, check)
                texts = after
                continue
            port_version, port = found
            port_check, port_after = check_patch(port, texts, names)
            cells[patch.name][release.version] = Cell(
                release.version, check, port_version, port_check
            )
            texts = port_after
    rows = tuple(
        PatchRow(
            name=patch.name,
            subject=patch.subject,
            upstream=parse_applied_upstream(patch.header.get("Applied-Upstream", "")),
            cells=cells[patch.name],
            verdict=text_verdict(
                patch.name,
                parse_applied_upstream(patch.header.get("Applied-Upstream", "")),
                cells[patch.name],
                versions,
            ),
        )
        for patch in series.patches
    )
    releases_by_version = {r.version: r for r in ordered}
    return Matrix(series.digest, versions, releases_by_version, rows, pins_file)
