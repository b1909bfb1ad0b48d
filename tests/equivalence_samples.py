"""Typed results, verdicts and reports the equivalence tests share (torch-free)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from overlay import render
from overlay.equivalence.controller.options import Options
from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.controller.outcome import Report, WorkerInfo
from overlay.equivalence.protocol import (
    PATHS,
    ErrorInfo,
    EthosUResult,
    InitReply,
    ItemResult,
    Numerics,
    OutputDigest,
    Payload,
    RunStatus,
    Stage,
    TargetState,
    VelaEstimate,
    VgfResult,
)
from overlay.equivalence.render import layout
from overlay.equivalence.verdict import AB, Limits, Quality, Verdict, decide, numerics_quality
from overlay.fixes import divergences
from overlay.items import CaseInfo, ItemId, ItemKind, ProbeInfo
from overlay.text.applier import transform
from overlay.text.series import Series

A, B, C = PATHS
CASE = CaseInfo("x", "TOSA-1.0+INT", "a8w8")
ITEM = CASE.item
ROOT = Path(__file__).resolve().parent.parent
FAKE_WORKER = Path(__file__).resolve().parent / "fake_worker.py"
PATCHES = ROOT / "patches" / "1.2.0"


def numerics(error: float = 0.0, digest: str = "o1", scale: float = 2.0) -> Numerics:
    """Return one output's numbers judged by max |x| (no range, no SQNR: old results)."""
    return Numerics(
        outputs=(OutputDigest(digest, "torch.float32", (1, 4)),),
        max_abs_err_vs_float=(0.01,),
        max_abs_err_vs_fake_quant=(error,),
        reference_max_abs=(scale,),
    )


def measured(error: float, sqnr: float, digest: str = "o", scale: float = 1.0) -> Numerics:
    """Return one output's numbers with its range and SQNR."""
    return Numerics(
        outputs=(OutputDigest(digest, "torch.float32", (1, 10)),),
        max_abs_err_vs_float=(error,),
        max_abs_err_vs_fake_quant=(error,),
        reference_max_abs=(scale / 2,),
        reference_range=(scale,),
        sqnr_db=(sqnr,),
    )


# Two outputs: the first 25% of its range off at 12 dB, the second 1% off at 40 dB.
TWO_OUTPUTS = Numerics(
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


def ok(**change: Any) -> ItemResult:
    """Return a lowered, right result (VGF skipped) with ``change`` applied."""
    result = ItemResult(
        status=RunStatus.OK,
        graph=("cpu: q", "delegate[0] TOSABackend: aten::convolution"),
        payloads=(Payload("TOSABackend", 10, "aa"),),
        numerics=numerics(),
        vgf=VgfResult(TargetState.SKIPPED, reason="no converter"),
    )
    return dataclasses.replace(result, **change)


def lowered(n: Numerics, **change: Any) -> ItemResult:
    """Return a lowered result with the numbers ``n`` (no VGF) and ``change`` applied."""
    result = ItemResult(
        status=RunStatus.OK,
        graph=("delegate[0] TOSABackend: aten::convolution",),
        payloads=(Payload("TOSABackend", 10, "aa"),),
        numerics=n,
    )
    return dataclasses.replace(result, **change)


def fail(kind: str = "ValueError", message: str = "boom") -> ItemResult:
    """Return a lowering that raised."""
    return ItemResult(status=RunStatus.FAIL, error=ErrorInfo(kind, message, Stage.LOWER))


def judge(
    a: ItemResult,
    b: ItemResult,
    c: ItemResult,
    fix: int | None = None,
    info: CaseInfo | ProbeInfo = CASE,
) -> Verdict:
    """Decide one item from its three paths' results."""
    return decide(info.item, info, {A: a, B: b, C: c}, fix)


def quality(result: ItemResult, limit: Limits | float) -> Quality:
    """Judge one result on TOSA: failed, wrong numbers, or right."""
    if not result.ok:
        return Quality.FAILED
    return numerics_quality(result.numerics, result.numerics_error, limit)


def vgf(n: Numerics | None = None, **change: Any) -> VgfResult:
    """Return a compared VGF lowering (executed when ``n`` is given)."""
    result = VgfResult(TargetState.COMPARED, payloads=(Payload("VgfBackend", 5, "v1"),), numerics=n)
    return dataclasses.replace(result, **change)


def ethos(
    target: str, digest: str = "e1", state: TargetState = TargetState.COMPARED
) -> EthosUResult:
    """Return one Ethos-U target's lowering (a failure when ``state`` is FAILED)."""
    estimate = VelaEstimate(5712, 5136, 1.1e-5, 4096, 400, 0, 55296, 320)
    if state is TargetState.FAILED:
        return EthosUResult(target, state, error=ErrorInfo("RuntimeError", "vela", Stage.ETHOSU))
    return EthosUResult(
        target, state, payloads=(Payload("EthosUBackend", 2240, digest),), estimates=(estimate,)
    )


def shown(report: Report) -> str:
    """Return the report as the CLI prints it (its Markdown, plain off a terminal)."""
    return render.markdown(layout.blocks(report))


def report_of(verdicts: list[Verdict] | tuple[Verdict, ...], **change: Any) -> Report:
    """Return a report of ``verdicts`` as a run on stock executorch 1.2.0 would give."""
    init = InitReply("/py", "1.2.0", "2.11.0", 1.0, ())
    workers = {p: WorkerInfo(p, f"/py/{p.value}", None, init) for p in (A, B, C)}
    report = Report(
        Options("/py/a", "/py/c"), workers, tuple(verdicts), divergences(), 3.0, {"x": 2.0}
    )
    return dataclasses.replace(report, **change)


def patched_copy(package: Path, series: Series, folder: Path) -> Path:
    """Return ``folder`` holding a hardlinked copy of the executorch ``package`` with
    ``series`` applied: first on PYTHONPATH, the same bytes the diff-patched build installs."""
    target = folder / "executorch"
    shutil.copytree(package, target, copy_function=os.link)
    for repo_path in series.targets():
        path = target / repo_path
        data = transform(series.patches, repo_path, path.read_bytes() if path.exists() else None)
        path.unlink(missing_ok=True)  # break the hardlink before writing
        if data is not None:
            path.write_bytes(data)
    return folder


def fake_options(tmp_path: Path, **change: Any) -> Options:
    """Return options that run the fake worker on every path (no torch)."""
    options = Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        out_dir=tmp_path / "out",
        timeout=5.0,
        attribute=False,
        worker_command=(str(FAKE_WORKER),),
        patches_dir=PATCHES,
    )
    return dataclasses.replace(options, **change)


