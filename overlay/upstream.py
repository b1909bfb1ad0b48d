"""The executorch version matrix: how each patch (and its port) fares on each release.

For every release the matrix reads the Arm backend sources from that release's
wheel (fetched and sha256-checked through ``overlay.wheels.fetch_wheel``) and
tries every patch of the series with the strict applier: exact, at an offset,
already contained (the reverse applies), target missing or moved, or conflict.
The newest release's result plus the patch's ``Applied-Upstream`` header give
the verdict: drop it, send it upstream, or port it.
"""

from __future__ import annotations

import enum
import json
import zipfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version
from unidiff.patch import PatchedFile
from wheel.wheelfile import WheelError as _WheelFileError
from wheel.wheelfile import WheelFile

from overlay import pins
from overlay.applier import HunkMismatchError, apply_file
from overlay.cache import sha256_file
from overlay.errors import OverlayError, UpstreamError
from overlay.series import PATCH_SUFFIX, Patch, Series, parse_patch
from overlay.tree import decode
from overlay.wheels import fetch_wheel

PORTS_DIR = "ports"
ARM_PREFIX = "backends/arm/"


class Status(enum.StrEnum):
    """How one patch (or one file diff of it) fares on one release, best first."""

    APPLIES = "applies"
    OFFSET = "offset"
    CONTAINED = "contained"
    CONFLICT = "conflict"
    MOVED = "moved"
    MISSING = "missing"


_RANK = {status: rank for rank, status in enumerate(Status)}
APPLYING = frozenset({Status.APPLIES, Status.OFFSET})


@dataclass(frozen=True)
class Check:
    """The result of trying one patch on one release's sources."""

    status: Status
    detail: str = ""

    @property
    def short(self) -> str:
        """Return a compact cell text, e.g. ``conflict h1`` or ``offset +12``."""
        if self.status is Status.OFFSET:
            return f"offset {self.detail.split()[0]}" if self.detail else "offset"
        if self.status is Status.CONFLICT and self.detail.startswith("hunk "):
            return "conflict h" + self.detail.split()[1].split("/")[0]
        return self.status.value

    def as_dict(self) -> dict[str, str]:
        """Return the JSON form."""
        return {"status": self.status.value, "detail": self.detail}


@dataclass(frozen=True)
class Cell:
    """One patch on one release: the pinned patch and, where one exists, its port."""

    version: str
    check: Check
    port_version: str | None = None
    port: Check | None = None

    @property
    def effective(self) -> Check:
        """Return the port's result if there is a port, else the pinned patch's."""
        return self.port if self.port is not None else self.check

    @property
    def short(self) -> str:
        """Return the terminal cell text."""
        if self.port is None:
            return self.check.short
        return f"{self.check.short} / port {self.port.short}"

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        out: dict[str, object] = {"version": self.version, **self.check.as_dict()}
        if self.port is not None:
            out["port"] = {"version": self.port_version, **self.port.as_dict()}
        return out


@dataclass(frozen=True)
class UpstreamInfo:
    """What a patch's ``Applied-Upstream`` header says."""

    text: str
    version: str | None
    commit: str | None
    note: str

    @property
    def ref(self) -> str:
        """Return a short reference: a 10-digit commit, a PR number or nothing."""
        if self.commit:
            return self.commit[:10]
        return ""


@dataclass(frozen=True)
class Verdict:
    """What to do with a patch, given the matrix and its header."""

    action: str  # "drop", "upstream" (send it), "port" (needs a port first)
    text: str
    needs_upstream: bool


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

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "series": self.series_digest,
            "versions": list(self.versions),
            "wheels": {
                v: {"file": r.wheel.name, "sha256": r.sha256, "pinned": r.pinned}
                for v, r in self.releases.items()
            },
            "patches": [
                {
                    "name": row.name,
                    "subject": row.subject,
                    "applied_upstream": row.upstream.text,
                    "cells": {v: cell.as_dict() for v, cell in row.cells.items()},
                    "verdict": {
                        "action": row.verdict.action,
                        "text": row.verdict.text,
                        "needs_upstream": row.verdict.needs_upstream,
                    },
                }
                for row in self.rows
            ],
        }


def parse_applied_upstream(text: str) -> UpstreamInfo:
    """Parse ``Applied-Upstream``: ``1.3.0, commit:<sha> (PR #N)`` or free text."""
    text = " ".join(text.split())
    version = None
    note = text
    head, _, rest = text.partition(",")
    try:
        Version(head.strip())
    except InvalidVersion:
        pass
    else:
        version, note = head.strip(), rest.strip()
    commit = None
    for word in note.replace("(", " ").replace(")", " ").split():
        if word.startswith("commit:"):
            commit = word.removeprefix("commit:")
    return UpstreamInfo(text=text, version=version, commit=commit, note=note)


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
        new = dict(texts)
        for patched_file in patch.files:
            new[patched_file.path] = apply_file(
                new[patched_file.path], patched_file, allow_offset=True
            ).text
        worst = max(checks, key=lambda c: _RANK[c.status])
        return worst, new
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
    worst = max(checks, key=lambda c: _RANK[c.status])
    if len(checks) > 1:
        worst = Check(worst.status, _join(checks, patch))
    return worst, dict(texts)


