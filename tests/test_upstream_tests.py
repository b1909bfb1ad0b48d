"""Upstream tests with pytest: JUnit reports read into each test's end state and reason.

The reports below are what pytest 8.4 (xunit2) wrote for a demo test file in an
executorch 1.5.1 env (trimmed tracebacks), so the parser is checked on pytest's own output.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from overlay import render
from overlay._hashing import sha256_bytes
from overlay.errors import UpstreamError
from overlay.fixes import Fix, UpstreamNote
from overlay.upstream import reports, suite, upstream_tests
from overlay.upstream.results import Counts, SuiteRun, TestResult, TestRun, TestState
from overlay.upstream.upstream_tests import (
    INI,
    lay_out_tests,
    new_tests,
    parse_junit,
    pytest_ini,
    read_run,
    run_tests_both_ways,
)

DEMO = "backends.arm.test.passes.test_demo"
NODE = "backends/arm/test/passes/test_demo.py"
REPORT = f"""<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="7" skipped="2" tests="11">
<testcase classname="{DEMO}" name="test_assert"><failure
 message="AssertionError: values differ&#10;assert 1 == 2">E AssertionError</failure></testcase>
<testcase classname="{DEMO}" name="test_runtime"><failure
 message="RuntimeError: Missing out variants: {{'a'}}">E RuntimeError</failure></testcase>
<testcase classname="{DEMO}" name="test_raises"><failure
 message="Failed: DID NOT RAISE &lt;class 'ValueError'&gt;">E Failed</failure></testcase>
<testcase classname="{DEMO}" name="test_setup"><error
 message="failed on setup with &quot;ImportError: no module named x&quot;">E</error></testcase>
<testcase classname="{DEMO}" name="test_ok" time="0.000" />
<testcase classname="{DEMO}" name="test_skip"><skipped type="pytest.skip"
 message="needs a GPU">needs a GPU</skipped></testcase>
<testcase classname="{DEMO}" name="test_xfail"><skipped type="pytest.xfail"
 message="known" /></testcase>
<testcase classname="{DEMO}.TestGroup" name="test_in_class"><failure
 message="assert 1 == 3">E assert 1 == 3</failure></testcase>
<testcase classname="{DEMO}" name="test_vgf"><failure
 message="FileNotFoundError: Did not find build arm_executor_runner or executor_runner."
 >E FileNotFoundError</failure></testcase>
</testsuite></testsuites>"""
COLLECTION = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="0" skipped="0" tests="1">
<testcase classname="" name="backends.arm.test.passes.test_demo" time="0.000"><error
 message="collection failure">ImportError while importing test module 'test_demo.py'.
Traceback:
backends/arm/test/passes/test_demo.py:1: in &lt;module&gt;
    import nonexistent_mod
E   ModuleNotFoundError: No module named 'nonexistent_mod'</error></testcase>
</testsuite></testsuites>"""


WRAPPED = "ValueError: Failed processing lifted tensor constant placeholder: g_scale."
CHAINED = f"""<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="1" skipped="0" tests="1">
<testcase classname="{DEMO}" name="test_int_on_cpu"><failure message="{WRAPPED}">
&gt;           tosa_arg = TosaArg(node, tosa_spec)
E               ValueError: TOSA-1.0+INT doesn't support tensor TosaArg(name='g_scale')

The above exception was the direct cause of the following exception:
E           {WRAPPED}
</failure></testcase></testsuite></testsuites>"""


def test_the_exceptions_a_failure_was_raised_from_are_read() -> None:
    (found,) = parse_junit(CHAINED)
    assert found.reason == WRAPPED
    assert found.causes == (
        "ValueError: TOSA-1.0+INT doesn't support tensor TosaArg(name='g_scale')",
    )


def test_every_end_state_and_reason_is_read() -> None:
    found = {t.node.rsplit("::", 1)[1]: t for t in parse_junit(REPORT)}
    assert found["test_assert"] == TestResult(
        f"{NODE}::test_assert", TestState.FAILED, "AssertionError: values differ"
    )
    assert found["test_runtime"].reason == "RuntimeError: Missing out variants: {'a'}"
    assert found["test_raises"].reason == "Failed: DID NOT RAISE <class 'ValueError'>"
    assert found["test_setup"] == TestResult(
        f"{NODE}::test_setup", TestState.ERROR, "setup: ImportError: no module named x"
    )
    assert found["test_ok"].state is TestState.PASSED and found["test_ok"].reason == ""
    assert (found["test_skip"].state, found["test_skip"].reason) == (
        TestState.SKIPPED,
        "needs a GPU",
    )
    assert found["test_xfail"].state is TestState.XFAILED
    assert found["test_in_class"].node == f"{NODE}::TestGroup::test_in_class"
    assert found["test_in_class"].reason == "assert 1 == 3"
    # lowered, then no executor_runner to run it on: not a failure of the test
    assert found["test_vgf"].state is TestState.NO_TARGET
    assert found["test_runtime"].state is TestState.FAILED


