"""What is sent upstream: which patch goes, what holds it back, what the reviewer reads."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from overlay import fixes, lines, render
from overlay._git import git, git_with_env
from overlay.envs import release_venvs
from overlay.equivalence import corpus
from overlay.equivalence.protocol import (
    ExactCheck,
    InitReply,
    ItemResult,
    Numerics,
    OutputDigest,
    RunStatus,
    TargetState,
    VgfResult,
)
from overlay.equivalence.verdict import Quality
from overlay.fixes import Effect, Trigger
from overlay.fixes.model import PullRequest, UpstreamNote
from overlay.text.series import Patch, load_series, parse_patch
from overlay.upstream import behaviour, export, pr_text, prepare, reports, upstream_tests
from overlay.upstream.commit_rules import PREFIX, Identity
from overlay.upstream.export import (
    LABEL_COMMANDS,
    Export,
    commit_message,
    export_patch,
    upstream_subject,
)
from overlay.upstream.gitrepo import GITHUB, MAIN_REF, open_upstream, refresh_command
from overlay.upstream.prepare import chosen, judge, release_date
from overlay.upstream.results import (
    Action,
    Applied,
    CaseOutcome,
    Counts,
    LintReport,
    OnBase,
    OpCounts,
    Outcome,
    PatchBehaviour,
    PatchVerdict,
    Review,
    Sending,
    Status,
    TestResult,
    TestRun,
    TestState,
)
from overlay.upstream.upstream_tests import new_tests
from overlay.upstream.verdicts import (
    PR_BODY_LIMIT,
    op_count_change,
    submission_problems,
    text_problems,
)

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
    how = Applied(Status.CONFLICT, applies) if applies else Applied(Status.APPLIES)
    return OnBase("0001-x.patch", how, base=name, commit="c0ffee" * 7, behaviour=found,
                  affected=run, broken=broken)  # fmt: skip


def _submission(
    patch: str,
    subject: str,
    bases: tuple[OnBase, ...],
    lint: LintReport | None,
    *,
    source: str = "1.5.1",
    base_commit: str = "",
    problems: tuple[str, ...] = (),
) -> PatchVerdict:
    """Return a fix as the export judges it: on its bases, with upstream's gate."""
    review = Review(base_commit, lint, ())
    action = Action.HOLD if problems else Action.SEND
    return PatchVerdict(patch, subject, bases, action, "", source=source, flags=problems,
                        review=review)  # fmt: skip


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
    sub = _submission(patch.name, item.subject, bases, lint, source="1.5.1")
    _, done = judge(item, patch, sub, torch="2.13.0", branch=("r", "b"))
    assert "`git -C r push <your fork> b`" in done.checklist
    _, unpushed = judge(item, patch, sub, torch="2.13.0")  # `git am` failed on main: no branch
    assert "push <your fork>" not in unpushed.checklist
    assert f"- [ ] No branch to push: `git am` of {item.stem}.mbox failed" in unpushed.checklist
    body, comment = done.pr_body, done.comment
    assert body.startswith(
        "### Summary\n\nThe demo pass drops the scale. It fails.\n\nKeep the scale."
    )
    assert fix.upstream.reproducer.splitlines()[0] in body
    # the measurements are the first comment: the merge bot copies the body into the commit
    assert comment.startswith("### Measurements\n\nEach model lowered and run: TOSA on the")
    assert "Ethos-U" not in comment  # how each target ran: only those the numbers hold
    assert "| VGF | main and 1.5.1 | fails: boom | max error 0.20% of range |" in comment
    assert comment.count("- the tests it adds: without 1 passed, 1 failed, with 2 passed") == 1
    assert (
        "On main's backends/arm (c0ffeec0ffee) over the executorch 1.5.1 wheel"
        " and on executorch 1.5.1" in comment
    )
    assert not [line for line in comment.splitlines() if line and line in body.splitlines()]
    assert "Measurements per target and base: first comment." in body
    assert f"- [ ] Post {item.stem}.comment.md as the PR's first comment" in done.checklist
    plan = body.split("### Test plan\n", 1)[1]
    assert "pytest -c backends/arm/test/pytest.ini t.py" in plan
    assert "| test | main and 1.5.1 without | with |" in plan  # both bases alike: one pair
    assert f"| `{NEW}` | failed | passed |" in plan  # changed
    assert f"`{OLD}`" not in plan  # the same without and with: counted, not named
    assert "The other 1 tests end the same without and with it (main 1 passed; 1.5.1" in plan
    assert "lintrunner x: clean" in plan
    cited = [f"@{pr.author}" for pr in fix.upstream.cited]
    cc = plan.rstrip().splitlines()[-1]  # the team and the cited PRs' authors, nobody else
    assert cc.split() == list(dict.fromkeys(" ".join(export.ARM_CC).split() + cited))
    assert "overlay" not in body.lower() and "patches/" not in body
    assert done.issue.startswith(f"Title: {PREFIX}")  # no Bug: header: an issue to file
    assert "CLA" in done.checklist and ".issue.md" in done.checklist
    report = Sending(
        "1.5.1", "1.5.1", "2.13.0", "c0ffee" * 7, (sub,), {"0002-x.patch": "dropped"}, 1.0
    )
    shown = render.markdown(reports.sending_blocks(report))
    assert "fails before, passes after" in shown and "ready" in shown
    assert "## Held back\n\n- none\n\n## Not sent\n\n- 0002-x.patch: dropped\n" in shown
    every = render.markdown(reports.sending_blocks(dataclasses.replace(report, skipped={})))
    assert every.endswith("## Not sent\n\n- none\n")