def _join(checks: Sequence[Check], patch: Patch) -> str:
    return "; ".join(
        f"{f.path}: {c.status.value} {c.detail}".strip()
        for f, c in zip(patch.files, checks, strict=True)
    )


def load_ports(patches_dir: Path, series: Series) -> dict[str, dict[str, Patch]]:
    """Load ``ports/<version>/<name>.patch``: version -> patch name -> port."""
    root = patches_dir / PORTS_DIR
    names = {p.name for p in series.patches}
    ports: dict[str, dict[str, Patch]] = {}
    if not root.is_dir():
        return ports
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            Version(folder.name)
        except InvalidVersion as exc:
            raise UpstreamError(
                f"{folder} is not named after an executorch release",
                expected="patches/ports/<version>/, e.g. patches/ports/1.5.1/",
                found=folder.name,
                hint="rename the folder to the release the ports were made against",
            ) from exc
        for path in sorted(folder.glob(f"*{PATCH_SUFFIX}")):
            if path.name not in names:
                raise UpstreamError(
                    f"port {path} does not belong to a patch of the series",
                    expected=f"a file named like one of: {', '.join(sorted(names))}",
                    found=path.name,
                    hint="name a port exactly like the patch it ports",
                )
            with path.open(encoding="utf-8", newline="") as handle:
                port = parse_patch(path.name, handle.read())
            ports.setdefault(folder.name, {})[path.name] = port
    return ports


def port_for(
    ports: Mapping[str, Mapping[str, Patch]], name: str, version: str
) -> tuple[str, Patch] | None:
    """Return the newest port of ``name`` made for ``version`` or an older release."""
    usable = [v for v in ports if name in ports[v] and Version(v) <= Version(version)]
    if not usable:
        return None
    best = max(usable, key=Version)
    return best, ports[best][name]


def verdict(patch: Patch, cells: Mapping[str, Cell], versions: Sequence[str]) -> Verdict:
    """Combine the patch's Applied-Upstream header with the matrix."""
    info = parse_applied_upstream(patch.header.get("Applied-Upstream", ""))
    newest = versions[-1]
    effective = cells[newest].effective
    if info.version is not None:
        how = f" ({info.ref})" if info.ref else ""
        text = f"drop: fixed upstream in {info.version}{how}"
        if info.note and not info.commit:
            text += f", {info.note}"
        fixed = Version(info.version)
        stale = [v for v in versions if Version(v) >= fixed and cells[v].check.status in APPLYING]
        if stale:
            text += f"; yet the patch still applies on {', '.join(stale)}: check the header"
        return Verdict("drop", text, needs_upstream=False)
    if info.text:
        text = f"drop: {info.text} (Applied-Upstream)"
        if effective.status in APPLYING:
            text += f"; the code it changes is still in {newest} ({effective.short})"
        return Verdict("drop", text, needs_upstream=False)
    if effective.status is Status.CONTAINED:
        first = next(v for v in versions if cells[v].effective.status is Status.CONTAINED)
        return Verdict(
            "drop",
            f"drop: contained upstream since {first} (add Applied-Upstream to the header)",
            needs_upstream=False,
        )
    port = cells[newest].port_version
    if effective.status in APPLYING:
        via = f" (port {port})" if port else ""
        return Verdict(
            "upstream",
            f"send upstream: not fixed in {newest}; applies there{via}",
            needs_upstream=True,
        )
    return Verdict(
        "port",
        f"port needed: {effective.short} on {newest}; add "
        f"patches/{PORTS_DIR}/{newest}/{patch.name}",
        needs_upstream=True,
    )


def build_matrix(
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    releases: Sequence[Release],
) -> Matrix:
    """Try every patch (cumulatively, in series order) and its port on every release."""
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
            verdict=verdict(patch, cells[patch.name], versions),
        )
        for patch in series.patches
    )
    return Matrix(series.digest, versions, {r.version: r for r in ordered}, rows)


