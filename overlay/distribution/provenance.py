"""What a patched executorch says about itself: local version, METADATA, ``ARM_OVERLAY.json``."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from overlay import __version__, codec
from overlay._hashing import sha256_bytes
from overlay.codec import CodecError
from overlay.distribution.distinfo import set_metadata_version, set_requirements
from overlay.text.series import Series

PROVENANCE_FILE = "ARM_OVERLAY.json"
LOCAL_PREFIX = "armfix"
SUBSET_LABEL = "fix"  # the local version segment before the numbers of a subset
TOOL = f"executorch-arm-overlay {__version__}"


@dataclasses.dataclass(frozen=True)
class PatchRecord:
    """One patch as the provenance names it."""

    name: str
    subject: str
    sha256: str


@dataclasses.dataclass(frozen=True)
class FileRecord:
    """One patched file's sha256 before and after the series."""

    pristine: str | None  # None: the release lacks the file (the series creates it)
    patched: str


@dataclasses.dataclass(frozen=True)
class Provenance:
    """What a patched tree was made from: written as ``ARM_OVERLAY.json`` in its dist-info."""

    tool: str
    version: str
    base_wheel: str
    base_sha256: str
    series_digest: str
    patches: tuple[PatchRecord, ...]  # the patches the tree holds (all, or the subset)
    files: dict[str, FileRecord]  # wheel path -> hashes
    requires: tuple[str, ...]  # the Requires-Dist lines the series was proven with

    def to_json(self) -> str:
        """Return the JSON text (sorted keys, so a rebuild gives the same bytes)."""
        return codec.dumps(self, indent=2) + "\n"


def parse_provenance(text: str | None) -> Provenance | None:
    """Return the provenance in ``text``, or None when it is absent or malformed."""
    if not text:
        return None
    try:
        return codec.loads(Provenance, text, where=PROVENANCE_FILE)
    except CodecError:
        return None


def is_whole(series: Series, fixes: Collection[int] | None) -> bool:
    """Return True when ``fixes`` (None: all) is every fix of the series."""
    return fixes is None or set(fixes) == series.numbers


def local_version(series: Series, fixes: Collection[int] | None = None) -> str:
    """Return the PEP 440 version of the patched tree, e.g. ``1.2.0+armfix.1a2b3c4d5e``.

    A subset of the fixes adds their numbers: ``1.5.1+armfix.1a2b3c4d5e.fix.1.7``.
    """
    version = f"{series.pins.executorch}+{LOCAL_PREFIX}.{series.short_digest}"
    if is_whole(series, fixes):
        return version
    assert fixes is not None
    return ".".join([version, SUBSET_LABEL, *map(str, sorted(fixes))])


def patched_metadata(series: Series, metadata: str, *, where: str) -> str:
    """Return METADATA as the patched wheel carries it: local version, narrowed requirements."""
    text = set_metadata_version(metadata, local_version(series), where=where)
    return set_requirements(text, series.pins.wheel_requirements(), tuple(series.pins.extras))


def make_provenance(
    series: Series,
    files: Mapping[str, FileRecord],
    *,
    base_wheel: str,
    base_sha256: str,
    fixes: Collection[int] | None = None,
) -> Provenance:
    """Return the provenance of ``fixes`` (None: all) applied to a wheel or installed tree."""
    held = series.patches if fixes is None else series.of(fixes)
    return Provenance(
        tool=TOOL,
        version=local_version(series, fixes),
        base_wheel=base_wheel,
        base_sha256=base_sha256,
        series_digest=series.digest,
        patches=tuple(PatchRecord(p.name, p.subject, sha256_bytes(p.text.encode())) for p in held),
        files=dict(files),
        requires=series.pins.wheel_requirements(),
    )
