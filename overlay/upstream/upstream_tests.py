"""Upstream's Arm tests run with pytest in a release env: every test's result and its reason."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from overlay._git import show
from overlay.equivalence.worker import vgf_run
from overlay.errors import OverlayError, UpstreamError
from overlay.upstream.results import Counts, TestResult, TestRun, TestState

_NEW_TEST_RE = re.compile(r"^\+def (test_\w+)\(", re.MULTILINE)
# One pytest run (a fix's tests on one side, a suite part): a guard against a hung run only,
# since upstream's pytest.ini already times out each test (timeout = 1800).
PYTEST_TIMEOUT_S = 3 * 3600.0
JUNIT_FILE = "junit.xml"
INI = "backends/arm/test/pytest.ini"  # upstream's, in a checkout
LAYER_GLOB = "lib/python*/site-packages/emulation_layer/deploy"
# What upstream's backends/arm/test/pytest.ini declares (its --strict-markers needs the
# markers). Used only when no upstream clone is given to read the file itself from.
PYTEST_INI_MARKERS = (
    "slow: Tests that take long time",
    "xlarge: Tests that are known to use a lot of memory",
    "flaky: Tests that are known to be flaky/intermittent",
    "tosa_ref_model: Tests that use TOSA reference model",
)


def vulkan_env(env: Path, folder: Path) -> dict[str, str]:
    """Return the variables that load ``env``'s ML emulation layer over lavapipe, as
    upstream's VGF tests look for them ({} when the layer or lavapipe is missing)."""
    deploy = next(iter(sorted(env.glob(LAYER_GLOB))), None)
    icd = vgf_run.lavapipe_icd()
    return vgf_run.layer_env(deploy, folder, icd) if deploy is not None and icd else {}


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


def _node(case: ET.Element) -> str:
    """Return a test's node id from its JUnit classname (dotted module[.Class]) and name."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:  # a collection error names the module only
        return name
    parts = classname.split(".")
    module = [p for p in parts if not p[:1].isupper()]
    owner = parts[len(module) :]
    return "::".join(["/".join(module) + ".py", *owner, name])


def _reason(element: ET.Element) -> str:
    """Return the exception line of a failure, error or skip (first line of its message)."""
    message = (element.get("message") or "").strip()
    if message in ("", "collection failure"):
        # The traceback's "E   " lines end with the exception; take the last one.
        raised = [
            line[1:].strip() for line in (element.text or "").splitlines() if line[:2] == "E "
        ]
        message = raised[-1] if raised else message or "error"
        return f"collection failure: {message}" if element.get("message") else message
    if message.startswith("failed on setup with "):
        message = "setup: " + message.removeprefix("failed on setup with ").strip('"')
    return message.splitlines()[0][:500]


_RAISED = re.compile(r"^E\s+([\w.]*(?:Error|Exception): .*)$")
# runner_utils' error when the pipeline's run stage finds no executor_runner to run the
# lowered file on (upstream builds it with setup_testing*.sh; this machine has none)
_NO_RUNNER = "FileNotFoundError: Did not find build arm_executor_runner"


def _causes(element: ET.Element, reason: str) -> tuple[str, ...]:
    """Return the exceptions of a failure's traceback other than its own, innermost first."""
    found = [
        m.group(1).strip()[:500] for m in map(_RAISED.match, (element.text or "").splitlines()) if m
    ]
    return tuple(c for c in dict.fromkeys(found) if c != reason)


def parse_junit(text: str) -> tuple[TestResult, ...]:
    """Return every test of a pytest JUnit report: node, end state and reason (a failure
    for want of an executor_runner is ``NO_TARGET``)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UpstreamError(
            "pytest wrote an unreadable JUnit report",
            expected="JUnit XML",
            found=str(exc),
            hint="run pytest by hand with --junitxml to see what it writes",
        ) from exc
    found = []
    for case in root.iter("testcase"):
        state, reason, causes = TestState.PASSED, "", tuple[str, ...]()
        for child in case:
            if child.tag == "failure":
                xfail = (child.get("message") or "").startswith("[XPASS(strict)]")
                state, reason = (TestState.XPASSED if xfail else TestState.FAILED), _reason(child)
                if reason.startswith(_NO_RUNNER):
                    state = TestState.NO_TARGET
                causes = _causes(child, reason)
            elif child.tag == "error":
                state, reason = TestState.ERROR, _reason(child)
                causes = _causes(child, reason)
            elif child.tag == "skipped":
                xfailed = child.get("type") == "pytest.xfail"
                state = TestState.XFAILED if xfailed else TestState.SKIPPED
                reason = _reason(child)
        found.append(TestResult(_node(case), state, reason, causes))
    return tuple(found)


def lay_out_tests(
    dest: Path,
    release_tests: Mapping[str, bytes],
    overrides: Mapping[str, bytes],
    pytest_ini: bytes,
) -> Path:
    """Lay ``dest`` out like an executorch checkout for pytest: the release's
    ``backends/arm/test`` files, the patch's versions over them, ``pytest_ini`` at :data:`INI`.
    """
    for path, data in {**release_tests, **overrides, INI: pytest_ini}.items():
        if not path.startswith("backends/arm/test/"):
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest


WORKERS = "--numprocesses=auto"  # pytest-xdist, as upstream runs its Arm tests


def read_run(stdout: str, stderr: str, returncode: int, junit: Path) -> Counts:
    """Return one pytest run's counts and tests from its output and JUnit report."""
    report = junit.read_text(encoding="utf-8") if junit.is_file() else ""
    tests = parse_junit(report) if report else ()
    if not tests:
        tail = (stdout + stderr).strip().splitlines()[-3:]
        problem = f"pytest exited with {returncode} and reported no test: " + " | ".join(tail)
        return Counts(problem=problem[:1500])
    return Counts(tests)