# --- what the maintainer reads, on the real 1.5.1 patches and recorded measurements ---------

NEWEST = LINES[-1]
MAIN, MAIN_DATE = "cff6f4dd32" + "0" * 30, "2026-08-22T15:26:39-07:00"  # the local snapshot
STALE = (
    "not ready on main: main cff6f4dd32 (2026-08-22) is older than executorch 1.5.1"
    " (2026-09-22); refresh it: `git -C /m fetch URL main:main`, then run again"
)
WRONG = {
    "tosa": "max error 2.75% of range, SQNR 27.6 dB",
    "vgf": "max error 2.75% of range, SQNR 27.6 dB",
}
RIGHT = {
    "tosa": "max error 0.00% of range, SQNR inf dB",
    "vgf": "max error 0.00% of range, SQNR inf dB",
}


def _export(patch: Patch) -> Export:
    """Return a real patch as the export makes it (the diff itself is not needed here)."""
    return Export(patch.name, upstream_subject(patch), commit_message(patch, SIGNER), "", {}, {})


def _sent(number: int) -> Patch:
    return next(p for p in load_series(NEWEST.directory).patches if p.number == number)


def _recorded(patch: Patch, base: str, states: dict[str, tuple[TestState, TestState]]) -> OnBase:
    """Return a fix on one base as measured: its claimed cases right with it on TOSA and VGF,
    the tests ``states`` gives (node -> without, with), those it adds among them."""
    fix = fixes.by_patch(patch.name)
    assert fix is not None
    cases = tuple(
        CaseOutcome(t.case, Quality.WRONG, Quality.RIGHT, None, "", "", WRONG, RIGHT)
        for t in fix.claims[NEWEST.name]
    )
    run = TestRun(
        "pytest -c backends/arm/test/pytest.ini " + " ".join(fix.upstream.affected_tests),
        fix.upstream.affected_tests,
        Counts(tuple(TestResult(n, before) for n, (before, _) in states.items())),
        Counts(tuple(TestResult(n, after) for n, (_, after) in states.items())),
        1.0,
    )
    added = new_tests(patch.diff)

    def own(counts: Counts) -> Counts:
        return Counts(tuple(t for t in counts.tests if t.node.split("[")[0] in added))

    test = TestRun(run.command, tuple(added), own(run.stock), own(run.patched), 1.0)
    found = PatchBehaviour(patch.name, base, cases, (), Outcome.FAILS_BEFORE_PASSES_AFTER, "ok",
                           test=test)  # fmt: skip
    commit, date = (MAIN, MAIN_DATE) if base == "main" else ("ab" * 20, "2026-09-22")
    return OnBase(patch.name, Applied(Status.APPLIES), base=base, commit=commit, date=date,
                  behaviour=found, affected=run)  # fmt: skip


def _0003_tests(passed: int) -> dict[str, tuple[TestState, TestState]]:
    """Return 0003's tests as recorded (docs/notes/measurements.md, 2026-12-05): its 11 new
    tests, 5 failed -> passed, 4 xfailed, 2 not run here; and the others, the same without
    and with it (``passed`` passed: 212 on main, 216 on 1.5.1; 3 skipped, 206 xfailed, 110
    not run here)."""
    new = new_tests(_sent(3).diff)
    states = {f"{node}[{p}]": (TestState.FAILED, TestState.PASSED) for node in new for p in "ab"}
    for node in list(states):
        if "_u55_" in node or "_u85_" in node:
            states[node] = (TestState.XFAILED, TestState.XFAILED)
        elif "_vgf_" in node:
            states[node] = (TestState.NO_TARGET, TestState.NO_TARGET)
    del states[f"{new[-1]}[b]"]  # the int16 fusion guard is not parametrized: 11 in all
    fix = fixes.by_patch(_sent(3).name)
    assert fix is not None
    others = [
        (TestState.PASSED, passed), (TestState.SKIPPED, 3), (TestState.XFAILED, 206),
        (TestState.NO_TARGET, 110),
    ]  # fmt: skip
    paths = fix.upstream.affected_tests
    for state, count in others:
        for i in range(count):
            path = paths[i % len(paths)]
            name = Path(path).stem.removeprefix("test_")
            node = (
                f"{path}::test_{name}_tosa_INT[{state.name.lower()}_{i:03d}_1x3x32x32_per_channel]"
            )
            states[node] = (state, state)
    return states


