"""The pure hunk applier: exact matches, offsets, line endings, no-newline markers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unidiff.patch import PatchedFile, PatchSet

from overlay.text.applier import HunkMismatchError, apply_file, apply_patch, split_lines, transform
from overlay.text.series import Patch, parse_patch

from scaffold import make_diff, patch_text

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
