"""The HTML report: self-contained, drawn graph differences and error bars, and it really
renders (a headless Chromium screenshot that is not blank; skipped without chromium)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from equivalence_samples import judge, ok, report_of, shown
from PIL import Image

from overlay import render
from overlay.equivalence.controller.options import Options
from overlay.equivalence.controller.outcome import Report, WorkerInfo
from overlay.equivalence.protocol import (
    ErrorInfo,
    EthosUResult,
    InitReply,
    ItemResult,
    Numerics,
    OutputDigest,
    PathId,
    Payload,
    RunStatus,
    Stage,
    TargetState,
    VelaEstimate,
    VgfResult,
)
from overlay.equivalence.render import html, layout
from overlay.equivalence.verdict import decide
from overlay.fixes import divergences
from overlay.items import CaseInfo

A, B, C = PathId.STOCK, PathId.RUNTIME, PathId.PATCHED
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Colours only the drawings use: CPU and delegated op boxes, the stock bars of the chart.
CPU_FILL, DELEGATE_FILL, STOCK_BAR = (0xFB, 0xE3, 0xC8), (0xD6, 0xE6, 0xFB), (0x8A, 0x8F, 0x98)


def _numerics(*errors: float) -> Numerics:
    outputs = tuple(OutputDigest(f"d{e}", "torch.float32", (1, 4)) for e in errors)
    return Numerics(outputs, errors, errors, tuple(2.0 for _ in errors))


def sample_report() -> Report:
    """A report with a fixed case (graph and numbers differ) and a regression."""
    stock = ItemResult(
        RunStatus.OK,
        graph=("cpu: aten.full.default", "delegate[0] TOSABackend: aten.add.Tensor"),
        numerics=_numerics(0.9, 0.001),
    )
    patched = ItemResult(
        RunStatus.OK,
        graph=("delegate[0] TOSABackend: aten.add.Tensor, aten.full.default",),
        numerics=_numerics(0.001, 0.001),
    )
    broken = ItemResult(
        RunStatus.FAIL, error=ErrorInfo("TosaValueError", "no float profile", Stage.LOWER)
    )
    fixed_case = CaseInfo("equal_constant_outputs_channels_last", "TOSA-1.0+FP", None)
    regressed = CaseInfo("conv_a16w8_int16", "TOSA-1.0+INT+int16", "a16w8")
    verdicts = (
        decide(fixed_case.item, fixed_case, {A: stock, B: patched, C: patched}, 4),
        decide(regressed.item, regressed, {A: patched, B: broken, C: broken}, 1),
    )
    init = InitReply("/py", "1.2.0", "2.11.0", 9.0, ())
    workers = {p: WorkerInfo(p, f"/py/{p.value}", None, init) for p in (A, B, C)}
    return Report(
        Options("/py/a", "/py/c"), workers, verdicts, divergences(), 3.0, {}, created="now"
    )


def page_of(report: Report) -> str:
    """Return the report's page."""
    return render.html(layout.blocks(report, html.drawings), layout.TITLE)


def test_the_page_is_self_contained_and_draws_each_difference() -> None:
    page = page_of(sample_report())
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|src=|https?://(?!www\.w3\.org/2000/svg)", page)
    assert page.count("<svg") == 4  # per case: its graph difference and its error chart
    assert "<p class='banner pass'>PASS: " in page
    assert '<a href="#item-case-conv-a16w8-int16">conv_a16w8_int16</a>' in page  # to its section
    assert '<h3 id="item-case-conv-a16w8-int16">' in page
    assert '<span class="badge bad">FAIL</span>' in page  # the regression's (b)
    assert "aten.full.default" in page and "lowering failed: TosaValueError" in page
    assert "tolerance 1%" in page  # the FP case's tolerance line


def test_the_written_page_says_the_verdict_in_its_title_and_wraps_long_lines(
    tmp_path: Path,
) -> None:
    report = sample_report()
    written = layout.write_reports(report, tmp_path, ("md", "html"))
    assert [p.name for p in written] == ["equivalence.md", "equivalence.html"]
    assert written[0].read_text(encoding="utf-8") == shown(report)
    page = written[1].read_text(encoding="utf-8")
    assert "<title>Equivalence report: PASS</title>" in page
    assert re.search(r"pre\{[^}]*white-space:pre-wrap", page)  # a long traceback line wraps
    undeclared = judge(ok(), ok(), ok(graph=()))  # (c)'s graph differs, no rule declares it
    (again,) = layout.write_reports(report_of([undeclared]), tmp_path, ("html",))
    assert "<title>Equivalence report: FAIL</title>" in again.read_text(encoding="utf-8")


