"""The suite's order (slow files first) and its end: the line budgets per job
(tests/budgets.py), printed, never a failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from budgets import table


def _file_weight(tests: list[pytest.Item]) -> tuple[int, bool, int]:
    """Return a file's sort key, slowest first: its torch tests (each a lowering or a torch
    import), whether it has integration tests (wheels, venvs, journal matrices), its size."""
    torch = sum(test.get_closest_marker("torch") is not None for test in tests)
    integration = any(test.get_closest_marker("integration") for test in tests)
    return -torch, not integration, -len(tests)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order whole files by :func:`_file_weight` (a file's own tests keep their order).

    `nox -s tests` deals files to its two workers in this order (``--dist loadfile
    --no-loadscope-reorder``): the long ones start first, the short ones even out the end.
    Under mutmut, by the files' times in its stats run, quickest first.
    """
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.partition("::")[0], []).append(item)
    took = _mutmut_durations()  # under mutmut, -x: the quick files first, a quick kill
    spent = lambda tests: sum(took.get(test.nodeid, 0) for test in tests)  # noqa: E731
    ordered = sorted(files.values(), key=spent if took else _file_weight)
    items[:] = [test for tests in ordered for test in tests]


def _mutmut_durations() -> dict[str, float]:
    """Return each test's time in mutmut's stats run, under mutmut only (else nothing)."""
    stats = Path("mutmut-stats.json")  # mutmut runs the tests in its mutants/ folder
    if "MUTANT_UNDER_TEST" not in os.environ or not stats.is_file():
        return {}
    try:
        return dict(json.loads(stats.read_text(encoding="utf-8"))["duration_by_test"])
    except (ValueError, KeyError, TypeError):  # another mutmut's format: the usual order
        return {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print each job's lines against its budget after the results."""
    terminalreporter.write_line("")
    for line in table():
        terminalreporter.write_line(line)
