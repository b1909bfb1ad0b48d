"""`--fix` selection: numbers and names of the line's fixes, refused when unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import SeriesError
from overlay.target import selection
from overlay.text.series import Series, load_series

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


def test_a_fix_is_named_by_its_patch_file_without_number_and_suffix(series: Series) -> None:
    assert selection.fix_name("0001-keep-terminal-int16-quantize.patch") == (
        "keep-terminal-int16-quantize"
    )
    assert selection.fix_name("0012-a-2-b.patch") == "a-2-b"  # only the leading number goes
    assert [(f.number, f.name) for f in selection.fixes_of(series)] == [
        (1, "keep-terminal-int16-quantize"),
        (2, "skip-factory-op-annotation"),
        (3, "conv-rescale-qparams-from-source"),
        (4, "distinct-output-transpose-slots"),
        (5, "int16-table-negative-rshift"),
        (6, "pool-default-stride"),
    ]


@pytest.mark.parametrize(
    ("values", "chosen"),
    [
        (["1,3"], {1, 3}),
        (["1", "3"], {1, 3}),
        (["0003"], {3}),
        ([" 2 , 4 "], {2, 4}),
        (["keep-terminal-int16-quantize"], {1}),
        (["0002-skip-factory-op-annotation.patch"], {2}),
        (["0004-distinct-output-transpose-slots"], {4}),
        (["1,keep-terminal-int16-quantize"], {1}),
        (["4,conv-rescale-qparams-from-source"], {3, 4}),
    ],
)
def test_select_takes_numbers_and_names(
    series: Series, values: list[str], chosen: set[int]
) -> None:
    assert selection.select(series, values) == frozenset(chosen)


@pytest.mark.parametrize(
    ("values", "message", "found"),
    [
        (["7"], "no fix '7' in the series", "7"),
        (["0"], "no fix '0' in the series", "0"),
        (["1,keep-terminal"], "no fix 'keep-terminal' in the series", "keep-terminal"),
        (["x", "y"], "no fix 'x', 'y' in the series", "x, y"),
        ([","], "--fix names no fix", "an empty list"),
    ],
)
def test_an_unknown_fix_is_refused_listing_the_fixes(
    series: Series, values: list[str], message: str, found: str
) -> None:
    with pytest.raises(SeriesError) as info:
        selection.select(series, values)
    assert info.value.message == message
    assert info.value.found == found
    assert info.value.expected == "fix numbers 1-6 or names, comma-separated"
    assert info.value.details is not None
    assert "    3  conv-rescale-qparams-from-source" in info.value.details


def test_describe_and_touching(series: Series) -> None:
    assert selection.describe(series, {1, 3}) == "fixes 1, 3 of 6"
    assert selection.describe(series, {2}) == "fix 2 of 6"
    assert selection.describe(series, {1, 2, 3, 4, 5, 6}) == "all 6 fixes"
    assert selection.describe(series, set()) == "no fix"
    assert selection.touching(series, "backends/arm/_passes/rewrite_conv_pass.py") == {3}
    assert selection.names(series, {4, 1}) == (
        "0001-keep-terminal-int16-quantize.patch",
        "0004-distinct-output-transpose-slots.patch",
    )
    assert selection.numbers_named(series, ["0002-skip-factory-op-annotation.patch", "x"]) == {2}
