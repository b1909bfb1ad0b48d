"""The suite's order and end: files with slow tests first; the line budgets per job
(tests/budgets.py), printed, never a failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from budgets import table

# How long a file's tests take, by their marks: torch lowers models, integration installs
# wheels and venvs, the rest is unit tests (seconds).
_WEIGHT = {"torch": 2, "integration": 1}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files with torch, then integration, tests first, keeping each file's order.

    `nox -s tests` runs `-n 2 --dist loadfile`, which hands out whole files in this order:
    the long files start at once and the unit files fill the end, so the two workers finish
    together instead of one idling while the other runs a long file it got last.
    """
    weight: dict[Path, int] = {}
    for item in items:
        marks = [_WEIGHT.get(mark.name, 0) for mark in item.iter_markers()]
        weight[item.path] = max([weight.get(item.path, 0), *marks])
    items.sort(key=lambda item: -weight[item.path])  # stable: the order inside a file is kept


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print each job's lines against its budget after the results."""
    terminalreporter.write_line("")
    for line in table():
        terminalreporter.write_line(line)
