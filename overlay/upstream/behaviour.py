"""Behaviour of the series on one release: trigger cases and upstream tests, stock vs patched.

One mechanism serves the retarget (is a patch still needed on the new release?) and the
upstream export (does the fix fail before and pass after on the target release?): the
corpus cases run on a stock and a patched env of that release (each a worker of
:mod:`overlay.equivalence.orchestrator`, in parallel), the patch's upstream tests run with
pytest in both envs, and the pure functions below turn the results into an outcome.

A patch's *bug triggers* are its FIXED triggers (:mod:`overlay.fixes`) claimed for the
pinned or the target release: stock fails them where the patch was written. Its other
triggers (CHANGED) show a lowering the patch changes where stock is already right.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from overlay import codec, fixes
from overlay._git import show
from overlay.equivalence import corpus, orchestrator
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    InitReply,
    ItemId,
    ItemKind,
    ItemResult,
    PathId,
)
from overlay.equivalence.verdict import AB, Quality, classify, limits, quality
from overlay.errors import OverlayError, UpstreamError
from overlay.fixes import Effect, Fix

Progress = Callable[[str], None]
_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")
_NEW_TEST_RE = re.compile(r"^\+def (test_\w+)\(", re.MULTILINE)
PYTEST_TIMEOUT_S = 1800.0


class Outcome(enum.StrEnum):
    """What a patch does on one release, judged by its trigger cases and tests."""

    FAILS_BEFORE_PASSES_AFTER = "fails before, passes after"
    FIXED_ON_STOCK = "already fixed on stock"
    REGRESSION = "regression with patch"
    STILL_FAILS = "still fails with patch"
    NO_BUG_TRIGGER = "no bug trigger"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True)
class CaseOutcome:
    """One corpus case on stock and (when a patched env ran) patched of one release."""

    case: str
    stock: Quality
    patched: Quality | None
    ab: AB | None  # stock -> patched, judged by correctness
    stock_error: str = ""
    patched_error: str = ""

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "case": self.case,
            "stock": self.stock.value,
            "patched": self.patched.value if self.patched else None,
            "ab": self.ab.value if self.ab else None,
            "stock_error": self.stock_error,
            "patched_error": self.patched_error,
        }


@dataclass(frozen=True)
class Counts:
    """pytest's closing counts."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0

    @property
    def ok(self) -> bool:
        """Return True when something ran and nothing failed."""
        return self.passed + self.xfailed > 0 and self.failed == 0 and self.errors == 0

    @property
    def text(self) -> str:
        """Return ``3 passed, 1 failed`` style text."""
        parts = [
            f"{n} {label}"
            for n, label in (
                (self.passed, "passed"),
                (self.failed, "failed"),
                (self.errors, "errors"),
                (self.skipped, "skipped"),
                (self.xfailed, "xfailed"),
                (self.xpassed, "xpassed"),
            )
            if n
        ]
        return ", ".join(parts) or "no tests ran"


@dataclass(frozen=True)
class TestRun:
    """Upstream tests run with pytest on stock and on patched of one release."""

    __test__ = False  # not a pytest test class

    command: str  # as a reviewer runs it in an executorch checkout
    selection: tuple[str, ...]  # node ids or files
    stock: Counts | None  # None: not run on stock (the affected subset runs patched only)
    patched: Counts
    seconds: float

    @property
    def fails_before_passes_after(self) -> bool:
        """Return True when stock fails the tests and the patch makes them pass."""
        return self.stock is not None and not self.stock.ok and self.patched.ok

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "command": self.command,
            "selection": list(self.selection),
            "stock": self.stock.text if self.stock else None,
            "patched": self.patched.text,
            "fails_before_passes_after": self.fails_before_passes_after,
            "seconds": round(self.seconds, 1),
        }


