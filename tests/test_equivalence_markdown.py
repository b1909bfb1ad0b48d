"""The Markdown report: the same parts as the text, as tables."""

from __future__ import annotations

import dataclasses

from equivalence_samples import ethos, fail, judge, lowered, measured, ok, report_of, vgf

from overlay import render
from overlay.equivalence.render import layout
from overlay.items import CaseInfo, ItemId, ItemKind


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