SCRIPTED = "ok,after,fixed2,regress1,changed3"


def scripted_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Options:
    """Options running the fake worker's scripted cases; (c) has executorch sources to edit.

    (b) runs the runtime patch ``tmp_path/patch.py:apply``; results go to a result cache in
    ``tmp_path/cache``; what the workers did is logged for :func:`runs`.
    """
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # workers write bytecode
    monkeypatch.setenv("FAKE_CASES", SCRIPTED)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "runs.log"))
    arm = tmp_path / "fake-patched" / "executorch" / "backends" / "arm"
    arm.mkdir(parents=True)
    (tmp_path / "fake-patched" / "executorch" / "__init__.py").write_text("", encoding="utf-8")
    (arm / "pass.py").write_text("VERSION = 1\n", encoding="utf-8")
    patch = tmp_path / "patch.py"
    patch.write_text("def apply() -> None:\n    pass\n", encoding="utf-8")
    return Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        runtime_patch=f"{patch}:apply",
        out_dir=tmp_path / "out",
        timeout=10.0,
        worker_command=(str(FAKE_WORKER),),
        patches_dir=PATCHES,
        pythonpath={C: str(tmp_path / "fake-patched")},
        cache_dir=tmp_path / "cache",
        probes=False,
    )


def runs(options: Options) -> Counter[str]:
    """Return what the fake workers did since the last call: 'init a', 'run c', ..."""
    log = options.out_dir.parent / "runs.log"
    if not log.exists():
        return Counter()
    lines = log.read_text(encoding="utf-8").splitlines()
    log.unlink()
    return Counter(" ".join(line.split()[:2]) for line in lines)


def decided(result: Report) -> dict[str, tuple[object, ...]]:
    """Return what was decided per item (no timings)."""
    return {
        str(v.item): (v.bc, v.bc_diffs, v.ab, v.ab_diffs, v.fix, tuple(v.targets.items()))
        for v in result.verdicts
    }


def long_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Report:
    """A fake run plus a case whose name is longer than the table's item column."""
    result = run(scripted_options(tmp_path, monkeypatch))
    name = "a_case_with_a_name_much_longer_than_the_item_column_allows_for"
    fixed = next(v for v in result.verdicts if v.ab is AB.FIXED)
    info = dataclasses.replace(fixed.info, name=name)
    extra = dataclasses.replace(fixed, item=ItemId(ItemKind.CASE, name), info=info)
    return dataclasses.replace(result, verdicts=(*result.verdicts, extra))
