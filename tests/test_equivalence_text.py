"""The text report: verdict first, 100 columns, every column explained, details and numbers."""

from __future__ import annotations

import dataclasses
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
    vgf,
)

from overlay import render
from overlay.equivalence.protocol import Payload
from overlay.equivalence.render import cells, layout
from overlay.equivalence.verdict import AB, Observation, decide
from overlay.items import CaseInfo, ItemId, ItemKind

WRONG_GRID = measured(error=0.585, sqnr=-2.6, digest="w")  # the grid warp: 59% of range


def test_report_shows_regression_error_text_and_fails_on_undeclared() -> None:
    regression = judge(
        ok(), fail("TosaValueError", "no float"), fail("TosaValueError", "no float"), 1
    )
    bad = dataclasses.replace(judge(ok(), ok(), ok(graph=())), item=ItemId(ItemKind.CASE, "bad"))
    rendered = report_of([regression, bad])
    table = layout.text(rendered)
    assert "stock OK, patched FAIL: TosaValueError: no float" in table
    flowing = " ".join(table.split())  # details wrap at 100 columns
    assert "attributed to fix 1" in flowing
    assert "stale-grouped-transpose-check" in table
    lines = table.splitlines()
    assert lines[:6] == [
        layout.TITLE,
        "",
        "FAIL: 1 problem(s) in 2 items",
        "",
        "  case:bad: undeclared divergence between (b) and (c): graph",
        "  vs stock (a): 0 fixed, 0 changed, 1 regression, 0 still broken, 0 unchecked, 1 same",
    ]
    header = lines.index(next(line for line in lines if line.startswith("item ")))
    rows = {line.split()[0]: line.split() for line in lines[header + 2 : header + 4]}
    assert rows["bad"] == ["bad", "ok", "ok", "ok", "0%", "same", "UNDECLARED"]
    assert rows["x"] == ["x", "ok", "FAIL", "FAIL", "-", "regression", "#1", "agree"]
    assert list(rows) == ["bad", "x"]  # the problem row comes first
    assert rendered.failures == ["case:bad: undeclared divergence between (b) and (c): graph"]


def test_passing_report_says_pass() -> None:
    rendered = report_of([judge(ok(), ok(), ok())])
    assert rendered.failures == []
    shown = layout.text(rendered)
    assert shown.splitlines()[2].startswith("PASS: (b) stock + runtime patch and")
    assert "Findings (a target wrong or failing on every path):\n\n  none\n" in shown


def test_text_report_fits_100_columns_verdict_first_every_column_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = layout.text(long_report(tmp_path, monkeypatch))
    lines = rendered.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[2].startswith("PASS: ")  # under the title
    header = next(i for i, line in enumerate(lines) if line.startswith("item "))
    assert lines[header - 1] == "" and lines[header - 2].startswith("  executorch-arm-overlay")
    assert lines[header].split() == " ".join(cells.HEADER).split()
    legend = [label for label, _ in cells.LEGEND]
    for column in cells.HEADER[1:]:
        assert any(column in label.split(", ") or column == label for label in legend) or (
            column in "abc"
        ), column
    row = next(line for line in lines if line.startswith("a_case_with"))
    assert row.split()[0].endswith("~")  # cut in the table, whole in the details
    assert "a_case_with_a_name_much_longer_than_the_item_column_allows_for (TOSA" in rendered


def test_report_shows_findings_numerics_per_path_and_ethos_u_estimates() -> None:
    info = CaseInfo("warp", "TOSA-1.0+INT", "a8w8", ethos_u=True, expect_broken="known")
    result = lowered(
        WRONG_GRID, vgf=vgf(WRONG_GRID, lower_seconds=2.0, run_seconds=3.0), lower_seconds=1.5
    )
    result = dataclasses.replace(result, ethos_u=(ethos("ethos-u55-128"),))
    rendered = report_of([judge(result, result, result, info=info)])
    table = layout.text(rendered)
    assert "case:warp: wrong on stock and patched (tosa): max error 58.50% of range" in table
    assert "(expected: known)" in " ".join(table.split())  # wrapped at 100 columns
    assert "not right on any path (tosa, vgf), as the case declares" in table  # its details
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= render.WIDTH
    name = lines.index("warp (TOSA-1.0+INT a8w8)")  # the case names its group of rows
    assert [line.split() for line in lines[name + 1 : name + 4]] == [
        [
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
    ethos_at = lines.index("warp (TOSA-1.0+INT a8w8)", name + 4)  # Ethos-U: the paths agree
    assert lines[ethos_at + 1].split() == [
        "ethos-u55-128", "abc", "compiled", "2.2", "5712", "5136", "4.0", "0.4", "0", "-"
    ]  # fmt: skip
    assert "right" not in lines[ethos_at + 1]  # compiled, never executed here
    assert lines[ethos_at + 2] == "    2240 B e1"  # the command streams, under their row


def test_report_says_what_a_fix_changes_in_executed_vgf() -> None:
    info = CaseInfo("grid", "TOSA-1.0+INT+FP+int16", None)
    exact = measured(0.0, math.inf)
    stock = lowered(exact, vgf=vgf(exact))
    patched = lowered(exact, vgf=vgf(exact, payloads=(Payload("VgfBackend", 6, "v2" * 8),)))
    v = decide(info.item, info, {A: stock, B: patched, C: patched}, 1)
    assert (v.ab, v.ab_diffs) == (AB.CHANGED, (Observation.VGF_PAYLOAD,))
    table = layout.text(report_of([v]))
    assert "VGF payloads: stock 5 B v1, patched 6 B v2v2v2v2v2v2" in table
    assert "executed VGF outputs: bit-identical on stock and patched" in table


def test_a_user_cases_unexpected_finding_says_where_to_declare_it() -> None:
    info = CaseInfo("mine", "TOSA-1.0+INT", "a8w8", source="my_models.py", group="user")
    wrong = lowered(WRONG_GRID)
    table = " ".join(layout.text(report_of([judge(wrong, wrong, wrong, info=info)])).split())
    assert (
        "(NOT EXPECTED: if it is known, set 'expect_broken': '<why>' on its entry in CASES of"
        " my_models.py)" in table
    )
    corpus_case = dataclasses.replace(info, source="corpus", group="core")
    plain = " ".join(layout.text(report_of([judge(wrong, wrong, wrong, info=corpus_case)])).split())
    assert "(NOT EXPECTED)" in plain and "my_models.py" not in plain


def test_a_wide_table_wraps_its_last_column_before_it_cuts_a_name() -> None:
    names = [f"probe:is_foldable.int{bits}_output_quantize" for bits in (8, 16)]
    why = "declared (fix 3: stale-grouped-transpose-check)"
    rows = ((names[0], "ok", "FAIL", "regression #?", why), (names[1], "ok", "ok", "same", "agree"))
    table = render.Table(("item", "a", "b", "a vs b", "b vs c"), rows, fit=True)
    lines = render.text([table]).splitlines()
    assert max(len(line) for line in lines) <= render.WIDTH
    assert [line.split()[0] for line in lines[2:]] == [
        names[0],
        "stale-grouped-transpose-check)",
        names[1],
    ]
    column = lines[0].index("b vs c")
    assert lines[2][column:] == "declared (fix 3:" and lines[3][:column].strip() == ""
    assert lines[3][column:] == "stale-grouped-transpose-check)"
    assert lines[4].split()[-1] == "agree"
