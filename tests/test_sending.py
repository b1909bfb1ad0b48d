"""What is sent upstream: which patch goes, what holds it back, what the reviewer reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from overlay import fixes, lines, render
from overlay._git import git, git_with_env
from overlay.envs import release_venvs
from overlay.equivalence import corpus
from overlay.equivalence.protocol import InitReply, ItemResult, RunStatus, TargetState, VgfResult
from overlay.equivalence.verdict import Quality
from overlay.fixes import Effect, Trigger
from overlay.text.series import load_series, parse_patch
from overlay.upstream import behaviour, pr_text, prepare, reports, upstream_tests
from overlay.upstream.canary.gitrepo import MAIN_REF, open_upstream
from overlay.upstream.commit_rules import Identity
from overlay.upstream.export import export_patch
from overlay.upstream.prepare import chosen, recent_authors
from overlay.upstream.results import (
    CaseOutcome,
    Counts,
    LintReport,
    OnBase,
    OpCounts,
    Outcome,
    PatchBehaviour,
    Sending,
    Submission,
    TestResult,
    TestRun,
    TestState,
)
from overlay.upstream.verdicts import op_count_change, submission_problems

from scaffold import make_diff

ROOT = Path(__file__).resolve().parent.parent
LINES = lines.all_lines(ROOT / "patches")
SIGNER = Identity("Jane Doe", "jane.doe@example.org")
NEW = "backends/arm/test/passes/test_demo.py::test_new"
OLD = "backends/arm/test/passes/test_demo.py::test_old"


def test_an_older_line_sends_the_newest_lines_patch_of_each_fix_it_carries() -> None:
    old, newest = LINES[0], LINES[-1]
    send, skipped = chosen(old.directory, newest.directory)
    carried = {p.number: p.name for p in load_series(newest.directory).patches}
    own = load_series(old.directory).patches
    assert [p.name for p in send] == [carried[p.number] for p in own if p.number in carried]
    assert sorted(skipped) == sorted(p.name for p in own if p.number not in carried)
    assert all("no longer carries it" in why for why in skipped.values())
    mine, none = chosen(newest.directory, newest.directory)
    assert [p.name for p in mine] == list(carried.values()) and none == {}
    last = load_series(newest.directory).patches[-1]
    only = chosen(newest.directory, newest.directory, frozenset({last.number}))
    assert [p.name for p in only[0]] == [last.name]
    kept = next(p for p in own if p.number in carried)  # sent as the newest's
    dropped = [p for p in own if p.number not in carried][:1]
    send, skipped = chosen(
        old.directory, newest.directory, frozenset({kept.number, dropped[0].number})
    )
    assert [p.name for p in send] == [carried[kept.number]]
    assert list(skipped) == [dropped[0].name]


def test_recent_authors_are_handles_where_the_email_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "up"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    authors = [
        ("Zingo Andersen", "zingo.andersen@arm.com"),
        ("Oscar A", "87121123+oscarandersson8218@users.noreply.github.com"),
        ("pytorchbot", "bot@pytorch.org"),
        ("Jane Doe", SIGNER.email),
        ("Zingo Andersen", "zingo.andersen@arm.com"),
    ]
    for index, (name, address) in enumerate(authors):
        (repo / "a.py").write_text(f"x = {index}\n")
        git(repo, "add", "a.py")
        who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": address}
        git_with_env(repo, {**who, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": address},
                     "commit", "-q", "-m", f"c{index}")  # fmt: skip
    scratch = open_upstream(str(repo), tmp_path / "scratch")
    found = recent_authors(scratch, scratch.rev(MAIN_REF), ["a.py"], SIGNER)
    assert found == ("Zingo Andersen", "@oscarandersson8218")


def _run(stock: TestState, patched: TestState) -> TestRun:
    tests = (TestResult(OLD, TestState.PASSED), TestResult(NEW, stock, "AssertionError: x"))
    after = (TestResult(OLD, TestState.PASSED), TestResult(NEW, patched))
    return TestRun("pytest -c backends/arm/test/pytest.ini t.py", ("t.py",), Counts(tests),
                   Counts(after), 1.0)  # fmt: skip


def _base(
    name: str, outcome: Outcome, *, applies: str = "", broken: tuple[str, ...] = ()
) -> OnBase:
    case = CaseOutcome(
        "grid_case", Quality.FAILED, Quality.RIGHT, None, "boom", "",
        {"tosa": "max error 0.10% of range, SQNR 50.0 dB", "vgf": "fails: boom"},
        {"tosa": "max error 0.10% of range, SQNR 50.0 dB", "vgf": "max error 0.20% of range"},
    )  # fmt: skip
    run = _run(TestState.FAILED, TestState.PASSED)
    found = PatchBehaviour("0001-x.patch", name, (case,), (), outcome, "why", test=run)
    return OnBase(name, "c0ffee" * 7, applies, found, run, broken)


def test_what_holds_a_fix_back() -> None:
    good = (
        _base("main", Outcome.FAILS_BEFORE_PASSES_AFTER),
        _base("1.5.1", Outcome.FAILS_BEFORE_PASSES_AFTER),
    )
    clean = LintReport("lintrunner a.py", (), 1.0)
    assert submission_problems(good, clean, []) == ()
    dirty = LintReport("lintrunner a.py", ("a.py:1:1 :Warning x [FLAKE8/C901]",), 1.0)
    held = submission_problems(
        (_base("main", Outcome.COULD_NOT_RUN, applies="git am fails: x"),
         _base("1.5.1", Outcome.STILL_FAILS, broken=(OLD,))),
        dirty, ["subject should start with an imperative verb the pre-push hook knows: 'Keep'"],
    )  # fmt: skip
    verb = "subject should start with an imperative verb the pre-push hook knows: 'Keep'"
    assert held == (
        f"pre-push hook: {verb}",
        "upstream's linters: 1 finding(s): a.py:1:1 :Warning x [FLAKE8/C901]",
        "main: git am fails: x",
        "1.5.1: why",
        f"1.5.1: passing without it, failing with it: {OLD}",
    )
    assert submission_problems(good, None, [])[0].startswith("upstream's linters did not run")
    assert submission_problems(good, None, [], lint_asked=False) == ()


def test_the_pr_body_is_what_a_reviewer_acts_on() -> None:
    fix = next(f for f in fixes.FIXES if f.upstream.reproducer)
    path = "backends/arm/_passes/demo_pass.py"
    header = (
        "Description: Fix the demo pass\n The demo pass drops the scale. It fails.\n .\n"
        " Keep the scale.\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
    )
    patch = parse_patch(
        f"{fix.number:04d}-demo.patch", header + make_diff(path, "x = 1\n", "x = 2\n")
    )
    item = export_patch(patch, {path: b"x = 1\n"}, signer=SIGNER)
    bases = (
        _base("main", Outcome.FAILS_BEFORE_PASSES_AFTER),
        _base("1.5.1", Outcome.FAILS_BEFORE_PASSES_AFTER),
    )
    lint = LintReport("lintrunner x", (), 1.0)
    sub = Submission(patch.name, "1.5.1", item.subject, "", bases, lint, (),
                     ("@someone", "Zingo Andersen"), ())  # fmt: skip
    done = pr_text.with_texts(item, patch, sub, release="1.5.1", torch="2.13.0", branch=("r", "b"))
    body = done.pr_body
    assert body.startswith(
        "### Summary\n\nThe demo pass drops the scale. It fails.\n\nKeep the scale."
    )
    assert fix.upstream.reproducer.splitlines()[0] in body
    assert "| `grid_case` | vgf | main | fails: boom | max error 0.20% of range |" in body
    plan = body.split("### Test plan\n", 1)[1]
    assert "pytest -c backends/arm/test/pytest.ini t.py" in plan
    assert "- the tests it adds: without 1 passed, 1 failed, with 2 passed" in plan
    assert f"| `{NEW}` | failed | passed | failed | passed |" in plan  # every test, each base
    assert "lintrunner x: clean" in plan
    assert plan.rstrip().splitlines()[-1].endswith("@someone Zingo Andersen")
    assert "overlay" not in body.lower() and "patches/" not in body
    assert done.issue.startswith("### 🐛 Describe the bug: Fix the demo pass")  # no Bug: header
    assert "CLA" in done.checklist and ".issue.md" in done.checklist
    report = Sending(
        "1.5.1", "1.5.1", "2.13.0", "c0ffee" * 7, (sub,), {"0002-x.patch": "dropped"}, 1.0
    )
    shown = render.text(reports.sending_blocks(report))
    assert "fails before, passes after" in shown and "ready" in shown
    assert "Held back:\n\n  none\n\nNot sent:\n\n  0002-x.patch: dropped\n" in shown
    every = render.text(reports.sending_blocks(dataclasses.replace(report, skipped={})))
    assert every.endswith("Not sent:\n\n  none\n")


# Measured 2026-12-06: conv -> conv (no activation) under get_vgf_snorm_quantization_config,
# TOSA-1.0+INT, on stock 1.5.1 and on 1.5.1 with the series of 96dca7b (today's 0003).
SNORM_STOCK = {"CONST": 16, "CONV2D": 2, "RESCALE": 2, "TRANSPOSE": 2}
SNORM_0003 = {"CLAMP": 2, "CONST": 16, "CONV2D": 2, "RESCALE": 2, "TRANSPOSE": 2}


def _item(ops: dict[str, int], vgf_ops: dict[str, int] | None = None) -> ItemResult:
    vgf = VgfResult(TargetState.COMPARED, tosa_ops=vgf_ops) if vgf_ops is not None else None
    return ItemResult(RunStatus.OK, tosa_ops=ops, vgf=vgf)


def test_a_patch_that_changes_a_bystanders_operators_is_held_back_with_the_counts() -> None:
    snorm = next(c for c in corpus.BYSTANDERS if c.quantize == "a8w8_snorm")
    plain = next(c for c in corpus.BYSTANDERS if c.quantize == "a8w8" and "conv" in c.name)
    init = InitReply("python", "1.5.1", "2.13.0", 1.0, ())
    stock = (init, {snorm.name: _item(SNORM_STOCK, SNORM_STOCK), plain.name: _item(SNORM_STOCK)})
    patched = (init, {snorm.name: _item(SNORM_0003, SNORM_0003), plain.name: _item(SNORM_STOCK)})
    counts = behaviour.op_counts([snorm.name, plain.name], stock, patched)
    assert [(c.case, c.target) for c in counts] == [
        (snorm.name, "tosa"), (snorm.name, "vgf"), (plain.name, "tosa")
    ]  # fmt: skip
    change = "CLAMP 0 -> 2 (stock: CONST 16, CONV2D 2, RESCALE 2, TRANSPOSE 2)"
    assert [op_count_change(c) for c in counts] == [change, change, ""]
    good = _base("main", Outcome.FAILS_BEFORE_PASSES_AFTER)
    held = dataclasses.replace(good, bystanders=counts)
    problems = submission_problems((held,), LintReport("l", (), 1.0), [])
    assert problems == (
        f"main: changes a model outside its bug: {snorm.note}, TOSA-1.0+INT, TOSA operators:"
        f" {change}",
        f"main: changes a model outside its bug: {snorm.note}, TOSA-1.0+INT, VGF operators:"
        f" {change}",
    )
    same = behaviour.op_counts([snorm.name], stock, stock)
    assert submission_problems((dataclasses.replace(good, bystanders=same),), None, [],
                               lint_asked=False) == ()  # fmt: skip
    sub = Submission("0003-x.patch", "1.5.1", "Arm backend: Fix x", "", (held,), None, (), (),
                     problems)  # fmt: skip
    header = "Description: Fix x\n It clamps.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    patch = parse_patch("0003-x.patch", header + make_diff("a.py", "x = 1\n", "x = 2\n"))
    plan = pr_text.pr_body(patch, sub, "1.5.1", "2.13.0")
    assert f"  - {snorm.note}, TOSA-1.0+INT, TOSA: {change}" in plan
    assert "- 2 models outside the bug it fixes, TOSA operators without -> with it:" in plan
    report = Sending("1.5.1", "1.5.1", "2.13.0", "c0ffee" * 7, (sub,), {}, 1.0)
    assert "1 of 2 change" not in render.text(reports.sending_blocks(report))  # per target
    assert "2 of 3 change" in render.text(reports.sending_blocks(report))


def test_a_bystander_that_fails_only_with_the_patch_is_a_change() -> None:
    counts = OpCounts("b", "conv -> conv", "TOSA-1.0+INT", "tosa", SNORM_STOCK, {}, "", "boom")
    assert op_count_change(counts) == "stock lowers, with it fails: boom"
    assert op_count_change(dataclasses.replace(counts, stock_error="bang")) == ""


def test_a_fix_that_claims_a_bystander_does_not_count_it_as_one() -> None:
    every = [c.name for c in corpus.BYSTANDERS]
    assert behaviour.bystanders(None) == every
    fix = fixes.FIXES[0]
    claim = Trigger(every[0], Effect.CHANGED, "it means to change it", "1.5.1")
    claiming = dataclasses.replace(fix, claims={"1.5.1": (claim,)})
    assert behaviour.bystanders(claiming) == every[1:]


def test_measure_lowers_each_patchs_bystanders_beside_its_triggers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix = fixes.FIXES[-1]
    path = "backends/arm/demo.py"
    patch = parse_patch(
        f"{fix.number:04d}-demo.patch",
        "Description: Fix demo\n It fixes.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
        + make_diff(path, "x = 1\n", "x = 2\n"),
    )
    ran: dict[str, list[str]] = {}
    init = InitReply("python", "1.5.1", "2.13.0", 1.0, ())

    def run_envs(jobs: dict[str, str], cases: list[str], **_: object) -> dict[str, object]:
        ran["cases"] = list(cases)
        side = {label: {c: _item(SNORM_STOCK) for c in cases} for label in jobs}
        side[patch.name][corpus.BYSTANDERS[1].name] = _item(SNORM_0003)
        return {label: (init, results) for label, results in side.items()}

    monkeypatch.setattr(behaviour, "run_envs", run_envs)
    monkeypatch.setattr(upstream_tests, "vulkan_env", lambda *_: {})
    monkeypatch.setattr(upstream_tests, "run_tests_both_ways", lambda *_, **__: _run(
        TestState.FAILED, TestState.PASSED))  # fmt: skip
    env = release_venvs.Env(tmp_path / "env", None)  # type: ignore[arg-type]
    base = prepare.Base("1.5.1", "c0ffee", {path: b"x = 1\n"}, env, tmp_path / "python")
    (found,) = prepare.measure(base, [patch], "1.5.1", tmp_path / "out", lambda _: None).values()
    claimed = {t.case for t in fix.triggers}
    bystanders = [c.name for c in corpus.BYSTANDERS if c.name not in claimed]
    assert set(bystanders) <= set(ran["cases"])
    assert [c.case for c in found.bystanders if c.target == "tosa"] == bystanders
    changed = [c for c in found.bystanders if op_count_change(c)]
    assert [(c.case, c.target) for c in changed] == [(corpus.BYSTANDERS[1].name, "tosa")]
