"""On the real 1.2.0 and 1.5.1 releases, in their own uv envs: retarget and the export.

One run of ``prepare`` (the retarget mechanism on 1.5.1, fast subset, plus the pinned
release) backs every assertion: per patch verdicts with behavioural evidence, and the
mbox for the one fix still needed, whose test fails on stock 1.5.1 and passes with it.
``nox -s release_tests`` runs these (CI does); they take minutes, the first time longer
(torch 2.13 is downloaded once into uv's cache).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlay._git import git
from overlay.upstream import prepare
from overlay.upstream.behaviour import Outcome
from overlay.upstream.export import Identity, check_message
from overlay.upstream.retarget import Action

pytestmark = pytest.mark.release
ROOT = Path(__file__).resolve().parent.parent
INT16 = "0001-keep-terminal-int16-quantize.patch"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> prepare.Prepared:
    out = tmp_path_factory.mktemp("upstream")
    clone = os.environ.get("OVERLAY_UPSTREAM_CLONE")
    request = prepare.Request(
        patches_dir=ROOT / "patches",
        out_dir=out,
        versions=("1.2.0", "1.5.1"),
        signer=Identity("Jane Doe", "jane.doe@example.org"),
        upstream_clone=Path(clone) if clone else None,
        torch=("2.13.0",),  # upstream's torch_pin.py for 1.5.1 (read from a clone if given)
    )
    return prepare.prepare(request)


def test_retarget_verdict_per_patch(prepared: prepare.Prepared) -> None:
    result = prepared.retarget
    verdicts = {v.name: v for v in result.verdicts}
    assert result.runtime["torch"] == "2.13.0"
    assert result.runtime["tosa-tools"] == "2026.5.0"  # the vgf extra's pin works
    int16 = verdicts[INT16]
    assert (int16.action, int16.plan.source) == (Action.PORTED, "port 1.5.1")
    assert int16.behaviour is not None
    assert int16.behaviour.outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    grid = int16.behaviour.bug_cases[0]
    assert grid.case == "grid_warp_a16w8_vgf"
    assert "only supports per-tensor int8 grids" in grid.stock_error
    assert grid.patched is not None and grid.patched.value == "right"
    for name in (
        "0002-skip-factory-op-annotation.patch",
        "0004-distinct-output-transpose-slots.patch",
    ):
        assert verdicts[name].action is Action.DROP, verdicts[name].text
    slots = verdicts["0004-distinct-output-transpose-slots.patch"]
    assert slots.text.startswith("fixed upstream in 1.5.1: trigger cases now pass on stock")
    # Measured, against the header: upstream's fix for #18491 (22867a9148) makes the
    # trigger lower, but the conv -> relu branch of the cat comes out wrong on stock 1.5.1,
    # and the 1.2.0 code the patch changes was rewritten: a conflict to port by hand.
    conv = verdicts["0003-conv-rescale-qparams-from-source.patch"]
    assert conv.action is Action.CONFLICT
    assert conv.behaviour is not None and conv.behaviour.outcome is Outcome.STILL_FAILS
    assert conv.behaviour.bug_cases[0].stock.value == "wrong"
    assert any(flag.startswith("text says drop") for flag in conv.flags)
    assert result.worktree is not None and "--resume" in result.resume
    assert [p.name for p in result.verdicts if p.action is Action.PORTED] == [INT16]
    moved = "conv_relu_cat_mixed_qparams"  # right with the pinned build, wrong on stock 1.5.1
    assert [p.split(":")[0] for p in result.problems] == [conv.name, moved]


def test_behaviour_per_release(prepared: prepare.Prepared) -> None:
    table = prepared.behaviour
    assert table["0003-conv-rescale-qparams-from-source.patch"]["1.2.0"].outcome is (
        Outcome.FAILS_BEFORE_PASSES_AFTER
    )
    assert table["0003-conv-rescale-qparams-from-source.patch"]["1.5.1"].outcome is (
        Outcome.STILL_FAILS
    )
    assert table["0004-distinct-output-transpose-slots.patch"]["1.5.1"].outcome is (
        Outcome.FIXED_ON_STOCK
    )
    assert table[INT16]["1.2.0"].outcome is Outcome.REGRESSION  # conv_a16w8_int16
    assert table[INT16]["1.5.1"].outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
    assert prepared.matrix.row(INT16).verdict.action == "upstream"
    sent = [row.name for row in prepared.matrix.rows if row.verdict.action == "upstream"]
    assert sent == [INT16]


def test_the_export_fails_before_and_passes_after(prepared: prepare.Prepared) -> None:
    (item,) = prepared.exports
    assert check_message(item.message) == []
    assert any(p.startswith("backends/arm/test/passes/") for p in item.after)
    test = prepared.behaviour[INT16]["1.5.1"].test
    assert test is not None and test.stock is not None
    assert (test.stock.failed, test.patched.passed, test.patched.failed) == (1, 1, 0)
    assert "- without this change: 1 failed\n- with this change: 1 passed" in item.pr_body
    repo, branch = prepared.branches[item.name]
    assert git(repo, "log", "-1", "--format=%s").strip() == item.subject
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == branch
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
