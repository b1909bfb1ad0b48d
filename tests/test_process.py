"""A child process: its failure is the caller's error, its last line decoded; the import check."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from overlay import _process
from overlay.envs.verify_install import Imported, import_check
from overlay.errors import UpstreamError


@dataclass(frozen=True)
class Answer:
    value: int


def refuse(found: str) -> UpstreamError:
    return UpstreamError("the child failed", found=found, hint="run it by hand")


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_last_line_is_decoded_and_the_lines_before_it_are_noise() -> None:
    answer = _process.json_line(
        Answer, python("print('warming up'); print('{\"value\": 3}')"), refuse
    )
    assert answer == Answer(3)


@pytest.mark.parametrize(
    ("command", "found"),
    [
        (python("import sys; sys.exit('no torch here')"), "exit code 1: no torch here"),
        (python('print(\'{"value": "3"}\')'), "not one JSON line of Answer: malformed data at"),
        (python("pass"), "not one JSON line of Answer: malformed data at Answer"),
        (["/nonexistent/python"], "cannot run /nonexistent/python: "),
        (
            python("import time\ntime.sleep(30)"),  # a multi-line script is named, not shown
            f"no answer within 1 s: {sys.executable} -c <script>",
        ),
    ],
    ids=["exits non-zero", "another shape", "prints nothing", "missing", "too slow"],
)
def test_a_failing_child_is_the_callers_error(command: list[str], found: str) -> None:
    with pytest.raises(UpstreamError) as info:
        _process.json_line(Answer, command, refuse, timeout=1)
    assert info.value.message == "the child failed" and info.value.hint == "run it by hand"
    assert info.value.found is not None and info.value.found.startswith(found)


def test_the_import_check_reports_each_module_file_or_error(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("", encoding="utf-8")
    (tmp_path / "broken.py").write_text("from good import NOPE\n", encoding="utf-8")
    env_python = tmp_path / "env-python"  # an env whose own path holds the modules
    env_python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{tmp_path}" exec "{sys.executable}" "$@"\n', encoding="utf-8"
    )
    env_python.chmod(0o755)
    found = import_check(env_python, ["good", "broken", "absent.inner"], refuse)
    assert found["good"] == Imported(file=str(tmp_path / "good.py"))
    assert found["broken"].error.startswith("ImportError: cannot import name 'NOPE'")
    assert found["absent.inner"] == Imported(
        error="ModuleNotFoundError: No module named 'absent'", missing="absent"
    )