@dataclass(frozen=True)
class PatchBehaviour:
    """One patch on one release: its trigger cases, its outcome and why."""

    patch: str
    release: str
    bug_cases: tuple[CaseOutcome, ...]
    other_cases: tuple[CaseOutcome, ...]  # its CHANGED triggers
    outcome: Outcome
    text: str
    regressions: tuple[str, ...] = ()
    test: TestRun | None = None

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form."""
        return {
            "patch": self.patch,
            "release": self.release,
            "outcome": self.outcome.value,
            "text": self.text,
            "bug_cases": [c.as_dict() for c in self.bug_cases],
            "other_cases": [c.as_dict() for c in self.other_cases],
            "regressions": list(self.regressions),
            "test": self.test.as_dict() if self.test else None,
        }


@dataclass(frozen=True)
class ReleaseRun:
    """The corpus cases run on stock and (optionally) patched envs of one release."""

    release: str
    stock_python: str
    patched_python: str | None
    init: dict[str, InitReply]  # "stock" / "patched" -> what the worker ran on
    results: dict[str, dict[str, ItemResult]]  # "stock" / "patched" -> case -> result
    seconds: float

    def case(self, name: str) -> CaseOutcome | None:
        """Judge one case (None when it was not run)."""
        stock = self.results["stock"].get(name)
        if stock is None:
            return None
        info = corpus.info(name)
        return judge_case(info, stock, self.results.get("patched", {}).get(name))

    def as_dict(self) -> dict[str, object]:
        """Return the JSON form (results by digest, as the equivalence report does)."""
        return {
            "release": self.release,
            "stock_python": self.stock_python,
            "patched_python": self.patched_python,
            "workers": {k: codec.encode(v) for k, v in self.init.items()},
            "cases": {
                name: self.case(name).as_dict()  # type: ignore[union-attr]
                for name in self.results["stock"]
            },
            "seconds": round(self.seconds, 1),
        }


def judge_case(info: CaseInfo, stock: ItemResult, patched: ItemResult | None) -> CaseOutcome:
    """Judge one case's stock and patched results by correctness."""
    limit = limits(info)
    qs = quality(stock, limit, vgf=info.targets_vgf)
    qp = quality(patched, limit, vgf=info.targets_vgf) if patched is not None else None
    ab = classify(info.item, stock, patched, limit) if patched is not None else None
    return CaseOutcome(info.name, qs, qp, ab, _error_of(stock), _error_of(patched))


def _error_of(result: ItemResult | None) -> str:
    if result is None:
        return ""
    for label, error in (
        ("", result.error),
        ("VGF: ", result.vgf.error if result.vgf is not None else None),
        ("numerics: ", result.numerics_error),
    ):
        if error is not None:
            return label + _first_line(error)[:300]
    return ""


def _first_line(error: ErrorInfo) -> str:
    """Return the error's first line; a wrapped error by its root cause alone."""
    if "\n(raised as: " in error.message:
        return error.message.splitlines()[0]
    return error.first_line


def triggers(fix: Fix, versions: Iterable[str]) -> tuple[list[str], list[str]]:
    """Return (bug trigger cases, other trigger cases) of ``fix`` claimed for ``versions``."""
    wanted = list(versions)
    bug: list[str] = []
    other: list[str] = []
    for trigger in fix.triggers:
        if not any(trigger.applies_to(v) for v in wanted):
            continue
        if trigger.effect is Effect.FIXED:
            bug.append(trigger.case)
        elif trigger.effect is Effect.CHANGED:
            other.append(trigger.case)
    return list(dict.fromkeys(bug)), [c for c in dict.fromkeys(other) if c not in bug]


def trigger_cases(versions: Iterable[str]) -> list[str]:
    """Return every case some fix claims (bug or other) for ``versions``, in corpus order."""
    wanted = list(versions)
    named = {c for fix in fixes.FIXES for group in triggers(fix, wanted) for c in group}
    return [c.name for c in corpus.CASES if c.name in named]