def test_graph_alignment_folds_long_equal_runs() -> None:
    same = tuple(f"cpu: op{i}" for i in range(20))
    rows = html.align(html.graph_ops((*same, "cpu: gone")), html.graph_ops((*same, "cpu: new")))
    assert rows[html.CONTEXT] == 20 - 2 * html.CONTEXT  # folded equal rows
    assert rows[-1] == ("replace", ("CPU", "gone"), ("CPU", "new"))


def test_a_new_result_field_shows_up_without_touching_the_page_code() -> None:
    report = sample_report()
    fixed = report.verdicts[0]
    extended = dataclasses.make_dataclass(
        "ItemResultPlus",
        [("sqnr_db", float, dataclasses.field(default=0.0))],
        bases=(ItemResult,),
        frozen=True,
    )
    results = {
        p: extended(**{f.name: getattr(r, f.name) for f in dataclasses.fields(r)}, sqnr_db=s)
        for (p, r), s in zip(fixed.results.items(), (12.5, 40.0, 40.0), strict=True)
    }
    rows = html.field_rows(dataclasses.replace(fixed, results=results))
    assert any(">sqnr_db<" in row and ">12.5<" in row for row in rows)


def test_nested_vgf_and_ethos_u_fields_show_what_differs_without_timings() -> None:
    fixed = sample_report().verdicts[0]
    good = _numerics(0.001)
    vela = VelaEstimate(5712, 5136, 1.1e-5, 4096, 400, 0, 55296, 320)

    def with_targets(path: PathId, digest: str, sqnr: float, seconds: float) -> ItemResult:
        vgf = VgfResult(
            TargetState.COMPARED,
            payloads=(Payload("VgfBackend", 5, "v1"),),
            numerics=dataclasses.replace(good, sqnr_db=(sqnr,)),
            lower_seconds=seconds,
            run_seconds=seconds,
        )
        ethos = EthosUResult(
            "ethos-u55-128",
            TargetState.COMPARED,
            payloads=(Payload("EthosUBackend", 2240, digest),),
            estimates=(vela,),
            lower_seconds=seconds,
        )
        return dataclasses.replace(fixed.results[path], vgf=vgf, ethos_u=(ethos,))

    results = {
        A: with_targets(A, "e1", 12.5, 1.0),
        B: with_targets(B, "e2", 40.0, 2.0),
        C: with_targets(C, "e2", 40.0, 3.0),
    }
    rows = "".join(html.field_rows(dataclasses.replace(fixed, results=results)))
    assert ">vgf.numerics.sqnr_db<" in rows and ">[12.5]<" in rows
    assert ">ethos_u[0].payloads[0].sha256<" in rows and "e2" in rows
    assert "seconds" not in rows  # timings differ on every run
    assert ">vgf<" not in rows and ">ethos_u<" not in rows  # walked into, not dumped whole


def _pixels(png: Path) -> tuple[float, Counter[tuple[int, ...]]]:
    """Return the share of non-white pixels and the count of each colour."""
    raw = Image.open(png).convert("RGB").tobytes()
    colours = Counter(tuple(raw[i : i + 3]) for i in range(0, len(raw), 3))
    white = sum(n for rgb, n in colours.items() if min(rgb) >= 235)
    return 1 - white / sum(colours.values()), colours


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "equivalence.html"
    page.write_text(page_of(sample_report()), encoding="utf-8")
    shot = tmp_path / "equivalence.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    ink, colours = _pixels(shot)
    assert 0.02 < ink < 0.9, ink  # text, tables and charts: neither blank nor a solid fill
    drawn = [colours[CPU_FILL], colours[DELEGATE_FILL], colours[STOCK_BAR]]
    assert drawn[0] > 2000 and drawn[1] > 4000 and drawn[2] > 300, drawn  # the SVGs rendered
    keep = os.environ.get("OVERLAY_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


if (
    __name__ == "__main__"
):  # write the sample page for a look: python tests/test_equivalence_html.py
    sys.stdout.write(page_of(sample_report()))
