"""A failing report's error: what failed, and a next step for who can act on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from equivalence_samples import judge, lowered, measured, ok, report_of

from overlay.equivalence.controller import outcome
from overlay.equivalence.protocol import ErrorInfo, ItemResult, RunStatus, Stage
from overlay.items import CaseInfo

WRONG = measured(error=0.585, sqnr=-2.6, digest="w")
MINE = CaseInfo("mine", "TOSA-1.0+INT", "a8w8", source="my_models.py", group="user")


def test_a_passing_report_is_no_error() -> None:
    assert outcome.failure_error(report_of([judge(ok(), ok(), ok())]), Path("r.md")) is None


def test_a_user_model_wrong_on_every_path_is_told_to_declare_it_in_its_own_file() -> None:
    wrong = lowered(WRONG)
    report = report_of([judge(wrong, wrong, wrong, info=MINE)])
    error = outcome.failure_error(report, Path("reports/equivalence.md"))
    assert error is not None and error.exit_code == 10
    assert error.found == (
        "case:mine: wrong on stock and patched (tosa): max error 58.50% of range, SQNR -2.6 dB"
    )
    assert error.hint == (
        "read reports/equivalence.md (or the .html beside it); mine is wrong on every path,"
        " stock included: if that is known, set 'expect_broken': '<why>' on its entry in CASES"
        " of my_models.py"
    )
    assert "overlay/" not in error.hint  # nothing to edit inside the overlay


def test_each_kind_of_problem_gets_its_own_next_step() -> None:
    healed = dataclasses.replace(MINE, expect_broken="tanh")
    right = lowered(measured(0.0, float("inf")))
    stuck = ItemResult(RunStatus.FAIL, error=ErrorInfo("WorkerTimeout", "late", Stage.HARNESS))
    wrong = lowered(WRONG)
    corpus_case = CaseInfo("zoo_x", "TOSA-1.0+INT", "a8w8")
    steps = outcome.next_steps(
        report_of(
            [
                judge(right, right, right, info=healed),
                judge(ok(), ok(), ok(graph=())),
                judge(ok(), ok(), stuck),
                judge(wrong, wrong, wrong, info=corpus_case),
            ]
        )
    )
    assert steps == [
        "mine is right now: drop 'expect_broken' from its entry in CASES of my_models.py",
        "(b) and (c) differ: the runtime patch and the diffs do not do the same; fix the one"
        " that is wrong (overlay maintainers declare an intended difference, with its reason,"
        " in the fix's module: overlay/fixes/fNNNN_*.py)",
        "an item did not finish (WorkerTimeout): raise --timeout, or run it alone with --case;"
        " a crashed worker's log is in <out>/equivalence-logs",
        "zoo_x (an overlay corpus case) changed against its expect_broken: report it to the"
        " overlay maintainers, who update the case",
    ]
