"""The parts every form of the report shows: what did not run, the verdict lines, findings."""

from __future__ import annotations

import dataclasses

from equivalence_samples import A, ethos, judge, numerics, ok, report_of

from overlay.equivalence.controller.options import Shard
from overlay.equivalence.protocol import (
    ErrorInfo,
    ExactCheck,
    Payload,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.equivalence.render import layout
from overlay.equivalence.verdict import Verdict


def test_the_top_says_once_what_did_not_run_here_and_how_to_make_it_run() -> None:
    def with_vgf(vgf: VgfResult, **change: object) -> Verdict:
        return judge(ok(vgf=vgf, **change), ok(vgf=vgf, **change), ok(vgf=vgf, **change))

    lowered = VgfResult(
        TargetState.COMPARED,
        payloads=(Payload("VgfBackend", 3, "ab"),),
        run_reason="not installed: lavapipe (apt-get install mesa-vulkan-drivers)",
    )
    failed = VgfResult(TargetState.FAILED, error=ErrorInfo("E", "m", Stage.VGF))
    skipped = VgfResult(TargetState.SKIPPED, reason="no model_converter")
    compiled = with_vgf(failed, ethos_u=(ethos("ethos-u55-128"),))
    report = report_of([with_vgf(lowered), with_vgf(lowered), compiled, with_vgf(skipped)])
    assert layout.not_executed_lines(report) == [
        "Ethos-U compiled, not executed here (1 case(s)): executing a command stream needs Arm's"
        " Corstone FVPs, which no package registry carries; Vela's estimates are shown; nothing"
        " is called right or wrong there",
        "VGF lowered, not executed here (1 case(s)): not installed: lavapipe (apt-get install"
        " mesa-vulkan-drivers); nothing is called right or wrong there",
        "VGF not lowered (1 case(s)): no model_converter; nothing is called right or wrong there",
    ]
    assert layout.headline(report)[-3:] == layout.not_executed_lines(report)
    executed = dataclasses.replace(lowered, numerics=numerics(), run_reason="")
    assert layout.not_executed_lines(report_of([with_vgf(executed)])) == []


def test_a_shard_says_which_part_of_the_selection_it_is() -> None:
    one = judge(ok(), ok(), ok())
    part = report_of([one], shards=(Shard(2, 4),), selection=(one.item, one.item))
    lines = layout.headline(part)
    assert lines[0].startswith("PASS: ")
    assert lines[2].startswith("shard(s) 2/4 of 2 selected items; 0 results: 0 ran, 0 from cache")


def test_each_path_says_which_lock_its_venv_was_synced_from() -> None:
    report = report_of([])
    synced = "1.2.0/locks/cp311-manylinux_2_28_x86_64.txt (stock) sha256 3f2a"
    workers = dict(report.workers)
    workers[A] = dataclasses.replace(workers[A], lock=synced)
    lines = layout.path_lines(dataclasses.replace(report, workers=workers))
    assert f"executorch 1.2.0, synced from {synced}, runtime patch none;" in lines[0]
    assert "not synced from a lock" in lines[1] and "not synced from a lock" in lines[2]


def test_a_differing_item_says_each_path_against_the_exact_reference() -> None:
    equal = ExactCheck(steps=(0,), differing=(0,))
    off = ExactCheck(steps=(1,), differing=(3,), first="features.5.block.6: conv2d (q_10)")
    right = ok(numerics=dataclasses.replace(numerics(), exact=equal))
    planted = ok(numerics=dataclasses.replace(numerics(digest="p"), exact=off))
    lines = layout.detail_lines(judge(right, planted, right))
    assert (
        "tosa against the exact reference: (a) equal to the exact reference; (b) 3 of 4 output"
        " values differ from the exact reference, by 1 step (first at features.5.block.6:"
        " conv2d (q_10)); (c) equal to the exact reference"
    ) in lines
    why = "no exact rule for aten.grid_sampler.default"
    unruled = ok(numerics=numerics(digest="u"), exact_reason=why)
    lines = layout.detail_lines(judge(ok(exact_reason=why), unruled, unruled))
    assert f"no exact reference: {why}" in lines
    assert not any("against the exact reference" in line for line in lines)