def test_a_collection_error_is_named_by_its_exception() -> None:
    (only,) = parse_junit(COLLECTION)
    assert only.state is TestState.ERROR
    assert only.reason == (
        "collection failure: ModuleNotFoundError: No module named 'nonexistent_mod'"
    )


def test_an_unreadable_report_is_an_error() -> None:
    with pytest.raises(UpstreamError, match="unreadable JUnit report"):
        parse_junit("<testsuites><testcase")


def test_read_run_takes_the_report_or_says_why_there_is_none(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(REPORT)
    done = read_run("", "", 1, junit)
    states = (TestState.FAILED, TestState.PASSED, TestState.ERROR, TestState.XFAILED)
    assert [done.count(state) for state in states] == [4, 1, 1, 1]
    assert (
        done.text == "1 passed, 4 failed, 1 errors, 1 skipped (needs a GPU), 1 xfailed (known),"
        " 1 not run here (no executor_runner built)"
    )
    assert len(done.tests) == 9 and done.problem == "" and not done.ok
    junit.unlink()
    broken = read_run("", "ImportError while loading conftest 'x/conftest.py'.\n", 4, junit)
    assert broken.tests == () and broken.text == "no tests ran" and not broken.ok
    assert broken.problem.startswith("pytest exited with 4 and reported no test")
    assert "ImportError while loading conftest" in broken.problem


def test_new_tests_and_the_test_tree(tmp_path: Path) -> None:
    diff = (
        "diff --git a/backends/arm/test/passes/test_x.py b/backends/arm/test/passes/test_x.py\n"
        "+def test_added():\n+    pass\n"
        "diff --git a/backends/arm/_passes/x.py b/backends/arm/_passes/x.py\n+def test_no():\n"
    )
    assert new_tests(diff) == ["backends/arm/test/passes/test_x.py::test_added"]
    tree = lay_out_tests(
        tmp_path,
        {"backends/arm/test/a.py": b"old", "backends/arm/x.py": b"not a test"},
        {"backends/arm/test/a.py": b"new"},
        b"[pytest]\n",
    )
    assert (tmp_path / "backends/arm/test/a.py").read_bytes() == b"new"
    assert not (tmp_path / "backends/arm/x.py").exists()
    assert (tree / INI).read_bytes() == b"[pytest]\n"


def test_the_suite_takes_every_pass_test_and_the_touched_operators_files() -> None:
    conv = Fix(
        3, "x", ("backends/arm/_passes/rewrite_conv_pass.py", "backends/arm/test/ops/test_add.py"),
        {},
        UpstreamNote("", "", affected_tests=("backends/arm/test/misc/test_custom_partition.py",)),
    )  # fmt: skip
    names = [
        *("passes/test_a.py", "passes/helper.py", "ops/test_conv2d.py", "ops/test_conv_combos.py"),
        *("ops/test_add.py", "ops/test_depthwise_conv.py", "misc/test_pass_pipeline_config.py"),
        *("misc/test_custom_partition.py", "quantizer/test_conv_relu_fusing.py"),
        *("ops/sub/test_conv.py", "test_root.py"),
    ]
    tests = [f"backends/arm/test/{n}" for n in names]
    chosen = [p.removeprefix("backends/arm/test/") for p in suite.selection([conv], tests)]
    assert chosen == [
        "misc/test_custom_partition.py",
        "ops/test_add.py",  # the fix changes it
        "ops/test_conv2d.py",
        "ops/test_conv_combos.py",
        "passes/test_a.py",
        "quantizer/test_conv_relu_fusing.py",
    ]


def _part_run(part: Sequence[str], stock: str = "", patched: str = "") -> TestRun:
    tests = tuple(TestResult(node, TestState.PASSED) for node in part)
    return TestRun("pytest", tuple(part), Counts(tests, stock), Counts(tests, patched), 1.0)


def test_an_interrupted_suite_resumes_with_the_parts_it_kept(tmp_path: Path) -> None:
    files = [f"backends/arm/test/passes/test_{i:02d}.py" for i in range(2 * suite.PART_FILES + 1)]
    calls: list[int] = []
    no_report = "pytest exited with 4 and reported no test"

    def run_part(number: int, part: Sequence[str]) -> TestRun:
        calls.append(number)
        if calls == [1, 2]:
            raise KeyboardInterrupt  # the first run stops in part 2
        if calls == [1, 2, 2]:
            return _part_run(part, stock=no_report)
        if calls == [1, 2, 2, 3, 2]:
            return _part_run(part, patched=no_report)
        return _part_run(part)

    def key(part: Sequence[str]) -> str:
        return sha256_bytes(" ".join(part).encode())

    with pytest.raises(KeyboardInterrupt):
        suite.run_in_parts(files, key, run_part, tmp_path, lambda _: None)
    runs = [suite.run_in_parts(files, key, run_part, tmp_path, lambda _: None) for _ in range(3)]
    # part 1 kept from the interrupted run; part 2's runs without a report are not kept
    assert calls == [1, 2, 2, 3, 2, 2]
    where = f"part 2 ({', '.join(files[8:16])}): "
    assert (runs[0].stock.problem, runs[1].patched.problem) == (where + no_report,) * 2
    assert [t.node for t in runs[2].stock.tests] == files
    assert runs[2].stock.problem == runs[2].patched.problem == "" and runs[2].seconds == 3.0
    assert runs[2].selection == tuple(files)
    assert runs[2].command.split()[3:5] == [upstream_tests.WORKERS, files[0]]
    (tmp_path / f"{key(files[:8])[:16]}.json").write_text("{}", encoding="utf-8")
    suite.run_in_parts(files, key, run_part, tmp_path, lambda _: None)  # unreadable: run again
    assert calls[-1] == 1


def test_a_parts_key_changes_with_everything_its_result_depends_on() -> None:
    base = (["stock-a", "patched-b"], {"t.py": b"1"}, b"[pytest]", {"VK_ICD": "x"})
    key = suite.part_key(*base)
    changed = [
        (["stock-a", "patched-c"], *base[1:]),
        (base[0], {"t.py": b"2"}, *base[2:]),
        (base[0], {"u.py": b"1"}, *base[2:]),
        (*base[:2], b"[pytest]\n", base[3]),
        (*base[:3], {}),
    ]
    assert all(suite.part_key(*c) != key for c in changed)
    assert suite.part_key(*base) == key


def _demo_run(tmp_path: Path, body: str, **options: Any) -> TestRun:
    """Run one demo test file on both sides (this interpreter each), its logs in ``logs/``."""
    node = "backends/arm/test/passes/test_demo_run.py"
    return run_tests_both_ways(
        sys.executable, sys.executable, release_tests={node: body.encode()}, patched_files={},
        pytest_ini=pytest_ini(None), selection=[node], log_dir=tmp_path / "logs", **options,
    )  # fmt: skip


def test_both_sides_run_with_the_extra_environment_and_their_logs(tmp_path: Path) -> None:
    body = "import os\n\ndef test_env():\n    assert os.environ['VK_DEMO'] == '1'\n"
    run = _demo_run(tmp_path, body, extra_env={"VK_DEMO": "1"})
    assert (run.stock.text, run.patched.text) == ("1 passed", "1 passed")
    assert "1 passed" in (tmp_path / "logs" / "pytest-patched.log").read_text()


def test_a_run_that_does_not_finish_is_a_run_that_reported_nothing(tmp_path: Path) -> None:
    run = _demo_run(tmp_path, "import time\n\ndef test_slow():\n    time.sleep(60)\n", timeout=3)
    for side, counts in (("stock", run.stock), ("patched", run.patched)):
        log = tmp_path / "logs" / f"pytest-{side}.log"
        assert counts.tests == ()
        assert counts.problem == f"pytest did not finish within 3 s (its output: {log})"


def test_the_suite_report_says_none_where_nothing_broke_or_was_fixed() -> None:
    run = _part_run(["backends/arm/test/passes/test_a.py"])
    fixed = "backends/arm/test/passes/test_a.py::test_b"
    for broken, fixes, verdict in (
        ((), (), "no test passes on stock and fails with the patches."),
        ((fixed,), (fixed,), "1 test(s) pass on stock and not with the patches."),
    ):
        done = SuiteRun("1.2.0", "1.2.0", run, broken, fixes)
        shown = render.markdown(reports.suite_blocks(done))
        assert f"executorch 1.2.0; {verdict}" in shown
        for heading, names in (("Broken", broken), ("Fixed", fixes)):
            after = shown.split(f"## {heading} by the patches\n\n", 1)[1]
            assert after.split("\n\n")[0] == f"- {names[0] if names else 'none'}"
