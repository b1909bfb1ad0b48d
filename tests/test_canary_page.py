"""The status page: its derived schema holds, the HTML is self-contained and renders."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from test_equivalence_html import CHROMIUM, CHROMIUM_FLAGS, _pixels

from overlay import codec, render
from overlay.upstream.canary import canary_report
from overlay.upstream.canary.canary_report import (
    NEWLY_CONFLICTING,
    CanaryReport,
    Forwarded,
    ForwardState,
    Gate,
    GateCheck,
    HostState,
    LineResult,
    MainBehaviour,
    Replay,
)
from overlay.upstream.results import (
    Action,
    Applied,
    Conflict,
    Counts,
    OnBase,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    RangeDiff,
    Status,
    TestResult,
    TestRun,
    TestState,
)

BAD_FILL, OK_FILL = (0xF8, 0xD0, 0xD0), (0xD6, 0xF0, 0xDC)  # conflict and applies badges


def sample() -> CanaryReport:
    """A report with a conflicting, an applying and a merged-upstream patch."""
    region = Conflict("backends/arm/b.py", 4, "<<<<<<< main\nx\n=======\ny\n>>>>>>> p\n")
    conflict = OnBase(
        "0002-b.patch",
        Applied(Status.CONFLICT, conflicts=(region,)),
        "1.5.1",
        Applied(Status.APPLIES),
    )
    applies = OnBase("0003-c.patch", Applied(Status.OFFSET, offsets=(7,)))
    target = Replay(
        "main",
        "f" * 40,
        (conflict, applies),
        range_diff=RangeDiff("git range-diff a..b c..d", "1: x < -: -"),
    )
    merged = Forwarded(
        "0002-b.patch", "https://github.com/pytorch/executorch/pull/12345", "pr", 12345,
        ForwardState.MERGED_MODIFIED, "c" * 40, "Arm backend: Fix b (#12345)", "PR number",
        "diff --git a/b.py b/b.py\n-<script>alert(1)</script>\n", "",
    )  # fmt: skip
    rows = tuple(
        PatchVerdict(
            p.patch, "s", (p,), Action.KEEP, "keep", "still open", flags=flags, since="2026-01-01"
        )
        for p, flags in ((conflict, (NEWLY_CONFLICTING,)), (applies, ()))
    )
    line = LineResult(
        "1.2.0",
        "a" * 40,
        (target,),
        (merged,),
        (),
        Gate(True, (GateCheck("export twice", True),)),
        rows,
        base_note="no tag v1.2.0 upstream: the base is the 1.2.0 wheel's 2 files on bbbbbbbbbbbb",
    )
    return CanaryReport(
        1, "2026-12-03T00:00:00+00:00", "overlay 0.1", "/up", "f" * 40, "2026-12-02", (line,),
        MainBehaviour(HostState.NOT_HOSTED, "executorch 1.5.1", "ImportError: no name 'x'"), 4.2,
        ("1.2.0/0002-b.patch: newly conflicting on main (conflicts)",),
    )  # fmt: skip


def test_status_json_validates_against_the_derived_schema_and_decodes_back() -> None:
    report = sample()
    schema = json.loads(canary_report.json_schema())
    assert schema["title"] == canary_report.SCHEMA_TITLE and "OnBase" in schema["$defs"]
    data = json.loads(render.json_text(report))
    jsonschema.validate(data, schema)
    assert codec.loads(CanaryReport, render.json_text(report)) == report
    data["lines"][0]["rows"][0]["bases"][0]["own"]["status"] = "sort of applies"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_markdown_has_one_row_per_line_and_patch_and_the_failures() -> None:
    text = render.markdown(canary_report.blocks(sample()))
    assert text.startswith("# Canary: FAILED")
    assert (
        "\nno tag v1.2.0 upstream: the base is the 1.2.0 wheel's 2 files on bbbbbbbbbbbb\n" in text
    )
    assert "| 1.2.0 | 0002-b.patch | **conflict (NEW)** | still open |" in text
    assert "| 1.2.0 | 0003-c.patch | **offset** | still open |" in text
    assert "**FAILED: 1.2.0/0002-b.patch: newly conflicting on main (conflicts)**" in text
    assert "## Behaviour on main: not hosted (executorch 1.5.1)" in text
    assert "- 0002-b.patch: **conflict**\n  - port 1.5.1: **applies**\n" in text
    assert "backends/arm/b.py" in text and "git range-diff a..b c..d" in text


def test_the_page_prints_every_cell_whole() -> None:
    step = "rebase the patch onto main, run its tests on the hosted build, then re-run the canary"
    line = sample().lines[0]
    rows = tuple(replace(row, text=step) for row in line.rows)
    report = replace(sample(), lines=(replace(line, rows=rows),))
    shown = render.markdown(canary_report.blocks(report)).splitlines()
    assert [r.split(" | ")[:2] for r in shown if r.startswith("| 1.2")] == [
        ["| 1.2.0", "0002-b.patch"],
        ["| 1.2.0", "0003-c.patch"],
    ]
    assert sum(r.endswith(f" | {step} |") for r in shown) == 2


def test_each_patchs_tests_are_listed_under_that_patch() -> None:
    passed = Counts((TestResult("t.py::a", TestState.PASSED),))
    run = TestRun("pytest t.py::a", ("t.py::a",), passed, passed, 1.0)
    found = [
        PatchBehaviour("0001-a.patch", "main", (), (), Outcome.NO_BUG_TRIGGER, "x", test=run),
        PatchBehaviour("0002-b.patch", "main", (), (), Outcome.NO_BUG_TRIGGER, "y"),
    ]
    report = replace(sample(), behaviour=MainBehaviour(HostState.HOSTED, patches=tuple(found)))
    text = render.markdown(canary_report.blocks(report))
    assert (
        "- 0001-a.patch: no bug trigger: x\n"
        "  - tests: pytest t.py::a: stock 1 passed -> patched 1 passed\n"
        "- 0002-b.patch: no bug trigger: y\n"
    ) in text


def test_the_html_page_is_self_contained_and_escapes_what_it_shows() -> None:
    html = render.html(canary_report.blocks(sample()), "Canary")
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script|<link|src=|https?://(?!github\.com/pytorch)", html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<tr>") == 3 and 'class="badge bad"' in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_html_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    written = canary_report.write_page(sample(), tmp_path)
    shot = tmp_path / "status.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            written[1].as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    ink, colours = _pixels(shot)
    assert 0.02 < ink < 0.9  # text and tables: neither blank nor a solid fill
    assert colours[BAD_FILL] > 50 and colours[OK_FILL] > 50  # the badges drew
