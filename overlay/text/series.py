"""Load and validate the patch series: a ``series`` file plus DEP-3 headed unified diffs."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchedFile, PatchSet

from overlay.errors import SeriesError, UnsafePatchError
from overlay.lines import pins as pins_module
from overlay.lines.listing import read_series_names, read_text
from overlay.lines.pins import Pins
from overlay.text import file_diffs

CHECKSUMS_FILE = "SHA256SUMS"
PATCH_SUFFIX = ".patch"
HEADER_END = "---\n"
REQUIRED_FIELDS = ("Description", "Forwarded", "Last-Update")
_FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):(?: (.*))?$")
_ISSUE_RE = re.compile(r"/issues/(\d+)")
_SEPARATOR_OR_DIFF = re.compile(r"^(?:---\n|diff --git |--- |@@ )", re.MULTILINE)


@dataclass(frozen=True)
class Patch:
    """One patch of the series: DEP-3 header plus the diff that unidiff parsed."""

    name: str
    header: dict[str, str]
    header_text: str
    diff: str
    patch_set: PatchSet = field(compare=False, repr=False)

    @property
    def number(self) -> int:
        """Return its fix's number, the name's prefix (``0007-x.patch``: 7; see
        :func:`read_series_names`)."""
        return int(self.name[:4])

    @property
    def text(self) -> str:
        """Return the whole patch file text (header, separator, diff)."""
        return self.header_text + HEADER_END + self.diff

    @property
    def subject(self) -> str:
        """Return the first line of the DEP-3 Description."""
        return self.header["Description"].split("\n", 1)[0].strip()

    @property
    def issues(self) -> tuple[int, ...]:
        """Return upstream issue numbers named by the Bug field."""
        return tuple(int(n) for n in _ISSUE_RE.findall(self.header.get("Bug", "")))

    @property
    def files(self) -> tuple[PatchedFile, ...]:
        """Return the parsed per-file diffs."""
        return tuple(self.patch_set)

    @property
    def targets(self) -> tuple[str, ...]:
        """Return the repository paths this patch modifies or creates."""
        return tuple(str(f.path) for f in self.patch_set)

    @property
    def creates(self) -> tuple[str, ...]:
        """Return the repository paths this patch creates (``--- /dev/null``)."""
        return tuple(str(f.path) for f in self.patch_set if file_diffs.creates(f))


@dataclass(frozen=True)
class Series:
    """An ordered, validated patch series and the pins it was made against."""

    directory: Path
    patches: tuple[Patch, ...]
    pins: Pins = field(compare=False, repr=False)
    patched_sha256: dict[str, str] = field(default_factory=dict, compare=False)
    checksums_for: str | None = None  # series digest SHA256SUMS was made for

    def __post_init__(self) -> None:
        """Refuse a path created twice, edited before it is created, or pinned as pristine."""
        seen: dict[str, str] = {}
        for patch in self.patches:
            for path in patch.targets:
                if path in patch.creates and path in seen:
                    raise SeriesError(
                        f"patch {patch.name} creates {path}, which {seen[path]} touches before it",
                        expected="a new file created by the first patch that touches it",
                        found=f"{seen[path]}, then {patch.name}",
                        hint="merge the creations into one patch, or reorder the series",
                    )
                seen.setdefault(path, patch.name)
        pinned = sorted(
            p for patch in self.patches for p in patch.creates if p in self.pins.pristine
        )
        if pinned:
            raise SeriesError(
                f"the series creates {', '.join(pinned)}, which {self.pins.source} pins as shipped",
                expected="files the series creates absent from [pristine]",
                found=f"[pristine] entries for {', '.join(pinned)}",
                hint="drop the entries (the release lacks the file) or make the patch edit it",
            )

    @property
    def created(self) -> frozenset[str]:
        """Return the repository paths the series creates (the pinned release lacks them)."""
        return frozenset(path for patch in self.patches for path in patch.creates)

    def pristine_sha256(self, repo_path: str) -> str | None:
        """Return the pinned sha256 of a file before the series; None: the series creates it."""
        return None if repo_path in self.created else self.pins.pristine_sha256(repo_path)

    def with_patches(self, patches: tuple[Patch, ...]) -> Series:
        """Return this series with other patches (and no recorded checksums)."""
        return Series(self.directory, patches, self.pins)

    def expected_patched_sha256(self) -> dict[str, str]:
        """Return the recorded post-series sha256 per repository path, checked for staleness."""
        hint = "regenerate it: `executorch-arm-overlay refresh`"
        if self.checksums_for is None:
            raise SeriesError(
                f"no {CHECKSUMS_FILE} in {self.directory}",
                expected="the recorded sha256 of every file after the series",
                found="no checksum file",
                hint=hint,
            )
        if self.checksums_for != self.digest or set(self.patched_sha256) != set(self.targets()):
            raise SeriesError(
                f"{CHECKSUMS_FILE} is stale: the patches changed since it was written",
                expected=f"series {self.digest[:12]} covering {', '.join(self.targets())}",
                found=f"series {(self.checksums_for or '')[:12]} covering "
                f"{', '.join(self.patched_sha256)}",
                hint=hint,
            )
        return dict(self.patched_sha256)

    @property
    def numbers(self) -> frozenset[int]:
        """Return the numbers of the fixes the series carries."""
        return frozenset(patch.number for patch in self.patches)

    def of(self, numbers: Collection[int]) -> tuple[Patch, ...]:
        """Return the patches of fixes ``numbers``, in series order."""
        return tuple(patch for patch in self.patches if patch.number in numbers)

    def numbers_of(self, patch_names: Iterable[str]) -> frozenset[int]:
        """Return the numbers of the named patches (names the series lacks are left out)."""
        wanted = set(patch_names)
        return frozenset(patch.number for patch in self.patches if patch.name in wanted)

    def touching(self, repo_path: str) -> frozenset[int]:
        """Return the numbers of the fixes whose patch touches ``repo_path``."""
        return frozenset(patch.number for patch in self.patches if repo_path in patch.targets)

    @property
    def digest(self) -> str:
        """Return a sha256 over the patch names and bytes, in series order."""
        h = hashlib.sha256()
        for patch in self.patches:
            h.update(patch.name.encode() + b"\0" + patch.text.encode() + b"\0")
        return h.hexdigest()

    @property
    def short_digest(self) -> str:
        """Return the first 10 hex digits of the digest (used in the local version)."""
        return self.digest[:10]

    def targets(self) -> list[str]:
        """Return every repository path the series touches, in first-touch order."""
        return list(dict.fromkeys(path for patch in self.patches for path in patch.targets))

    def get(self, name: str) -> Patch:
        """Return the patch called ``name`` (with or without its suffix)."""
        for patch in self.patches:
            if name in (patch.name, patch.name.removesuffix(PATCH_SUFFIX)):
                return patch
        raise SeriesError(
            f"no patch {name!r} in the series",
            expected=", ".join(p.name for p in self.patches),
            found=name,
            hint="list the series with `executorch-arm-overlay status`",
        )


def split_header(text: str, *, name: str) -> tuple[str, str]:
    """Split a patch file into its DEP-3 header and its diff at the first ``---`` line."""
    first = _SEPARATOR_OR_DIFF.search(text)
    if first is not None and first.group() == HEADER_END:
        return text[: first.start()], text[first.end() :]
    raise SeriesError(
        f"patch {name} has no DEP-3 header",
        expected="'Description:' and other fields, then a line '---', then the diff",
        found="the diff starts without a header separator",
        hint="add a DEP-3 header (see patches/*.patch for the form)",
    )


def parse_dep3(header_text: str, *, name: str) -> dict[str, str]:
    """Parse DEP-3 fields; continuation lines start with a space."""
    fields: dict[str, str] = {}
    last: str | None = None
    for number, line in enumerate(header_text.splitlines(), start=1):
        if line.startswith(" ") and last is not None:
            fields[last] += "\n" + line
            continue
        match = _FIELD_RE.match(line)
        if match is None:
            raise SeriesError(
                f"patch {name}: header line {number} is not a DEP-3 field",
                expected="'Field: value' or a continuation line starting with a space",
                found=repr(line),
                hint="fix the header of the patch",
            )
        last = match.group(1)
        if last in fields:
            raise SeriesError(f"patch {name}: header field {last} appears twice", found=line)
        fields[last] = match.group(2) or ""
    missing = [f for f in REQUIRED_FIELDS if not fields.get(f, "").strip()]
    if missing:
        raise SeriesError(
            f"patch {name}: DEP-3 header lacks {', '.join(missing)}",
            expected=", ".join(REQUIRED_FIELDS),
            found=", ".join(fields) or "no fields",
            hint="add the missing fields",
        )
    return fields


_SHORT_RANGE = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.MULTILINE)


def normalize_counts(diff: str) -> str:
    """Spell out omitted hunk counts (``@@ -3 +3 @@`` is ``@@ -3,1 +3,1 @@``), as unidiff does."""

    return _SHORT_RANGE.sub(lambda m: f"@@ -{m[1]}{m[2] or ',1'} +{m[3]}{m[4] or ',1'} @@", diff)


def parse_patch(name: str, text: str) -> Patch:
    """Parse and validate one patch file's text."""
    header_text, diff = split_header(text, name=name)
    header = parse_dep3(header_text, name=name)
    file_diffs.refuse_git_actions(diff, name=name)
    try:
        patch_set = PatchSet(diff)
    except UnidiffParseError as exc:
        raise SeriesError(
            f"patch {name} is not a well-formed unified diff: {exc}",
            expected="hunks whose line counts match their @@ headers",
            found="a truncated or malformed diff",
            hint="regenerate the patch (`executorch-arm-overlay edit`, then `refresh`)",
        ) from exc
    if len(patch_set) == 0:
        raise SeriesError(f"patch {name} changes no file", hint="remove it from the series")
    for patched_file in patch_set:
        file_diffs.check_file_diff(patched_file, name=name)
    if str(patch_set) != normalize_counts(diff):
        raise SeriesError(
            f"patch {name} does not survive a unidiff round trip",
            expected="a plain unified diff (unidiff parse -> str gives the same bytes)",
            found="text unidiff drops or rewrites (stray lines between hunks, CR line ends)",
            hint="regenerate the patch with `git diff`",
        )
    return Patch(name=name, header=header, header_text=header_text, diff=diff, patch_set=patch_set)