def test_0003s_body_fits_github_naming_its_new_tests_and_counting_the_rest() -> None:
    """Gate rule 1: the body lists the tests it adds and those whose state changed; the 535
    others are counted (main's body listed all 546 in a table over 65,536 characters)."""
    patch = _sent(3)
    bases = (
        _recorded(patch, "main", _0003_tests(212)),
        _recorded(patch, "1.5.1", _0003_tests(216)),
    )
    lint = LintReport("lintrunner x", (), 1.0)
    sub = _submission(patch.name, upstream_subject(patch), bases, lint, base_commit=MAIN)
    judged, done = judge(_export(patch), patch, sub, torch="2.13.0")
    body = done.pr_body
    assert len(body) < PR_BODY_LIMIT
    assert not [p for p in judged.flags if "PR body" in p]
    runs = [b.affected for b in bases if b.affected is not None]
    new = [t.node for t in runs[0].stock.tests if t.node.split("[")[0] in new_tests(patch.diff)]
    assert len(new) == 11 and all(node.split("[")[0] in body for node in new)
    # a test's parametrizations that ended alike share a row
    assert "_tosa_INT_relu_cat` (2: a, b) | failed | passed |" in body
    # the rows "not run here" (its VGF tests) are said plainly not to have run
    assert "| not run here | not run here |" in body
    assert "The tests not run here did not run for this change: they need an executor" in body
    same = {t.node for run in runs for t in run.stock.tests if t.node not in new}
    assert len(same) == 535 and not [n for n in same if n in body]
    # each base counts its own (main selects 531 of them, 1.5.1 535)
    not_run = "110 not run here (no executor_runner built)"
    assert (
        "The other tests end the same without and with it"
        f" (main, 531: 212 passed, 3 skipped, 206 xfailed, {not_run};"
        f" 1.5.1, 535: 216 passed, 3 skipped, 206 xfailed, {not_run})." in body
    )
    assert (
        "- all of them: without 212 passed, 5 failed, 3 skipped, 210 xfailed, 112 not run"
        in done.comment
    )


def test_a_body_over_githubs_limit_holds_the_fix_back() -> None:
    """Gate rule 1: a real check, not a truncation: 800 tests whose state changed are named."""
    patch = _sent(3)
    node = "backends/arm/test/ops/test_conv_combos.py::test_convolution_2d_tosa_INT"
    states = {
        f"{node}_{i:04d}[1x3x32x32]": (TestState.XFAILED, TestState.SKIPPED) for i in range(800)
    }
    base = _recorded(patch, "1.5.1", states)
    sub = _submission(patch.name, upstream_subject(patch), (base,),
                      LintReport("lintrunner x", (), 1.0), base_commit=MAIN)  # fmt: skip
    judged, done = judge(_export(patch), patch, sub, torch="2.13.0", lint_asked=False)
    size = len(done.pr_body)
    assert size > PR_BODY_LIMIT
    expected = (
        f"the PR body is {size:,} characters: GitHub refuses more than 65,536"
        " (and the merge bot copies it into the squash commit)"
    )
    assert expected in judged.flags
    assert f"- [ ] Not ready: {expected}" in done.checklist


def test_a_stale_main_is_said_with_its_commit_date_and_refresh_and_holds_nothing_back() -> None:
    """Gate rule 2: main older than the release: the report, the PR text and the checklist
    say so with main's commit and date and the command that refreshes it; the fix is ready
    on the release, and what main found holds nothing back."""
    patch = _sent(7)
    states = {f"{new_tests(patch.diff)[0]}": (TestState.FAILED, TestState.PASSED)}
    main = dataclasses.replace(
        _recorded(patch, "main", states), own=Applied(Status.CONFLICT, "git am fails: x")
    )
    bases = (main, _recorded(patch, "1.5.1", states))
    sub = _submission(patch.name, upstream_subject(patch), bases, None, base_commit=MAIN)
    judged, done = judge(_export(patch), patch, sub, torch="2.13.0", stale=STALE)
    assert [p for p in judged.flags if "main" in p] == []  # nor "linters did not run"
    assert "- [ ] Not ready on main: main cff6f4dd32 (2026-08-22) is older" in done.checklist
    assert (
        "On main's backends/arm (cff6f4dd3200, 2026-08-22) over the executorch 1.5.1 wheel"
        in done.comment
    )
    held, _ = judge(_export(patch), patch, sub, torch="2.13.0")  # main as new as the release
    assert "main: git am fails: x" in held.flags
    report = Sending("1.5.1", "1.5.1", "2.13.0", MAIN, (judged,), {}, 1.0, MAIN_DATE,
                     "2026-09-22", STALE)  # fmt: skip
    shown = render.markdown(reports.sending_blocks(report))
    assert "main cff6f4dd3200 (2026-08-22) and executorch 1.5.1 (2026-09-22)" in shown
    assert "Not ready on main: main cff6f4dd32 (2026-08-22) is older than executorch 1.5.1" in shown
    assert "ready on 1.5.1, not on main" in shown
    current = dataclasses.replace(report, stale_main="", submissions=(held,))
    assert "ready on 1.5.1, not on main" not in render.markdown(reports.sending_blocks(current))


