"""The report the command prints and writes (Markdown): verdict first, every column explained,
details, findings, the numbers per path and the Ethos-U estimates."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import pytest
from equivalence_samples import (
    A,
    B,
    C,
    ethos,
    fail,
    judge,
    long_report,
    lowered,
    measured,
    ok,
    report_of,
    shown,
    vgf,
)

from overlay import render
from overlay.equivalence.protocol import ErrorInfo, Payload, Stage, TargetState, VgfResult
from overlay.equivalence.render import cells, layout
from overlay.equivalence.verdict import AB, Observation, Verdict, decide
from overlay.items import CaseInfo, ItemId, ItemKind

EXACT = measured(0.0, math.inf)
WRONG_GRID = measured(error=0.585, sqnr=-2.6, digest="w")  # the grid warp: 59% of range


def table(page: str, first: str) -> list[list[str]]:
    """Return the header and rows of the table whose first column is ``first``, as cells."""
    lines = page.splitlines()
    at = lines.index(next(line for line in lines if line.startswith(f"| {first} |")))
    header, _, *rows = itertools.takewhile(lambda line: line.startswith("|"), lines[at:])
    return [[cell.strip() for cell in line[1:-1].split("|")] for line in (header, *rows)]


def vgf_fixed(fix: int) -> Verdict:
    """Stock's VGF lowering raises; the runtime patch and the diffs lower and run it right."""
    broken = VgfResult(TargetState.FAILED, error=ErrorInfo("VgfConverterError", "no", Stage.VGF))
    good = lowered(EXACT, vgf=vgf(EXACT))
    return judge(lowered(EXACT, vgf=broken), good, good, fix)


def test_report_shows_regression_error_text_and_fails_on_undeclared() -> None:
    regression = judge(
        ok(), fail("TosaValueError", "no float"), fail("TosaValueError", "no float"), 1
    )
    bad = dataclasses.replace(judge(ok(), ok(), ok(graph=())), item=ItemId(ItemKind.CASE, "bad"))
    rendered = report_of([regression, bad])
    page = shown(rendered)
    assert "stock OK, patched FAIL: TosaValueError: no float" in page
    assert "attributed to fix 1" in page
    assert "## Declared divergences" in page and "stale-grouped-transpose-check" in page
    assert page.splitlines()[:6] == [
        f"# {layout.TITLE}",
        "",
        "**FAIL: 1 problem(s) in 2 items**",
        "",
        "- case:bad: undeclared divergence between (b) and (c): graph",
        "- vs stock (a): 0 fixed, 0 changed, 1 regression, 0 still broken, 0 unchecked, 1 same",
    ]
    rows = {row[0]: row for row in table(page, "item")[1:]}
    assert rows["bad"] == ["bad", "ok", "ok", "ok", "0%", "same", "**UNDECLARED**"]
    assert rows["x"] == ["x", "ok", "**FAIL**", "**FAIL**", "-", "regression #1", "agree"]
    assert list(rows) == ["bad", "x"]  # the problem row comes first
    assert (
        "### bad (TOSA-1.0+INT a8w8)\n\n- (b) vs (c): UNDECLARED: graph; differ in: graph" in page
    )
    assert rendered.failures == ["case:bad: undeclared divergence between (b) and (c): graph"]


def test_passing_report_says_pass() -> None:
    rendered = report_of([judge(ok(), ok(), ok())])
    assert rendered.failures == []
    page = shown(rendered)
    assert page.splitlines()[2].startswith("PASS: (b) stock + runtime patch and")
    assert "## Findings (a target wrong or failing on every path)\n\n- none\n" in page


def test_the_report_says_its_verdict_first_and_explains_every_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = shown(long_report(tmp_path, monkeypatch))
    lines = page.splitlines()
    assert lines[2].startswith("PASS: ")  # under the title
    header = next(i for i, line in enumerate(lines) if line.startswith("| item |"))
    assert lines[header - 1] == "" and lines[header - 2].startswith("- executorch-arm-overlay")
    assert table(page, "item")[0] == list(cells.HEADER)
    legend = [label for label, _ in cells.LEGEND]
    for column in cells.HEADER[1:]:
        assert any(column in label.split(", ") or column == label for label in legend) or (
            column in "abc"
        ), column
    name = "a_case_with_a_name_much_longer_than_the_item_column_allows_for"
    assert name in [row[0] for row in table(page, "item")]  # whole in the table
    assert f"### {name} (TOSA" in page  # and its section


