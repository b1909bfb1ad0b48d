"""The one reader of a tree's state: files classified by the fixes they hold, one verdict.

The world: four fixes over three files. Fix 1 edits a.py and b.py, fix 2 c.py, fix 3
another part of a.py, and fix 4 the line of a.py fix 1 changed (it needs fix 1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay.errors import ApplyError, BusyError, DriftError
from overlay.in_place import transaction
from overlay.text.series import Series
from overlay.tree import state
from overlay.tree.locate import Target, find_target
from overlay.tree.state import FileState, MetadataState, TreeState

from scaffold import make_diff, make_tree, patch_text, snapshot, write_series

A, B, C = "backends/arm/a.py", "backends/arm/b.py", "backends/arm/sub/c.py"
A0 = "".join(f"a{i} = {i}\n" for i in range(40))
B0 = "".join(f"b{i} = {i}\n" for i in range(10))
C0 = "".join(f"c{i} = {i}\n" for i in range(10))
A1 = A0.replace("a5 = 5\n", "a5 = 'one'\n")  # fix 1
A13 = A1.replace("a30 = 30\n", "a30 = 'three'\n")  # fix 1 then 3
A134 = A13.replace("a5 = 'one'\n", "a5 = 'four'\n")  # then 4
B1 = B0.replace("b2 = 2\n", "b2 = 'one'\n")
C2 = C0.replace("c7 = 7\n", "c7 = 'two'\n")


def world(base: Path) -> tuple[Series, Target]:
    patches = {
        "0001-one.patch": patch_text("One", make_diff(A, A0, A1) + make_diff(B, B0, B1)),
        "0002-two.patch": patch_text("Two", make_diff(C, C0, C2)),
        "0003-three.patch": patch_text("Three", make_diff(A, A1, A13)),
        "0004-four.patch": patch_text("Four", make_diff(A, A13, A134)),
    }
    pristine = {A: A0.encode(), B: B0.encode(), C: C0.encode()}
    series = write_series(base / "patches", patches, pristine)
    return series, find_target(make_tree(base / "site", pristine))


def holding(target: Target, files: dict[str, str]) -> Target:
    for repo_path, text in files.items():
        target.file(repo_path).write_text(text)
    return find_target(target.root)


def test_each_file_says_which_fixes_it_holds(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    only3 = A0.replace("a30 = 30\n", "a30 = 'three'\n")  # fix 3 without fix 1: it applies
    holding(target, {A: only3, C: C2})
    files = state.read_files(series, find_target(target.root))
    assert {p: (r.state, set(r.fixes)) for p, r in files.items()} == {
        A: (FileState.PARTIAL, {3}),
        B: (FileState.PRISTINE, set()),
        C: (FileState.PATCHED, {2}),
    }
    assert files[A].pristine == A0.encode()  # recovered by reverse-applying fix 3
    assert state.fix_states(series, files) == (frozenset({2, 3}), frozenset())


@pytest.mark.parametrize(
    ("files", "tree", "applied", "half"),
    [
        ({}, TreeState.PRISTINE, set(), set()),
        ({A: A134, B: B1, C: C2}, TreeState.PATCHED, {1, 2, 3, 4}, set()),
        ({A: A13, B: B1}, TreeState.PARTIAL, {1, 3}, set()),
        ({A: A1}, TreeState.MIXED, set(), {1}),  # fix 1 in a.py, not in b.py
        ({A: A134.replace("a0 = 0", "a0 = 'x'")}, TreeState.DRIFTED, set(), set()),
    ],
    ids=["pristine", "patched", "partial", "mixed", "drifted"],
)
def test_the_tree_state_follows_from_the_fixes(
    tmp_path: Path, files: dict[str, str], tree: TreeState, applied: set[int], half: set[int]
) -> None:
    series, target = world(tmp_path)
    status = state.inspect(series, holding(target, files))
    assert (status.state, set(status.applied), set(status.half)) == (tree, applied, half)
    assert not status.complete  # the dist-info records none of it


def test_a_subset_in_place_is_recorded_and_reported(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    plan = transaction.apply(series, target, fixes=frozenset({1, 3}))
    assert (set(plan.before), set(plan.after), set(plan.chosen)) == (set(), {1, 3}, {1, 3})
    status = state.inspect(series, find_target(target.root))
    assert status.state is TreeState.PARTIAL and status.record.fixes == frozenset({1, 3})
    assert status.record.state is MetadataState.IN_PLACE
    version = f"1.2.0+armfix.{series.short_digest}.fix.1.3"
    assert str(status.target.version) == version
    assert status.summary == (
        f"partial: fixes 1, 3 (patched in place, executorch {version}):"
        " `apply` adds the rest, `revert` removes them"
    )
    problem = status.problem()
    assert problem is not None and problem.message.endswith("holds fixes 1, 3 of this series")
    assert problem.hint == f"apply the rest: `executorch-arm-overlay apply --target {target.root}`"
    transaction.apply(series, find_target(target.root), fixes=frozenset({2}))
    transaction.apply(series, find_target(target.root), fixes=frozenset({4}))
    assert state.inspect(series, find_target(target.root)).complete


def test_summaries_say_what_files_and_dist_info_disagree_on(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    files_only = state.inspect(series, holding(target, {C: C2}))
    assert files_only.summary == (
        "fix 2 in the files, a stock dist-info: run `apply` to record them in it"
    )
    transaction.apply(series, find_target(target.root), fixes=frozenset({2}))
    moved = holding(find_target(target.root), {C: C0, A: A1, B: B1})
    assert state.inspect(series, moved).summary == (
        "fix 1 in the files, but the dist-info names fix 2: run `apply`"
    )
    reverted = holding(moved, {A: A0, B: B0})
    assert state.inspect(series, reverted).summary == (
        "pristine files, patched in place dist-info: run `revert` or `apply`"
    )
    mixed = holding(reverted, {A: A1})
    assert state.inspect(series, mixed).summary == (
        "mixed: fix 1 in some of their files only: run `apply` or `revert`"
    )


def test_apply_and_revert_of_subsets_compose(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    stock = snapshot(target.root)
    transaction.apply(series, target)  # all four
    plan = transaction.apply(series, find_target(target.root), reverse=True, fixes=frozenset({2}))
    assert [c.repo_path for c in plan.changes] == [C] and set(plan.after) == {1, 3, 4}
    assert target.file(C).read_text() == C0 and target.file(A).read_text() == A134
    with pytest.raises(ApplyError) as info:  # fix 4 edits what fix 1 wrote
        transaction.apply(series, find_target(target.root), reverse=True, fixes=frozenset({1}))
    assert info.value.message.startswith(f"{A}: fixes 3, 4 cannot be applied without fix 1")
    assert info.value.hint == "revert them together: --fix 1,3,4"
    transaction.apply(series, find_target(target.root), reverse=True, fixes=frozenset({1, 4}))
    assert target.file(A).read_text() == A0.replace("a30 = 30\n", "a30 = 'three'\n")
    transaction.apply(series, find_target(target.root), reverse=True)
    assert snapshot(target.root) == stock  # the dist-info too, byte for byte


def test_a_half_applied_fix_is_refused_unless_chosen(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    mixed = holding(target, {A: A1})
    before = snapshot(mixed.root)
    with pytest.raises(DriftError) as info:
        transaction.apply(series, mixed, fixes=frozenset({2}))
    assert info.value.message == "fix 1 in some of their files only; nothing was written"
    assert info.value.hint == "apply or revert them whole (--fix 1), or every fix (no --fix)"
    assert snapshot(mixed.root) == before
    transaction.apply(series, mixed, fixes=frozenset({1}))  # chosen: completed
    assert state.inspect(series, find_target(mixed.root)).applied == {1}


def test_a_file_touched_by_too_many_fixes_is_not_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    series, target = world(tmp_path)
    partial = holding(target, {A: A1, B: B1})
    assert state.inspect(series, partial).state is TreeState.PARTIAL
    monkeypatch.setattr(state, "MAX_SUBSET_FIXES", 2)  # a.py has three fixes
    assert state.inspect(series, partial).state is TreeState.DRIFTED


def test_a_busy_tree_is_reported_and_not_verified(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    transaction.apply(series, target)
    with transaction.locked(find_target(target.root)):
        status = state.inspect(series, find_target(target.root))
        assert (status.state, status.files, status.complete) == (TreeState.BUSY, {}, False)
        problem = status.problem()
        assert isinstance(problem, BusyError)
        assert problem.message == f"another overlay run is writing {target.root}"
    assert state.verified(series, target.root, rebuild="-").complete


def test_revert_takes_out_only_the_named_fixes(tmp_path: Path) -> None:
    series, target = world(tmp_path)
    transaction.apply(series, target, fixes=frozenset({1, 3}))
    plan = transaction.apply(series, find_target(target.root), reverse=True, fixes=frozenset({3}))
    assert (set(plan.before), set(plan.after)) == ({1, 3}, {1})
    assert [c.repo_path for c in plan.changes] == [A]  # c.py (fix 2) is left alone
    assert (target.file(A).read_text(), target.file(C).read_text()) == (A1, C0)