def test_on_a_stale_main_the_checklist_pushes_only_a_branch_of_a_refreshed_run() -> None:
    """A branch on a stale main holds whatever that main holds (here, a local commit): the
    checklist offers no push of it, only of the branch a run on the refreshed main writes."""
    patch = _sent(7)
    states = {f"{new_tests(patch.diff)[0]}": (TestState.FAILED, TestState.PASSED)}
    bases = (_recorded(patch, "main", states), _recorded(patch, "1.5.1", states))
    sub = _submission(patch.name, upstream_subject(patch), bases, None, base_commit=MAIN)
    where = ("branches/x", "arm-x")
    _, stale = judge(_export(patch), patch, sub, torch="2.13.0", stale=STALE, branch=where)
    _, current = judge(_export(patch), patch, sub, torch="2.13.0", branch=where)
    push = "`git -C branches/x push <your fork> arm-x`"
    assert f"- [ ] Push the branch (from this folder): {push}" in current.checklist
    assert "Push the branch (from this folder)" not in stale.checklist
    assert (
        "- [ ] Once main is refreshed and the export has run again, push the branch that run"
        f" writes (from its folder), not this one: {push}"
    ) in stale.checklist


@pytest.mark.parametrize("patch", load_series(NEWEST.directory).patches, ids=lambda p: p.name[:4])
def test_the_texts_speak_upstreams_words(patch: Patch) -> None:
    """Gate rule 4, on each patch the newest line sends: the numbers name the model, spec
    and quantizer config (no corpus case), the issue's title is the symptom, the PRs the fix
    declares are cited and their authors cc'd by handle, the labels are pytorchbot commands."""
    fix = fixes.by_patch(patch.name)
    assert fix is not None
    states = {n: (TestState.FAILED, TestState.PASSED) for n in new_tests(patch.diff)}
    bases = (_recorded(patch, "main", states), _recorded(patch, "1.5.1", states))
    lint = LintReport("lintrunner x", (), 1.0)
    sub = _submission(patch.name, upstream_subject(patch), bases, lint, base_commit=MAIN)
    judged, done = judge(_export(patch), patch, sub, torch="2.13.0")
    words = [p for p in judged.flags if "says '" not in p]  # rule 3 is tested on its own
    assert words == []
    read = (done.message, done.pr_body, done.comment, done.issue)
    for trigger in fix.claims[NEWEST.name]:
        assert not [t for t in read if trigger.case in t]
        info = corpus.info(trigger.case)
        assert f"{info.model}, on {info.spec}" in done.comment
    assert done.issue.splitlines()[0] == f"Title: {PREFIX}{fix.upstream.symptom}"
    assert done.issue.splitlines()[0] != f"Title: {done.subject}"
    assert "executorch 1.5.1 and main (cff6f4dd3200, 2026-08-22), torch 2.13.0" in done.issue
    cc = done.pr_body.rstrip().splitlines()[-1]
    assert all(word.startswith("@") for word in cc.split()[1:])
    for pr in fix.upstream.cited:
        assert f"#{pr.number} ({pr.title}, @{pr.author})" in done.pr_body
        assert f"@{pr.author}" in cc.split()
    for command in LABEL_COMMANDS:
        assert f"  - `{command}`" in done.checklist


