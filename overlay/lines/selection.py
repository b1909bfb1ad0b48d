"""``--fix`` by number (``7``, ``0007``), short name or patch file name."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from overlay.errors import UsageError
from overlay.lines import evidence
from overlay.lines.listing import patch_number
from overlay.text.series import PATCH_SUFFIX, Series


def fix_name(patch_name: str) -> str:
    """Return the short name of a patch file (``0001-keep-x.patch`` -> ``keep-x``)."""
    return patch_name.removesuffix(PATCH_SUFFIX).partition("-")[2]


def _spellings(patch_name: str) -> tuple[str, ...]:
    """Return every way ``--fix`` names the fix of ``patch_name`` (numbers without zeros)."""
    stem = patch_name.removesuffix(PATCH_SUFFIX)
    return str(patch_number(patch_name)), patch_name, stem, fix_name(patch_name)


def _key(token: str) -> str:
    return str(int(token)) if token.isdigit() else token


def select(series: Series, values: Iterable[str]) -> frozenset[int]:
    """Return the fixes named by ``--fix`` values (each a comma-separated list); refuse a fix
    the line does not carry (a dropped one with the reason its evidence records) or none."""
    return _select([series], values)


def refuse_unknown(every: Sequence[Series], values: Iterable[str]) -> None:
    """Refuse ``--fix`` values no line of ``every`` (oldest first) carries, before the line
    is known (it follows from the target), listing the newest line's fixes."""
    if every:
        _select(every, values, anywhere=len(every) > 1)


def _select(
    every: Sequence[Series], values: Iterable[str], *, anywhere: bool = False
) -> frozenset[int]:
    patches = [p for series in every for p in series.patches]
    carried = {spelling: p.number for p in patches for spelling in _spellings(p.name)}
    tokens = [token.strip() for value in values for token in value.split(",") if token.strip()]
    missing = [token for token in tokens if _key(token) not in carried]
    if missing or not tokens:
        raise _refusal(every[-1], missing, anywhere=anywhere)
    return frozenset(carried[_key(token)] for token in tokens)


def _refusal(series: Series, missing: list[str], *, anywhere: bool = False) -> UsageError:
    line, numbers = str(series.pins.executorch), sorted(series.numbers)
    record = series.directory / evidence.EVIDENCE_FILE
    gone = evidence.dropped(evidence.load(series.directory))
    dropped = {spelling: p for p in gone for spelling in _spellings(p.patch)}
    reasons = []
    for token in missing:
        found = dropped.get(_key(token))
        if found is not None:
            why = found.reason.removeprefix("drop: ")
            upstream = " ".join(found.applied_upstream.split())
            if upstream and upstream not in why:
                why += f" ({upstream})"
            number = patch_number(found.patch)
            reasons.append(f"fix {number} is dropped on line {line}: {why} ({record})")
        elif token.isdigit():
            where = "no release line carries" if anywhere else f"line {line} does not carry"
            reasons.append(f"{where} fix {int(token)}")
        else:
            where = "no release line has" if anywhere else f"line {line} has no"
            reasons.append(f"{where} fix named {token!r}")
    listing = "\n".join(f"    {p.number}  {fix_name(p.name)}" for p in series.patches)
    return UsageError(
        "; ".join(reasons) or "--fix names no fix",
        expected=f"fixes of line {line}: {', '.join(map(str, numbers))} (numbers or names)",
        found=", ".join(missing) or "an empty list",
        details=f"  the fixes of line {line}:\n{listing}",
        hint=f"name fixes the line carries, comma-separated, e.g. --fix {numbers[-1]}"
        if numbers
        else f"line {line} carries no fix",
    )


def describe(series: Series, numbers: Collection[int]) -> str:
    """Return how a set of fixes reads in messages."""
    total = len(series.patches)
    if not numbers:
        return "no fix"
    if set(numbers) == series.numbers:
        return f"all {total} fixes" if total != 1 else "the 1 fix"
    word = "fix" if len(numbers) == 1 else "fixes"
    return f"{word} {', '.join(map(str, sorted(numbers)))}"