def matrix_pin(version: str) -> pins.WheelPin:
    """Return the recorded wheel pin of a release, or an unverified one to record."""
    for pin in pins.MATRIX_WHEELS:
        if pin.version == version:
            return pin
    try:
        Version(version)
    except InvalidVersion as exc:
        raise UpstreamError(
            f"{version!r} is not a release version",
            expected="a version like 1.5.1",
            found=version,
            hint="list releases with `pip index versions executorch`",
        ) from exc
    template = pins.MATRIX_WHEELS[-1]
    filename = template.filename.replace(f"-{template.version}-", f"-{version}-", 1)
    return pins.WheelPin(filename, "", template.python, template.platform)


def read_release(wheel: Path, version: str, *, prefix: str = ARM_PREFIX) -> dict[str, bytes]:
    """Return ``{repository path: bytes}`` of the wheel's files under ``prefix``, RECORD-checked."""
    package = pins.PACKAGE_DIR + "/"
    files: dict[str, bytes] = {}
    try:
        with WheelFile(wheel) as src:
            for info in src.infolist():
                name = info.filename
                if info.is_dir() or not name.startswith(package + prefix):
                    continue
                files[name.removeprefix(package)] = src.read(name)
    except (_WheelFileError, zipfile.BadZipFile, OSError) as exc:
        raise UpstreamError(
            f"cannot read {wheel.name}: {exc}",
            expected=f"a readable executorch {version} wheel",
            found=str(exc),
            hint="delete it from the wheel cache and run again",
        ) from exc
    if not files:
        raise UpstreamError(
            f"{wheel.name} has no {prefix} sources",
            expected=f"{package}{prefix}... files",
            found="none",
            hint="the matrix needs a full executorch wheel",
        )
    return files


def load_release(version: str, *, cache: Path | None = None) -> Release:
    """Fetch (cached, sha256-checked when recorded) and read one release's Arm sources."""
    pin = matrix_pin(version)
    try:
        wheel = fetch_wheel(pin, cache=cache)
    except OverlayError as exc:
        raise UpstreamError(
            f"cannot fetch executorch {version} for the matrix",
            expected=pin.filename,
            found=exc.message,
            hint=exc.hint or "check the version exists: `pip index versions executorch`",
        ) from exc
    digest = sha256_file(wheel)
    return Release(version, wheel, digest, bool(pin.sha256), read_release(wheel, version))


def unpinned_note(matrix: Matrix) -> str:
    """Return the MATRIX_WHEELS lines to add for releases that were fetched unverified."""
    lines = [
        f'        ("{r.version}", "{r.sha256}"),' for r in matrix.releases.values() if not r.pinned
    ]
    if not lines:
        return ""
    return "not yet recorded; add to MATRIX_WHEELS in overlay/pins.py:\n" + "\n".join(lines)


def render_table(matrix: Matrix) -> str:
    """Render the matrix for a terminal."""
    header = ["patch", *matrix.versions]
    rows = [
        [row.name.removesuffix(PATCH_SUFFIX), *(row.cells[v].short for v in matrix.versions)]
        for row in matrix.rows
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows), ""]
    for row in matrix.rows:
        out.append(f"{row.name}: {row.verdict.text}")
        for version in matrix.versions:
            cell = row.cells[version]
            for label, check in (("", cell.check), ("port ", cell.port)):
                if check is not None and check.status not in (Status.APPLIES,) and check.detail:
                    out.append(f"    {version} {label}{check.status.value}: {check.detail}")
    note = unpinned_note(matrix)
    if note:
        out += ["", note]
    return "\n".join(out) + "\n"


def render_markdown(matrix: Matrix) -> str:
    """Render the matrix as a Markdown table plus verdicts."""
    out = [
        "| patch | " + " | ".join(matrix.versions) + " | verdict |",
        "|---|" + "---|" * len(matrix.versions) + "---|",
    ]
    for row in matrix.rows:
        cells = " | ".join(row.cells[v].short for v in matrix.versions)
        out.append(f"| `{row.name}` | {cells} | {row.verdict.text} |")
    out += ["", "Wheels:", ""]
    for release in matrix.releases.values():
        state = "recorded" if release.pinned else "NOT recorded"
        out.append(f"- `{release.wheel.name}` sha256 `{release.sha256}` ({state})")
    return "\n".join(out) + "\n"


def render_json(matrix: Matrix) -> str:
    """Render the matrix as JSON."""
    return json.dumps(matrix.as_dict(), indent=2) + "\n"


def run_matrix(
    series: Series, patches_dir: Path, versions: Sequence[str], *, cache: Path | None = None
) -> Matrix:
    """Fetch every release in ``versions`` and build the matrix."""
    if not versions:
        raise UpstreamError("no releases to check", hint="pass --versions 1.2.0,1.5.1")
    ports = load_ports(patches_dir, series)
    releases = [load_release(v, cache=cache) for v in dict.fromkeys(versions)]
    return build_matrix(series, ports, releases)