def test_the_gate_holds_back_internal_names_a_subject_as_title_and_undeclared_prs() -> None:
    """Gate rule 4, its refusals: a text naming a corpus case, an issue titled with what the
    change does, a description citing a PR its fix module does not declare."""
    header = (
        "Description: Fix the demo pass\n Since #4242 the demo pass drops the scale.\n"
        "Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    )
    patch = parse_patch("0099-demo.patch", header + make_diff("a.py", "x = 1\n", "x = 2\n"))
    item = dataclasses.replace(
        _export(patch),
        pr_body="| `conv_relu_int8` | TOSA | 1.5.1 | x | y |",  # a corpus case, by its name
        issue=f"Title: {upstream_subject(patch)}\n",
    )
    found = text_problems(item, (), None, [c.name for c in corpus.ALL_CASES])
    assert found == [
        "the text names internal corpus case(s) conv_relu_int8: name the model, the TOSA"
        " spec and the quantizer config (CaseInfo.model)",
        "the issue draft's title says what the change does, not the symptom: declare"
        " UpstreamNote.symptom in the fix module",
        "the description cites #4242, which the fix module does not declare"
        " (UpstreamNote.regressed_by or related): the PR text does not link it and its"
        " author is not cc'd",
    ]
    note = UpstreamNote("t.py", "", symptom="s", related=(PullRequest(4242, "T", "who"),))
    titled = dataclasses.replace(item, pr_body="", issue=f"Title: {PREFIX}s\n")
    assert text_problems(titled, (), note, [c.name for c in corpus.ALL_CASES]) == []
    fits = dataclasses.replace(titled, issue=f"Title: {PREFIX}{'s' * (100 - len(PREFIX))}\n")
    assert text_problems(fits, (), note, []) == []
    long = dataclasses.replace(titled, issue=f"Title: {PREFIX}{'s' * (101 - len(PREFIX))}\n")
    (problem,) = text_problems(long, (), note, [])
    assert problem.startswith("the issue draft's title has 101 characters, over 100")


def test_a_series_marker_names_another_fixs_pr_until_that_pr_is_open() -> None:
    """``#<0099>`` in 0098's description: the PR text keeps it and both checklists say when to
    replace it; the commit message names 0099's commit by its subject; no gate rule minds."""
    texts = {
        98: " The float path is #<0099> (register it on FP only), a separate fix.\n",
        99: " Register it on FP only.\n",
    }
    patches = [
        parse_patch(
            f"{n:04d}-demo.patch",
            f"Description: Fix demo {n}\n{text}Forwarded: no\nLast-Update: 2026-12-02\n---\n"
            + make_diff("a.py", "x = 1\n", "x = 2\n"),
        )
        for n, text in texts.items()
    ]
    subjects = {p.number: upstream_subject(p) for p in patches}
    said = commit_message(patches[0], SIGNER, subjects)
    assert 'The float path is "Arm backend: Fix demo 99" (register' in said
    assert "#<0099>" in commit_message(patches[0], SIGNER)  # no series given: kept
    bases = (_base("main", Outcome.FAILS_BEFORE_PASSES_AFTER),)
    done = {}
    for patch in patches:
        item = export_patch(patch, {"a.py": b"x = 1\n"}, signer=SIGNER, series=subjects)
        sub = _submission(patch.name, item.subject, bases, LintReport("lint", (), 1.0))
        named = export.named_by(patches, patch.number)
        judged, done[patch.number] = judge(item, patch, sub, torch="2.13.0", named_by=named)
        assert not [f for f in judged.flags if "cites" in f]  # the marker is no PR number
    assert "The float path is #<0099> (register it on FP only)" in done[98].pr_body
    assert (
        "- [ ] After opening the PR of 0099, edit this PR's text: replace #<0099> with that"
        " PR's number." in done[98].checklist
    )
    assert "- [ ] Then edit 0098's PR text: replace #<0099> with this PR's number." in (
        done[99].checklist
    )
    assert "#<" not in done[99].pr_body and "Then edit" not in done[98].checklist


def test_main_is_refreshed_where_it_is_read_and_the_release_dated_by_its_commit(
    tmp_path: Path,
) -> None:
    """Gate rule 2: the command that refreshes the main the export reads (a bare mirror: a
    fetch into main; a clone on main: a pull), and the release's own commit date where the
    clone has it, else the day recorded in patches/upstream.toml."""
    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "-q", "-b", "main")
    (clone / "a.py").write_text("x = 1\n")
    git(clone, "add", "a.py")
    when = {"GIT_COMMITTER_DATE": "2026-09-21T10:00:00+00:00"}
    git_with_env(clone, {**when, "GIT_AUTHOR_DATE": when["GIT_COMMITTER_DATE"]},
                 "commit", "-qm", "the release")  # fmt: skip
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(clone), str(mirror))
    assert refresh_command(str(mirror)) == (
        f"`git -C {mirror} fetch {GITHUB} main:main`, or `--upstream {GITHUB}`"
    )
    assert refresh_command(str(clone)).startswith(f"`git -C {clone} pull --ff-only {GITHUB} main`")
    assert refresh_command(GITHUB) == "run it again (main is fetched each run)"
    scratch = open_upstream(str(clone), tmp_path / "scratch")
    commit = scratch.rev(MAIN_REF)
    assert release_date(scratch, commit, "2026-09-22") == "2026-09-21T10:00:00+00:00"
    assert release_date(scratch, "ab" * 20, "2026-09-22") == "2026-09-22"  # not in the clone
    assert release_date(scratch, "", "") == ""


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
    sub = _submission("0003-x.patch", "Arm backend: Fix x", (held,), None, source="1.5.1",
                      problems=problems)  # fmt: skip
    plan = pr_text.measurements(sub, "1.5.1", "2.13.0")
    assert f"  - {snorm.note}, TOSA-1.0+INT, TOSA: {change}" in plan
    assert (
        f"- 2 models outside the bug it fixes ({snorm.note}; {plain.note}), TOSA operators"
        " without -> with it:" in plan
    )
    unchanged = dataclasses.replace(sub, bases=(dataclasses.replace(good, bystanders=same),))
    assert (
        "- 1 models outside the bug it fixes, the same TOSA operators without and with it"
        f" (operator counts):\n  - {snorm.note}\n"
        in pr_text.measurements(unchanged, "1.5.1", "2.13.0")
    )
    report = Sending("1.5.1", "1.5.1", "2.13.0", "c0ffee" * 7, (sub,), {}, 1.0)
    assert "1 of 2 change" not in render.markdown(reports.sending_blocks(report))  # per target
    assert "2 of 3 change" in render.markdown(reports.sending_blocks(report))


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
    (found,) = prepare.measure(
        base, [patch], "1.5.1", tmp_path / "out", lambda _: None, origin=base.files
    ).values()
    assert found.lands and (found.base, found.commit) == ("1.5.1", "c0ffee")
    claimed = {t.case for t in fix.triggers}
    bystanders = [c.name for c in corpus.BYSTANDERS if c.name not in claimed]
    assert set(bystanders) <= set(ran["cases"])
    assert [c.case for c in found.bystanders if c.target == "tosa"] == bystanders
    changed = [c for c in found.bystanders if op_count_change(c)]
    assert [(c.case, c.target) for c in changed] == [(corpus.BYSTANDERS[1].name, "tosa")]


