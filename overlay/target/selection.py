"""The fixes of a line as `apply --fix` and `revert --fix` name them: by number or by name.

A fix is one patch of the line's series. Its number is its position in ``series``
(1-based), its name the patch file name without the ``NNNN-`` prefix and ``.patch``.
A set of fixes is a frozenset of numbers; the whole series is every number.

Example: ``--fix 1,3 --fix distinct-output-transpose-slots`` on a four-patch series.
Becomes: ``frozenset({1, 3, 4})``; ``--fix 9`` is refused, listing the four fixes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from overlay.errors import SeriesError
from overlay.text.series import PATCH_SUFFIX, Series

_NUMBER_PREFIX = re.compile(r"^\d+-")


@dataclass(frozen=True)
class Fix:
    """One fix of a series."""

    number: int  # 1-based position in the series
    name: str  # the patch file name without NNNN- and .patch
    patch_name: str  # the patch file name


def fix_name(patch_name: str) -> str:
    """Return the short name of a patch file (``0001-keep-x.patch`` -> ``keep-x``)."""
    return _NUMBER_PREFIX.sub("", patch_name.removesuffix(PATCH_SUFFIX))


def fixes_of(series: Series) -> tuple[Fix, ...]:
    """Return every fix of the series, in series order."""
    return tuple(
        Fix(number, fix_name(patch.name), patch.name)
        for number, patch in enumerate(series.patches, start=1)
    )


def every(series: Series) -> frozenset[int]:
    """Return the numbers of every fix of the series."""
    return frozenset(range(1, len(series.patches) + 1))


def touching(series: Series, repo_path: str) -> frozenset[int]:
    """Return the numbers of the fixes whose patch touches ``repo_path``."""
    return frozenset(
        number for number, patch in enumerate(series.patches, start=1) if repo_path in patch.targets
    )


def select(series: Series, values: Iterable[str]) -> frozenset[int]:
    """Return the fixes named by ``--fix`` values (each a comma-separated list).

    A token is a number (``3``, ``0003``), a short name, or the patch file name with or
    without its suffix. Refuses an unknown token, listing the fixes of the series.
    """
    known = fixes_of(series)
    by_name: dict[str, int] = {}
    for fix in known:
        for spelling in (fix.name, fix.patch_name, fix.patch_name.removesuffix(PATCH_SUFFIX)):
            by_name[spelling] = fix.number
    chosen: set[int] = set()
    unknown: list[str] = []
    for value in values:
        for token in (t.strip() for t in value.split(",")):
            if not token:
                continue
            if token.isdigit() and 1 <= int(token) <= len(known):
                chosen.add(int(token))
            elif token in by_name:
                chosen.add(by_name[token])
            else:
                unknown.append(token)
    if unknown or not chosen:
        listing = "\n".join(f"    {f.number}  {f.name}" for f in known)
        raise SeriesError(
            f"no fix {', '.join(map(repr, unknown))} in the series"
            if unknown
            else "--fix names no fix",
            expected=f"fix numbers 1-{len(known)} or names, comma-separated",
            found=", ".join(unknown) or "an empty list",
            details=f"  the fixes of {series.directory.name}:\n{listing}",
            hint="name fixes as `executorch-arm-overlay status` lists them, e.g. --fix 1,3",
        )
    return frozenset(chosen)


def describe(series: Series, numbers: Collection[int]) -> str:
    """Return how a set of fixes reads in messages.

    Example: ``{1, 3}`` of a four-patch series.
    Becomes: ``fixes 1, 3 of 4``; all four read ``all 4 fixes``, none ``no fix``.
    """
    total = len(series.patches)
    if not numbers:
        return "no fix"
    if set(numbers) == set(every(series)):
        return f"all {total} fixes" if total != 1 else "the 1 fix"
    word = "fix" if len(numbers) == 1 else "fixes"
    return f"{word} {', '.join(map(str, sorted(numbers)))} of {total}"


def names(series: Series, numbers: Collection[int]) -> tuple[str, ...]:
    """Return the patch file names of ``numbers``, in series order."""
    return tuple(p.name for n, p in enumerate(series.patches, start=1) if n in numbers)


def numbers_named(series: Series, patch_names: Iterable[str]) -> frozenset[int]:
    """Return the numbers of the named patches (names the series lacks are left out)."""
    wanted = set(patch_names)
    return frozenset(n for n, p in enumerate(series.patches, start=1) if p.name in wanted)
