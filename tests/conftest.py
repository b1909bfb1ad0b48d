"""The suite's end: the line budgets per job (tests/budgets.py), printed, never a failure."""

from __future__ import annotations

import pytest
from budgets import table


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print each job's lines against its budget after the results."""
    terminalreporter.write_line("")
    for line in table():
        terminalreporter.write_line(line)
