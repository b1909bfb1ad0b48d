"""The CI configuration: the GitHub workflows pass actionlint and do what the docs say, and
pre-commit runs exactly the checks of ``nox -s lint``."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CANARY = WORKFLOWS / "canary.yml"
TESTS = WORKFLOWS / "tests.yml"
EQUIVALENCE = WORKFLOWS / "equivalence.yml"
PRE_COMMIT = ROOT / ".pre-commit-config.yaml"
SCRIPTS = Path(sysconfig.get_path("scripts"))
ACTIONLINT = shutil.which("actionlint", path=str(SCRIPTS)) or shutil.which("actionlint")
PRE_COMMIT_TOOL = shutil.which("pre-commit", path=str(SCRIPTS)) or shutil.which("pre-commit")
NO_ACTIONLINT = "actionlint is not installed (the dev extra's actionlint wheel)"


def test_the_workflows_are_the_nightly_canary_the_tests_and_the_sharded_equivalence() -> None:
    assert sorted(WORKFLOWS.glob("*.yml")) == [CANARY, EQUIVALENCE, TESTS]


@pytest.mark.skipif(ACTIONLINT is None, reason=NO_ACTIONLINT)
@pytest.mark.parametrize("workflow", [CANARY, EQUIVALENCE, TESTS], ids=lambda path: path.name)
def test_actionlint_accepts_the_workflow(workflow: Path) -> None:
    assert ACTIONLINT is not None
    done = subprocess.run(
        [ACTIONLINT, "-no-color", str(workflow)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(ACTIONLINT is None, reason=NO_ACTIONLINT)
def test_actionlint_really_checks(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = CANARY.read_text(encoding="utf-8").replace("runs-on: ubuntu-latest", "runs-on: [")
    broken.write_text(text.replace("${{ github.run_id }}", "${{ github.nope( }}"), encoding="utf-8")
    assert ACTIONLINT is not None
    done = subprocess.run([ACTIONLINT, "-no-color", str(broken)], capture_output=True, check=False)
    assert done.returncode != 0


def test_the_canary_is_scheduled_uploads_the_page_and_compares_with_the_last_one() -> None:
    text = CANARY.read_text(encoding="utf-8")
    assert "schedule:" in text and "cron:" in text
    assert "actions/upload-artifact@" in text and "path: build/canary/" in text
    assert "--previous previous/status.json" in text
    assert "nox -s canary --" in text


def test_the_tests_run_nox_tests_on_every_push_and_pull_request() -> None:
    text = TESTS.read_text(encoding="utf-8")
    assert "\non:\n  push:\n  pull_request:\n" in text
    assert "        run: nox -s tests\n" in text
    assert "schedule:" not in text  # the nightly work is the canary's


def _step(job: dict[str, Any], uses: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = job["steps"]
    (step,) = [s for s in steps if s.get("uses", "").startswith(f"{uses}@")]
    return step


def test_the_equivalence_runs_n_shards_and_the_merge_of_all_of_them_is_the_verdict() -> None:
    jobs = yaml.safe_load(EQUIVALENCE.read_text(encoding="utf-8"))["jobs"]
    assert sorted(jobs) == ["merge", "shard"]
    shard, merge = jobs["shard"], jobs["merge"]
    numbers = shard["strategy"]["matrix"]["shard"]
    count = len(numbers)
    assert count > 1 and numbers == list(range(1, count + 1))
    assert shard["strategy"]["fail-fast"] is False  # one failing shard cancels no other
    (run,) = [s["run"] for s in shard["steps"] if "nox -s equivalence --" in s.get("run", "")]
    command = " ".join(run.split("nox -s equivalence --", 1)[1].split("\\\n"))
    out = command.split(" --out ", 1)[1].split()[0]
    assert f" --shard ${{{{ matrix.shard }}}}/{count} " in command
    assert " --cache-dir " in command  # a result cache per shard: its items are stable
    upload = _step(shard, "actions/upload-artifact")["with"]
    assert upload["path"] == f"{out}/" and upload["name"].endswith("${{ matrix.shard }}")
    # The merge waits for every shard, runs even when one failed (it is named missing),
    # and its exit code is the run's verdict.
    assert merge["needs"] == "shard" and merge["if"] == "${{ !cancelled() }}"
    download = _step(merge, "actions/download-artifact")["with"]
    assert download["pattern"] == upload["name"].replace("${{ matrix.shard }}", "*")
    (merging,) = [s for s in merge["steps"] if "merge-reports" in s.get("run", "")]
    assert f"merge-reports {download['path']}/*/equivalence.json" in merging["run"]
    assert not any(s.get("continue-on-error") for job in jobs.values() for s in job["steps"])
    # The shards sync the locks tests.yml syncs: one cache entry for both.
    tests = yaml.safe_load(TESTS.read_text(encoding="utf-8"))["jobs"]["tests"]
    caches = [s["with"] for s in shard["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert _step(tests, "actions/cache")["with"] in caches


def lint_commands() -> list[str]:
    """Return the commands noxfile.py's ``_lint`` runs, in order (``PY_SOURCES`` spelled out)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    sources = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "PY_SOURCES"
    )
    lint = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_lint")
    commands = []
    for statement in lint.body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "session.run":
            words: list[str] = []
            for arg in call.args:
                words += sources if isinstance(arg, ast.Starred) else [ast.literal_eval(arg)]
            commands.append(" ".join(words))
    return commands


def test_pre_commit_runs_the_checks_of_nox_lint() -> None:
    assert lint_commands() == [
        "ruff check overlay tests benchmarks noxfile.py",
        "ruff format --check overlay tests benchmarks noxfile.py",
        "mypy",
    ]
    (repo,) = yaml.safe_load(PRE_COMMIT.read_text(encoding="utf-8"))["repos"]
    hooks = repo["hooks"]
    assert repo["repo"] == "local"  # the project's own tools, not pinned copies of them
    assert [" ".join([hook["entry"], *hook.get("args", [])]) for hook in hooks] == (lint_commands())
    assert all(hook["language"] == "system" and not hook["pass_filenames"] for hook in hooks)


@pytest.mark.skipif(PRE_COMMIT_TOOL is None, reason="pre-commit is not installed (dev extra)")
def test_pre_commit_accepts_its_config() -> None:
    assert PRE_COMMIT_TOOL is not None
    done = subprocess.run(
        [PRE_COMMIT_TOOL, "validate-config", str(PRE_COMMIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