def test_measure_says_why_a_patch_does_not_land_on_a_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = "backends/arm/demo.py"
    patch = parse_patch(
        "0009-demo.patch",
        "Description: Fix demo\n It fixes.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
        + make_diff(path, "x = 1\n", "x = 2\n"),
    )
    monkeypatch.setattr(behaviour, "run_envs", lambda *_, **__: {})
    monkeypatch.setattr(upstream_tests, "vulkan_env", lambda *_: {})
    env = release_venvs.Env(tmp_path / "env", None)  # type: ignore[arg-type]
    base = prepare.Base("main", "c0ffee", {path: b"y = 1\n"}, env, tmp_path / "python", "2026")
    (found,) = prepare.measure(
        base, [patch], "1.5.1", tmp_path / "out", lambda _: None, origin={path: b"x = 1\n"}
    ).values()
    assert not found.lands and (found.base, found.commit, found.date) == ("main", "c0ffee", "2026")
    assert found.own.detail.startswith("does not apply to main: conflict: ")
    assert (found.behaviour, found.affected) == (None, None)
    assert submission_problems((found,), None, [], lint_asked=False) == (
        f"main: {found.own.detail}",
    )


def test_the_numbers_share_a_row_across_bases_and_put_what_did_not_run_aside() -> None:
    """Review 35: main's rows repeat 1.5.1's; Ethos-U (compiled only) and a TOSA lowering
    that delegated nothing read the same without and with the change: one line each."""
    ethos = "lowers (6 ops left on the CPU)"
    on_cpu = "not delegated (aten.grid_sampler_2d.default on the CPU)"
    stock = {"tosa": on_cpu, "vgf": "max error 100.00% of range", "ethos-u55-128": ethos}
    fixed = {**stock, "vgf": "max error 0.00% of range"}

    def on(base: str, vgf_after: str = "max error 0.00% of range") -> OnBase:
        case = CaseOutcome("grid_warp_int8_vgf_int", Quality.WRONG, Quality.RIGHT, None,
                           "", "", stock, {**fixed, "vgf": vgf_after})  # fmt: skip
        found = PatchBehaviour("0008-x.patch", base, (case,), (), Outcome.FAILS_BEFORE_PASSES_AFTER,
                               "")  # fmt: skip
        return OnBase("0008-x.patch", Applied(Status.APPLIES), base=base, behaviour=found)

    lines = pr_text.numbers_table([on("main"), on("1.5.1")])
    assert lines[2:] == [
        "| target | base | without this change | with it |",
        "|---|---|---|---|",
        "| VGF | main and 1.5.1 | max error 100.00% of range | max error 0.00% of range |",
        "",
        f"- TOSA on main and 1.5.1: {on_cpu}, without and with it",
        f"- Ethos-U55-128 on main and 1.5.1: {ethos}, without and with it",
        "",
    ]
    apart = pr_text.numbers_table([on("main"), on("1.5.1", "max error 3.00% of range")])
    assert apart[4:6] == [
        "| VGF | main | max error 100.00% of range | max error 0.00% of range |",
        "| VGF | 1.5.1 | max error 100.00% of range | max error 3.00% of range |",
    ]
    issue = pr_text.numbers_table([on("main"), on("1.5.1")], with_change=False)
    assert issue[2:5] == [
        "| target | base | result |",
        "|---|---|---|",
        "| VGF | main and 1.5.1 | max error 100.00% of range |",
    ]
    ran = pr_text.how_run([on("main")])
    assert "Ethos-U compiled by Vela, never run (no FVP)" in ran
    assert "TOSA on the TOSA reference model" not in ran  # it delegated nothing: not run


def test_the_quantizer_config_is_called_as_code_writes_it() -> None:
    """Review 38 R-c: per-channel is the config's default, so a caption calls it bare, as
    the reproducers and the bystander list do; only a per-tensor case names the argument."""
    assert pr_text.case_words("conv_relu_cat_mixed_qparams").endswith(
        "`TOSAQuantizer` with `get_symmetric_quantization_config()`"
    )
    assert pr_text.case_words("grouped_transposed_conv_int8").endswith(
        "`TOSAQuantizer` with `get_symmetric_quantization_config(is_per_channel=False)`"
    )
    for bystander in corpus.BYSTANDERS:  # their hand-written notes call it the same way
        call = pr_text.config_call(bystander)
        assert call in bystander.note if call else "config()" not in bystander.note


def test_bystanders_alike_on_both_bases_are_listed_once_after_the_blocks() -> None:
    """Review 38 R-d: where the bases' Test plan blocks differ, an identical bystander list
    is printed once after them, not in each block."""
    same = (OpCounts("b", "conv -> conv", "TOSA-1.0+INT", "tosa", SNORM_STOCK, SNORM_STOCK),)
    good = _base("main", Outcome.FAILS_BEFORE_PASSES_AFTER)
    bases = (
        dataclasses.replace(good, bystanders=same),
        dataclasses.replace(
            good, base="1.5.1", commit="", broken=("t.py::test_x",), bystanders=same
        ),
    )
    header = "Description: Fix x\n It clamps.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    patch = parse_patch("0003-x.patch", header + make_diff("a.py", "x = 1\n", "x = 2\n"))
    sub = _submission(patch.name, "Arm backend: Fix x", bases, None)
    plan = pr_text.measurements(sub, "1.5.1", "2.13.0")
    listed = "- 1 models outside the bug it fixes, the same TOSA operators"
    assert plan.count(listed) == 1
    assert plan.index("On executorch 1.5.1") < plan.index(f"On both bases:\n\n{listed}")
    one = pr_text.measurements(dataclasses.replace(sub, bases=bases[:1]), "1.5.1", "2.13.0")
    assert "On both bases" not in one and one.count(listed) == 1


