"""A user's CASES: each entry checked torch-free, at run time and read from the file as written."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from overlay.equivalence.corpus import user_cases
from overlay.equivalence.corpus.user_cases import UNKNOWN, StaticCases, read_statically


def _entry(**change: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "module": lambda: None,
        "inputs": (1,),
        "spec": "TOSA-1.0+INT",
        "quantize": "a8w8",
    }
    entry.update(change)
    return entry


def test_user_case_validation() -> None:
    assert user_cases.validate_case("ok", _entry()) == []
    assert user_cases.validate_case("ok", _entry(per_channel=False, tolerance=0.1)) == []
    assert user_cases.validate_case("fp", _entry(spec="TOSA-1.0+FP", quantize=None)) == []
    bad = {
        "'spec' must be": _entry(spec="TOSA-2.0+INT"),
        "'quantize' must be": _entry(quantize="a4w4"),
        "'inputs' must be": _entry(inputs=[1]),
        "'module' must be": _entry(module=3),
        "'per_channel' must be": _entry(per_channel="yes"),
        "'tolerance' must be": _entry(tolerance=-1),
        "'timeout' must be": _entry(timeout=0),
        "'ethos_u' must be": _entry(ethos_u=1),
        "'expect_broken' must be": _entry(expect_broken=True),
        "unknown key(s) extra": _entry(extra=1),
        "a16w8 needs the +int16": _entry(quantize="a16w8"),
        "needs an INT spec": _entry(spec="TOSA-1.0+FP"),
    }
    for needle, entry in bad.items():
        problems = user_cases.validate_case("c", entry)
        assert len(problems) == 1 and needle in problems[0], (needle, problems)
    missing = {k: v for k, v in _entry().items() if k != "spec"}
    assert user_cases.validate_case("c", missing) == ["c: missing key(s) spec"]
    assert user_cases.validate_cases({}, origin="f.py") == [
        "f.py: CASES must be a non-empty dict of case name -> dict"
    ]
    assert len(user_cases.validate_cases({"bad name!": _entry()}, origin="f.py")) == 1
    assert user_cases.validate_cases({"good": _entry()}, origin="f.py") == []
    taken = user_cases.validate_cases({"conv_relu_int8": _entry()}, origin="f.py")
    assert taken == ["conv_relu_int8: the name is already a corpus case: rename it"]


def test_unknown_values_are_left_to_the_worker() -> None:
    unknown = _entry(module=UNKNOWN, inputs=UNKNOWN, spec=UNKNOWN, quantize=UNKNOWN)
    assert user_cases.validate_case("c", unknown) == []
    assert user_cases.validate_case("c", UNKNOWN) == []


def test_a_valid_entry_becomes_its_case_description() -> None:
    entry = _entry(quantize="a16w8", spec="TOSA-1.0+INT+int16", timeout=60, expect_broken="why")
    info = user_cases.case_info("mine", entry, Path("/home/u/my_models.py"))
    assert (info.name, info.spec, info.quantize, info.source) == (
        "mine", "TOSA-1.0+INT+int16", "a16w8", "my_models.py"
    )  # fmt: skip
    assert (info.group, info.fast, info.timeout, info.expect_broken) == ("user", True, 60.0, "why")
    assert (info.per_channel, info.tolerance, info.sqnr_db, info.ethos_u) == (
        True,
        None,
        None,
        False,
    )


def _read(text: str) -> StaticCases:
    return read_statically(ast.parse(text), "m.py")


MODEL = "import torch\nclass Net(torch.nn.Module):\n    pass\n"
EMPTY = ("m.py: CASES must be a non-empty dict of case name -> dict",)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (
            "CASES = {}\n",
            StaticCases((), EMPTY),
        ),
        (
            "CASES: dict = {}\n",
            StaticCases((), EMPTY),
        ),
        (
            "CASES = []\n",
            StaticCases(None, EMPTY),
        ),
        (
            MODEL + "CASES = {'mine': {'module': Net, 'inputs': (torch.randn(1, 3),),"
            " 'spec': 'TOSA-1.0+INT', 'quantize': 'a8w8'}}\n",
            StaticCases(("mine",), ()),
        ),
        (
            MODEL + "CASES = {'mine': {'module': Net, 'inputs': (torch.randn(1, 3),),"
            " 'spec': 'TOSA-1.0+INT8'}}\n",
            StaticCases(
                ("mine",),
                (
                    "mine: missing key(s) quantize",
                    "mine: 'spec' must be a TOSA spec string like 'TOSA-1.0+INT', found"
                    " 'TOSA-1.0+INT8'",
                ),
            ),
        ),
        ("CASES = {'mine': ENTRY}\n", StaticCases(("mine",), ())),  # its entry is known later
        # built or filled at run time: nothing is known before the file runs
        ("CASES = {}\nCASES['x'] = {}\n", StaticCases(None, ())),
        ("CASES = {}\ndef fill(c):\n    pass\nfill(CASES)\n", StaticCases(None, ())),
        ("CASES = make()\n", StaticCases(None, ())),
        ("CASES = {**OTHER}\n", StaticCases(None, ())),
        ("if True:\n    CASES = {}\n", StaticCases(None, ())),
    ],
)
def test_cases_are_read_as_written(text: str, found: StaticCases) -> None:
    assert _read(text) == found
