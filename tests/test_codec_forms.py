"""Every file the overlay persists or exchanges round-trips through the codec and its schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overlay import codec
from overlay.distribution.distinfo import Original
from overlay.distribution.provenance import FileRecord, PatchRecord, Provenance
from overlay.equivalence.controller.result_cache import CACHE_SCHEMA, CacheEntry, ResultCache
from overlay.equivalence.protocol import SCHEMA_VERSION, InitReply
from overlay.equivalence.verdict import AB, Quality
from overlay.upstream.pin_check import SavedCheck
from overlay.upstream.releases import Release, build_matrix
from overlay.upstream.results import (
    REPORT_SCHEMA,
    Action,
    Applied,
    CaseOutcome,
    Conflict,
    Counts,
    Matrix,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    PinAttempt,
    ReleaseRun,
    Status,
    TestOutcome,
    TestResult,
    TestRun,
    TestState,
    TestVerdict,
)
from overlay.upstream.retarget.retarget_verdict import CaseMove, Retarget, WheelRecord

jsonschema = pytest.importorskip("jsonschema")  # the dev extra

CASE = CaseOutcome(
    "conv_int16",
    Quality.WRONG,
    Quality.RIGHT,
    AB.FIXED,
    "ValueError: x",
    "",
    stock_targets={"tosa": "max error 0.4 (limit 0.05)"},
    patched_targets={"tosa": "max error 0.01"},
)
TESTS = TestRun(
    command="pytest backends/arm/test/ops/test_conv.py",
    selection=("backends/arm/test/ops/test_conv.py::test_a",),
    stock=Counts(
        (TestResult("t.py::a", TestState.FAILED, "ValueError: x", ("TypeError: cause",)),)
    ),
    patched=Counts((TestResult("t.py::a", TestState.PASSED),)),
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
    test_verdict=TestVerdict(TestOutcome.FAILS_BEFORE_PASSES_AFTER, "x"),
)
REGION = Conflict("a.py", 3, "<<<<<<< main\n")
VERDICT = PatchVerdict(
    patch="0001-fix.patch",
    subject="Arm backend: Fix",
    bases=(
        OnBase("0001-fix.patch", Applied(Status.APPLIES), base="1.2.0", behaviour=BEHAVIOUR),
        OnBase(
            "0001-fix.patch",
            Applied(Status.CONFLICT, "hunk 1/2", conflicts=(REGION,)),
            "1.5.1",
            Applied(Status.OFFSET, "+2 lines", (2,)),
            base="executorch 1.5.1",
            behaviour=BEHAVIOUR,
        ),
    ),
    action=Action.CONFLICT,
    text="conflict: resolve by hand",
    source="3-way merge",
    flags=("the text says drop, stock still fails",),
)
RUN = ReleaseRun(
    release="1.5.1",
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


def test_a_retarget_report_round_trips_directly_from_its_dataclasses() -> None:
    report = Retarget(
        old_version="1.2.0",
        version="1.5.1",
        candidate="out/patches",
        fast=True,
        problems=("0001-fix.patch: conflict",),
        wheels=(WheelRecord("executorch-1.5.1-cp311.whl", "ab" * 32, "3.11", "linux_x86_64"),),
        runtime={"torch": "2.11.0"},
        attempts=(PinAttempt({"torch": "2.11.0"}, True, "ok", 30.0, "torch_pin.py"),),
        patches=(VERDICT,),
        runtime_form="unchanged",
        moves=(CaseMove("conv_int16", "right", "right", (), "no change", ""),),
        runs={"new": RUN},
        timings={"total": 61.2},
        worktree="out/worktree",
        resume="python -m overlay retarget 1.5.1 --resume",
        locks=("out/patches/locks/cp311-linux_x86_64.txt",),
    )
    data = _round_trip(report, "retarget.json")
    assert data["schema"] == REPORT_SCHEMA == 3
    patch = data["patches"][0]
    assert set(patch) == {
        "patch", "subject", "bases", "action", "text", "upstream", "source", "flags", "since",
        "review",
    }  # fmt: skip
    pinned, on = patch["bases"]
    assert (pinned["base"], pinned["own"]["status"]) == ("1.2.0", "applies")
    assert pinned["behaviour"] == on["behaviour"]
    assert on["own"]["conflicts"] == [{"path": "a.py", "line": 3, "text": "<<<<<<< main\n"}]
    assert on["port"] == {
        "status": "offset", "detail": "+2 lines", "offsets": [2], "conflicts": [], "evidence": [],
    }  # fmt: skip
    behaviour = on["behaviour"]
    assert behaviour["test_verdict"] == {"outcome": "fails before, passes after", "text": "x"}
    assert behaviour["bug_cases"][0] == {
        "case": "conv_int16",
        "stock": "wrong",
        "patched": "right",
        "ab": "fixed",
        "stock_error": "ValueError: x",
        "patched_error": "",
        "stock_targets": {"tosa": "max error 0.4 (limit 0.05)"},
        "patched_targets": {"tosa": "max error 0.01"},
    }
    assert behaviour["test"]["patched"]["tests"] == [
        {"node": "t.py::a", "state": "passed", "reason": "", "causes": []}
    ]
    assert behaviour["test"]["stock"]["tests"][0]["causes"] == ["TypeError: cause"]
    assert data["runs"]["new"]["workers"]["stock"]["runtime_fixes_applied"] == [1, 3]


def test_a_matrix_round_trips_with_each_patch_on_each_release_and_its_port() -> None:
    from overlay.lines import pins
    from overlay.text.series import Series, parse_patch

    from scaffold import make_diff

    text = "a\nb\nc\n"
    patch = parse_patch(
        "0001-fix.patch",
        "Description: Fix b\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
        + make_diff("backends/arm/x.py", text, "a\nB\nc\n"),
    )
    series = Series(
        Path("."), (patch,), pins.load(Path(__file__).parent.parent / "patches" / "1.2.0")
    )
    release = Release("1.5.1", Path("executorch-1.5.1.whl"), "ab" * 32, True,
                      {"backends/arm/x.py": text.encode()})  # fmt: skip
    matrix = build_matrix(series, {"1.5.1": {1: patch}}, [release], "upstream.toml")
    assert isinstance(matrix, Matrix)
    data = _round_trip(matrix, "matrix.json")
    (cell,) = data["rows"][0]["bases"]
    assert (cell["base"], cell["own"]["status"], cell["port_version"], cell["port"]["status"]) == (
        "1.5.1",
        "applies",
        "1.5.1",
        "applies",
    )
    assert data["rows"][0]["action"] == "send upstream"
    assert data["wheels"]["1.5.1"] == {"file": "executorch-1.5.1.whl", "sha256": "ab" * 32,
                                       "pinned": True}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "title"),
    [
        (SavedCheck("conv", ("q::a.out",), "k" * 64, ""), "lowering-check.json"),
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