def test_a_target_not_compared_on_any_model_is_one_line_above_the_models() -> None:
    """Review 38 R7: 0008's five 'TOSA ... not delegated' bullets, one per model, and 0007's
    Ethos-U lines are one line before the models' tables; targets that differ stay."""
    on_cpu = "not delegated (aten::grid_sampler_2d on the CPU)"
    quantised = "not delegated (quantize_per_tensor, aten::grid_sampler_2d on the CPU)"
    ethos = "lowers (6 ops left on the CPU)"

    def case(name: str, tosa: str, **more: str) -> CaseOutcome:
        stock = {"tosa": tosa, "vgf": "max error 100.00% of range", **more}
        return CaseOutcome(name, Quality.WRONG, Quality.RIGHT, None, "", "", stock,
                           {**stock, "vgf": "max error 0.00% of range"})  # fmt: skip

    cases = (
        case("grid_sample_nearest_zeros_fp", on_cpu),
        case("grid_sample_nearest_reflection_int8_intfp", quantised, **{"ethos-u55-128": ethos}),
    )
    found = PatchBehaviour("0008-x.patch", "main", cases, (), Outcome.FAILS_BEFORE_PASSES_AFTER, "")
    base = OnBase("0008-x.patch", Applied(Status.APPLIES), base="main", behaviour=found)
    lines = pr_text.numbers_table([base])
    assert lines[:3] == [
        "- TOSA on main: not delegated (the CPU runs it) on every model, without and with it;"
        " nothing to compare.",
        f"- Ethos-U55-128 on main: {ethos} on 1 of the 2 models, without and with it;"
        " nothing to compare.",
        "",
    ]
    assert sum("| VGF | main |" in line for line in lines) == 2  # it differs: kept per model
    assert not [line for line in lines[3:] if "TOSA" in line.split("`")[0] or "Ethos" in line]
    issue = pr_text.numbers_table([base], with_change=False)
    assert (
        issue[0]
        == "- TOSA on main: not delegated (the CPU runs it) on every model; nothing to compare."
    )


def test_the_numbers_speak_of_the_exact_evaluation_without_node_names() -> None:
    """Review 38, method-line terms: 0003's cell named 'the exact reference' and a quantize
    node of the overlay's graph; 0001's all-zero output was only an SQNR of 0.0 dB."""
    exact = ExactCheck((7,), (81,), "conv: conv2d + relu (quantize_per_tensor_default_2)")
    digest = OutputDigest("ab" * 32, "torch.int8", (1, 6, 8, 8))
    numerics = Numerics((digest,), (0.1,), (0.11,), (2.0,), (4.0,), (27.6,), exact)
    text = behaviour.numbers_text(numerics)
    assert text == (
        "81 of 384 output values differ from the exact evaluation, by up to 7 steps (first at"
        " conv: conv2d + relu); max error 2.75% of range, SQNR 27.6 dB"
    )
    one = dataclasses.replace(numerics, exact=ExactCheck((1,), (66,)))
    assert behaviour.numbers_text(one).startswith("66 of 384 output values differ from the"
                                                  " exact evaluation, by 1 step; max")  # fmt: skip
    right = dataclasses.replace(numerics, exact=ExactCheck((0,), (0,)), sqnr_db=(None,))
    assert behaviour.numbers_text(right).startswith("equal to the exact evaluation; max error")
    zeros = OutputDigest(hashlib.sha256(bytes(4 * 16)).hexdigest(), "torch.float32", (1, 16))
    dark = Numerics((zeros,), (0.5,), (0.5643,), (0.5643,), (1.0,), (0.0,))
    assert behaviour.numbers_text(dark) == (
        "max error 56.43% of range, SQNR 0.0 dB (output all zeros)"
    )
    assert "zeros" not in behaviour.numbers_text(dataclasses.replace(dark, outputs=(digest,)))

    def on(texts: dict[str, str]) -> OnBase:
        case = CaseOutcome("c", Quality.WRONG, Quality.RIGHT, None, "", "", texts, texts)
        fails = Outcome.FAILS_BEFORE_PASSES_AFTER
        found = PatchBehaviour("0003-x.patch", "main", (case,), (), fails, "")
        return OnBase("0003-x.patch", Applied(Status.APPLIES), base="main", behaviour=found)

    method = pr_text.how_run([on({"tosa": text})])
    assert method.count("exact") == 2 and method.endswith(
        "Quantised models also against the exact evaluation (exact: the quantised graph"
        " evaluated in integer arithmetic)."
    )
    texel = pr_text.how_run([on({"vgf": "max error 150.00% of range, SQNR 6.7 dB"})])
    assert texel.endswith("(on an arange image: a neighbouring texel was read).")
    assert "100%" not in pr_text.how_run([on({"vgf": "max error 99.99% of range, SQNR 9.0 dB"})])


