"""Torch-free: verdict semantics, declared divergences, claims, reports, the protocol, the
worker loop and the orchestrator's timeout and crash handling (with a fake worker)."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from overlay import fixes
from overlay.equivalence import corpus, orchestrator, protocol, report, verdict, worker
from overlay.equivalence.orchestrator import Options, Report, WorkerInfo, run
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    ErrorReply,
    InitReply,
    InitRequest,
    ItemId,
    ItemKind,
    ItemResult,
    ListReply,
    ListRequest,
    Numerics,
    OutputDigest,
    PathId,
    Payload,
    ProbeInfo,
    ProtocolError,
    QuitRequest,
    RunReply,
    RunRequest,
    RunStatus,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.equivalence.verdict import AB, BC, Observation, Quality, decide
from overlay.errors import EquivalenceError

A, B, C = PathId.STOCK, PathId.RUNTIME, PathId.PATCHED
CASE = CaseInfo("x", "TOSA-1.0+INT", "a8w8")
ITEM = CASE.item
FAKE_WORKER = Path(__file__).resolve().parent / "fake_worker.py"


def numerics(error: float = 0.0, digest: str = "o1", scale: float = 2.0) -> Numerics:
    return Numerics(
        outputs=(OutputDigest(digest, "torch.float32", (1, 4)),),
        max_abs_err_vs_float=(0.01,),
        max_abs_err_vs_fake_quant=(error,),
        reference_max_abs=(scale,),
    )


def ok(**change: Any) -> ItemResult:
    result = ItemResult(
        status=RunStatus.OK,
        graph=("cpu: q", "delegate[0] TOSABackend: aten::convolution"),
        payloads=(Payload("TOSABackend", 10, "aa"),),
        numerics=numerics(),
        vgf=VgfResult(TargetState.SKIPPED, reason="no converter"),
    )
    return dataclasses.replace(result, **change)


def fail(kind: str = "ValueError", message: str = "boom") -> ItemResult:
    return ItemResult(status=RunStatus.FAIL, error=ErrorInfo(kind, message, Stage.LOWER))


def judge(a: ItemResult, b: ItemResult, c: ItemResult, fix: int | None = None) -> verdict.Verdict:
    return decide(ITEM, CASE, {A: a, B: b, C: c}, fix)


def test_identical_results_agree() -> None:
    v = judge(ok(), ok(), ok())
    assert (v.bc, v.ab, v.bc_diffs, v.ab_diffs, v.fix) == (BC.AGREE, AB.SAME, (), (), None)
    assert v.failures == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"graph": ("cpu: other",)}, Observation.GRAPH),
        ({"payloads": (Payload("TOSABackend", 10, "bb"),)}, Observation.TOSA_PAYLOAD),
        ({"numerics": numerics(digest="o2")}, Observation.NUMERICS),
        (
            {"vgf": VgfResult(TargetState.COMPARED, payloads=(Payload("VgfBackend", 1, "v"),))},
            Observation.VGF_PAYLOAD,
        ),
        ({"value": [1, 2]}, Observation.VALUE),
    ],
)
def test_any_observation_difference_is_undeclared(
    change: dict[str, Any], field: Observation
) -> None:
    v = judge(ok(), ok(), ok(**change))
    assert v.bc is BC.UNDECLARED and v.bc_diffs == (field,)
    assert v.failures == [f"case:x: undeclared divergence between (b) and (c): {field.value}"]


def test_skipped_vgf_is_not_compared() -> None:
    v = judge(ok(), ok(), ok(vgf=VgfResult(TargetState.SKIPPED, reason="other reason")))
    assert v.bc is BC.AGREE


def test_same_failure_agrees_but_a_different_message_does_not() -> None:
    same = judge(ok(), fail(), fail())
    assert (same.bc, same.ab) == (BC.AGREE, AB.REGRESSION)
    other = judge(ok(), fail(), fail(message="other"))
    assert (other.bc, other.bc_diffs) == (BC.UNDECLARED, (Observation.ERROR,))


WRONG = numerics(error=1.5, digest="w")  # 75% of the range: wrong under any tolerance here


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (fail(), ok(), AB.FIXED),  # stock fails, patched right
        (ok(numerics=WRONG), ok(), AB.FIXED),  # stock wrong numbers, patched right
        (ok(), fail(), AB.REGRESSION),
        (ok(), ok(numerics=WRONG), AB.REGRESSION),
        (ok(), ok(numerics=numerics(error=0.05, digest="m")), AB.REGRESSION),  # worse by 2.5%
        (ok(), ok(graph=("cpu: full",)), AB.CHANGED),  # both right, lowering differs
        (ok(), ok(numerics=numerics(error=0.001, digest="n")), AB.CHANGED),  # within noise
        (fail(), fail(message="another"), AB.STILL_BROKEN),
        (ok(numerics=WRONG), ok(numerics=numerics(error=1.0, digest="v")), AB.STILL_BROKEN),
        (fail(), ok(numerics=WRONG), AB.STILL_BROKEN),
        (ok(), ok(), AB.SAME),
    ],
)
def test_a_vs_b_verdict_semantics(a: ItemResult, b: ItemResult, expected: AB) -> None:
    assert judge(a, b, b).ab is expected


def test_numerics_failure_is_wrong_not_right() -> None:
    broken = ok(numerics=None, numerics_error=ErrorInfo("RuntimeError", "x", Stage.NUMERICS))
    assert verdict.quality(broken, 0.05) is Quality.WRONG
    assert judge(broken, ok(), ok()).ab is AB.FIXED


def test_tolerance_by_scheme_and_case() -> None:
    assert verdict.tolerance(CaseInfo("f", "TOSA-1.0+FP", None)) == 0.01
    assert verdict.tolerance(CaseInfo("q", "TOSA-1.0+INT", "a8w8")) == 0.05
    assert verdict.tolerance(CaseInfo("z", "TOSA-1.0+INT", "a8w8", tolerance=0.15)) == 0.15
    deep = ok(numerics=numerics(error=0.2))  # 10% of the range
    assert verdict.quality(deep, 0.05) is Quality.WRONG
    assert verdict.quality(deep, 0.15) is Quality.RIGHT


def test_probe_differences_are_changes_unless_one_raises() -> None:
    probe = ProbeInfo("p", "d")
    value = ItemResult(RunStatus.OK, value=True)
    other = ItemResult(RunStatus.OK, value=False)
    raised = ItemResult(RunStatus.FAIL, error=ErrorInfo("E", "m", Stage.PROBE))
    paths = {A: value, B: other, C: other}
    assert decide(probe.item, probe, paths, 1).ab is AB.CHANGED
    assert decide(probe.item, probe, {A: raised, B: value, C: value}, 1).ab is AB.FIXED
    assert decide(probe.item, probe, {A: value, B: raised, C: raised}, 1).ab is AB.REGRESSION


def test_declared_divergence_matches_only_its_exact_observation() -> None:
    probe = ItemId(ItemKind.PROBE, "p")
    declared = fixes.DeclaredDivergence("d1", probe, "RuntimeError", "stale check", "why")
    seed = ItemResult(RunStatus.FAIL, error=ErrorInfo("RuntimeError", "x stale check", Stage.PROBE))
    good = ItemResult(RunStatus.OK, value=[1])
    info = ProbeInfo("p", "d")
    hit = decide(probe, info, {A: good, B: seed, C: good}, None, [declared])
    assert (hit.bc, hit.declared, hit.failures) == (BC.DECLARED, "d1", [])
    for item, b in (
        (ItemId(ItemKind.PROBE, "other"), seed),
        (probe, ItemResult(RunStatus.FAIL, error=ErrorInfo("RuntimeError", "m", Stage.PROBE))),
        (
            probe,
            ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "stale check", Stage.PROBE)),
        ),
    ):
        miss = decide(item, info, {A: good, B: b, C: good}, None, [declared])
        assert miss.bc is BC.UNDECLARED, item


def test_the_seed_divergence_is_declared_with_a_reason() -> None:
    (only,) = fixes.DECLARED_DIVERGENCES
    assert fixes.declared_divergences("1.2.0") == (only,)
    assert fixes.declared_divergences("1.5.1") == ()
    assert only.id == "seed-stale-grouped-transpose-check"
    assert only.item == ItemId(ItemKind.PROBE, "RewriteConvPass.grouped_transposed_fp")
    assert "5123efe184" in only.reason


def _trigger_case(effect: fixes.Effect) -> tuple[fixes.Fix, fixes.Trigger]:
    return next((f, t) for f in fixes.FIXES for t in f.triggers if t.effect is effect)


@pytest.mark.parametrize("effect", list(fixes.Effect))
def test_claims_are_checked_against_the_registry(effect: fixes.Effect) -> None:
    entry, trigger = _trigger_case(effect)
    item = ItemId(ItemKind.CASE, trigger.case)
    good = AB(effect.value)
    assert verdict.check_claim(item, good, entry.number) is None
    wrong_fix = verdict.check_claim(item, good, entry.number % 4 + 1)
    assert wrong_fix is not None and f"claims '{effect.value} by patch {entry.number}'" in wrong_fix
    nothing = verdict.check_claim(item, AB.SAME, None)
    assert nothing is not None and nothing.endswith("found 'no difference'")
    other = AB.FIXED if good is not AB.FIXED else AB.CHANGED
    assert verdict.check_claim(item, other, entry.number) is not None
    assert verdict.check_claim(ItemId(ItemKind.CASE, "unclaimed"), AB.FIXED, 2) is None


def test_harness_failure_is_incomplete_and_fails_the_run() -> None:
    stuck = ItemResult(RunStatus.FAIL, error=ErrorInfo("WorkerTimeout", "late", Stage.HARNESS))
    v = judge(ok(), ok(), stuck)
    assert v.bc is BC.INCOMPLETE
    assert v.failures == ["case:x: did not finish on (c) WorkerTimeout: late"]


def _report(verdicts: list[verdict.Verdict]) -> Report:
    init = InitReply("/py", "1.2.0", "2.11.0", 1.0, ())
    workers = {p: WorkerInfo(p, f"/py/{p.value}", None, init) for p in (A, B, C)}
    options = Options("/py/a", "/py/c")
    return Report(options, workers, tuple(verdicts), fixes.DECLARED_DIVERGENCES, 3.0, {"x": 2.0})


def test_report_shows_regression_error_text_and_fails_on_undeclared() -> None:
    regression = judge(
        ok(), fail("TosaValueError", "no float"), fail("TosaValueError", "no float"), 1
    )
    bad = dataclasses.replace(judge(ok(), ok(), ok(graph=())), item=ItemId(ItemKind.CASE, "bad"))
    rendered = _report([regression, bad])
    table = report.render_table(rendered)
    assert "stock OK, patched FAIL: TosaValueError: no float" in table
    flowing = " ".join(table.split())  # details wrap at 100 columns
    assert "attributed to 0001-keep-terminal-int16-quantize.patch" in flowing
    assert "seed-stale-grouped-transpose-check" in table
    lines = table.splitlines()
    assert lines[:3] == [
        "FAIL: 1 problem(s) in 2 items",
        "  - case:bad: undeclared divergence between (b) and (c): graph",
        "vs stock (a): 0 fixed, 0 changed, 1 regression, 0 still broken, 1 same",
    ]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("bad ", "x "))}
    assert rows["bad"] == ["bad", "ok", "ok", "ok", "0%", "same", "UNDECLARED"]
    assert rows["x"] == ["x", "ok", "FAIL", "FAIL", "-", "regression", "#1", "agree"]
    assert list(rows) == ["bad", "x"]  # the problem row comes first
    assert rendered.failures == ["case:bad: undeclared divergence between (b) and (c): graph"]
    markdown = report.render_markdown(rendered)
    assert "## Declared divergences" in markdown and "| x |" in markdown
    data = json.loads(report.render_json(rendered))
    assert (data["schema"], data["verdict"]) == (report.REPORT_SCHEMA, "fail")
    assert data["failures"] == rendered.failures
    assert data["items"][0]["a_vs_b"] == {
        "verdict": "regression",
        "fix": 1,
        "differs_in": ["status", "graph", "tosa payload", "numerics"],
    }
    assert data["items"][0]["results"]["b"]["error"]["type"] == "TosaValueError"


def test_passing_report_says_pass() -> None:
    rendered = _report([judge(ok(), ok(), ok())])
    assert rendered.failures == []
    assert report.render_table(rendered).startswith("PASS: (b) stock + runtime patch and (c)")
    assert json.loads(report.render_json(rendered))["verdict"] == "pass"


def test_vgf_line_counts_compared_failed_and_skipped() -> None:
    def with_vgf(vgf: VgfResult) -> verdict.Verdict:
        return judge(ok(vgf=vgf), ok(vgf=vgf), ok(vgf=vgf))

    compared = VgfResult(TargetState.COMPARED, payloads=(Payload("VgfBackend", 3, "ab"),))
    failed = VgfResult(TargetState.FAILED, error=ErrorInfo("E", "m", Stage.VGF))
    rendered = _report([with_vgf(compared), with_vgf(compared), with_vgf(failed)])
    assert report.vgf_line(rendered) == (
        "VGF: payloads compared on 2 case(s), lowering failed on 1, executed on 0"
    )
    skipped = _report([with_vgf(VgfResult(TargetState.SKIPPED, reason="no model_converter"))])
    assert report.vgf_line(skipped).endswith("skipped: no model_converter")


def test_corpus_covers_specs_quantisations_and_every_fix() -> None:
    cases = {c.name: c for c in corpus.CASES}
    assert len(cases) == len(corpus.CASES) >= 15
    specs = {c.spec for c in cases.values()}
    assert {"TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+FP"} <= specs
    assert any("int16" in s for s in specs)
    assert {c.quantize for c in cases.values()} >= {None, "a8w8", "a16w8"}
    every = {c.name: c for c in corpus.ALL_CASES}
    for entry in fixes.FIXES:
        assert entry.triggers, entry.patch
        for trigger in entry.triggers:
            assert trigger.case in every, trigger.case  # every claim names a real case
            if every[trigger.case].group == "core":
                assert every[trigger.case].fast, trigger.case  # and runs in the CI subset
    effects = {t.effect for f in fixes.FIXES for t in f.triggers}
    assert fixes.Effect.REGRESSION in effects


# --- the protocol -------------------------------------------------------------------------

MESSAGES: list[protocol.Request | protocol.Reply] = [
    InitRequest(runtime_patch="x.py:apply", models=None),
    ListRequest(),
    RunRequest(ITEM, fixes=(1, 3), keep_bytes=True),
    QuitRequest(),
    InitReply("/py", "1.2.0", "2.11.0", 3.5, (1, 2)),
    ListReply((CASE,), (ProbeInfo("p", "d"),)),
    RunReply(ITEM, ok(value={"k": [1, None, "s"]})),
    RunReply(ITEM, ok(numerics=Numerics((), (None,), (float("inf"),), (0.0,)))),
    ErrorReply(ErrorInfo("ValueError", "bad", Stage.INIT, "tb")),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: protocol.Request | protocol.Reply) -> None:
    line = protocol.encode(message)
    assert "\n" not in line
    decoded = (
        protocol.decode_request(line)
        if isinstance(message, InitRequest | ListRequest | RunRequest | QuitRequest)
        else protocol.decode_reply(line)
    )
    assert decoded == message
    assert type(decoded) is type(message)


def _envelope(kind: str, body: object, schema: int = protocol.SCHEMA_VERSION) -> str:
    return json.dumps({"schema": schema, "type": kind, "body": body})


@pytest.mark.parametrize(
    ("line", "where"),
    [
        (_envelope("run", {"item": {"kind": "case", "name": "x"}, "extra": 1}), "body"),
        (_envelope("run", {"item": {"kind": "model", "name": "x"}}), "body.item.kind"),
        (_envelope("run", {"item": {"kind": "case"}}), "body.item.name"),
        (_envelope("run", {"item": {"kind": "case", "name": 3}}), "body.item.name"),
        (
            _envelope("run", {"item": {"kind": "case", "name": "x"}, "fixes": ["1"]}),
            "body.fixes[0]",
        ),
        (_envelope("teleport", {}), "type"),
        ("{not json", "line"),
        (json.dumps({"type": "list", "body": {}}), "envelope"),
    ],
)
def test_malformed_messages_are_protocol_errors(line: str, where: str) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_request(line)
    assert info.value.message == f"malformed protocol message at {where}"


def test_another_schema_is_refused() -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_request(_envelope("list", {}, schema=99))
    assert info.value.found == "schema 99"


def test_a_reply_is_not_a_request() -> None:
    with pytest.raises(ProtocolError):
        protocol.decode_request(protocol.encode(ErrorReply(ErrorInfo("E", "m", Stage.INIT))))


class ScriptedRunner:
    def __init__(self) -> None:
        self.seen: list[RunRequest] = []

    def init(self, request: InitRequest) -> InitReply:
        raise RuntimeError(f"cannot load {request.models}")

    def cases(self) -> ListReply:
        return ListReply((CASE,), ())

    def run(self, request: RunRequest) -> ItemResult:
        self.seen.append(request)
        return ok()


def test_worker_serve_answers_each_request_and_stops_at_quit() -> None:
    runner = ScriptedRunner()
    lines = [
        protocol.encode(ListRequest()),
        "",
        protocol.encode(RunRequest(ITEM, fixes=(2,))),
        protocol.encode(InitRequest(models="m.py")),
        "garbage",
        protocol.encode(QuitRequest()),
        protocol.encode(ListRequest()),  # after quit: never answered
    ]
    replies = io.StringIO()
    worker.serve(io.StringIO("\n".join(lines) + "\n"), replies, runner)
    answers = [protocol.decode_reply(line) for line in replies.getvalue().splitlines()]
    assert [type(a) for a in answers] == [ListReply, RunReply, ErrorReply, ErrorReply]
    assert runner.seen == [RunRequest(ITEM, fixes=(2,))]
    init_error, bad_line = answers[2], answers[3]
    assert isinstance(init_error, ErrorReply) and isinstance(bad_line, ErrorReply)
    assert (init_error.error.type, init_error.error.stage) == ("RuntimeError", Stage.INIT)
    assert init_error.error.message == "cannot load m.py"
    assert (bad_line.error.type, bad_line.error.stage) == ("ProtocolError", Stage.REQUEST)


# --- the orchestrator with a fake worker ---------------------------------------------------


def _fake_options(tmp_path: Path, **change: Any) -> Options:
    options = Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        out_dir=tmp_path / "out",
        timeout=5.0,
        attribute=False,
        worker_command=(str(FAKE_WORKER),),
        patches_dir=Path(__file__).resolve().parent.parent / "patches" / "1.2.0",
    )
    return dataclasses.replace(options, **change)


def test_a_timeout_and_a_crash_fail_one_item_each_and_the_run_goes_on(tmp_path: Path) -> None:
    result = run(_fake_options(tmp_path, probes=False))
    by_name = {v.item.name: v for v in result.verdicts}
    assert list(by_name) == ["ok", "slow", "crash", "after"]
    assert by_name["ok"].bc is BC.AGREE and by_name["after"].bc is BC.AGREE
    slow, crash = by_name["slow"], by_name["crash"]
    assert slow.bc is BC.INCOMPLETE and crash.bc is BC.INCOMPLETE
    for path in (A, B, C):
        slow_error, crash_error = slow.results[path].error, crash.results[path].error
        assert slow_error is not None and crash_error is not None
        assert (slow_error.type, slow_error.stage) == ("WorkerTimeout", Stage.HARNESS)
        assert (crash_error.type, crash_error.stage) == ("WorkerDied", Stage.HARNESS)
        assert "case:crash" in crash_error.message and "exit code 3" in crash_error.message
    assert [f.split(":")[1] for f in result.failures] == ["slow", "crash"]
    assert result.verdicts[-1].results[C].graph == ("cpu: add",)  # restarted worker answered


def test_workers_see_only_the_overlay_package_and_run_in_the_out_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CASES", "ok")
    options = _fake_options(tmp_path)
    result = run(options)
    assert [str(v.item) for v in result.verdicts] == ["case:ok", "probe:where"]
    where = result.verdicts[1]
    value = where.results[C].value
    assert isinstance(value, dict)
    library = (options.log_dir / "overlay").resolve()
    assert Path(str(value["overlay"])).resolve().is_relative_to(library)
    assert Path(str(value["cwd"])).resolve() == options.log_dir.resolve()
    assert (options.log_dir / "worker-c.log").is_file()
    assert not (library / "patches").exists()
    assert result.failures == []


def test_a_case_timeout_overrides_the_run_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CASES", "slow,patient")
    result = run(_fake_options(tmp_path, probes=False))
    by_name = {v.item.name: v for v in result.verdicts}
    assert by_name["patient"].bc is BC.AGREE  # 6 s of work under its own 30 s
    slow = by_name["slow"].results[C].error
    assert slow is not None and slow.type == "WorkerTimeout" and "within 5 s" in slow.message


def test_a_missing_python_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EquivalenceError) as info:
        run(_fake_options(tmp_path, stock_python=str(tmp_path / "no-python")))
    assert "cannot run the Python of path (a) stock" in str(info.value)


# --- user cases ----------------------------------------------------------------------------


def _entry(**change: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "module": lambda: None,
        "inputs": (1,),
        "spec": "TOSA-1.0+INT",
        "quantize": "a8w8",
    }
    entry.update(change)
    return entry


def test_user_case_validation() -> None:
    assert corpus.validate_case("ok", _entry()) == []
    assert corpus.validate_case("ok", _entry(per_channel=False, tolerance=0.1)) == []
    assert corpus.validate_case("fp", _entry(spec="TOSA-1.0+FP", quantize=None)) == []
    bad = {
        "'spec' must be": _entry(spec="TOSA-2.0+INT"),
        "'quantize' must be": _entry(quantize="a4w4"),
        "'inputs' must be": _entry(inputs=[1]),
        "'module' must be": _entry(module=3),
        "'per_channel' must be": _entry(per_channel="yes"),
        "'tolerance' must be": _entry(tolerance=-1),
        "unknown key(s) extra": _entry(extra=1),
        "a16w8 needs the +int16": _entry(quantize="a16w8"),
        "needs an INT spec": _entry(spec="TOSA-1.0+FP"),
    }
    for needle, entry in bad.items():
        problems = corpus.validate_case("c", entry)
        assert len(problems) == 1 and needle in problems[0], (needle, problems)
    missing = {k: v for k, v in _entry().items() if k != "spec"}
    assert corpus.validate_case("c", missing) == ["c: missing key(s) spec"]
    assert corpus.validate_cases({}, origin="f.py") == [
        "f.py: CASES must be a non-empty dict of case name -> dict"
    ]
    assert len(corpus.validate_cases({"bad name!": _entry()}, origin="f.py")) == 1
    assert corpus.validate_cases({"good": _entry()}, origin="f.py") == []


# --- user inputs, resolved and checked before any worker starts --------------------------


def test_relative_user_files_are_read_from_the_callers_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = tmp_path / "caller"
    (caller / "seed").mkdir(parents=True)
    (caller / "seed" / "patch.py").write_text("def go():\n    pass\n", encoding="utf-8")
    (caller / "models.py").write_text("CASES = {}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the caller's folder: nox runs from the noxfile's
    monkeypatch.setenv(orchestrator.CALLER_DIR_ENV, str(caller))
    options = orchestrator.options_from_env(
        "py", "py", runtime_patch="seed/patch.py:go", models="models.py"
    )
    assert options.runtime_patch == f"{(caller / 'seed' / 'patch.py').resolve()}:go"
    assert options.models == str((caller / "models.py").resolve())
    module_spec = orchestrator.options_from_env("py", "py", runtime_patch="overlay.runtime:apply")
    assert module_spec.runtime_patch == "overlay.runtime:apply"


@pytest.mark.parametrize(
    ("change", "option"),
    [
        ({"runtime_patch": "missing/patch.py:go"}, "--runtime-patch"),
        ({"models": "missing.py"}, "--models"),
        ({"runtime_patch": "not a module:go"}, "--runtime-patch"),
    ],
)
def test_a_bad_user_file_fails_before_any_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, str], option: str
) -> None:
    monkeypatch.setenv(orchestrator.CALLER_DIR_ENV, str(tmp_path))
    with pytest.raises(EquivalenceError) as info:
        orchestrator.options_from_env("py", "py", **change)
    assert info.value.message.startswith(option)
    assert info.value.hint is not None and option in info.value.hint


def test_trigger_claims_are_scoped_to_their_releases() -> None:
    from overlay.equivalence.protocol import ItemId, ItemKind
    from overlay.equivalence.verdict import AB, check_claim

    assert fixes.triggers_of("grid_warp_a16w8_vgf", "1.2.0") == []
    assert [f.number for f, _ in fixes.triggers_of("grid_warp_a16w8_vgf", "1.5.1")] == [1]
    assert [f.number for f, _ in fixes.triggers_of("grid_warp_a16w8_vgf", "1.5.1+armfix.a")] == [1]
    assert [f.number for f, _ in fixes.triggers_of("int16_quantize_output", "1.2.0")] == [1]
    assert fixes.triggers_of("int16_quantize_output", "1.5.1") == []
    item = ItemId(ItemKind.CASE, "grid_warp_a16w8_vgf")
    assert check_claim(item, AB.SAME, None, "1.2.0") is None
    problem = check_claim(item, AB.SAME, None, "1.5.1")
    assert problem is not None and "claims 'fixed by patch 1'" in problem


def test_a_failed_vgf_lowering_fails_only_a_vgf_case() -> None:
    from overlay.equivalence.protocol import (
        ErrorInfo,
        ItemResult,
        RunStatus,
        Stage,
        TargetState,
        VgfResult,
    )
    from overlay.equivalence.verdict import Quality, quality

    failed_vgf = VgfResult(TargetState.FAILED, error=ErrorInfo("RuntimeError", "no", Stage.VGF))
    result = ItemResult(RunStatus.OK, vgf=failed_vgf)
    assert quality(result, 0.05) is Quality.RIGHT
    assert quality(result, 0.05, vgf=True) is Quality.FAILED
    assert corpus.info("grid_warp_a16w8_vgf").targets_vgf


def test_a_wrapped_error_leads_with_its_root_cause() -> None:
    from overlay.equivalence.protocol import Stage
    from overlay.equivalence.worker import error_info

    try:
        try:
            raise RuntimeError("grid_sampler rewrite only supports per-tensor int8 grids")
        except RuntimeError as inner:
            raise Exception("An error occurred when running the pass") from inner
    except Exception as outer:
        info = error_info(outer, Stage.LOWER)
    assert info.type == "Exception"
    assert info.first_line == (
        "Exception: RuntimeError: grid_sampler rewrite only supports per-tensor int8 grids"
    )
    assert "(raised as: An error occurred when running the pass)" in info.message
    assert error_info(ValueError("plain"), Stage.LOWER).message == "plain"
