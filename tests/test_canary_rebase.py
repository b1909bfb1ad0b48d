"""The canary's classifier: unchanged, offset, 3-way merged, upstream, conflict, missing."""

from __future__ import annotations

from overlay.text.series import Patch, parse_patch
from overlay.upstream.canary.rebase import Step, classify, conflict_hunks
from overlay.upstream.canary.results import PatchOnTarget, TextStatus

from scaffold import make_diff, patch_text

PATH = "backends/arm/_passes/p.py"
BASE = "".join(f"line {i}\n" for i in range(1, 21))
AFTER = BASE.replace("line 10\n", "line ten\n")
LABELS = ("main", "1.2.0 before", "0001-p.patch")


def _patch() -> Patch:
    return parse_patch("0001-p.patch", patch_text("Change line 10", make_diff(PATH, BASE, AFTER)))


def _classify(text: str | None, *, step: bool = True) -> tuple[PatchOnTarget, dict[str, str]]:
    patch = _patch()
    texts = {} if text is None else {PATH: text}
    names = (
        frozenset(texts) | {"backends/arm/_passes/moved/p.py"} if text is None else frozenset(texts)
    )
    known = Step(patch, {PATH: BASE}, {PATH: AFTER}, "") if step else None
    return classify(patch, texts, names, known, LABELS)


def test_applies_unchanged_and_carries_the_change() -> None:
    found, after = _classify(BASE)
    assert found.status is TextStatus.UNCHANGED and after == {PATH: AFTER}


def test_applies_with_an_offset_and_reports_it() -> None:
    found, after = _classify("new\nnew\nnew\n" + BASE)
    assert found.status is TextStatus.OFFSET and found.offsets == (3,)
    assert after[PATH] == "new\nnew\nnew\n" + AFTER


def test_the_reverse_applying_is_already_upstream() -> None:
    found, after = _classify(AFTER)
    assert found.status is TextStatus.UPSTREAM and found.evidence[0].kind == "reverse applies"
    assert after == {PATH: AFTER}


def test_a_changed_context_merges_three_way() -> None:
    drifted = BASE.replace("line 7\n", "line seven\n")
    found, after = _classify(drifted)
    assert found.status is TextStatus.MERGED
    assert after[PATH] == drifted.replace("line 10\n", "line ten\n")


def test_the_same_lines_changed_otherwise_conflict_with_markers() -> None:
    other = BASE.replace("line 10\n", "line TEN\n")
    found, after = _classify(other)
    assert found.status is TextStatus.CONFLICT and after == {PATH: other}  # the patch is left out
    (hunk,) = found.conflicts
    assert hunk.path == PATH
    assert "<<<<<<< main\nline TEN\n=======\nline ten\n>>>>>>> 0001-p.patch\n" in hunk.text


def test_without_a_merge_base_a_mismatch_is_a_conflict() -> None:
    found, _ = _classify(BASE.replace("line 7\n", "line seven\n"), step=False)
    assert found.status is TextStatus.CONFLICT


def test_a_missing_file_is_missing_with_where_it_moved() -> None:
    found, _ = _classify(None)
    assert found.status is TextStatus.MISSING and "moved/p.py" in found.detail


def test_conflict_hunks_keep_context_and_each_region() -> None:
    merged = (
        "a\nb\nc\nd\n<<<<<<< x\n1\n=======\n2\n>>>>>>> y\n"
        "e\nf\ng\nh\n<<<<<<< x\n3\n=======\n>>>>>>> y\n"
    )
    first, second = conflict_hunks(PATH, merged, context=2)
    assert first.text == "c\nd\n<<<<<<< x\n1\n=======\n2\n>>>>>>> y\ne\nf\n"
    assert second.text.startswith("g\nh\n<<<<<<< x\n3\n") and second.text.endswith(">>>>>>> y\n")


def test_a_merge_that_adds_nothing_is_already_upstream() -> None:
    # upstream made the same change and touched the context: the reverse does not apply
    both = AFTER.replace("line 7\n", "line seven\n")
    found, after = _classify(both)
    assert found.status is TextStatus.UPSTREAM
    assert [e.kind for e in found.evidence] == ["merge adds nothing"]
    assert after == {PATH: both}