def decide_patch(
    patch: str,
    release: str,
    bug: Sequence[CaseOutcome],
    other: Sequence[CaseOutcome],
    *,
    kept: bool,
    regressions: Sequence[str] = (),
    test: TestRun | None = None,
) -> PatchBehaviour:
    """Decide a patch's outcome on a release from its cases (pure).

    ``kept`` says whether the patched env carries this patch; without it only the stock
    side counts (is the bug still there?).
    """
    still = [c for c in bug if c.stock is not Quality.RIGHT]
    if not bug and kept and regressions:
        text = (
            f"no bug trigger on {release}, and a regression with the patch:"
            f" {', '.join(regressions)} right on stock, not with the patch"
        )
        return PatchBehaviour(
            patch, release, (), tuple(other), Outcome.REGRESSION, text, tuple(regressions), test
        )
    if not bug:
        wrong_other = [c.case for c in other if c.stock is not Quality.RIGHT]
        if wrong_other:
            text = f"no bug trigger; stock {release} is not right on {', '.join(wrong_other)}"
            return PatchBehaviour(
                patch, release, (), tuple(other), Outcome.NO_BUG_TRIGGER, text, (), test
            )
        cases = ", ".join(c.case for c in other) or "none"
        text = (
            f"no case fails on stock {release}: its trigger cases ({cases}) are right "
            "there, the patch only changes how they lower"
        )
        return PatchBehaviour(
            patch, release, (), tuple(other), Outcome.NO_BUG_TRIGGER, text, (), test
        )
    if not still:
        names = ", ".join(c.case for c in bug)
        text = f"fixed upstream in {release}: trigger cases now pass on stock ({names})"
        return PatchBehaviour(
            patch, release, tuple(bug), tuple(other), Outcome.FIXED_ON_STOCK, text, (), test
        )
    names = ", ".join(f"{c.case} ({c.stock_error or c.stock.value})" for c in still)
    if not kept:
        text = f"still needed on {release}: stock fails {names}"
        return PatchBehaviour(
            patch, release, tuple(bug), tuple(other), Outcome.STILL_FAILS, text, (), test
        )
    not_fixed = [c for c in still if c.patched is not Quality.RIGHT]
    if regressions:
        text = (
            f"regression with the patch on {release}: {', '.join(regressions)} "
            "right on stock, not with the patch"
        )
        outcome = Outcome.REGRESSION
    elif not_fixed:
        text = f"still fails with the patch on {release}: " + ", ".join(
            f"{c.case} ({c.patched_error or c.patched})" for c in not_fixed
        )
        outcome = Outcome.STILL_FAILS
    else:
        text = f"fails on stock {release}, passes with the patch: {names}"
        outcome = Outcome.FAILS_BEFORE_PASSES_AFTER
    if (
        test is not None
        and outcome is Outcome.FAILS_BEFORE_PASSES_AFTER
        and not test.fails_before_passes_after
    ):
        stock = test.stock.text if test.stock else "not run"
        text += f"; but its upstream test does not fail before and pass after ({stock} ->"
        text += f" {test.patched.text})"
        outcome = Outcome.STILL_FAILS
    return PatchBehaviour(
        patch, release, tuple(bug), tuple(other), outcome, text, tuple(regressions), test
    )


def regressions_of(run: ReleaseRun) -> list[str]:
    """Return the cases right on stock and not right on patched (or measurably worse)."""
    found = []
    for name in run.results["stock"]:
        outcome = run.case(name)
        if outcome is not None and outcome.ab is AB.REGRESSION:
            found.append(name)
    return found


Side = tuple[InitReply, dict[str, ItemResult]]


def run_envs(
    jobs: Mapping[str, str],
    cases: Sequence[str],
    *,
    out_dir: Path,
    patches_dir: Path | None = None,
    timeout: float = orchestrator.DEFAULT_TIMEOUT_S,
    progress: Progress = lambda _: None,
) -> dict[str, Side]:
    """Run ``cases`` in each env of ``jobs`` (label -> python), one worker each, in parallel."""
    items = [ItemId(ItemKind.CASE, corpus.info(c).name) for c in dict.fromkeys(cases)]
    if not jobs:
        return {}

    def one(label: str, python: str) -> Side:
        slug = re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")
        options = orchestrator.Options(
            stock_python=python,
            patched_python=python,
            probes=False,
            out_dir=out_dir / slug,
            timeout=timeout,
            patches_dir=patches_dir,
        )
        init, results = orchestrator.run_items(
            options,
            PathId.STOCK,
            python,
            items,
            progress=lambda text: progress(f"{label} {text}"),
        )
        return init, {item.name: result for item, result in results.items()}

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {label: pool.submit(one, label, python) for label, python in jobs.items()}
        return {label: future.result() for label, future in futures.items()}


def assemble(release: str, stock: Side, patched: Side | None) -> ReleaseRun:
    """Put one release's stock and patched sides together."""
    init = {"stock": stock[0]}
    results = {"stock": stock[1]}
    if patched is not None:
        init["patched"] = patched[0]
        results["patched"] = patched[1]
    return ReleaseRun(
        release=release,
        stock_python=stock[0].python,
        patched_python=patched[0].python if patched else None,
        init=init,
        results=results,
        seconds=sum(r.seconds for side in results.values() for r in side.values()),
    )


def run_release(
    release: str,
    stock_python: str,
    patched_python: str | None,
    cases: Sequence[str],
    *,
    out_dir: Path,
    patches_dir: Path | None = None,
    progress: Progress = lambda _: None,
) -> ReleaseRun:
    """Run ``cases`` on the stock and (if given) patched envs of one release, in parallel."""
    jobs = {"stock": stock_python}
    if patched_python is not None:
        jobs["patched"] = patched_python
    done = run_envs(jobs, cases, out_dir=out_dir, patches_dir=patches_dir, progress=progress)
    return assemble(release, done["stock"], done.get("patched"))


# --- upstream tests ------------------------------------------------------------------------


