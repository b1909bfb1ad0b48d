"""Judge a mutmut run of the core: every survivor reviewed, the score at its recorded floor.

Run by ``nox -s mutants`` after ``mutmut run``, from the checkout root (where ``mutants/``
is). It reads mutmut's results, names each undetected mutant by a stable description
(module, function, original line, mutated line: mutmut's numeric ids shift whenever a
function changes) and compares them with ``tests/mutation_survivors.toml``, the reviewed
survivors with the reason each cannot be killed. It prints the score per module (the table
of docs/mutation.md) and exits 1 when a survivor is not reviewed, a mutant was not checked
or ended oddly, or the score is under the floor. A reviewed entry no run reports (stale)
is a warning: delete it when it stays stale.

Example: a new ``if x > 0`` line whose ``>=`` mutant no test kills.
Becomes: exit 1 and a ``[[equivalent]]`` block to paste into the TOML with its reason,
or better, a test that kills it.
"""

from __future__ import annotations

import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from mutmut.configuration import config
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files
from mutmut.utils.format_utils import orig_function_and_class_names_from_key

REVIEWED = Path(__file__).resolve().parent / "mutation_survivors.toml"
DETECTED = {"killed", "timeout", "segfault"}  # segfault: mutmut's name for a killed test run
UNDETECTED = {"survived", "no tests"}  # no tests: no selected test runs the mutated function


@dataclass(frozen=True)
class Mutant:
    """One mutant of a run: where it is, what it changes, how the tests took it."""

    name: str  # mutmut's id, e.g. overlay.codec.x__decode__mutmut_12 (not stable)
    module: str  # overlay/codec.py
    status: str  # mutmut's status: killed, survived, no tests, timeout, ...

    @property
    def function(self) -> str:
        """Return the mutated function, ``Class.method`` for a method."""
        function, cls = orig_function_and_class_names_from_key(self.name)
        name = function.rpartition(".")[2]
        return f"{cls}.{name}" if cls else name


@dataclass(frozen=True)
class Change:
    """The stable description of a mutant: what the diff removes and adds, stripped."""

    module: str
    function: str
    line: str
    mutant: str


def run_results() -> list[Mutant]:
    """Return every mutant of the mutated files with its status."""
    mutants = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, exit_code in data.exit_code_by_key.items():
            mutants.append(Mutant(name, str(path), status_by_exit_code[exit_code]))
    return mutants


def change_of(mutant: Mutant) -> Change:
    """Return what ``mutant`` changes, read from mutmut's diff of the function."""
    diff = get_diff_for_mutant(mutant.name, path=mutant.module).splitlines()[2:]
    removed = [line[1:].strip() for line in diff if line.startswith("-")]
    added = [line[1:].strip() for line in diff if line.startswith("+")]
    return Change(mutant.module, mutant.function, "\n".join(removed), "\n".join(added))


def reviewed_changes(data: dict[str, object]) -> dict[Change, str]:
    """Return the reviewed survivors of the TOML (change -> reason), checked for shape."""
    out: dict[Change, str] = {}
    entries = data.get("equivalent", [])
    if not isinstance(entries, list):
        raise ValueError(f"{REVIEWED.name}: [[equivalent]] must be an array of tables")
    keys = {"module", "function", "line", "mutant", "reason"}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != keys or not str(entry["reason"]).strip():
            raise ValueError(f"{REVIEWED.name}: {entry!r} needs exactly {sorted(keys)}")
        change = Change(*(str(entry[k]) for k in ("module", "function", "line", "mutant")))
        if change in out:
            raise ValueError(f"{REVIEWED.name}: listed twice: {entry!r}")
        out[change] = str(entry["reason"])
    return out


def score(counts: Counter[str]) -> float:
    """Return the share of mutants detected, in percent (undetected and equivalents count)."""
    total = sum(counts.values())
    return 100.0 * sum(counts[s] for s in DETECTED) / total if total else 100.0


def table(mutants: list[Mutant], equivalent: set[str]) -> str:
    """Return the per-module Markdown table of a run (``equivalent``: names reviewed)."""
    rows = [
        "| module | mutants | killed | timeout | equivalent | survived | score |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    modules = sorted({m.module for m in mutants})
    for module in [*modules, "all"]:
        mine = [m for m in mutants if module in ("all", m.module)]
        counts = Counter(m.status for m in mine)
        equal = sum(1 for m in mine if m.name in equivalent)
        survived = sum(counts[s] for s in UNDETECTED) - equal
        rows.append(
            f"| {module} | {len(mine)} | {counts['killed'] + counts['segfault']}"
            f" | {counts['timeout']} | {equal} | {survived} | {score(counts):.1f}% |"
        )
    return "\n".join(rows)


def snippet(changes: list[Change]) -> str:
    """Return TOML for unreviewed survivors, to paste once each has its reason."""
    document = tomlkit.document()
    entries = tomlkit.aot()
    for change in changes:
        entry = tomlkit.table()
        entry.update(
            {
                "module": change.module,
                "function": change.function,
                "line": change.line,
                "mutant": change.mutant,
                "reason": "TODO: kill it with a test, or say why no test can",
            }
        )
        entries.append(entry)
    document.append("equivalent", entries)
    return tomlkit.dumps(document)


def main() -> int:
    """Judge the run in ./mutants; return the exit code."""
    config()  # reads [tool.mutmut] from ./pyproject.toml
    mutants = run_results()
    if not mutants:
        sys.stdout.write("no mutmut results in ./mutants: run `mutmut run` first\n")
        return 1
    data = tomllib.loads(REVIEWED.read_text(encoding="utf-8"))
    reviewed = reviewed_changes(data)
    problems: list[str] = []
    odd = [m for m in mutants if m.status not in DETECTED | UNDETECTED]
    problems += [f"{m.name}: {m.status} (not a verdict: run again)" for m in odd]
    undetected = {m.name: change_of(m) for m in mutants if m.status in UNDETECTED}
    unreviewed = sorted(
        {c for c in undetected.values() if c not in reviewed},
        key=lambda c: (c.module, c.function, c.line, c.mutant),
    )
    stale = sorted(set(reviewed) - set(undetected.values()), key=lambda c: (c.module, c.line))
    problems += [f"unreviewed survivor in {c.module} {c.function}: {c.line!r}" for c in unreviewed]
    for c in stale:  # a flaky test can kill an equivalent mutant once: warn, do not fail
        sys.stdout.write(
            f"WARN stale entry (killed in this run; delete it if it stays so): {c.module}"
            f" {c.function}: {c.line!r} -> {c.mutant!r}\n"
        )
    equivalent = {name for name, change in undetected.items() if change in reviewed}
    sys.stdout.write(table(mutants, equivalent) + "\n")
    floor = float(str(data["floor"]))
    total = score(Counter(m.status for m in mutants))
    if total < floor:
        problems.append(f"score {total:.1f}% is under the floor {floor:.1f}% ({REVIEWED.name})")
    if unreviewed:
        sys.stdout.write("\nunreviewed survivors (kill each with a test, or review it):\n")
        sys.stdout.write(snippet(unreviewed))
    for problem in problems:
        sys.stdout.write(f"FAIL {problem}\n")
    if not problems:
        sys.stdout.write(f"\nok: score {total:.1f}% (floor {floor:.1f}%), all survivors reviewed\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
