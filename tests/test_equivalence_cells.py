"""The cells every form shares: a result's status code, error and numbers, a verdict's words."""

from __future__ import annotations

import dataclasses

from equivalence_samples import CASE, TWO_OUTPUTS, fail, judge, numerics, ok

from overlay.equivalence.protocol import (
    ErrorInfo,
    ExactCheck,
    ItemResult,
    RunStatus,
    Stage,
)
from overlay.equivalence.render import cells


def test_the_worst_output_speaks_for_a_run_with_several() -> None:
    two = TWO_OUTPUTS
    assert cells.numbers_cells(two, None) == ["-", "25.00%", "12.0"]  # no exact reference
    no_sqnr = dataclasses.replace(two, sqnr_db=())
    assert cells.numbers_cells(no_sqnr, None) == ["-", "25.00%", "-"]
    shapes = dataclasses.replace(two, max_abs_err_vs_fake_quant=(None, 0.01))
    assert cells.numbers_cells(shapes, None) == ["-", "shape!", "-"]
    error = ErrorInfo("VgfRunError", "no device", Stage.VGF_RUN)
    assert cells.numbers_cells(two, error) == ["-", "FAIL: VgfRunError", "-"]
    stepped = dataclasses.replace(two, exact=ExactCheck(steps=(0, 3), differing=(0, 7)))
    assert cells.numbers_cells(stepped, None) == ["3", "25.00%", "12.0"]  # the worst output's
    unshaped = dataclasses.replace(two, exact=ExactCheck(steps=(None, 0), differing=(4, 0)))
    assert cells.numbers_cells(unshaped, None)[0] == "shape!"


def test_status_codes_and_the_error_cell() -> None:
    stuck = ItemResult(RunStatus.FAIL, error=ErrorInfo("WorkerTimeout", "late", Stage.HARNESS))
    died = ItemResult(RunStatus.FAIL, error=ErrorInfo("WorkerDied", "gone", Stage.HARNESS))
    broken = ok(numerics=None, numerics_error=ErrorInfo("RuntimeError", "x", Stage.NUMERICS))
    assert [cells.status_code(r) for r in (ok(), fail(), stuck, died, broken)] == [
        "ok", "FAIL", "TIME", "DIED", "num!"
    ]  # fmt: skip
    assert cells.error_cell(ok(numerics=numerics(error=0.2)), CASE) == "10%!"  # above 5%
    assert cells.error_cell(ok(numerics=numerics(error=0.02)), CASE) == "1%"
    assert cells.error_cell(ok(numerics=numerics(error=1e-5)), CASE) == "<0.01%"
    assert cells.error_cell(fail(), CASE) == "-"
    # with an exact reference the steps decide the mark, not the fake-quant error
    equal = dataclasses.replace(numerics(error=0.2), exact=ExactCheck(steps=(0,), differing=(0,)))
    assert cells.error_cell(ok(numerics=equal), CASE) == "10%"
    one = dataclasses.replace(numerics(error=0.002), exact=ExactCheck(steps=(1,), differing=(3,)))
    assert cells.error_cell(ok(numerics=one), CASE) == "0.1%!"


def test_a_verdict_in_words() -> None:
    regression = judge(ok(), fail(), fail(), 1)
    assert cells.ab_cell(regression) == "regression #1"
    assert cells.ab_cell(judge(fail(), ok(), ok(), None)) == "fixed #?"
