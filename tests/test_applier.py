"""The pure hunk applier: exact matches, offsets, line endings, no-newline markers."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unidiff.patch import PatchedFile, PatchSet

from overlay.errors import ChecksumMismatchError
from overlay.text.applier import (
    HunkMismatchError,
    apply_file,
    apply_patch,
    apply_to,
    hunks_of,
    split_lines,
    transform,
    transform_checked,
)
from overlay.text.series import Patch, parse_patch

from scaffold import created_diff, make_diff, patch_text, write_series

OLD = "".join(f"line {i}\n" for i in range(1, 21))


def one_file(diff: str) -> PatchedFile:
    patched_file: PatchedFile = PatchSet(diff)[0]
    return patched_file


def test_split_lines_only_splits_on_newline() -> None:
    assert split_lines("a\x0cb\nc\r\nd") == ["a\x0cb\n", "c\r\n", "d"]
    assert split_lines("") == []
    assert split_lines("x\n") == ["x\n"]


def test_apply_and_reverse_exact() -> None:
    new = OLD.replace("line 5\n", "line five\n").replace("line 15\n", "")
    diff = one_file(make_diff("f.py", OLD, new))
    assert apply_file(OLD, diff).text == new
    assert apply_file(new, diff, reverse=True).text == OLD


def test_apply_to_by_default_applies_forward_in_place_exactly_unnamed() -> None:
    new = OLD.replace("line 5\n", "line five\n")
    diff = one_file(make_diff("f.py", OLD, new))
    assert apply_to(OLD, diff) == new  # forward
    shifted = "header\n" + OLD
    with pytest.raises(HunkMismatchError) as info:  # no offset, so no fuzz either
        apply_to(shifted, diff)
    assert info.value.message.startswith(": hunk 1 does not apply")  # no `where`
    fuzzy = OLD.replace("line 2\n", "line two\n")  # only the hunk's first context line
    with pytest.raises(HunkMismatchError):
        apply_to(fuzzy, diff)


def test_mismatch_names_hunk_and_shows_nearest_match() -> None:
    new = OLD.replace("line 10\n", "line ten\n")
    diff = one_file(make_diff("f.py", OLD, new))
    drifted = OLD.replace("line 9\n", "line nine\n")
    with pytest.raises(HunkMismatchError) as info:
        apply_file(drifted, diff, where="patch p, file f.py")
    text = str(info.value)
    assert info.value.hunk == 1
    assert "patch p, file f.py: hunk 1 does not apply" in text
    assert "'line nine'" in text  # the found lines are shown
    assert "nearest match: line" in text


def test_no_fuzz_offset_refused_unless_allowed() -> None:
    new = OLD.replace("line 10\n", "line ten\n")
    diff = one_file(make_diff("f.py", OLD, new))
    shifted = "extra 1\nextra 2\n" + OLD
    with pytest.raises(HunkMismatchError):
        apply_file(shifted, diff)
    result = apply_file(shifted, diff, allow_offset=True)
    assert result.text == "extra 1\nextra 2\n" + new
    assert result.offsets == (2,)


def test_fuzz_drops_context_at_each_end_only_when_asked_and_keeps_an_anchor() -> None:
    new = OLD.replace("line 10\n", "line ten\n")
    diff = one_file(make_diff("f.py", OLD, new))
    drifted = OLD.replace("line 7\n", "line seven\n").replace("line 13\n", "line 13!\n")
    with pytest.raises(HunkMismatchError):
        apply_file(drifted, diff, allow_offset=True)
    with pytest.raises(HunkMismatchError):
        apply_file(drifted, diff, allow_offset=True, fuzz=0)
    with pytest.raises(HunkMismatchError):  # lines 7 and 13 are the outermost: fuzz 1 drops them
        apply_file(drifted.replace("line 8\n", "line 8!\n"), diff, allow_offset=True, fuzz=1)
    result = apply_file(drifted, diff, allow_offset=True, fuzz=1)
    assert result.text == drifted.replace("line 10\n", "line ten\n")
    assert result.offsets == (0,)  # where its header says, one context line in
    with pytest.raises(HunkMismatchError):  # fuzz needs offsets: it is a search
        apply_file(drifted, diff, fuzz=1)
    # a pure insertion trimmed to nothing has no anchor: it is not placed blindly
    insertion = one_file(
        make_diff("f.py", OLD, OLD.replace("line 10\n", "line 10\nnew\n"), context=1)
    )
    away = OLD.replace("line 10\n", "line 10 moved\n").replace("line 11\n", "line 11 moved\n")
    with pytest.raises(HunkMismatchError):
        apply_file(away, insertion, allow_offset=True, fuzz=3)


def test_fuzz_is_tried_only_where_the_whole_hunk_matches_nowhere_even_at_line_one() -> None:
    filler = "".join(f"filler {i}\n" for i in range(10))
    diff = one_file(make_diff("f.py", filler + "A\nX\nB\n", filler + "A\nB\n", context=1))
    # the whole hunk matches only on the first line, the trimmed one also near its header
    text = "A\nX\nB\n" + filler[: len(filler) // 2] + "C\nX\nD\n"
    result = apply_file(text, diff, allow_offset=True, fuzz=1)
    assert result.text == text.replace("A\nX\nB\n", "A\nB\n", 1)
    assert result.offsets == (-10,)


def test_a_hunk_trimmed_by_fuzz_may_match_on_the_first_line() -> None:
    diff = one_file(make_diff("f.py", "Q\nX\nB\nrest\n", "Q\nB\nrest\n", context=1))
    result = apply_file("X\nB\nrest\n", diff, allow_offset=True, fuzz=1)  # no Q: fuzz drops it
    assert result.text == "B\nrest\n"
    assert result.offsets == (-1,)  # X, its header's second line, is the file's first


def test_a_patch_applies_with_the_fuzz_it_is_given_and_only_with_it() -> None:
    """Fuzz 2 drops two context lines at each end, no more: the hunk still holds lines 9
    and 11 around its change (its three trailing context lines are counted from its end)."""
    new = OLD.replace("line 10\n", "line ten\n")
    patch = parse_patch("p.patch", patch_text("p", make_diff("f.py", OLD, new)))
    drifted = OLD
    for number in (7, 8, 12, 13):
        drifted = drifted.replace(f"line {number}\n", f"line {number}!\n")
    outermost = OLD.replace("line 7\n", "line 7!\n")  # what fuzz 1 would drop
    with pytest.raises(HunkMismatchError):
        apply_patch(patch, {"f.py": outermost}, allow_offset=True)  # no fuzz unless asked
    with pytest.raises(HunkMismatchError):
        apply_patch(patch, {"f.py": drifted}, allow_offset=True, fuzz=1)
    applied = apply_patch(patch, {"f.py": drifted}, allow_offset=True, fuzz=2)
    assert applied == {"f.py": drifted.replace("line 10\n", "line ten\n")}
    eleven = drifted.replace("line 11\n", "line 11!\n")  # an anchor line itself drifted
    with pytest.raises(HunkMismatchError):
        apply_patch(patch, {"f.py": eleven}, allow_offset=True, fuzz=2)


def test_no_newline_at_end_of_file_both_ways() -> None:
    old = "a\nb\nc"
    new = "a\nb\nc\nd"
    diff_text = make_diff("f", old, new)
    assert "\\ No newline at end of file" in diff_text
    diff = one_file(diff_text)
    assert apply_file(old, diff).text == new
    assert apply_file(new, diff, reverse=True).text == old
    with pytest.raises(HunkMismatchError):
        apply_file("a\nb\nc\n", diff)  # the file has a final newline: not what the diff says


def test_crlf_file_with_lf_patch_keeps_crlf() -> None:
    new = OLD.replace("line 3\n", "line three\n")
    diff = one_file(make_diff("f", OLD, new))
    crlf_old = OLD.replace("\n", "\r\n")
    result = apply_file(crlf_old, diff).text
    assert result == new.replace("\n", "\r\n")
    assert apply_file(result, diff, reverse=True).text == crlf_old


def test_crlf_patch_applies_to_crlf_file() -> None:
    old = OLD.replace("\n", "\r\n")
    new = old.replace("line 3\r\n", "line three\r\n")
    diff = one_file(make_diff("f", old, new))
    assert apply_file(old, diff).text == new


def test_mixed_line_endings_are_not_guessed() -> None:
    new = OLD.replace("line 3\n", "line three\n")
    diff = one_file(make_diff("f", OLD, new))
    mixed = OLD.replace("line 3\n", "line 3\r\n")
    with pytest.raises(HunkMismatchError):
        apply_file(mixed, diff)


def test_pure_insertion_at_start() -> None:
    diff = one_file("--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n")
    assert apply_file("", diff).text == "x\ny\n"
    assert apply_file("x\ny\n", diff, reverse=True).text == ""


lines = st.lists(st.sampled_from(["a", "b", "c", "def f():", "    pass", "", "x = 1"]), max_size=30)


@st.composite
def edits(draw: st.DrawFn) -> tuple[str, str]:
    """Draw an old text and an edited copy (replace, insert, delete at random places)."""
    old = draw(lines)
    new = list(old)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(new)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            new.insert(at, draw(st.sampled_from(["NEW", "b", "    return 0"])))
        elif new and at < len(new):
            if action == "delete":
                del new[at]
            else:
                new[at] = draw(st.sampled_from(["CHANGED", "a"]))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    final_old = draw(st.booleans())
    final_new = draw(st.booleans())

    def join(parts: list[str], final: bool) -> str:
        text = eol.join(parts)
        return text + eol if final and parts else text

    return join(old, final_old), join(new, final_new)


@settings(max_examples=300, deadline=None)
@given(edits(), st.integers(0, 3))
def test_apply_then_reverse_is_identity(pair: tuple[str, str], context: int) -> None:
    old, new = pair
    diff_text = make_diff("f.py", old, new, context=context)
    if not diff_text:
        return  # identical texts make no diff
    diff = one_file(diff_text)
    assert apply_file(old, diff).text == new
    assert apply_file(new, diff, reverse=True).text == old


def _patch(name: str, path: str, old: str, new: str) -> Patch:
    return parse_patch(name, patch_text(name, make_diff(path, old, new)))


def test_transform_applies_patches_in_order_and_reverses_last_first() -> None:
    step1 = OLD.replace("line 4\n", "line four\n")
    step2 = step1.replace("line four\n", "line 4!\n")
    patches = [_patch("1.patch", "f.py", OLD, step1), _patch("2.patch", "f.py", step1, step2)]
    assert transform(patches, "f.py", OLD.encode()) == step2.encode()
    assert transform(patches, "f.py", step2.encode(), reverse=True) == OLD.encode()
    assert transform(patches, "other.py", b"untouched\n") == b"untouched\n"
    with pytest.raises(HunkMismatchError) as info:
        transform(list(reversed(patches)), "f.py", OLD.encode())
    assert info.value.hunk == 1 and "patch 2.patch, file f.py" in info.value.message


def test_transform_keeps_undecodable_bytes() -> None:
    patch = _patch("1.patch", "f.py", OLD, OLD.replace("line 2\n", "line two\n"))
    old = OLD.encode() + b"caf\xe9\n"  # not UTF-8, outside the hunk
    assert transform([patch], "f.py", old) == old.replace(b"line 2\n", b"line two\n")


def test_apply_patch_needs_every_file() -> None:
    patch = _patch("1.patch", "f.py", OLD, OLD.replace("line 3\n", "3\n"))
    assert apply_patch(patch, {"f.py": OLD, "g.py": "g\n"}) == {
        "f.py": OLD.replace("line 3\n", "3\n"),
        "g.py": "g\n",
    }
    with pytest.raises(HunkMismatchError) as info:
        apply_patch(patch, {"g.py": "g\n"})
    assert (info.value.hunk, info.value.found) == (1, "no such file")


def test_overlapping_hunks_are_a_mismatch_of_the_second_hunk() -> None:
    # Hunk 2 names line 2, which hunk 1 already consumed: never apply a hunk twice over.
    diff = one_file(
        "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n@@ -2,1 +2,1 @@\n-y\n+Y\n"
    )
    with pytest.raises(HunkMismatchError) as info:
        apply_file("x\ny\nz\n", diff)
    assert info.value.hunk == 2


DATA = Path(__file__).resolve().parent / "data" / "edge"


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("crlf-file", "crlf-file.old", "crlf-file.new"),
        ("no-newline-at-eof", "no-newline-at-eof.old", "no-newline-at-eof.new"),
        ("add-newline-at-eof", "no-newline-at-eof.old", "add-newline-at-eof.new"),
        ("start-and-end", "start-and-end.old", "start-and-end.new"),
    ],
)
def test_saved_samples_apply_and_reverse_byte_for_byte(name: str, old: str, new: str) -> None:
    patch = parse_patch(name, (DATA / f"{name}.patch").read_bytes().decode())
    (path,) = patch.targets
    before, after = (DATA / old).read_bytes(), (DATA / new).read_bytes()
    assert before != after
    assert transform([patch], path, before) == after
    assert transform([patch], path, after, reverse=True) == before
    with pytest.raises(HunkMismatchError):
        transform([patch], path, after)  # applied twice: the old lines are gone


def test_the_saved_multi_file_sample_applies_to_every_file() -> None:
    patch = parse_patch("m.patch", (DATA / "multiple-files.patch").read_text(encoding="utf-8"))
    stems = {"backends/arm/m0/a.py": "a", "backends/arm/m1/b.py": "b", "backends/arm/m2/c.py": "c"}
    old = {p: "".join(f"{s} = {i}\n" for i in range(1, 26)) for p, s in stems.items()}
    new = apply_patch(patch, {**old, "untouched.py": "u\n"})
    assert new == {
        **{
            p: t.replace(f"{stems[p]} = 3\n", f"{stems[p]} = 'three'\n").replace(
                f"{stems[p]} = 20\n", ""
            )
            for p, t in old.items()
        },
        "untouched.py": "u\n",
    }
    assert apply_patch(patch, new, reverse=True) == {**old, "untouched.py": "u\n"}


# --- what a mismatch says: every number and line of the report ------------------------------


def mismatch(text: str, diff: str, *, reverse: bool = False) -> HunkMismatchError:
    with pytest.raises(HunkMismatchError) as info:
        apply_file(text, one_file(diff), reverse=reverse, where="patch p, file f.py")
    return info.value


def test_a_mismatch_reports_expected_found_and_nearest_lines_exactly() -> None:
    new = OLD.replace("line 1\n", "line one\n")
    drifted = OLD.replace("line 2\n", "line 2  \n")  # trailing blanks are shown, not stripped
    exc = mismatch(drifted, make_diff("f.py", OLD, new))
    assert exc.message == "patch p, file f.py: hunk 1 does not apply"
    assert exc.hunk == 1
    assert exc.expected == "4 exact lines at line 1"
    assert exc.found == "different text (no fuzz is allowed)"
    assert exc.hint == (
        "the file drifted from the pinned source: refresh the patch "
        "(`executorch-arm-overlay edit`) or restore the pristine file"
    )
    shown = (
        "        1 | 'line 1'\n        2 | 'line 2  '\n        3 | 'line 3'\n        4 | 'line 4'"
    )
    assert exc.details == (
        "  expected lines (hunk 1 @@ -1,4 +1,4 @@):\n"
        "        1 | 'line 1'\n        2 | 'line 2'\n        3 | 'line 3'\n        4 | 'line 4'\n"
        f"  found at line 1:\n{shown}\n"
        f"  nearest match: line 1 (75% similar):\n{shown}"
    )


def test_a_reverse_mismatch_says_reverse_apply_and_names_the_second_hunk() -> None:
    new = OLD.replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")
    diff = make_diff("f.py", OLD, new)
    exc = mismatch(new.replace("line fifteen\n", "line XV\n"), diff, reverse=True)
    assert exc.message == "patch p, file f.py: hunk 2 does not reverse-apply"
    assert exc.hunk == 2
    assert exc.expected == "7 exact lines at line 12"
    assert exc.details is not None
    assert exc.details.startswith(
        "  expected lines (hunk 2 @@ -12,7 +12,7 @@):\n       12 | 'line 12'"
    )
    assert "  found at line 12:\n       12 | 'line 12'\n" in exc.details
    assert "       15 | 'line XV'\n" in exc.details
    assert "  nearest match: line 12 (86% similar):\n       12 | 'line 12'" in exc.details


def test_a_mismatch_past_the_end_of_the_file_shows_nothing_found() -> None:
    diff = "--- a/f.py\n+++ b/f.py\n@@ -5,2 +5,2 @@\n-e\n+E\n f\n"
    exc = mismatch("a\nb\n", diff)
    assert exc.expected == "2 exact lines at line 5"
    assert exc.details is not None
    assert "  found at line 5:\n    (nothing: end of file)\n" in exc.details


def test_a_long_hunk_shows_eight_lines_then_a_count() -> None:
    old = "".join(f"v{i}\n" for i in range(1, 31))
    for size, more in ((8, None), (9, 1), (12, 4)):
        hunk = "".join(f"-v{i}\n" for i in range(1, size + 1))
        diff = f"--- a/f.py\n+++ b/f.py\n@@ -1,{size} +0,0 @@\n{hunk}"
        exc = mismatch(old.replace("v1\n", "w1\n"), diff)
        assert exc.details is not None
        expected_block = exc.details.split("  found at line")[0]
        assert expected_block.count(" | ") == min(size, 8)
        assert f"       {min(size, 8)} | 'v{min(size, 8)}'" in expected_block
        if more is None:
            assert "more lines" not in exc.details
        else:
            assert expected_block.endswith(f"    ... {more} more lines\n")


def test_crlf_lines_are_shown_with_their_cr() -> None:
    diff = "--- a/f.py\n+++ b/f.py\n@@ -1,1 +1,1 @@\n-a\n+A\n"
    exc = mismatch("b\r\nc\n", diff)  # mixed endings: the hunk stays LF
    assert exc.details is not None
    assert "  found at line 1:\n        1 | 'b\\r'\n" in exc.details


def nearest_line(text: str, old_lines: list[str], start: int) -> str:
    """Return the 'nearest match' line of the report for a one-hunk deletion at ``start``."""
    hunk = "".join(f"-{line}\n" for line in old_lines)
    diff = f"--- a/f.py\n+++ b/f.py\n@@ -{start},{len(old_lines)} +{start - 1},0 @@\n{hunk}"
    details = mismatch(text, diff).details
    assert details is not None
    return next(ln for ln in details.splitlines() if ln.startswith("  nearest match:"))


def test_the_nearest_match_is_the_most_similar_window_anywhere() -> None:
    lines = [f"x{i}" for i in range(1, 13)]
    lines[2:5] = ["a", "b", "z"]  # lines 3-5: two of three lines of the hunk
    text = "".join(f"{ln}\n" for ln in lines)
    assert nearest_line(text, ["a", "b", "c"], 10) == "  nearest match: line 3 (67% similar):"
    first = "a\nb\nz\n" + "".join(f"x{i}\n" for i in range(9))
    assert nearest_line(first, ["a", "b", "c"], 8) == "  nearest match: line 1 (67% similar):"
    last = "".join(f"x{i}\n" for i in range(9)) + "q\nb\nc\n"  # the last full window
    assert nearest_line(last, ["a", "b", "c"], 1) == "  nearest match: line 10 (67% similar):"


def test_the_nearest_match_prefers_the_closest_of_equal_windows() -> None:
    text = "".join(f"{ln}\n" for ln in ["a", "n", "n", "n", "n", "a", "n", "n", "n", "a", "n"])
    # the hunk "a" is declared at line 7: "a" is on lines 1, 6 and 10; 6 is the closest
    assert nearest_line(text, ["a"], 7) == "  nearest match: line 6 (100% similar):"
    assert nearest_line(text, ["a"], 2) == "  nearest match: line 1 (100% similar):"
    # equally close windows (lines 3 and 7 around line 5): the first one wins
    text = "".join(f"{ln}\n" for ln in ["n", "n", "a", "n", "n", "n", "a", "n", "n"])
    assert nearest_line(text, ["a"], 5) == "  nearest match: line 3 (100% similar):"
    assert nearest_line(text, ["a"], 9) == "  nearest match: line 7 (100% similar):"


def test_a_nearer_but_less_similar_window_does_not_win() -> None:
    text = "a\nb\nn\nn\nn\nn\nn\nn\n"
    assert nearest_line(text, ["a", "b", "c"], 6) == "  nearest match: line 1 (67% similar):"


def test_a_window_is_never_cut_by_the_end_of_the_file() -> None:
    # "b c" at the end is 80% like "a b c" if the window were cut to two lines; the full
    # window "z b c" (67%) is what the report shows
    text = "".join(f"x{i}\n" for i in range(6)) + "z\nb\nc\n"
    assert nearest_line(text, ["a", "b", "c"], 1) == "  nearest match: line 7 (67% similar):"
    short = "x\na\nb\n"  # a file no longer than the hunk: only the one full window
    assert nearest_line(short, ["a", "b", "c"], 1) == "  nearest match: line 1 (67% similar):"


def test_a_one_line_hunk_is_compared_with_one_line_windows() -> None:
    assert nearest_line("p\nq\nr\n", ["q!"], 1).startswith("  nearest match: line 1 (0% similar)")
    assert nearest_line("p\nq!\nr\n", ["q!"], 3) == "  nearest match: line 2 (100% similar):"


def test_big_hunks_of_repeated_lines_are_compared_line_by_line() -> None:
    # difflib's autojunk heuristic would ignore the blank lines (popular in a 200+ line
    # sequence) and call this window 45% similar
    old_lines = ["" if i % 2 else f"v{i}" for i in range(200)]
    drifted = [f"{ln}!" if ln and i < 20 else ln for i, ln in enumerate(old_lines)]
    text = "".join(f"{ln}\n" for ln in drifted)
    assert nearest_line(text, old_lines, 1) == "  nearest match: line 1 (95% similar):"


# --- offsets ---------------------------------------------------------------------------------


def test_an_offset_may_be_backwards() -> None:
    new = OLD.replace("line 10\n", "line ten\n")
    diff = one_file(make_diff("f.py", OLD, new))
    shorter = OLD.replace("line 1\nline 2\nline 3\n", "")
    result = apply_file(shorter, diff, allow_offset=True)
    assert result.text == new.replace("line 1\nline 2\nline 3\n", "")
    assert result.offsets == (-3,)


def test_a_hunk_found_nowhere_is_a_mismatch_even_with_offsets() -> None:
    new = OLD.replace("line 10\n", "line ten\n")
    diff = one_file(make_diff("f.py", OLD, new))
    with pytest.raises(HunkMismatchError) as info:
        apply_file(OLD.replace("line 10\n", "line X\n"), diff, allow_offset=True)
    assert info.value.hunk == 1


def test_an_offset_match_may_start_right_where_the_previous_hunk_ended() -> None:
    diff = one_file("--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n-a\n+A\n@@ -5,1 +5,1 @@\n-b\n+B\n")
    result = apply_file("a\nb\nc\nd\ne\n", diff, allow_offset=True)
    assert result.text == "A\nB\nc\nd\ne\n"
    assert result.offsets == (0, -3)


def test_the_offset_search_reaches_every_line_of_the_file_but_not_beyond() -> None:
    text = "".join(f"n{i}\n" for i in range(9)) + "t\n"  # 10 lines, "t" on line 10
    found = apply_file(
        text, one_file("--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n-t\n+T\n"), allow_offset=True
    )
    assert found.offsets == (9,)  # distance 9: the whole file away
    head = "t\n" + "".join(f"n{i}\n" for i in range(9))
    far = "--- a/f\n+++ b/f\n@@ -11,1 +11,1 @@\n-t\n+T\n"  # declared past the end
    assert apply_file(head, one_file(far), allow_offset=True).offsets == (-10,)
    farther = "--- a/f\n+++ b/f\n@@ -12,1 +12,1 @@\n-t\n+T\n"
    with pytest.raises(HunkMismatchError):  # more than a file's length away: not an offset
        apply_file(head, one_file(farther), allow_offset=True)


# --- apply_patch and transform_checked -------------------------------------------------------


def test_apply_patch_reverses_refuses_offsets_by_default_and_names_the_patch() -> None:
    new = OLD.replace("line 3\n", "3\n")
    patch = _patch("1.patch", "f.py", OLD, new)
    assert apply_patch(patch, {"f.py": new}, reverse=True) == {"f.py": OLD}
    shifted = "extra\n" + OLD
    with pytest.raises(HunkMismatchError) as info:
        apply_patch(patch, {"f.py": shifted})
    assert info.value.message == "patch 1.patch, file f.py: hunk 1 does not apply"
    assert apply_patch(patch, {"f.py": shifted}, allow_offset=True) == {"f.py": "extra\n" + new}


def test_a_file_the_patch_names_but_the_sources_lack() -> None:
    patch = _patch("1.patch", "f.py", OLD, OLD.replace("line 3\n", "3\n"))
    with pytest.raises(HunkMismatchError) as info:
        apply_patch(patch, {})
    exc = info.value
    assert exc.message == "patch 1.patch, file f.py: the file does not exist"
    assert exc.expected == "f.py in the sources"
    assert exc.found == "no such file"
    assert exc.hint == "the file moved or was removed upstream: port the patch"


NEW_FILE = "void main() {}\n// nearest\n"


def test_a_created_file_comes_from_nothing_and_its_reverse_leaves_no_file() -> None:
    create = parse_patch("0001-c.patch", patch_text("C", created_diff("s/new.glsl", NEW_FILE)))
    edited = NEW_FILE.replace("nearest", "round half to even")
    edit = parse_patch("0002-e.patch", patch_text("E", make_diff("s/new.glsl", NEW_FILE, edited)))
    assert create.creates == ("s/new.glsl",) and edit.creates == ()
    assert transform([create], "s/new.glsl", None) == NEW_FILE.encode()
    assert transform([create, edit], "s/new.glsl", None) == edited.encode()
    assert transform([create, edit], "s/new.glsl", edited.encode(), reverse=True) is None
    assert apply_patch(create, {"f.py": OLD}) == {"f.py": OLD, "s/new.glsl": NEW_FILE}
    assert apply_patch(create, {"f.py": OLD, "s/new.glsl": NEW_FILE}, reverse=True) == {"f.py": OLD}


def test_a_creation_refuses_an_existing_file_even_an_empty_one() -> None:
    create = parse_patch("0001-c.patch", patch_text("C", created_diff("s/new.glsl", NEW_FILE)))
    for existing in (b"", NEW_FILE.encode()):
        with pytest.raises(HunkMismatchError) as info:
            transform([create], "s/new.glsl", existing)
        exc = info.value
        assert exc.message == (
            "patch 0001-c.patch, file s/new.glsl: the patch creates the file, and it exists"
        )
        assert exc.expected == "no s/new.glsl"
        assert exc.found == f"a file of {len(existing.decode().splitlines())} lines"
        assert exc.hint == "the file is shipped now (upstream added it): drop or port the patch"
        assert exc.hunk == 1
    with pytest.raises(HunkMismatchError, match="and it exists"):
        apply_patch(create, {"s/new.glsl": "x\n"})


def test_reversing_a_creation_needs_exactly_the_created_lines() -> None:
    create = parse_patch("0001-c.patch", patch_text("C", created_diff("s/new.glsl", NEW_FILE)))
    with pytest.raises(HunkMismatchError) as info:
        transform([create], "s/new.glsl", (NEW_FILE + "extra\n").encode(), reverse=True)
    assert info.value.message == (
        "patch 0001-c.patch, file s/new.glsl: the file holds more than the patch created"
    )
    assert info.value.found == "1 more lines"
    assert info.value.expected == "only the lines the patch created"
    assert info.value.hint == "restore the file the patch created, or remove it"
    assert info.value.hunk == 1
    with pytest.raises(HunkMismatchError, match="the file does not exist"):
        transform([create], "s/new.glsl", None, reverse=True)
    with pytest.raises(HunkMismatchError, match="hunk 1 does not reverse-apply"):
        transform([create], "s/new.glsl", b"other\n", reverse=True)


def test_transform_checked_gives_no_file_for_a_created_one_in_reverse(tmp_path: Path) -> None:
    series = write_series(
        tmp_path / "s",
        {"0001-c.patch": patch_text("C", created_diff("backends/new.glsl", NEW_FILE))},
        {},
    )
    assert series.created == frozenset({"backends/new.glsl"})
    assert series.pristine_sha256("backends/new.glsl") is None
    assert transform_checked(series, "backends/new.glsl", None) == NEW_FILE.encode()
    assert transform_checked(series, "backends/new.glsl", NEW_FILE.encode(), reverse=True) is None
    stale = dataclasses.replace(series, patched_sha256={"backends/new.glsl": "0" * 64})
    with pytest.raises(ChecksumMismatchError) as info:
        transform_checked(stale, "backends/new.glsl", None)
    assert info.value.found == f"sha256 {hashlib.sha256(NEW_FILE.encode()).hexdigest()}"


def test_transform_checked_requires_the_recorded_bytes(tmp_path: Path) -> None:
    new = OLD.replace("line 4\n", "line four\n")
    series = write_series(
        tmp_path / "s",
        {"0001-a.patch": patch_text("A", make_diff("backends/a.py", OLD, new))},
        {"backends/a.py": OLD.encode()},
    )
    assert transform_checked(series, "backends/a.py", OLD.encode()) == new.encode()
    assert transform_checked(series, "backends/a.py", new.encode(), reverse=True) == OLD.encode()
    drifted = OLD.replace("line 20\n", "line 20!\n").encode()  # outside the hunk: applies
    with pytest.raises(ChecksumMismatchError) as info:
        transform_checked(series, "backends/a.py", drifted)
    exc = info.value
    produced = hashlib.sha256(drifted.replace(b"line 4\n", b"line four\n")).hexdigest()
    wanted = hashlib.sha256(new.encode()).hexdigest()
    assert exc.message == "backends/a.py: the series produced unexpected bytes; nothing was written"
    assert (exc.expected, exc.found) == (f"sha256 {wanted}", f"sha256 {produced}")
    assert exc.hint == "SHA256SUMS does not match the patches: `executorch-arm-overlay refresh`"
    with pytest.raises(ChecksumMismatchError) as info:
        transform_checked(
            series, "backends/a.py", new.replace("line 20", "!").encode(), reverse=True
        )
    assert info.value.expected == f"sha256 {hashlib.sha256(OLD.encode()).hexdigest()}"


def test_hunks_of_reads_a_file_diff_forward_unless_asked() -> None:
    new = OLD.replace("line 3\n", "line three\n")
    diff = one_file(make_diff("f.py", OLD, new))
    (forward,) = hunks_of(diff)
    assert (forward.index, forward.old_start, forward.header) == (1, 1, "@@ -1,6 +1,6 @@")
    assert forward.old[2] == "line 3\n" and forward.new[2] == "line three\n"
    (backward,) = hunks_of(diff, reverse=True)
    assert (backward.old, backward.new) == (forward.new, forward.old)


def test_a_blank_line_after_the_last_hunk_is_not_context() -> None:
    """unidiff keeps a blank line after a hunk as an "empty" line: it belongs to no side."""
    diff = one_file("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\n")
    (hunk,) = hunks_of(diff)
    assert (hunk.old, hunk.new) == (("a\n", "b\n"), ("a\n", "c\n"))
    assert apply_file("a\nb\n", diff).text == "a\nc\n"


def test_a_stray_no_newline_marker_at_the_start_of_a_hunk_is_ignored() -> None:
    diff = one_file("--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n\\ No newline at end of file\n-a\n+b\n")
    assert apply_file("a\n", diff).text == "b\n"


def test_a_crlf_file_without_a_final_newline_keeps_its_last_line() -> None:
    diff = one_file(make_diff("f", "a\nb\nc", "a\nB\nc"))  # LF hunks, last line unterminated
    assert apply_file("a\r\nb\r\nc", diff).text == "a\r\nB\r\nc"


def test_a_crlf_mismatch_names_the_hunk_as_the_diff_does() -> None:
    new = OLD.replace("line 3\n", "three\n").replace("line 15\n", "fifteen\n")
    diff = one_file(make_diff("f", OLD, new))
    crlf = OLD.replace("\n", "\r\n").replace("line 15", "line XV")
    with pytest.raises(HunkMismatchError) as info:
        apply_file(crlf, diff)
    exc = info.value
    assert exc.message == ": hunk 2 does not apply"  # no ``where``: the caller adds it
    assert exc.hunk == 2 and exc.expected == "7 exact lines at line 12"
    assert exc.details is not None
    assert exc.details.startswith("  expected lines (hunk 2 @@ -12,7 +12,7 @@):\n")


def test_a_later_hunk_is_expected_where_the_earlier_offset_puts_it() -> None:
    new = OLD.replace("line 3\n", "three\n").replace("line 15\n", "fifteen\n")
    diff = one_file(make_diff("f", OLD, new))
    shifted = "x\nx\n" + OLD.replace("line 15\n", "line 15!\n")
    with pytest.raises(HunkMismatchError) as info:
        apply_file(shifted, diff, allow_offset=True)
    assert info.value.hunk == 2
    assert info.value.expected == "7 exact lines at line 14"  # line 12 plus the offset 2
