"""Retarget: text plans, the candidate folder and work tree, the conflict path, moves."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from overlay import fixes, render
from overlay._git import git
from overlay.equivalence.protocol import ItemResult, RunStatus
from overlay.equivalence.verdict import Quality
from overlay.errors import UpstreamError
from overlay.lines import pins
from overlay.text.series import Patch, Series, load_series, parse_patch
from overlay.upstream import behaviour
from overlay.upstream.results import Action, Applied, CaseOutcome, OnBase, PinAttempt, Status
from overlay.upstream.retarget.candidate import Layout, render_pins, write_candidate
from overlay.upstream.retarget.conflicts import commit_resolution, resolved, work_commits
from overlay.upstream.retarget.moves import case_moves, covered, runtime_form_note
from overlay.upstream.retarget.retarget_verdict import (
    CaseMove,
    Retarget,
    TextPlan,
    WheelRecord,
    apply_behaviour,
    candidate_pristine,
    final_verdict,
    plan_series,
    readiness,
    retarget_blocks,
)
from overlay.upstream.retarget.run import Request, own_fixes
from overlay.upstream.verdicts import decide_patch

from scaffold import created_diff, make_diff, pins_toml

ROOT = Path(__file__).resolve().parent.parent
PATH = "backends/arm/_passes/demo_pass.py"
OLD = "".join(f"line {i}\n" for i in range(1, 41))


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


def _patch(name: str, before: str, after: str, extra: str = "") -> Patch:
    header = f"Description: Fix the demo pass\n{extra}Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    return parse_patch(name, header + make_diff(PATH, before, after))


FIX = _patch("0001-fix.patch", OLD, _edit(OLD, "line 10\n", "line 10 fixed\n"))


PINS = pins.load(ROOT / "patches" / "1.2.0")


def _plans(
    new: str, *patches: Patch, ports: dict[str, dict[int, Patch]] | None = None
) -> list[TextPlan]:
    series = Series(Path("."), patches or (FIX,), PINS)
    return plan_series(
        series, ports or {}, {PATH: OLD.encode()}, {PATH: new.encode()}, version="1.5.1"
    )


def _plan(new: str, patch: Patch = FIX) -> TextPlan:
    return _plans(new, patch)[0]


def test_plan_classifies_carried_ported_contained_conflict() -> None:
    shifted = "header\n" * 7 + OLD
    carried = _plan(shifted)
    assert (carried.action, carried.replayed.own.status) == (Action.CARRIED, Status.OFFSET)
    assert carried.after[PATH] == _edit(shifted, "line 10\n", "line 10 fixed\n")
    # Upstream changed a context line of the hunk: the strict applier fails, git merges.
    context = _edit(OLD, "line 8\n", "line 8 upstream\n")
    ported = _plan(context)
    assert (ported.action, ported.replayed.own.status, ported.source) == (
        Action.PORTED,
        Status.MERGED,
        "3-way merge",
    )
    assert ported.after[PATH] == _edit(context, "line 10\n", "line 10 fixed\n")
    contained = _plan(FIX_AFTER)
    assert contained.action is Action.DROP and contained.replayed.own.status is Status.CONTAINED
    clash = _plan(_edit(OLD, "line 10\n", "line 10 upstream\n"))
    assert clash.action is Action.CONFLICT
    assert [(c.path, c.line) for c in clash.replayed.own.conflicts] == [(PATH, 10)]
    assert "<<<<<<< executorch 1.5.1" in clash.after[PATH]
    # A header naming the upstream fix drops a patch whose text no longer applies.
    fixed = _patch(FIX.name, OLD, FIX_AFTER, "Applied-Upstream: 1.3.0, commit:abc\n")
    assert _plan(_edit(OLD, "line 10\n", "line 10 upstream\n"), fixed).action is Action.DROP


FIX_AFTER = _edit(OLD, "line 10\n", "line 10 fixed\n")


def test_a_port_wins_and_a_dropped_patch_is_not_the_next_ones_base() -> None:
    new = _edit(OLD, "line 10\n", "line 10 upstream\n")
    port = _patch("0001-renamed.patch", new, _edit(new, "line 20\n", "line 20 ported\n"))
    plan = _plans(new, ports={"1.5.1": {1: port}})[0]
    assert (plan.action, plan.source) == (Action.PORTED, "port 1.5.1")
    assert plan.replayed.own.status is Status.CONFLICT  # what the pinned patch itself gives
    assert "Overlay-Patch: 0001-fix.patch" in plan.message and "Fix the demo pass" in plan.message
    headed = _patch(FIX.name, OLD, FIX_AFTER, "Applied-Upstream: 1.3.0, commit:abc\n")
    next_one = _patch("0002-next.patch", FIX_AFTER, _edit(FIX_AFTER, "line 11\n", "line 11 b\n"))
    merged = _edit(OLD, "line 8\n", "line 8 upstream\n")
    dropped, second = _plans(merged, headed, next_one)
    assert (dropped.action, dropped.replayed.own.status) == (Action.DROP, Status.MERGED)
    assert second.action is Action.CONFLICT  # planned without the dropped patch's lines


def _series(tmp_path: Path, *patches: Patch, folder: Path | None = None) -> Series:
    folder = folder or tmp_path / "patches"
    folder.mkdir(parents=True)
    (folder / "pins.toml").write_text(pins_toml({PATH: OLD.encode()}), encoding="utf-8")
    (folder / "series").write_text("".join(p.name + "\n" for p in patches), encoding="utf-8")
    for patch in patches:
        (folder / patch.name).write_text(patch.text, encoding="utf-8")
    return load_series(folder)


def _resumed(series: Series, new_files: dict[str, bytes], work: Path) -> list[TextPlan]:
    """Do what ``retarget --resume`` does before it writes the candidate again."""
    commit_resolution(work)
    held = work_commits(work)
    plans = plan_series(
        series, {}, {PATH: OLD.encode()}, new_files, version="1.5.1",
        taken={name: c.after for name, c in held.items()},
    )  # fmt: skip
    return [resolved(p, held[p.name]) if p.name in held else p for p in plans]


def _candidate_pins(new: str) -> str:
    return pins_toml({PATH: new.encode()}, version="1.5.1")


def test_conflict_leaves_a_work_tree_and_resume_finishes_the_candidate(tmp_path: Path) -> None:
    """A synthetic release where patch 1 conflicts and patch 2 applies after it."""
    after_first = FIX_AFTER
    second = _patch("0002-more.patch", after_first, _edit(after_first, "line 30\n", "line 30 b\n"))
    series = _series(tmp_path, FIX, second)
    new = _edit(OLD, "line 10\n", "line 10 upstream\n")
    new_files = {PATH: new.encode()}
    plans = plan_series(series, {}, {PATH: OLD.encode()}, new_files, version="1.5.1")
    assert [p.action for p in plans] == [Action.CONFLICT, Action.CARRIED]
    out = tmp_path / "out"
    layout = Layout(out, "1.5.1")
    pins_text = _candidate_pins(new)
    kwargs = {"layout": layout, "today": "2026-12-03", "pins_text": pins_text}
    resume = write_candidate(plans, new_files, resume=False, **kwargs)  # type: ignore[arg-type]
    assert "--resume" in resume and f"{PATH}: conflict at line 10" in resume
    work = out / "worktree"
    assert "<<<<<<< executorch 1.5.1" in (work / PATH).read_text()
    log = git(work, "log", "--format=%s").splitlines()
    assert log == ["executorch 1.5.1 pristine sources"]
    with pytest.raises(UpstreamError, match="conflict markers are still"):
        commit_resolution(work)
    (work / PATH).write_text(_edit(new, "line 10 upstream\n", "line 10 upstream fixed\n"))
    done = _resumed(series, new_files, work)
    assert [(p.action, p.source) for p in done] == [
        (Action.PORTED, "3-way merge, resolved by hand"),
        (Action.CARRIED, "pinned"),  # planned on top of the resolution
    ]
    assert write_candidate(done, new_files, resume=True, **kwargs) == ""  # type: ignore[arg-type]
    assert git(work, "log", "--format=%s").splitlines()[:2] == [
        "Fix the demo pass",
        "Fix the demo pass",
    ]
    assert "line 10 upstream fixed\n" in (work / PATH).read_text()
    candidate = load_series(out / "patches")
    assert [p.name for p in candidate.patches] == ["0001-fix.patch", "0002-more.patch"]
    assert str(candidate.pins.executorch) == "1.5.1"
    assert candidate.expected_patched_sha256()  # SHA256SUMS matches the new series


def _case(name: str, stock: Quality, patched: Quality | None = None) -> CaseOutcome:
    return CaseOutcome(name, stock, patched, None, "boom" if stock is Quality.FAILED else "")


def _item(ok: bool, graph: tuple[str, ...] = ("cpu: add",)) -> ItemResult:
    return ItemResult(status=RunStatus.OK if ok else RunStatus.FAIL, graph=graph)


def test_case_moves_attribute_changes() -> None:
    def sides(stock: ItemResult, patched: ItemResult) -> tuple[dict[str, ItemResult], ...]:
        return {"conv_relu_fp": stock}, {"conv_relu_fp": patched}

    same = _item(True)
    other = _item(True, ("delegate[0] TOSABackend: conv",))
    moves = case_moves(sides(same, same), sides(other, other), "1.5.1")  # type: ignore[arg-type]
    assert (moves[0].attribution, moves[0].changes) == ("upstream change", ("graph",))
    moves = case_moves(sides(same, other), sides(same, same), "1.5.1")  # type: ignore[arg-type]
    assert moves[0].attribution == "patch"
    unchanged = case_moves(sides(same, same), sides(same, same), "1.5.1")  # type: ignore[arg-type]
    assert unchanged[0].attribution == "no change"


def test_runtime_form_is_declared_when_the_fix_moved() -> None:
    moved = dataclasses.replace(_plan("header\n" + OLD), action=Action.PORTED, after={"x.py": ""})
    moved = dataclasses.replace(
        moved, replayed=dataclasses.replace(moved.replayed, patch="0001-any-name.patch")
    )
    note = runtime_form_note([moved], "1.6.0")
    assert "no runtime form on 1.6.0" in note  # the newest form (1.5.1's) is elsewhere
    (newest,) = fixes.by_number(1).runtime_forms("1.5.1")
    form = newest.qualname
    assert form in note and "DiffOnly for 1.6.0" in note
    declared = runtime_form_note([moved], "1.5.1")
    assert declared.endswith(f"its fix module declares 1.5.1: {form}")


def test_pins_render_and_load(tmp_path: Path) -> None:
    old = pins.load(ROOT / "patches" / "1.2.0")
    text = render_pins(
        old,
        version="1.5.1",
        runtime={"torch": "2.13.0", "torchao": "0.18.0", "tosa-tools": "2026.5.0"},
        wheels=[
            WheelRecord(WHEEL, "ef" * 32, "3.11", "manylinux_2_28_x86_64"),
            WheelRecord(
                WHEEL.replace("manylinux_2_28_x86_64", "macosx_12_0_arm64"),
                "",
                "3.11",
                "macosx_12_0_arm64",
                "not found",
            ),
        ],
        pristine={PATH: "ab" * 32},
        attempts=[PinAttempt({"torch": "2.13.0"}, False, "VGF: GLIBC_2.38 not found", 30.0)],
    )
    (tmp_path / "pins.toml").write_text(text)
    loaded = pins.load(tmp_path)
    assert [w.file for w in loaded.wheels] == [WHEEL]
    assert loaded.wheels[0].sha256 == "ef" * 32
    assert "# not published: executorch-1.5.1-cp311-cp311-macosx_12_0_arm64.whl" in text
    assert str(loaded.executorch) == "1.5.1"
    assert loaded.runtime == {"torch": "2.13.0", "torchao": "0.18.0", "tosa-tools": "2026.5.0"}
    assert loaded.extras == {"arm": ("tosa-tools",)}  # executorch[arm], minus what is gone
    assert loaded.macos_deployment_target == old.macos_deployment_target == "15.0"
    assert loaded.pristine == {PATH: "ab" * 32}
    assert "#   torch 2.13.0: failed: VGF: GLIBC_2.38 not found" in text
    assert text.index('executorch = "1.5.1"') < text.index("[runtime]") < text.index("[pristine]")
    assert "matrix_versions" not in text and "[torch]" not in text  # shared: upstream.toml


ORIGIN = "torch 2.13.0 ([torch] in upstream.toml)"
WHEEL = "executorch-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl"


def _retarget(**changes: object) -> Retarget:
    plan = _plan("header\n" + OLD)
    found = decide_patch(
        FIX.name, "1.5.1", [_case("a", Quality.FAILED, Quality.RIGHT)], [], kept=True
    )
    before = decide_patch(
        FIX.name, "1.2.0", [_case("a", Quality.FAILED, Quality.RIGHT)], [], kept=True
    )
    pinned = OnBase(FIX.name, Applied(Status.APPLIES), base="1.2.0", behaviour=before)
    result = Retarget(
        old_version="1.2.0",
        version="1.5.1",
        candidate="c",
        fast=True,
        problems=(),
        wheels=(),
        runtime={"torch": "2.13.0"},
        attempts=(PinAttempt({"torch": "2.13.0"}, True, "ok", 1.0, ORIGIN),),
        patches=(
            final_verdict(plan.replayed, plan.action, plan.source, found, "1.5.1", pinned=pinned),
        ),
        runtime_form="none",
        moves=(
            CaseMove("a", "right", "right", (), "patch", ""),
            CaseMove("b", "right", "failed", ("graph",), "upstream change", "kept", "0007-x.patch"),
        ),
        runs={},
        timings={"total": 12.0},
        worktree="",
        resume="",
        locks=(),
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def test_render_retarget_lists_each_patch() -> None:
    blocks = retarget_blocks(_retarget())
    text = render.markdown(blocks)
    assert text.startswith("# retarget executorch 1.2.0 -> 1.5.1: ready to promote (fast corpus)\n")
    assert "| 0001-fix | offset +1 | carried | fails before, passes after |" in text
    assert "\n  - a: stock failed, patched right [boom]\n" in text
    assert "\n  - on 1.2.0: fails on stock 1.2.0, passes with the patch: a (boom)\n" in text
    assert f"- tried torch 2.13.0: ok\n  - from: {ORIGIN}\n" in text
    assert "| b | right | failed | upstream change | kept |" in text
    assert "NOT ready" in render.markdown(retarget_blocks(_retarget(problems=("x",))))


def test_the_retarget_report_round_trips_through_the_codec(tmp_path: Path) -> None:
    from overlay import codec

    result = _retarget()
    (path,) = render.write(tmp_path, "retarget", [], result, ("json",))
    assert codec.loads(Retarget, path.read_text(encoding="utf-8")) == result


def test_stock_of_the_new_release_decides_what_the_candidate_carries() -> None:
    carried = _plan("header\n" + OLD)
    own = carried.replayed.own
    gone = decide_patch(FIX.name, "1.5.1", [_case("a", Quality.RIGHT)], [], kept=False)
    assert apply_behaviour(carried.action, carried.source, own, gone)[0] is Action.DROP
    still = decide_patch(FIX.name, "1.5.1", [_case("a", Quality.FAILED)], [], kept=False)
    assert apply_behaviour(carried.action, carried.source, own, still)[0] is Action.CARRIED
    header = "Applied-Upstream: 1.3.0, commit:abc\n"
    clash = _edit(OLD, "line 10\n", "line 10 upstream\n")
    text_drop = _plan(clash, _patch(FIX.name, OLD, FIX_AFTER, header))
    assert text_drop.action is Action.DROP
    kept = apply_behaviour(text_drop.action, text_drop.source, text_drop.replayed.own, still)
    assert kept == (Action.CONFLICT, "3-way merge")
    assert "<<<<<<<" in text_drop.after[PATH]  # the work tree gets the markers to resolve
    verdict = final_verdict(text_drop.replayed, text_drop.action, text_drop.source, still, "1.5.1")
    assert verdict.action is Action.CONFLICT and f"{PATH}: conflict at line 10" in verdict.text
    assert verdict.flags[0].startswith("text says drop (Applied-Upstream: 1.3.0")
    headed = _patch(FIX.name, OLD, FIX_AFTER, header)
    merged = _plan(_edit(OLD, "line 8\n", "line 8 upstream\n"), headed)
    assert apply_behaviour(merged.action, merged.source, merged.replayed.own, still) == (
        Action.PORTED,
        "3-way merge",
    )


def test_a_case_another_fix_claims_on_the_target_release_is_that_fixs_evidence() -> None:
    five, one = fixes.by_number(5), fixes.by_number(1)
    assert behaviour.triggers(five, ["1.2.0", "1.5.1"])[0] == [
        "zoo_grid_warp_a16w8_intfp16",
        "zoo_grid_warp_a16w8_int16",
        "grid_warp_a16w8_vgf",
    ]
    bug, _ = behaviour.triggers(five, ["1.2.0", "1.5.1"], target="1.5.1")
    assert "grid_warp_a16w8_vgf" not in bug  # fix 1 claims it on 1.5.1
    assert "grid_warp_a16w8_vgf" in behaviour.triggers(one, ["1.2.0", "1.5.1"], target="1.5.1")[0]


TEST_PATH = "backends/arm/test/passes/test_demo_pass.py"
TEST_FILE = "def test_demo():\n    pass\n"


def test_a_resolution_may_change_more_files_and_is_measured_again(tmp_path: Path) -> None:
    """Dogfooding 0003 on 1.5.1: the text drops the patch (its header names the upstream
    fix), stock still fails, so it is a conflict; the resolution fixes the bug another
    way and adds a test to the release's test file beside it."""

    stale = _patch(FIX.name, OLD, FIX_AFTER, "Applied-Upstream: 1.3.0, commit:abc\n")
    series = _series(tmp_path, stale)
    new = _edit(OLD, "line 10\n", "line 10 upstream\n")
    new_files = {PATH: new.encode(), TEST_PATH: TEST_FILE.encode(), "backends/arm/x.py": b"x\n"}
    still = decide_patch(FIX.name, "1.5.1", [_case("a", Quality.WRONG)], [], kept=False)
    texts = plan_series(series, {}, {PATH: OLD.encode()}, new_files, version="1.5.1")
    first = [
        dataclasses.replace(p, action=a, source=s)
        for p in texts
        for a, s in [apply_behaviour(p.action, p.source, p.replayed.own, still)]
    ]
    assert [p.action for p in first] == [Action.CONFLICT]
    out = tmp_path / "out"
    layout = Layout(out, "1.5.1")
    hint = write_candidate(
        first, new_files, layout=layout, resume=False, today="2026-12-03",
        pins_text=_candidate_pins(new),
    )  # fmt: skip
    work = out / "worktree"
    assert f"{work}/.git/OVERLAY_MERGE_MSG" in hint and "--resume" in hint
    assert set(git(work, "ls-files").split()) == set(new_files)  # every release file
    # Resolve: fix it another way, add a test, give the commit a header of its own.
    (work / PATH).write_text(_edit(new, "line 20\n", "line 20 fixed\n"))
    (work / TEST_PATH).write_text(TEST_FILE + "\n\ndef test_fixed():\n    pass\n")
    message = "Fix it again\n\nDescription: Fix it again\n the new way\nForwarded: no\n"
    message += "Last-Update: 2026-12-03\n"
    (work / ".git" / "OVERLAY_MERGE_MSG").write_text(f"{message}\nOverlay-Patch: {FIX.name}\n")
    # The re-run plans the text again (a drop), and takes the resolution from its commit.
    taken = _resumed(series, new_files, work)
    assert [(p.action, p.source) for p in taken] == [
        (Action.PORTED, "3-way merge, resolved by hand")
    ]
    assert set(taken[0].after) == {PATH, TEST_PATH}
    assert taken[0].after[TEST_PATH].endswith("def test_fixed():\n    pass\n")
    pristine = candidate_pristine(taken, new_files)
    assert list(pristine) == sorted([PATH, TEST_PATH])
    pins_text = pins_toml({p: new_files[p] for p in pristine}, version="1.5.1")
    done = write_candidate(
        taken, new_files, layout=layout, resume=True, today="2026-12-03",
        pins_text=pins_text,
    )  # fmt: skip
    assert done == ""
    patch = load_series(out / "patches").get(FIX.name)
    assert patch.targets == (PATH, TEST_PATH)
    assert patch.subject == "Fix it again" and "Applied-Upstream" not in patch.header
    # A second resume measures the committed tree again: a kept patch is taken as it is,
    # or as amended in the work tree; an uncommitted edit is refused.
    assert _resumed(series, new_files, work) == taken
    held = work_commits(work)[FIX.name]
    assert resolved(taken[0], held) == taken[0]
    (work / TEST_PATH).write_text(TEST_FILE + "\n\ndef test_fixed_better():\n    pass\n")
    git(work, "commit", "-qa", "--amend", "--no-edit")
    edited = resolved(taken[0], work_commits(work)[FIX.name])
    assert edited.source == "3-way merge, resolved by hand, edited in the work tree"
    assert edited.after[TEST_PATH].endswith("def test_fixed_better():\n    pass\n")
    (work / TEST_PATH).write_text("edited\n")
    with pytest.raises(UpstreamError, match="uncommitted changes"):
        commit_resolution(work)
    (work / "backends/arm/new_test.py").write_text("x\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "--amend", "--no-edit")
    with pytest.raises(UpstreamError, match="adds or removes files"):
        work_commits(work)


def test_a_case_the_candidate_loses_is_covered_by_the_lines_own_fix() -> None:
    lost = CaseMove("grid_warp_int8_vgf_int", "right", "failed", ("vgf payload",), "patch", "x")
    seven = fixes.by_number(7)
    found = covered(lost, "1.5.1", (fixes.by_number(1), seven))
    assert found.covered_by == "fix 7"
    assert found.note == (
        "x; fixed on 1.5.1 by fix 7, the 1.5.1 line's own fix (not carried from the"
        " pinned line): the line keeps it"
    )
    assert readiness([], [found], behaviour_checked=True) == ()
    # not without that fix, not on another release, not for a case it does not claim
    assert covered(lost, "1.5.1", (fixes.by_number(1),)) == lost
    assert covered(lost, "1.6.0", (seven,)) == lost
    other = dataclasses.replace(lost, case="conv_relu_int8")
    assert covered(other, "1.5.1", (seven,)) == other
    assert readiness([], [lost], behaviour_checked=True) == (
        "grid_warp_int8_vgf_int: right with the pinned build, failed now",
    )


def test_own_fixes_are_the_target_lines_fixes_beyond_the_candidate(tmp_path: Path) -> None:
    root = ROOT / "patches"
    request = Request(patches_dir=root / "1.2.0", version="1.5.1", out_dir=tmp_path)
    ported = {p.name for p in load_series(root / "1.5.1").patches if p.number != 7}
    assert [f.number for f in own_fixes(request, ported)] == [7]
    nowhere = Request(patches_dir=root / "1.2.0", version="1.6.0", out_dir=tmp_path)
    assert own_fixes(nowhere, ported) == []


def test_a_patch_creating_a_file_is_carried_onto_a_release_without_it() -> None:
    """Planned like an edit: the created file comes after it; the candidate pins only the
    release's files (none for the file the patch creates)."""
    shader = "backends/arm/vgf/shaders/new.glsl"
    header = "Description: Add a shader\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
    diff = make_diff(PATH, OLD, FIX_AFTER) + created_diff(shader, "void main() {}\n")
    patch = parse_patch("0001-fix.patch", header + diff)
    new = "line 0\n" + OLD
    (plan,) = _plans(new, patch)
    assert plan.action is Action.CARRIED
    assert plan.after[shader] == "void main() {}\n"
    assert candidate_pristine([plan], {PATH: new.encode()}) == {
        PATH: hashlib.sha256(new.encode()).hexdigest()
    }