def new_tests(diff: str) -> list[str]:
    """Return ``path::test_name`` of every test function a diff adds."""
    found = []
    for block in re.split(r"(?m)^diff --git ", diff):
        header = block.split("\n", 1)[0]
        path = header.split(" b/")[-1].strip() if " b/" in header else ""
        if "/test/" not in path:
            continue
        found += [f"{path}::{name}" for name in _NEW_TEST_RE.findall(block)]
    return found


def parse_counts(output: str) -> Counts:
    """Parse pytest's closing line (``= 1 failed, 17 passed in 3.2s =``)."""
    lines = [line for line in output.splitlines() if " in " in line and _COUNT_RE.search(line)]
    if not lines:
        return Counts()
    values: dict[str, int] = {}
    for number, word in _COUNT_RE.findall(lines[-1]):
        key = {"error": "errors"}.get(word, word)
        values[key] = values.get(key, 0) + int(number)
    values.pop("deselected", None)
    return Counts(**values)


@dataclass(frozen=True)
class TestTree:
    """A folder laid out like an executorch checkout's ``backends/arm/test``, for pytest."""

    __test__ = False  # not a pytest test class

    root: Path
    ini: Path


def lay_out_tests(
    dest: Path,
    release_tests: Mapping[str, bytes],
    overrides: Mapping[str, bytes],
    pytest_ini: bytes,
) -> TestTree:
    """Write the release's ``backends/arm/test`` files, the patch's versions over them."""
    for path, data in {**release_tests, **overrides}.items():
        if not path.startswith("backends/arm/test/"):
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    ini = dest / "backends" / "arm" / "test" / "pytest.ini"
    ini.parent.mkdir(parents=True, exist_ok=True)
    ini.write_bytes(pytest_ini)
    return TestTree(dest, ini)


def run_pytest(
    python: str, tree: TestTree, selection: Sequence[str], *, log: Path | None = None
) -> Counts:
    """Run pytest with upstream's ``pytest.ini`` in ``python``'s env; return the counts."""
    env = dict(os.environ)
    env["PATH"] = str(Path(python).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    command = [
        python, "-m", "pytest", "-c", str(tree.ini), "--rootdir", str(tree.root),
        "-q", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers", *selection,
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            command,
            cwd=tree.root,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=PYTEST_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UpstreamError(
            "cannot run the upstream tests",
            expected=f"pytest in {python}",
            found=str(exc),
            hint="the release env needs pytest (it is in [upstream] test_requirements)",
        ) from exc
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    counts = parse_counts(proc.stdout)
    if counts == Counts() and proc.returncode not in (0, 5):
        raise UpstreamError(
            "pytest did not report counts",
            expected="a closing line like '1 failed, 17 passed'",
            found=(proc.stdout + proc.stderr).strip()[-1500:],
            hint=f"run it by hand: {' '.join(command)}",
        )
    return counts


def run_tests_both_ways(
    stock_python: str,
    patched_python: str,
    *,
    release_tests: Mapping[str, bytes],
    patched_files: Mapping[str, bytes],
    pytest_ini: bytes,
    selection: Sequence[str],
    log_dir: Path,
    stock: bool = True,
) -> TestRun:
    """Run ``selection`` on stock (with the patch's test files) and on patched."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="overlay-tests-") as tmp:
        tree = lay_out_tests(Path(tmp), release_tests, patched_files, pytest_ini)
        stock_counts = None
        if stock:
            stock_counts = run_pytest(
                stock_python, tree, selection, log=log_dir / "pytest-stock.log"
            )
        patched_counts = run_pytest(
            patched_python, tree, selection, log=log_dir / "pytest-patched.log"
        )
    shown = " ".join(selection)
    command = f"pytest -c backends/arm/test/pytest.ini {shown}"
    return TestRun(
        command, tuple(selection), stock_counts, patched_counts, time.perf_counter() - started
    )


# What upstream's backends/arm/test/pytest.ini declares (its --strict-markers needs the
# markers). Used only when no upstream clone is given to read the file itself from.
PYTEST_INI_MARKERS = (
    "slow: Tests that take long time",
    "xlarge: Tests that are known to use a lot of memory",
    "flaky: Tests that are known to be flaky/intermittent",
    "tosa_ref_model: Tests that use TOSA reference model",
)


def pytest_ini(clone: Path | None, ref: str = "main") -> bytes:
    """Return upstream's ``backends/arm/test/pytest.ini`` (from a clone when one is given)."""
    if clone is not None:
        with contextlib.suppress(OverlayError):
            return show(clone, f"{ref}:backends/arm/test/pytest.ini")
    lines = ["[pytest]", "addopts = --strict-markers", "markers ="]
    lines += [f"    {marker}" for marker in PYTEST_INI_MARKERS]
    return ("\n".join(lines) + "\n").encode()
