"""The Markdown report: the same parts as the text, as tables."""

from __future__ import annotations

import dataclasses
import math

from equivalence_samples import ethos, fail, judge, lowered, measured, ok, report_of, vgf

from overlay import render
from overlay.equivalence.protocol import ErrorInfo, Stage, TargetState, VgfResult
from overlay.equivalence.render import layout
from overlay.equivalence.verdict import AB, Verdict
from overlay.items import CaseInfo, ItemId, ItemKind

EXACT = measured(0.0, math.inf)


def vgf_fixed(fix: int) -> Verdict:
    """Stock's VGF lowering raises; the runtime patch and the diffs lower and run it right."""
    broken = VgfResult(TargetState.FAILED, error=ErrorInfo("VgfConverterError", "no", Stage.VGF))
    good = lowered(EXACT, vgf=vgf(EXACT))
    return judge(lowered(EXACT, vgf=broken), good, good, fix)


def test_markdown_has_the_table_the_declared_divergences_and_ethos_u() -> None:
    regression = judge(
        ok(), fail("TosaValueError", "no float"), fail("TosaValueError", "no float"), 1
    )
    bad = dataclasses.replace(judge(ok(), ok(), ok(graph=())), item=ItemId(ItemKind.CASE, "bad"))
    page = render.markdown(layout.blocks(report_of([regression, bad])))
    assert page.startswith(f"# {layout.TITLE}\n\n**FAIL: 1 problem(s) in 2 items**\n\n- case:bad: ")
    assert "## Declared divergences" in page and "| x | ok | **FAIL** | **FAIL** |" in page
    assert "| bad | ok | ok | ok | 0% | same | **UNDECLARED** |" in page
    assert (
        "### bad (TOSA-1.0+INT a8w8)\n\n- (b) vs (c): UNDECLARED: graph; differ in: graph" in page
    )
    wrong = measured(error=0.585, sqnr=-2.6, digest="w")
    info = CaseInfo("warp", "TOSA-1.0+INT", "a8w8", ethos_u=True, expect_broken="known")
    result = dataclasses.replace(lowered(wrong, vgf=vgf(wrong)), ethos_u=(ethos("ethos-u55-128"),))
    targets = render.markdown(layout.blocks(report_of([judge(result, result, result, info=info)])))
    assert "## Ethos-U" in targets
    row = "| warp (TOSA-1.0+INT a8w8) | ethos-u55-128 | abc | compiled | 2.2 | 5712 | 5136 | 4.0 |"
    row += " 0.4 | 0 | - |"
    assert f"{row} 2240 B e1 |" in targets


def test_a_vgf_lowering_error_says_its_type_in_every_form() -> None:
    shown = layout.blocks(report_of([vgf_fixed(7)]))
    failed = ["FAIL: VgfConverterError", "-", "failed", "-", "-", "-"]  # VGF s, run s, VGF,
    # steps, err, SQNR
    (row,) = [line for line in render.text(shown).splitlines() if line.startswith("(a) ")]
    assert row.split("  ")[0] == "(a)" and [c.strip() for c in row.split("  ") if c][-6:] == failed
    markdown = render.markdown(shown)
    tosa = "| x (TOSA-1.0+INT a8w8) | (a) | - | right | - | 0.00% | inf | "
    assert tosa + " | ".join(failed) in markdown
    assert "<td>FAIL: VgfConverterError</td><td>-</td><td>failed</td>" in render.html(shown, "t")


def test_a_differing_items_section_says_its_verdict_in_words_once() -> None:
    def named(verdict: Verdict, name: str) -> Verdict:
        return dataclasses.replace(verdict, item=ItemId(ItemKind.CASE, name))

    failed = fail("TosaValueError", "no float")
    regression = named(judge(ok(), failed, failed), "worse")
    changed = named(judge(ok(), ok(graph=("cpu: q",)), ok(graph=("cpu: q",)), 2), "other")
    report = report_of([named(vgf_fixed(7), "vgf"), regression, changed])
    assert [v.ab for v in report.verdicts] == [AB.FIXED, AB.REGRESSION, AB.CHANGED]
    sections = render.markdown(layout.blocks(report)).split("\n### ")[1:]
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
