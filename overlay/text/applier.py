"""The strict applier: exact context, no fuzz unless asked, line endings kept; its reverse."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from unidiff.constants import LINE_TYPE_NO_NEWLINE
from unidiff.patch import PatchedFile

from overlay._hashing import sha256_bytes
from overlay.errors import ApplyError, ChecksumMismatchError
from overlay.text.file_diffs import creates
from overlay.text.series import Patch, Series

_SHOWN_LINES = 8


@dataclass(frozen=True)
class Hunk:
    """One hunk as old/new line lists (line endings included)."""

    index: int  # 1-based position in its file diff
    old_start: int  # 1-based, as in the @@ header
    old: tuple[str, ...]
    new: tuple[str, ...]
    header: str


@dataclass(frozen=True)
class FileResult:
    """The outcome of applying one file diff to one text."""

    text: str
    offsets: tuple[int, ...]  # per hunk: actual line minus the line the header names


class HunkMismatchError(ApplyError):
    """A hunk's old lines are not where (or anywhere) the diff says."""

    def __init__(self, message: str, *, hunk: int, **kwargs: str | None) -> None:
        super().__init__(message, **kwargs)
        self.hunk = hunk


def split_lines(text: str) -> list[str]:
    r"""Split on ``\n`` only, keeping line ends (``str.splitlines`` also splits on \x0c etc.)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _eol_of(lines: Iterable[str]) -> str | None:
    """Return ``"\r\n"`` or ``"\n"`` when every terminated line uses it, else None."""
    kinds = {("\r\n" if line.endswith("\r\n") else "\n") for line in lines if line.endswith("\n")}
    return kinds.pop() if len(kinds) == 1 else None


def hunks_of(patched_file: PatchedFile, *, reverse: bool = False) -> list[Hunk]:
    """Convert a unidiff file diff into Hunks, honouring ``\\ No newline at end of file``."""
    hunks = []
    for number, hunk in enumerate(patched_file, start=1):
        old: list[str] = []
        new: list[str] = []
        last: list[list[str]] = []
        for line in hunk:
            if line.line_type == LINE_TYPE_NO_NEWLINE:
                for side in last:
                    side[-1] = side[-1].removesuffix("\n")
                continue
            if line.is_context:  # not unidiff's "empty" line: a blank line after the hunk
                last = [old, new]
            elif line.is_removed:
                last = [old]
            elif line.is_added:
                last = [new]
            else:
                continue
            for side in last:
                side.append(line.value)
        if reverse:
            old, new = new, old
        start = hunk.target_start if reverse else hunk.source_start
        header = (
            f"@@ -{hunk.source_start},{hunk.source_length} "
            f"+{hunk.target_start},{hunk.target_length} @@"
        )
        hunks.append(Hunk(number, start, tuple(old), tuple(new), header))
    return hunks


def _adapt_eol(hunks: list[Hunk], file_lines: Sequence[str]) -> list[Hunk]:
    """Give LF hunks CRLF ends when the file is uniformly CRLF (never the other way round)."""
    if _eol_of(file_lines) != "\r\n":
        return hunks
    hunk_lines = [line for h in hunks for line in (*h.old, *h.new)]
    if _eol_of(hunk_lines) != "\n":
        return hunks

    def crlf(lines: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(line[:-1] + "\r\n" if line.endswith("\n") else line for line in lines)

    return [Hunk(h.index, h.old_start, crlf(h.old), crlf(h.new), h.header) for h in hunks]


def _trimmed(hunk: Hunk, lines: int) -> Hunk | None:
    """Return ``hunk`` without up to ``lines`` context lines at each end (None: no anchor left)."""
    lead = _common(hunk.old, hunk.new)
    tail = _common(hunk.old[lead:][::-1], hunk.new[lead:][::-1])
    cut_lead, cut_tail = min(lead, lines), min(tail, lines)
    old = hunk.old[cut_lead : len(hunk.old) - cut_tail]
    new = hunk.new[cut_lead : len(hunk.new) - cut_tail]
    if not old:
        return None
    return Hunk(hunk.index, hunk.old_start + cut_lead, old, new, hunk.header)


def _common(one: Sequence[str], other: Sequence[str]) -> int:
    """Return the length of the longest common prefix of two line lists."""
    unequal = (i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b)
    return next(unequal, min(len(one), len(other)))


def _matches(lines: Sequence[str], at: int, old: Sequence[str]) -> bool:
    return at >= 0 and at + len(old) <= len(lines) and list(lines[at : at + len(old)]) == list(old)


def _nearest(lines: Sequence[str], old: Sequence[str], around: int) -> tuple[int, float]:
    """Return the start line (0-based) whose window best resembles ``old``, and its ratio."""
    best, best_ratio = around, -1.0
    size = max(len(old), 1)
    for at in range(0, max(len(lines) - size + 1, 1)):
        window = lines[at : at + size]
        ratio = difflib.SequenceMatcher(None, list(window), list(old), autojunk=False).ratio()
        if ratio > best_ratio or (ratio == best_ratio and abs(at - around) < abs(best - around)):
            best, best_ratio = at, ratio
    return best, best_ratio


def _show(lines: Sequence[str], start: int) -> str:
    shown = [f"    {start + i + 1:>5} | {line.rstrip(chr(10))!r}" for i, line in enumerate(lines)]
    if len(shown) > _SHOWN_LINES:
        shown = [*shown[:_SHOWN_LINES], f"    ... {len(shown) - _SHOWN_LINES} more lines"]
    return "\n".join(shown) or "    (nothing: end of file)"


def _mismatch(
    lines: Sequence[str], hunk: Hunk, at: int, *, where: str, reverse: bool
) -> HunkMismatchError:
    found = lines[max(at, 0) : max(at, 0) + len(hunk.old)]
    near, ratio = _nearest(lines, hunk.old, at)
    details = (
        f"  expected lines (hunk {hunk.index} {hunk.header}):\n{_show(hunk.old, at)}\n"
        f"  found at line {at + 1}:\n{_show(found, at)}\n"
        f"  nearest match: line {near + 1} ({ratio:.0%} similar):\n"
        f"{_show(lines[near : near + len(hunk.old)], near)}"
    )
    verb = "reverse-apply" if reverse else "apply"
    return HunkMismatchError(
        f"{where}: hunk {hunk.index} does not {verb}",
        hunk=hunk.index,
        expected=f"{len(hunk.old)} exact lines at line {at + 1}",
        found="different text (no fuzz is allowed)",
        details=details,
        hint="the file drifted from the pinned source: refresh the patch "
        "(`executorch-arm-overlay edit`) or restore the pristine file",
    )


def apply_file(
    text: str,
    patched_file: PatchedFile,
    *,
    reverse: bool = False,
    allow_offset: bool = False,
    where: str = "",
    fuzz: int = 0,
) -> FileResult:
    """Apply (or reverse) one file diff to ``text``; raise HunkMismatchError on any mismatch.

    Hunks must match exactly, at the line their header names (plus the shift of
    earlier hunks). With ``allow_offset`` a hunk may match exactly elsewhere,
    the nearest place winning (like ``patch`` with fuzz 0); the offsets are returned.
    ``fuzz`` (with ``allow_offset``): a hunk that matches nowhere is tried again without
    1, then up to ``fuzz``, context lines at each end.
    """
    lines = split_lines(text)
    hunks = _adapt_eol(hunks_of(patched_file, reverse=reverse), lines)
    out: list[str] = []
    cursor = 0  # next unconsumed line of ``lines``
    shift = 0  # offset found for the previous hunk, carried forward
    offsets = []
    for each in hunks:
        hunk = each
        # A pure insertion at line 0 (old_start 0) anchors before the first line.
        declared = hunk.old_start - 1 if hunk.old else hunk.old_start
        expected_at = declared + shift
        at = expected_at
        if not _matches(lines, at, hunk.old) or at < cursor:
            at = -1
            if allow_offset:
                at = _search(lines, hunk.old, expected_at, floor=cursor)
            for cut in range(1, fuzz + 1 if allow_offset and at < 0 else 1):
                narrow = _trimmed(hunk, cut)
                at = -1 if narrow is None else _search(lines, narrow.old, expected_at, floor=cursor)
                if at >= 0 and narrow is not None:
                    hunk, declared = narrow, declared + (narrow.old_start - hunk.old_start)
                    break
            if at < 0:
                raise _mismatch(lines, hunk, expected_at, where=where, reverse=reverse)
        offsets.append(at - declared)
        shift = at - declared
        out.extend(lines[cursor:at])
        out.extend(hunk.new)
        cursor = at + len(hunk.old)
    out.extend(lines[cursor:])
    return FileResult("".join(out), tuple(offsets))


def apply_to(
    text: str | None,
    patched_file: PatchedFile,
    *,
    reverse: bool = False,
    allow_offset: bool = False,
    where: str = "",
    fuzz: int = 0,
) -> str | None:
    """Apply (or reverse) one file diff to a file that may not exist (None); None: no file.

    A creating diff refuses an existing file forward, and in reverse must take every line.
    """
    new = creates(patched_file)
    if text is None and not (new and not reverse):
        raise HunkMismatchError(
            f"{where}: the file does not exist",
            hunk=1,
            expected=f"{patched_file.path} in the sources",
            found="no such file",
            hint="the file moved or was removed upstream: port the patch",
        )
    if new and not reverse and text is not None:
        raise HunkMismatchError(
            f"{where}: the patch creates the file, and it exists",
            hunk=1,
            expected=f"no {patched_file.path}",
            found=f"a file of {len(split_lines(text))} lines",
            hint="the file is shipped now (upstream added it): drop or port the patch",
        )
    result = apply_file(
        text or "", patched_file, reverse=reverse, allow_offset=allow_offset, where=where, fuzz=fuzz
    ).text
    if new and reverse:
        if result:
            raise HunkMismatchError(
                f"{where}: the file holds more than the patch created",
                hunk=1,
                expected="only the lines the patch created",
                found=f"{len(split_lines(result))} more lines",
                hint="restore the file the patch created, or remove it",
            )
        return None
    return result


def _search(lines: Sequence[str], old: Sequence[str], around: int, *, floor: int) -> int:
    """Return the exact match of ``old`` nearest to ``around`` at or after ``floor``, or -1."""
    for distance in range(0, len(lines) + 1):
        for at in (around - distance, around + distance):
            if at >= floor and _matches(lines, at, old):
                return at
    return -1


def decode(data: bytes) -> str:
    """Decode file bytes losslessly (non-UTF-8 bytes survive the round trip)."""
    return data.decode("utf-8", errors="surrogateescape")


def encode(text: str) -> bytes:
    """Encode text produced by :func:`decode` back to the same bytes."""
    return text.encode("utf-8", errors="surrogateescape")


def apply_patch(
    patch: Patch,
    texts: Mapping[str, str],
    *,
    reverse: bool = False,
    allow_offset: bool = False,
    fuzz: int = 0,
) -> dict[str, str]:
    """Apply one patch to ``{repository path: text}``; return the texts after it.

    A file the patch edits but ``texts`` lacks is a mismatch of its first hunk; a file it
    creates must be absent, and is absent again after its reverse.
    """
    out = dict(texts)
    for diff in patch.files:
        where = f"patch {patch.name}, file {diff.path}"
        old = out.get(diff.path)
        new = apply_to(
            old, diff, reverse=reverse, allow_offset=allow_offset, where=where, fuzz=fuzz
        )
        if new is None:
            out.pop(diff.path, None)
        else:
            out[diff.path] = new
    return out


def transform(
    patches: Iterable[Patch], repo_path: str, data: bytes | None, *, reverse: bool = False
) -> bytes | None:
    """Apply (or reverse, last patch first) every patch that touches ``repo_path``.

    ``data`` None: the file does not exist (a patch creates it); a None result: no file.
    """
    ordered = list(patches)
    text = None if data is None else decode(data)
    for patch in reversed(ordered) if reverse else ordered:
        for patched_file in patch.files:
            if patched_file.path == repo_path:
                where = f"patch {patch.name}, file {repo_path}"
                text = apply_to(text, patched_file, reverse=reverse, where=where)
    return None if text is None else encode(text)


def transform_checked(
    series: Series, repo_path: str, data: bytes | None, *, reverse: bool = False
) -> bytes | None:
    """Transform like :func:`transform`, then require the recorded result.

    Forward, the result must be the SHA256SUMS entry; in reverse, the pinned pristine file
    (no file, for one the series creates).
    """
    new = transform(series.patches, repo_path, data, reverse=reverse)
    if reverse:
        wanted = series.pristine_sha256(repo_path)
    else:
        wanted = series.expected_patched_sha256()[repo_path]
    found = None if new is None else sha256_bytes(new)
    if found != wanted:
        raise ChecksumMismatchError(
            f"{repo_path}: the series produced unexpected bytes; nothing was written",
            expected=f"sha256 {wanted}",
            found=f"sha256 {found}",
            hint="SHA256SUMS does not match the patches: `executorch-arm-overlay refresh`",
        )
    return new