def test_a_tests_parametrizations_that_are_a_product_are_shown_as_axes() -> None:
    """Review 38: 0008's '(12 cases)' said nothing; stacked parametrize ids (pytest joins
    them with '-') that form every combination read as their axes."""
    modes = ("border", "reflection", "zeros")
    grid = [
        f"{k}-{m}" for k in ("float", "float_align_corners", "int8", "int8_align") for m in modes
    ]
    few = ["per_channel", "per_tensor"]
    nodes = [f"t.py::test_shader[{p}]" for p in grid] + [f"t.py::test_linear[{p}]" for p in few]
    nodes += ["t.py::test_part[a-x]", "t.py::test_part[a-y]", "t.py::test_part[b-x]"]
    counts = (
        Counts(tuple(TestResult(n, TestState.FAILED) for n in nodes)),
        Counts(tuple(TestResult(n, TestState.PASSED) for n in nodes)),
    )
    run = TestRun("pytest t.py", ("t.py",), *counts, 1.0)
    base = OnBase("0008-x.patch", Applied(Status.APPLIES), base="main", affected=run)
    table = "\n".join(pr_text.tests_table([base], ["t.py::test_shader", "t.py::test_linear",
                                                    "t.py::test_part"]))  # fmt: skip
    assert (
        "`t.py::test_shader` (12: float/float_align_corners/int8/int8_align x"
        " border/reflection/zeros) | failed | passed |" in table
    )
    assert "`t.py::test_linear` (2: per_channel, per_tensor)" in table  # one axis: listed
    assert "`t.py::test_part` (3: a-x, a-y, b-x)" in table  # not every combination: listed


def test_a_note_for_reviewers_is_in_the_pr_body_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """What reviewers must act on (e.g. regenerate the SPIR-V the PR adds) stops being true
    once they have: it is in the PR body, after the Summary, never in the commit message."""
    fix = next(f for f in fixes.FIXES if f.upstream.reproducer)
    note = dataclasses.replace(fix.upstream, reviewers="please regenerate the blobs.")
    monkeypatch.setattr(pr_text, "_note", lambda patch: note)
    path = "backends/arm/_passes/demo_pass.py"
    header = (
        "Description: Fix the demo pass\n It fails.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    )
    patch = parse_patch(
        f"{fix.number:04d}-demo.patch", header + make_diff(path, "x = 1\n", "x = 2\n")
    )
    item = export_patch(patch, {path: b"x = 1\n"}, signer=SIGNER)
    bases = (_base("main", Outcome.FAILS_BEFORE_PASSES_AFTER),)
    sub = _submission(patch.name, item.subject, bases, LintReport("x", (), 1.0), source="1.5.1")
    comment = pr_text.measurements(sub, "1.5.1", "2.13.0")
    body = pr_text.pr_body(patch, sub, comment)
    assert body.startswith(
        "### Summary\n\nIt fails.\n\nFor reviewers: please regenerate the blobs.\n"
    )
    assert "regenerate" not in item.message
    plain = pr_text.pr_body(patch, sub, comment).replace(
        "For reviewers: please regenerate the blobs.\n\n", ""
    )
    monkeypatch.setattr(pr_text, "_note", lambda patch: fix.upstream)
    assert pr_text.pr_body(patch, sub, comment) == plain


def test_an_issue_draft_that_speaks_of_this_change_is_held_back() -> None:
    """Review 41: an issue is filed before any fix exists, so it never says "this change"."""
    header = "Description: Fix x\n It clamps.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    patch = parse_patch("0001-x.patch", header + make_diff("a.py", "x\n", "y\n"))
    item = dataclasses.replace(_export(patch), issue="Title: x\n\nIt fails.\n")
    assert not [p for p in text_problems(item, (), None, []) if "this change" in p]
    said = dataclasses.replace(item, issue="Title: x\n\nIt fails without this change.\n")
    assert text_problems(said, (), None, []) == [
        "the issue draft speaks of this change, but an issue describes the bug before any fix"
        " exists: reword it (the Description's first paragraph, UpstreamNote): \"It fails"
        ' without this change."'
    ]


def test_a_pr_that_asks_reviewers_to_work_on_the_commit_is_not_ready() -> None:
    """Review 41: regenerating files or amending the commit is the sender's work: a PR text
    (the reviewers' note, the commit message, the body) that asks it of reviewers is held
    back; a note that only informs them is not."""
    header = "Description: Fix x\n It clamps.\nForwarded: no\nLast-Update: 2026-12-06\n---\n"
    patch = parse_patch("0099-x.patch", header + make_diff("a.py", "x\n", "y\n"))
    item = _export(patch)
    ask = (
        "The .glsl files are the source: please Regenerate the four blobs with"
        " generate_grid_sampler_spirv.py and amend the commit."
    )
    asked = text_problems(item, (), UpstreamNote("t.py", "", reviewers=ask), [])
    assert asked == [
        f'the PR asks reviewers to regenerate and amend ("{ask}"): do it before sending'
    ]
    neutral = "Today's CI stops the tie tests at the model converter (their xfail)."
    assert text_problems(item, (), UpstreamNote("t.py", "", reviewers=neutral), []) == []
    body = dataclasses.replace(item, pr_body="### Summary\n\nPlease rerun the generator.\n")
    (problem,) = text_problems(body, (), None, [])
    assert problem.startswith('the PR asks reviewers to rerun ("Please rerun the generator.")')