def test_report_shows_findings_numerics_per_path_and_ethos_u_estimates() -> None:
    info = CaseInfo("warp", "TOSA-1.0+INT", "a8w8", ethos_u=True, expect_broken="known")
    result = lowered(
        WRONG_GRID, vgf=vgf(WRONG_GRID, lower_seconds=2.0, run_seconds=3.0), lower_seconds=1.5
    )
    result = dataclasses.replace(result, ethos_u=(ethos("ethos-u55-128"),))
    page = shown(report_of([judge(result, result, result, info=info)]))
    assert "case:warp: wrong on stock and patched (tosa): max error 58.50% of range" in page
    assert "(expected: known)" in page
    assert "not right on any path (tosa, vgf), as the case declares" in page  # its details
    name = "warp (TOSA-1.0+INT a8w8)"  # the case names each of its rows
    assert table(page, "case")[1:] == [
        [
            name,
            f"({p})",
            "1.5",
            "wrong",
            "-",
            "58.50%",
            "-2.6",
            "2.0",
            "3.0",
            "wrong",
            "-",
            "58.50%",
            "-2.6",
        ]
        for p in "abc"
    ]
    (streams,) = table(page.split("\n## Ethos-U (Vela", 1)[1], "case")[1:]
    assert streams == [
        name, "ethos-u55-128", "abc", "compiled", "2.2", "5712", "5136", "4.0", "0.4", "0", "-",
        "2240 B e1",  # the paths agree: one row; its command streams in the last column
    ]  # fmt: skip
    assert "right" not in streams  # compiled, never executed here


def test_report_says_what_a_fix_changes_in_executed_vgf() -> None:
    info = CaseInfo("grid", "TOSA-1.0+INT+FP+int16", None)
    stock = lowered(EXACT, vgf=vgf(EXACT))
    patched = lowered(EXACT, vgf=vgf(EXACT, payloads=(Payload("VgfBackend", 6, "v2" * 8),)))
    v = decide(info.item, info, {A: stock, B: patched, C: patched}, 1)
    assert (v.ab, v.ab_diffs) == (AB.CHANGED, (Observation.VGF_PAYLOAD,))
    page = shown(report_of([v]))
    assert "VGF payloads: stock 5 B v1, patched 6 B v2v2v2v2v2v2" in page
    assert "executed VGF outputs: bit-identical on stock and patched" in page


def test_a_user_cases_unexpected_finding_says_where_to_declare_it() -> None:
    info = CaseInfo("mine", "TOSA-1.0+INT", "a8w8", source="my_models.py", group="user")
    wrong = lowered(WRONG_GRID)
    page = shown(report_of([judge(wrong, wrong, wrong, info=info)]))
    assert (
        "(NOT EXPECTED: if it is known, set 'expect_broken': '<why>' on its entry in CASES of"
        " my_models.py)" in page
    )
    corpus_case = dataclasses.replace(info, source="corpus", group="core")
    plain = shown(report_of([judge(wrong, wrong, wrong, info=corpus_case)]))
    assert "(NOT EXPECTED)" in plain and "my_models.py" not in plain


def test_a_vgf_lowering_error_says_its_type_in_every_form() -> None:
    blocks = layout.blocks(report_of([vgf_fixed(7)]))
    failed = ["FAIL: VgfConverterError", "-", "failed", "-", "-", "-"]  # VGF s, run s, VGF,
    # steps, err, SQNR
    markdown = render.markdown(blocks)
    tosa = "| x (TOSA-1.0+INT a8w8) | (a) | - | right | - | 0.00% | inf | "
    assert tosa + " | ".join(failed) in markdown
    assert "<td>FAIL: VgfConverterError</td><td>-</td><td>failed</td>" in render.html(blocks, "t")


def test_a_differing_items_section_says_its_verdict_in_words_once() -> None:
    def named(verdict: Verdict, name: str) -> Verdict:
        return dataclasses.replace(verdict, item=ItemId(ItemKind.CASE, name))

    failed = fail("TosaValueError", "no float")
    regression = named(judge(ok(), failed, failed), "worse")
    changed = named(judge(ok(), ok(graph=("cpu: q",)), ok(graph=("cpu: q",)), 2), "other")
    report = report_of([named(vgf_fixed(7), "vgf"), regression, changed])
    assert [v.ab for v in report.verdicts] == [AB.FIXED, AB.REGRESSION, AB.CHANGED]
    sections = shown(report).split("\n### ")[1:]
    said = {
        s.split()[0]: [line for line in s.splitlines() if "(a) vs (b)" in line] for s in sections
    }
    assert said == {
        "worse": [
            "- (a) vs (b): regression, attributed to no single fix; differ in: status, graph,"
            " tosa payload, numerics"
        ],
        "vgf": ["- (a) vs (b): fixed, attributed to fix 7; differ in: vgf payload, vgf numerics"],
        "other": ["- (a) vs (b): changed, attributed to fix 2; differ in: graph"],
    }
    words = {"worse": "regression", "vgf": "fixed", "other": "changed"}
    assert all(s.count(words[s.split()[0]]) == 1 for s in sections)  # said once