def run_tests_both_ways(
    stock_python: str,
    patched_python: str,
    *,
    release_tests: Mapping[str, bytes],
    patched_files: Mapping[str, bytes],
    pytest_ini: bytes,
    selection: Sequence[str],
    log_dir: Path,
    timeout: float = PYTEST_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
) -> TestRun:
    """Run ``selection`` with upstream's ``pytest.ini`` on stock (with the patch's test files)
    and on patched, each on every core (``extra_env`` set; a run that writes no JUnit report
    comes back with ``problem`` saying why)."""
    started = time.perf_counter()
    counts = []
    with tempfile.TemporaryDirectory(prefix="overlay-tests-") as tmp:
        tree = lay_out_tests(Path(tmp), release_tests, patched_files, pytest_ini)
        junit = tree / JUNIT_FILE
        for side, python in (("stock", stock_python), ("patched", patched_python)):
            env = tool_env(Path(python).parent, **(extra_env or {}))
            junit.unlink(missing_ok=True)
            command = [
                python, "-m", "pytest", "-c", str(tree / INI), "--rootdir", str(tree),
                "-q", "-rfE", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers",
                "-o", "junit_family=xunit2", f"--junitxml={junit}", WORKERS, *selection,
            ]  # fmt: skip
            log = log_dir / f"pytest-{side}.log"  # written as pytest runs: it shows progress
            log.parent.mkdir(parents=True, exist_ok=True)
            try:
                with log.open("w", encoding="utf-8") as output:
                    proc = subprocess.run(
                        command, cwd=tree, stdout=output, stderr=subprocess.STDOUT, env=env,
                        check=False, timeout=timeout,
                    )  # fmt: skip
            except subprocess.TimeoutExpired:
                problem = f"pytest did not finish within {timeout:.0f} s (its output: {log})"
                counts.append(Counts(problem=problem))
                continue
            except OSError as exc:
                raise UpstreamError(
                    "cannot run the upstream tests",
                    expected=f"pytest in {python}",
                    found=str(exc),
                    hint="the release env needs pytest (test_requirements in"
                    " patches/upstream.toml)",
                ) from exc
            text = log.read_text(encoding="utf-8", errors="replace")
            counts.append(read_run(text, "", proc.returncode, junit))
    seconds = time.perf_counter() - started
    return TestRun(pytest_command(selection), tuple(selection), counts[0], counts[1], seconds)


def tool_env(bindir: Path, **extra: str) -> dict[str, str]:
    """Return this process's environment for a tool of another env: ``bindir`` first on
    ``PATH``, no ``PYTHONPATH`` of ours, ``extra`` set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"PATH": str(bindir) + os.pathsep + env.get("PATH", "")} | extra


def tool_shell_line(bindir: Path, command: Sequence[str], **extra: str) -> str:
    """Return ``command`` as a shell line that runs it as :func:`tool_env` does: ``bindir``
    first on ``PATH``, ``extra`` set (for a hint a user pastes)."""
    settings = [f"PATH={shlex.quote(str(bindir))}:$PATH"]
    settings += [f"{name}={shlex.quote(value)}" for name, value in extra.items()]
    return " ".join([*settings, shlex.join(command)])


def pytest_command(selection: Sequence[str]) -> str:
    """Return the command a reviewer runs in an executorch checkout for ``selection``."""
    return f"pytest -c {INI} {' '.join(selection)}"


def pytest_ini(repo: Path | None, refs: Sequence[str] = ("main",)) -> bytes:
    """Return upstream's ``backends/arm/test/pytest.ini`` at the first of ``refs`` a clone
    (or the canary's scratch repository) holds; without one, its options written out."""
    for ref in refs:
        with contextlib.suppress(OverlayError):
            if repo is not None:
                return show(repo, f"{ref}:{INI}")
    lines = ["[pytest]", "addopts = --strict-markers", "markers ="]
    lines += [f"    {marker}" for marker in PYTEST_INI_MARKERS]
    return ("\n".join(lines) + "\n").encode()
