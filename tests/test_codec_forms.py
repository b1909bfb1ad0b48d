"""Every file the overlay persists or exchanges round-trips through the codec and its schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overlay import codec
from overlay.dist.distinfo import Original
from overlay.dist.provenance import FileRecord, PatchRecord, Provenance
from overlay.equivalence.controller.result_cache import CACHE_SCHEMA, CacheEntry, ResultCache
from overlay.equivalence.protocol import SCHEMA_VERSION, InitReply
from overlay.equivalence.verdict import AB, Quality
from overlay.upstream.behaviour import ReleaseRunJson
from overlay.upstream.facts import (
    Action,
    CaseMove,
    CaseOutcome,
    Cell,
    Check,
    Counts,
    Status,
    TestResult,
    TestRun,
    TestState,
    TextPlan,
)
from overlay.upstream.matrix import MatrixJson, PatchRowJson, WheelJson
from overlay.upstream.releases import WheelRecord
from overlay.upstream.retarget.conflicts import ResumeState
from overlay.upstream.retarget.pin_check import CheckKey, PinAttempt, SavedCheck
from overlay.upstream.retarget.result import REPORT_SCHEMA, RetargetJson
from overlay.upstream.verdicts import (
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    TestOutcome,
    TestVerdict,
    Verdict,
)

jsonschema = pytest.importorskip("jsonschema")  # the dev extra

CASE = CaseOutcome("conv_int16", Quality.WRONG, Quality.RIGHT, AB.FIXED, "ValueError: x", "")
TESTS = TestRun(
    command="pytest backends/arm/test/ops/test_conv.py",
    selection=("backends/arm/test/ops/test_conv.py::test_a",),
    stock=Counts(failed=1, tests=(TestResult("t.py::a", TestState.FAILED, "AssertionError"),)),
    patched=Counts(passed=1, tests=(TestResult("t.py::a", TestState.PASSED),)),
    seconds=12.345,
)
BEHAVIOUR = PatchBehaviour(
    patch="0001-fix.patch",
    release="1.5.1",
    bug_cases=(CASE,),
    other_cases=(),
    outcome=Outcome.FAILS_BEFORE_PASSES_AFTER,
    text="fails before, passes after",
    regressions=("conv_int8",),
    test=TESTS,
    test_verdict=TestVerdict(TestOutcome.FAILS_BEFORE_PASSES_AFTER, "1 test fails before"),
)
VERDICT = PatchVerdict(
    name="0001-fix.patch",
    action=Action.CONFLICT,
    text="conflict: resolve by hand",
    plan=TextPlan(
        "0001-fix.patch", Status.CONFLICT, "hunk 1/2", Action.CONFLICT, "3-way merge",
        conflicts=("a.py: hunk 1",), merge_note="1 conflict",
    ),
    behaviour=BEHAVIOUR,
    flags=("the text says drop, stock still fails",),
)  # fmt: skip
RUN = ReleaseRunJson(
    release="1.5.1",
    stock_python="/envs/stock/bin/python",
    patched_python=None,
    workers={"stock": InitReply("/envs/stock/bin/python", "1.5.1", "2.11.0", 1.5, (1, 3))},
    cases={"conv_int16": CASE},
    seconds=4.2,
)


def _round_trip(value: Any, title: str) -> dict[str, Any]:
    """Encode ``value``, check its schema accepts the text and decoding gives it back."""
    cls = type(value)
    text = codec.dumps(value, indent=2)
    data = json.loads(text)
    jsonschema.validate(data, codec.schema(cls, title=title))
    assert codec.loads(cls, text) == value
    return dict(data)


def test_a_retarget_report_round_trips_with_the_keys_it_always_had() -> None:
    report = RetargetJson(
        old_version="1.2.0",
        version="1.5.1",
        candidate="out/patches",
        ready=False,
        problems=("0001-fix.patch: conflict",),
        fast=True,
        wheels=(WheelRecord("executorch-1.5.1-cp311.whl", "ab" * 32, "3.11", "linux_x86_64"),),
        runtime={"torch": "2.11.0"},
        attempts=(PinAttempt({"torch": "2.11.0"}, True, "ok", 30.0, "torch_pin.py"),),
        patches=(VERDICT.as_json(),),
        runtime_form="unchanged",
        moves=(CaseMove("conv_int16", "right", "right", (), "no change", ""),),
        runs={"new": RUN},
        timings={"total": 61.2},
        worktree="out/worktree",
        resume="python -m overlay retarget 1.5.1 --resume",
        locks=("out/patches/locks/cp311-linux_x86_64.txt",),
    )
    data = _round_trip(report, "retarget.json")
    assert set(data) == {
        "schema", "old_version", "version", "candidate", "ready", "problems", "fast", "wheels",
        "runtime", "attempts", "patches", "runtime_form", "moves", "runs", "timings",
        "worktree", "resume", "locks",
    }  # fmt: skip
    assert data["schema"] == REPORT_SCHEMA == 1
    patch = data["patches"][0]
    assert set(patch) == {
        "name", "action", "text", "text_status", "text_detail", "source", "conflicts",
        "merge_note", "behaviour", "flags",
    }  # fmt: skip
    assert (patch["action"], patch["text_status"], patch["source"]) == (
        "conflict",
        "conflict",
        "3-way merge",
    )
    behaviour = patch["behaviour"]
    assert behaviour["test_verdict"] == "1 test fails before"
    assert behaviour["bug_cases"][0] == {
        "case": "conv_int16",
        "stock": "wrong",
        "patched": "right",
        "ab": "fixed",
        "stock_error": "ValueError: x",
        "patched_error": "",
    }
    assert behaviour["test"]["stock"] == "1 failed"
    assert behaviour["test"]["seconds"] == 12.3  # rounded
    assert behaviour["test"]["patched_tests"] == [
        {"node": "t.py::a", "state": "passed", "reason": ""}
    ]
    assert data["runs"]["new"]["workers"]["stock"]["runtime_fixes_applied"] == [1, 3]


def test_a_matrix_round_trips_with_cells_and_ports() -> None:
    with_port = Cell("1.5.1", Check(Status.CONFLICT, "hunk 1/1"), "1.5.1", Check(Status.APPLIES))
    matrix = MatrixJson(
        series="1b5ee9052a",
        versions=("1.2.0", "1.5.1"),
        wheels={"1.5.1": WheelJson("executorch-1.5.1-cp311.whl", "ab" * 32, True)},
        behaviour={"0001-fix.patch": {"1.5.1": BEHAVIOUR.as_json()}},
        patches=(
            PatchRowJson(
                name="0001-fix.patch",
                subject="Fix the conv",
                applied_upstream="",
                cells={
                    "1.2.0": Cell("1.2.0", Check(Status.APPLIES)).as_json(),
                    "1.5.1": with_port.as_json(),
                },
                verdict=Verdict("port", "port needed (port 1.5.1)", needs_upstream=True),
            ),
        ),
    )
    data = _round_trip(matrix, "matrix.json")
    cells = data["patches"][0]["cells"]
    assert cells["1.5.1"] == {
        "version": "1.5.1",
        "status": "conflict",
        "detail": "hunk 1/1",
        "port": {"version": "1.5.1", "status": "applies", "detail": ""},
    }
    assert cells["1.2.0"]["port"] is None
    assert data["patches"][0]["verdict"]["needs_upstream"] is True
    assert data["behaviour"]["0001-fix.patch"]["1.5.1"]["outcome"] == "fails before, passes after"


@pytest.mark.parametrize(
    ("value", "title"),
    [
        (ResumeState("1.5.1", "0002-b.patch", ("0003-c.patch",)), "overlay-retarget.json"),
        (SavedCheck(CheckKey("conv", ("q::a.out",), "k" * 64), ""), "lowering-check.json"),
        (RUN, "release run"),
        (
            Provenance(
                "executorch-arm-overlay 0.1", "1.2.0+armfix.1", "executorch.whl", "ab" * 32, "d",
                (PatchRecord("0001-a.patch", "A", "cd" * 32),),
                {"executorch/a.py": FileRecord("01" * 32, "02" * 32)}, ("torch==2.11.0",),
            ),
            "ARM_OVERLAY.json",
        ),
        (Original("tool", "digest", "executorch-1.2.0.dist-info", "Version: 1.2.0\n"), "original"),
    ],
)  # fmt: skip
def test_a_persisted_record_round_trips(value: object, title: str) -> None:
    _round_trip(value, title)


def test_a_cache_entry_round_trips_and_is_what_the_cache_writes(tmp_path: Path) -> None:
    reply = InitReply("/py", "1.2.0", "2.11.0", 1.0, ())
    store = ResultCache(tmp_path)
    store.put("ab" * 32, reply)
    (written,) = [p for p in tmp_path.rglob("*.json")]
    entry = codec.loads(CacheEntry, written.read_text(encoding="utf-8"))
    assert entry.header == (CACHE_SCHEMA, SCHEMA_VERSION, "InitReply", "ab" * 32)
    assert codec.decode(InitReply, entry.value) == reply
    _round_trip(entry, "cache entry")


def test_a_resume_state_of_the_old_key_order_still_reads() -> None:
    old = json.dumps({"version": "1.5.1", "conflict": "0002-b.patch", "remaining": []})
    assert codec.loads(ResumeState, old) == ResumeState("1.5.1", "0002-b.patch", ())