def load_series(directory: Path) -> Series:
    """Load and validate the series in ``directory``."""
    names = read_series_names(directory)
    on_disk = sorted(p.name for p in directory.glob(f"*{PATCH_SUFFIX}"))
    unknown = [n for n in names if not (directory / n).is_file()]
    if unknown:
        raise SeriesError(
            f"series lists patches that do not exist: {', '.join(unknown)}",
            expected=f"files in {directory}",
            found=", ".join(on_disk) or "no patch files",
            hint="fix the series file or add the patches",
        )
    unlisted = [n for n in on_disk if n not in names]
    if unlisted:
        raise SeriesError(
            f"patch files not in the series: {', '.join(unlisted)}",
            expected="every *.patch listed in 'series'",
            found=", ".join(unlisted),
            hint="add them to 'series' or delete them",
        )
    patches = []
    for name in names:
        path = directory / name
        if path.is_symlink():
            raise UnsafePatchError(f"patch {name} is a symlink", hint="commit the file itself")
        patches.append(parse_patch(name, read_text(path)))
    pins = pins_module.load(directory)
    checksums = directory / CHECKSUMS_FILE
    found = checksums.is_file()
    digest, hashes = parse_checksums(read_text(checksums), where=checksums) if found else (None, {})
    return Series(directory, tuple(patches), pins, hashes, digest)


def format_checksums(series: Series, hashes: dict[str, str]) -> str:
    """Render SHA256SUMS: the series digest, then ``sha256  path`` per patched file."""
    lines = [
        "# sha256 of each file after the whole series; written by `python -m overlay refresh`",
        f"# series {series.digest}",
    ]
    lines += [f"{hashes[path]}  {path}" for path in series.targets()]
    return "\n".join(lines) + "\n"


def parse_checksums(text: str, *, where: Path) -> tuple[str | None, dict[str, str]]:
    """Parse SHA256SUMS into (series digest, {path: sha256})."""
    digest = None
    hashes: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# series "):
            digest = line.removeprefix("# series ").strip()
        if not line.strip() or line.startswith("#"):
            continue
        value, _, path = line.partition("  ")
        if len(value) != 64 or not path:
            raise SeriesError(
                f"{where}: malformed line",
                expected="'<64 hex sha256>  <path>'",
                found=repr(line),
                hint="regenerate it: `executorch-arm-overlay refresh`",
            )
        hashes[file_diffs.check_repo_path(path, patch=where.name)] = value
    return digest, hashes
