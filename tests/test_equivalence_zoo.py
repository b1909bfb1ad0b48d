"""Torch-free: absolute numerics (SQNR, per-case limits, findings), executed VGF and
Ethos-U results in verdicts and reports, case groups (the per-case timeout is tested with
the fake worker in test_equivalence.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from overlay import fixes
from overlay.equivalence import corpus, ethosu, orchestrator, probes, protocol, report, verdict
from overlay.equivalence.orchestrator import Options, Report, WorkerInfo
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    EthosUResult,
    InitReply,
    ItemKind,
    ItemResult,
    ListReply,
    Numerics,
    OutputDigest,
    PathId,
    Payload,
    RunReply,
    RunStatus,
    Stage,
    TargetState,
    VelaEstimate,
    VgfResult,
)
from overlay.equivalence.verdict import AB, BC, Observation, Quality, decide
from overlay.errors import EquivalenceError

A, B, C = PathId.STOCK, PathId.RUNTIME, PathId.PATCHED
DEEP = CaseInfo("deep_int8", "TOSA-1.0+INT", "a8w8", tolerance=0.25, sqnr_db=20.0, group="zoo")


def numerics(error: float, sqnr: float, digest: str = "o", scale: float = 1.0) -> Numerics:
    return Numerics(
        outputs=(OutputDigest(digest, "torch.float32", (1, 10)),),
        max_abs_err_vs_float=(error,),
        max_abs_err_vs_fake_quant=(error,),
        reference_max_abs=(scale / 2,),
        reference_range=(scale,),
        sqnr_db=(sqnr,),
    )


def ok(n: Numerics, **change: Any) -> ItemResult:
    result = ItemResult(
        status=RunStatus.OK,
        graph=("delegate[0] TOSABackend: aten::convolution",),
        payloads=(Payload("TOSABackend", 10, "aa"),),
        numerics=n,
    )
    return dataclasses.replace(result, **change)


def judge(info: CaseInfo, a: ItemResult, b: ItemResult, c: ItemResult) -> verdict.Verdict:
    return decide(info.item, info, {A: a, B: b, C: c}, None)


# --- absolute numerics ----------------------------------------------------------------------

# MobileNetV2 as the issue measured it: 10.6% of the range off on every path, a right lowering.
DEEP_RIGHT = numerics(error=0.106, sqnr=27.0)
WRONG = numerics(error=0.585, sqnr=-2.6, digest="w")  # the grid warp: 59% of range, -2.6 dB


def test_a_case_wrong_on_every_path_is_a_finding_that_fails_the_run() -> None:
    info = CaseInfo("warp", "TOSA-1.0+INT+FP+int16", "a16w8")
    v = judge(info, ok(WRONG), ok(WRONG), ok(WRONG))
    assert (v.ab, v.bc) == (AB.SAME, BC.AGREE)  # before: silently "same as stock, agree"
    assert v.findings == (
        verdict.Finding("tosa", Quality.WRONG, "max error 58.50% of range, SQNR -2.6 dB"),
    )
    assert v.failures == [
        "case:warp: wrong on stock and patched (tosa): max error 58.50% of range, SQNR -2.6 dB"
    ]


def test_a_declared_broken_case_is_reported_not_failed_and_must_reproduce() -> None:
    info = CaseInfo("warp", "TOSA-1.0+INT+FP+int16", "a16w8", expect_broken="int16 tanh")
    v = judge(info, ok(WRONG), ok(WRONG), ok(WRONG))
    assert [f.quality for f in v.findings] == [Quality.WRONG] and v.failures == []
    exact = numerics(0.0, math.inf)
    healed = judge(info, ok(exact), ok(exact), ok(exact))
    assert healed.findings == ()
    assert healed.failures == [
        "case:warp: expected to be wrong on every path (int16 tanh), but a path is right"
    ]


def test_a_correct_deep_int8_net_is_right_under_its_sqnr_limits() -> None:
    v = judge(DEEP, ok(DEEP_RIGHT), ok(DEEP_RIGHT), ok(DEEP_RIGHT))
    assert v.quality == {A: Quality.RIGHT, B: Quality.RIGHT, C: Quality.RIGHT}
    assert (v.findings, v.failures) == ((), [])
    # the same numbers under the a8w8 default (5% of range) would be a false finding
    plain = dataclasses.replace(DEEP, tolerance=None, sqnr_db=None)
    assert verdict.quality(ok(DEEP_RIGHT), verdict.limits(plain)) is Quality.WRONG


def test_sqnr_below_the_floor_is_wrong_even_within_the_range_limit() -> None:
    noisy = numerics(error=0.2, sqnr=12.0)  # within 25% of range, but 12 dB < 20 dB
    assert verdict.quality(ok(noisy), verdict.limits(DEEP)) is Quality.WRONG
    assert verdict.quality(ok(numerics(0.2, 21.0)), verdict.limits(DEEP)) is Quality.RIGHT
    exact = numerics(error=0.0, sqnr=math.inf)
    assert verdict.quality(ok(exact), verdict.limits(DEEP)) is Quality.RIGHT


def test_limits_by_scheme_and_by_case() -> None:
    assert verdict.limits(CaseInfo("f", "TOSA-1.0+FP", None)) == verdict.Limits(0.01, None)
    assert verdict.limits(CaseInfo("q", "TOSA-1.0+INT", "a8w8")) == verdict.Limits(0.05, None)
    assert verdict.limits(DEEP) == verdict.Limits(0.25, 20.0)


def test_the_error_is_a_fraction_of_the_range_not_of_max_abs() -> None:
    # outputs in [0.5, 1.0]: range 0.5, max |x| 1.0; an error of 0.04 is 8% of the range
    n = dataclasses.replace(numerics(0.04, 30.0), reference_max_abs=(1.0,), reference_range=(0.5,))
    assert verdict.quality(ok(n), 0.05) is Quality.WRONG
    assert verdict.quality(ok(n), 0.1) is Quality.RIGHT


def test_a_branch_off_by_seven_codes_in_a_wide_output_is_wrong() -> None:
    # stock 1.5.1 on conv_relu_cat_mixed_qparams: the relu branch of the cat is 1.29 off,
    # the output's range is 46.9 (2.7%: right under the a8w8 default); the case sets 1%
    stock_151 = dataclasses.replace(
        numerics(1.2873646, 27.6), reference_max_abs=(24.46,), reference_range=(46.897,)
    )
    info = corpus.info("conv_relu_cat_mixed_qparams")
    assert verdict.quality(ok(stock_151), verdict.limits(info)) is Quality.WRONG
    assert verdict.quality(ok(numerics(0.0, math.inf)), verdict.limits(info)) is Quality.RIGHT
    plain = dataclasses.replace(info, tolerance=None)
    assert verdict.quality(ok(stock_151), verdict.limits(plain)) is Quality.RIGHT


# --- executed VGF and Ethos-U in the verdicts -------------------------------------------------


def vgf(n: Numerics | None = None, **change: Any) -> VgfResult:
    result = VgfResult(TargetState.COMPARED, payloads=(Payload("VgfBackend", 5, "v1"),), numerics=n)
    return dataclasses.replace(result, **change)


def test_vgf_numerics_are_judged_compared_and_found() -> None:
    info = CaseInfo("net", "TOSA-1.0+INT", "a8w8")
    good, bad = numerics(0.0, math.inf), numerics(0.5, 1.0, digest="bad")
    fixed = judge(info, ok(good, vgf=vgf(bad)), ok(good, vgf=vgf(good)), ok(good, vgf=vgf(good)))
    assert fixed.ab is AB.FIXED and fixed.ab_diffs == (Observation.VGF_NUMERICS,)
    assert fixed.targets[A] == {"tosa": Quality.RIGHT, "vgf": Quality.WRONG}
    split = judge(info, ok(good, vgf=vgf(good)), ok(good, vgf=vgf(good)), ok(good, vgf=vgf(bad)))
    assert (split.bc, split.bc_diffs) == (BC.UNDECLARED, (Observation.VGF_NUMERICS,))
    everywhere = judge(info, *(ok(good, vgf=vgf(bad)) for _ in range(3)))
    assert [(f.target, f.quality) for f in everywhere.findings] == [("vgf", Quality.WRONG)]
    crashed = vgf(numerics_error=ErrorInfo("VgfRunError", "no device", Stage.VGF_RUN))
    assert verdict.target_qualities(ok(good, vgf=crashed), 0.05)["vgf"] is Quality.WRONG


def ethos(
    target: str, digest: str = "e1", state: TargetState = TargetState.COMPARED
) -> EthosUResult:
    estimate = VelaEstimate(5712, 5136, 1.1e-5, 4096, 400, 0, 55296, 320)
    if state is TargetState.FAILED:
        return EthosUResult(target, state, error=ErrorInfo("RuntimeError", "vela", Stage.ETHOSU))
    return EthosUResult(
        target, state, payloads=(Payload("EthosUBackend", 2240, digest),), estimates=(estimate,)
    )


def test_ethos_u_bytes_are_compared_and_a_failure_is_a_regression() -> None:
    info = CaseInfo("net", "TOSA-1.0+INT", "a8w8", ethos_u=True)
    good = numerics(0.0, math.inf)
    same = (ethos("ethos-u55-128"), ethos("ethos-u85-256"))
    other = (ethos("ethos-u55-128", "e2"), ethos("ethos-u85-256"))
    v = judge(info, ok(good, ethos_u=same), ok(good, ethos_u=same), ok(good, ethos_u=other))
    assert v.bc_diffs == (Observation.ETHOSU_PAYLOAD,) and v.bc is BC.UNDECLARED
    broken = (ethos("ethos-u55-128", state=TargetState.FAILED), ethos("ethos-u85-256"))
    r = judge(info, ok(good, ethos_u=same), ok(good, ethos_u=broken), ok(good, ethos_u=broken))
    assert (r.ab, r.bc) == (AB.REGRESSION, BC.AGREE)
    assert r.targets[B]["ethos-u55-128"] is Quality.FAILED


def test_vela_summary_is_read_in_bytes(tmp_path: Path) -> None:
    csv = tmp_path / "out_summary_Ethos_U55_High_End_Embedded.csv"
    csv.write_text(
        "experiment,sram_memory_used,off_chip_flash_memory_used,dram_memory_used,cycles_total,"
        "cycles_npu,inference_time,nn_macs,total_npu_encoded_weights\n"
        "default,4.0,0.390625,0.0,5712,5136,1.1424e-05,55296,320\n",
        encoding="utf-8",
    )
    assert ethosu.read_summary(csv) == VelaEstimate(
        5712, 5136, 1.1424e-05, 4096, 400, 0, 55296, 320
    )


# --- reports ----------------------------------------------------------------------------------


def _report(verdicts: list[verdict.Verdict]) -> Report:
    init = InitReply("/py", "1.2.0", "2.11.0", 1.0, ())
    workers = {p: WorkerInfo(p, f"/py/{p.value}", None, init) for p in (A, B, C)}
    return Report(
        Options("/py/a", "/py/c"), workers, tuple(verdicts), fixes.DECLARED_DIVERGENCES, 3.0, {}
    )


def test_report_shows_findings_numerics_per_path_and_ethos_u_estimates() -> None:
    info = CaseInfo("warp", "TOSA-1.0+INT", "a8w8", ethos_u=True, expect_broken="known")
    result = ok(WRONG, vgf=vgf(WRONG, lower_seconds=2.0, run_seconds=3.0), lower_seconds=1.5)
    result = dataclasses.replace(result, ethos_u=(ethos("ethos-u55-128"),))
    rendered = _report([judge(info, result, result, result)])
    table = report.render_table(rendered)
    assert "case:warp: wrong on stock and patched (tosa): max error 58.50% of range" in table
    assert "(expected: known)" in " ".join(table.split())  # wrapped at 100 columns
    assert "not right on any path (tosa, vgf), as the case declares" in table  # its details
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= report.WIDTH
    name = lines.index("case:warp (TOSA-1.0+INT a8w8)")  # the case names its group of rows
    assert [line.split() for line in lines[name + 1 : name + 4]] == [
        [f"({p})", "1.5", "58.50%", "-2.6", "2.0", "3.0", "58.50%", "-2.6"] for p in "abc"
    ]
    ethos_at = lines.index("case:warp", name + 4)  # Ethos-U: the three paths agree, one row
    assert lines[ethos_at + 1].split() == [
        "ethos-u55-128", "abc", "2.2", "5712", "5136", "4.0", "0.4", "0"
    ]  # fmt: skip
    assert "executed on 1" in report.vgf_line(rendered)
    data = json.loads(report.render_json(rendered))
    item = data["items"][0]
    assert item["findings"][0]["target"] == "tosa"
    assert item["targets"]["c"] == {"tosa": "wrong", "vgf": "wrong", "ethos-u55-128": "right"}
    assert "## Ethos-U" in report.render_markdown(rendered)


def test_new_results_round_trip_the_protocol() -> None:
    result = ok(DEEP_RIGHT, vgf=vgf(DEEP_RIGHT), ethos_u=(ethos("ethos-u85-256"),))
    inf = ok(numerics(0.0, math.inf))
    for message in (RunReply(DEEP.item, result), RunReply(DEEP.item, inf)):
        assert protocol.decode_reply(protocol.encode(message)) == message
    assert protocol.SCHEMA_VERSION == 3


# --- the corpus: groups, selection and per-case timeouts --------------------------------------


def test_zoo_covers_the_networks_with_int8_and_float_variants() -> None:
    zoo = {c.name: c for c in corpus.ZOO_CASES}
    for network in ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "efficientnet_b0",
                    "deit_tiny", "lstm", "unet", "grid_warp"):  # fmt: skip
        assert {f"zoo_{network}_int8", f"zoo_{network}_fp"} <= set(zoo), network
        assert zoo[f"zoo_{network}_int8"].sqnr_db is not None
    assert all(c.group == "zoo" and c.timeout for c in zoo.values())
    assert [c.name for c in zoo.values() if c.fast] == ["zoo_grid_warp_int16_grid_intfp16"]
    assert len({c.name for c in corpus.ALL_CASES}) == len(corpus.ALL_CASES)
    int16 = [c for c in zoo.values() if c.name.startswith("zoo_grid_warp") and "int16" in c.spec]
    assert {c.spec for c in int16} == {"TOSA-1.0+INT+FP+int16", "TOSA-1.0+INT+int16"}
    claimed = {t.case for f in fixes.FIXES for t in f.triggers}
    assert {"zoo_grid_warp_int16_grid_intfp16", "zoo_grid_warp_int16_grid_int16"} <= claimed


def _select(**change: Any) -> list[str]:
    listing = ListReply(corpus.ALL_CASES, probes.PROBES)
    infos, _ = orchestrator.select(listing, Options("py", "py", **change))
    return [i.name for i in infos if i.kind is ItemKind.CASE]


def test_groups_select_cases() -> None:
    core = _select()
    assert core == [c.name for c in corpus.CASES]
    assert _select(group="zoo") == [c.name for c in corpus.ZOO_CASES]
    assert len(_select(group="all")) == len(corpus.ALL_CASES)
    fast = _select(fast=True)
    assert [n for n in fast if n.startswith("zoo_")] == ["zoo_grid_warp_int16_grid_intfp16"]
    assert _select(group="zoo", fast=True) == ["zoo_grid_warp_int16_grid_intfp16"]
    listing = ListReply(corpus.ALL_CASES, probes.PROBES)
    kinds = {
        group: {i.kind for i in orchestrator.select(listing, Options("py", "py", group=group))[0]}
        for group in (None, "zoo", "all")
    }
    assert kinds == {None: set(ItemKind), "zoo": {ItemKind.CASE}, "all": set(ItemKind)}
    with pytest.raises(EquivalenceError, match="unknown group"):  # before any worker starts
        orchestrator.resolve_inputs(Options("py", "py", group="mystery"), Path.cwd())


def test_report_says_what_a_fix_changes_in_executed_vgf() -> None:
    info = CaseInfo("grid", "TOSA-1.0+INT+FP+int16", None)
    exact = numerics(0.0, math.inf)
    stock = ok(exact, vgf=vgf(exact))
    patched = ok(exact, vgf=vgf(exact, payloads=(Payload("VgfBackend", 6, "v2" * 8),)))
    v = decide(info.item, info, {A: stock, B: patched, C: patched}, 1)
    assert (v.ab, v.ab_diffs) == (AB.CHANGED, (Observation.VGF_PAYLOAD,))
    table = report.render_table(_report([v]))
    assert "VGF payloads: stock 5 B v1, patched 6 B v2v2v2v2v2v2" in table
    assert "executed VGF outputs: bit-identical on stock and patched" in table


def test_an_expected_breakage_holds_only_for_the_releases_it_was_measured_on() -> None:
    info = CaseInfo(
        "warp",
        "TOSA-1.0+INT+FP+int16",
        "a16w8",
        expect_broken="int16 tanh",
        broken_releases="~=1.2.0",
    )
    results = {A: ok(WRONG), B: ok(WRONG), C: ok(WRONG)}
    pinned = decide(info.item, info, results, None, version="1.2.0+armfix.abc")
    assert pinned.findings and pinned.failures == []
    newer = decide(info.item, info, results, None, version="1.5.1")
    assert newer.failures == [
        "case:warp: wrong on stock and patched (tosa): max error 58.50% of range, SQNR -2.6 dB"
    ]
    exact = numerics(0.0, math.inf)
    healed = {A: ok(exact), B: ok(exact), C: ok(exact)}
    assert decide(info.item, info, healed, None, version="1.5.1").failures == []
    grid = corpus.info("grid_warp_a16w8_vgf")  # issue 9-10's VGF case meets the same tanh
    assert (grid.expect_broken, grid.broken_releases) == (corpus.INT16_TANH, "~=1.2.0")


def test_the_env_key_covers_the_vulkan_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from overlay.equivalence import envinfo

    icd = tmp_path / "lvp_icd.x86_64.json"
    monkeypatch.setattr(envinfo, "ICD_GLOBS", (str(tmp_path / "lvp_icd*.json"),))

    def described() -> envinfo.EnvInfo:
        return envinfo.collect("no_such_package", "backends", None)

    without = described()
    assert without.vulkan_drivers == ()  # no lavapipe: VGF is not executed
    icd.write_text('{"ICD": {"api_version": "1.3.255"}}', encoding="utf-8")
    first = described()
    assert [line.split()[0] for line in first.vulkan_drivers] == [icd.name]
    icd.write_text('{"ICD": {"api_version": "1.4.305"}}', encoding="utf-8")
    digests = {without.digest, first.digest, described().digest}
    assert len(digests) == 3  # installing or updating the driver changes the cache key


def test_layer_manifests_are_rewritten_whole_graph_layer_first(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from overlay.equivalence import vgf_run

    deploy = tmp_path / "deploy"
    manifests = deploy / "share" / "vulkan" / "explicit_layer.d"
    manifests.mkdir(parents=True)
    for stem in ("VkLayer_Graph", "VkLayer_Tensor"):
        layer = {"layer": {"name": stem, "library_path": f"../../../lib/lib{stem}.so"}}
        (manifests / f"{stem}.json").write_text(json.dumps(layer), encoding="utf-8")
    folder = tmp_path / "vgf-layers"
    graph = folder / "0-VkLayer_Graph" / "VkLayer_Graph.json"
    vgf_run._layer_folders(deploy, folder)
    torn = 0
    with ThreadPoolExecutor(4) as pool:  # the workers of a run share the folder
        rewrites = pool.map(lambda _: vgf_run._layer_folders(deploy, folder), range(60))
        for _ in range(600):  # a Vulkan loader reading while other workers rewrite
            try:
                json.loads(graph.read_text(encoding="utf-8"))
            except ValueError:
                torn += 1
        found = list(rewrites)
    assert torn == 0
    assert all(f == found[0] for f in found)
    assert [p.name for p in found[0]] == ["0-VkLayer_Graph", "1-VkLayer_Tensor"]
    for path, stem in zip(found[0], ("VkLayer_Graph", "VkLayer_Tensor"), strict=True):
        assert sorted(p.name for p in path.iterdir()) == [f"{stem}.json"]  # no temporary left
        data = json.loads((path / f"{stem}.json").read_text(encoding="utf-8"))
        assert data["layer"]["library_path"] == str(deploy.resolve() / "lib" / f"lib{stem}.so")


def test_the_worst_output_speaks_for_a_run_with_several() -> None:
    two = Numerics(
        outputs=(
            OutputDigest("o1", "torch.float32", (1, 4)),
            OutputDigest("o2", "torch.float32", (1, 4)),
        ),
        max_abs_err_vs_float=(0.5, 0.01),
        max_abs_err_vs_fake_quant=(0.5, 0.01),
        reference_max_abs=(1.0, 1.0),
        reference_range=(2.0, 1.0),
        sqnr_db=(12.0, 40.0),
    )
    assert verdict.worst(two) == (0.25, 12.0)
    assert verdict.numerics_text(two) == "max error 25.00% of range, SQNR 12.0 dB"
    assert report.numbers_cells(two, None, short=True) == ["25.00%", "12.0"]
    no_sqnr = dataclasses.replace(two, sqnr_db=())
    assert verdict.numerics_text(no_sqnr) == "max error 25.00% of range, SQNR inf dB"
    assert report.numbers_cells(no_sqnr, None, short=True) == ["25.00%", "-"]
    shapes = dataclasses.replace(two, max_abs_err_vs_fake_quant=(None, 0.01))
    assert verdict.worst(shapes) is None
    assert report.numbers_cells(shapes, None, short=True) == ["shape!", "-"]
