"""The parts every form of the report shows: the VGF line, the verdict lines, the findings."""

from __future__ import annotations

import dataclasses

from equivalence_samples import A, judge, ok, report_of

from overlay.equivalence.controller.options import Shard
from overlay.equivalence.protocol import ErrorInfo, Payload, Stage, TargetState, VgfResult
from overlay.equivalence.render import sections
from overlay.equivalence.verdict import Verdict


def test_vgf_line_counts_compared_failed_and_skipped() -> None:
    def with_vgf(vgf: VgfResult) -> Verdict:
        return judge(ok(vgf=vgf), ok(vgf=vgf), ok(vgf=vgf))

    compared = VgfResult(TargetState.COMPARED, payloads=(Payload("VgfBackend", 3, "ab"),))
    failed = VgfResult(TargetState.FAILED, error=ErrorInfo("E", "m", Stage.VGF))
    rendered = report_of([with_vgf(compared), with_vgf(compared), with_vgf(failed)])
    assert sections.vgf_line(rendered) == (
        "VGF: payloads compared on 2 case(s), lowering failed on 1, executed on 0"
    )
    skipped = report_of([with_vgf(VgfResult(TargetState.SKIPPED, reason="no model_converter"))])
    assert sections.vgf_line(skipped).endswith("skipped: no model_converter")
    not_run = dataclasses.replace(compared, run_reason="not installed: lavapipe")
    assert sections.vgf_line(report_of([with_vgf(not_run)])).endswith(
        "executed on 0 (not run: not installed: lavapipe)"
    )


def test_a_shard_says_which_part_of_the_selection_it_is() -> None:
    one = judge(ok(), ok(), ok())
    part = report_of([one], shards=(Shard(2, 4),), selection=(one.item, one.item))
    lines = sections.headline(part)
    assert lines[0].startswith("PASS: ")
    assert lines[2].startswith("shard(s) 2/4 of 2 selected items; 0 results: 0 ran, 0 from cache")


def test_each_path_says_which_lock_its_venv_was_synced_from() -> None:
    report = report_of([])
    synced = "1.2.0/locks/cp311-manylinux_2_28_x86_64.txt (stock) sha256 3f2a"
    workers = dict(report.workers)
    workers[A] = dataclasses.replace(workers[A], lock=synced)
    lines = sections.path_lines(dataclasses.replace(report, workers=workers))
    assert f"executorch 1.2.0, synced from {synced}, runtime patch none;" in lines[0]
    assert "not synced from a lock" in lines[1] and "not synced from a lock" in lines[2]
