"""`--fix` selection: a fix is its patch number on every line; others are refused with why."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay import fixes, lines
from overlay.errors import UsageError
from overlay.lines import evidence, selection
from overlay.lines.evidence import LineEvidence, PatchEvidence, Status
from overlay.text.series import Series, load_series

from scaffold import make_diff, patch_text, write_series

ROOT = Path(__file__).resolve().parent.parent
LINES = lines.all_lines(ROOT / "patches")


def _spellings(name: str) -> list[str]:
    stem = name.removesuffix(".patch")
    return [str(int(name[:4])), name[:4], stem, name, stem[5:]]


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_every_spelling_of_a_carried_fix_selects_its_patch_number(line: lines.Line) -> None:
    series = load_series(line.directory)
    carried = [fix.number for fix in fixes.carried_by(line)]
    assert [p.number for p in series.patches] == carried  # one identity: patch = fix number
    for patch in series.patches:
        for spelling in _spellings(patch.name):
            assert selection.select(series, [spelling]) == {patch.number}, spelling
    assert selection.select(series, [",".join(map(str, carried))]) == series.numbers


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_a_fix_the_line_does_not_carry_is_refused_with_why(line: lines.Line) -> None:
    series = load_series(line.directory)
    dropped = {int(p.patch[:4]): p for p in evidence.dropped(evidence.load(line.directory))}
    listing = "".join(f"\n    {p.number}  {_spellings(p.name)[-1]}" for p in series.patches)
    absent = [f.number for f in fixes.FIXES if f.number not in series.numbers]
    unknown = max(f.number for f in fixes.FIXES) + 1
    for number in [*absent, unknown]:
        with pytest.raises(UsageError) as info:
            selection.select(series, [f"{number:04d}"])
        error = info.value
        assert error.exit_code == 2
        assert error.details == f"  the fixes of line {line.name}:{listing}"
        assert error.found == f"{number:04d}"
        if number in dropped:
            record = line.directory / evidence.EVIDENCE_FILE
            assert error.message.startswith(f"fix {number} is dropped on line {line.name}: ")
            assert error.message.endswith(f" ({record})")
            assert dropped[number].reason.removeprefix("drop: ") in error.message
        else:
            assert error.message == f"line {line.name} does not carry fix {number}"


def _line(tmp_path: Path) -> Series:
    """Line 9.9.0 carrying fixes 1, 4 and 7, with the evidence of dropping fix 2."""
    path = "backends/a.py"
    old = "".join(f"v{i} = {i}\n" for i in range(30))
    patches = {
        f"{n:04d}-fix-{n}.patch": patch_text(
            f"Fix {n}", make_diff(path, old, old.replace(f"v{3 * n} = ", f"v{3 * n} = -"))
        )
        for n in (1, 4, 7)
    }
    series = write_series(tmp_path / "9.9.0", patches, {path: old.encode()}, version="9.9.0")
    drop = PatchEvidence(
        "0002-fix-2.patch",
        Status.DROPPED,
        "drop: no case fails on stock 9.9.0",
        applied_upstream="not triggered with\n torchao >= 0.16",
    )
    evidence.write(series.directory, LineEvidence(1, "9.8.0", "2026-12-04", "fast", (drop,)))
    return series


@pytest.mark.parametrize(
    ("values", "chosen"),
    [
        (["7"], {7}),
        (["0007"], {7}),
        (["1,7"], {1, 7}),
        (["1", " 7 "], {1, 7}),
        (["fix-7"], {7}),
        (["0007-fix-7"], {7}),
        (["0001-fix-1.patch,7"], {1, 7}),
    ],
)
def test_select_takes_numbers_and_names(
    tmp_path: Path, values: list[str], chosen: set[int]
) -> None:
    assert selection.select(_line(tmp_path), values) == chosen


@pytest.mark.parametrize(
    ("values", "message", "found"),
    [
        (
            ["2"],
            "fix 2 is dropped on line 9.9.0: no case fails on stock 9.9.0"
            " (not triggered with torchao >= 0.16) ({evidence})",
            "2",
        ),
        (
            ["fix-2"],
            "fix 2 is dropped on line 9.9.0: no case fails on stock 9.9.0"
            " (not triggered with torchao >= 0.16) ({evidence})",
            "fix-2",
        ),
        (["3"], "line 9.9.0 does not carry fix 3", "3"),
        (["0"], "line 9.9.0 does not carry fix 0", "0"),
        (["1,fix"], "line 9.9.0 has no fix named 'fix'", "fix"),
        (["x", "9"], "line 9.9.0 has no fix named 'x'; line 9.9.0 does not carry fix 9", "x, 9"),
        ([","], "--fix names no fix", "an empty list"),
    ],
)
def test_a_bad_fix_is_a_usage_error_listing_the_lines_fixes(
    tmp_path: Path, values: list[str], message: str, found: str
) -> None:
    series = _line(tmp_path)
    with pytest.raises(UsageError) as info:
        selection.select(series, values)
    evidence_file = series.directory / evidence.EVIDENCE_FILE
    assert info.value.message == message.format(evidence=evidence_file)
    assert info.value.found == found
    assert info.value.expected == "fixes of line 9.9.0: 1, 4, 7 (numbers or names)"
    assert info.value.details == (
        "  the fixes of line 9.9.0:\n    1  fix-1\n    4  fix-4\n    7  fix-7"
    )
    assert info.value.hint == "name fixes the line carries, comma-separated, e.g. --fix 7"


def test_describe_names_fixes_by_number(tmp_path: Path) -> None:
    series = _line(tmp_path)
    assert selection.describe(series, {7}) == "fix 7"
    assert selection.describe(series, {7, 1}) == "fixes 1, 7"
    assert selection.describe(series, {7, 4, 1}) == "all 3 fixes"
    assert selection.describe(series, set()) == "no fix"
    assert selection.fix_name("0012-a-2-b.patch") == "a-2-b"  # only the leading number goes
