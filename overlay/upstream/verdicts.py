"""The engine's upstream verdicts, in one pure module: a patch's text on each release, its
tests, its behaviour, what holds a pull request back.

Size: longer than 500 lines on purpose: one place per decision (docs/architecture.md).
"""

from __future__ import annotations

import base64
import datetime
import re
import struct
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from packaging.version import Version

from overlay.equivalence.protocol import ItemResult
from overlay.equivalence.verdict import TOSA, VGF, Limits, Quality, target_qualities
from overlay.fixes.model import UpstreamNote
from overlay.upstream.commit_rules import PREFIX
from overlay.upstream.export import ISSUE_TITLE, Export
from overlay.upstream.results import (
    APPLYING,
    NOT_COMPARED,
    Action,
    CaseOutcome,
    Counts,
    LintReport,
    OnBase,
    OpCounts,
    Outcome,
    PatchBehaviour,
    Status,
    TestOutcome,
    TestResult,
    TestRun,
    TestState,
    TestVerdict,
    UpstreamInfo,
)

# --- text ----------------------------------------------------------------------------------


def text_verdict(info: UpstreamInfo, cells: Sequence[OnBase]) -> tuple[Action, str]:
    """Combine the Applied-Upstream header with the patch on each release, oldest first."""
    newest, effective = cells[-1].base, cells[-1].effective
    if info.version is not None:
        how = f" ({info.commit[:10]})" if info.commit else ""
        text = f"drop: fixed upstream in {info.version}{how}"
        if info.note and not info.commit:
            text += f", {info.note}"
        fixed = Version(info.version)
        stale = [c.base for c in cells if Version(c.base) >= fixed and c.own.status in APPLYING]
        if stale:
            text += f"; yet the patch still applies on {', '.join(stale)}: check the header"
        return Action.DROP, text
    if info.text:
        text = f"drop: {info.text} (Applied-Upstream)"
        if effective.status in APPLYING:
            text += f"; the code it changes is still in {newest} ({effective.short})"
        return Action.DROP, text
    if effective.status is Status.CONTAINED:
        first = next(c.base for c in cells if c.effective.status is Status.CONTAINED)
        text = f"drop: contained upstream since {first} (add Applied-Upstream to the header)"
        return Action.DROP, text
    port = cells[-1].port_version
    if effective.status in APPLYING:
        via = f" (port {port})" if port else ""
        return Action.SEND, f"send upstream: not fixed in {newest}; applies there{via}"
    where = f"`retarget {newest}` resolves it (its candidate's patch is the port)"
    return Action.CONFLICT, f"port needed: {effective.short} on {newest}; {where}"


# --- tests ---------------------------------------------------------------------------------


_OWN = ("AssertionError", "assert ", "Failed: ")  # the test's own check failed
_NOT_OWN = ("Failed: Timeout",)  # pytest-timeout: the test did not finish
_FAILING = frozenset({TestState.FAILED, TestState.ERROR})
_MIN_MATCH = 12  # either message may be cut short; shorter ones say too little to match
_LABEL = re.compile(r"^(?:VGF|numerics|[\w.]*(?:Error|Exception|Warning)): ")


def _core(error: str) -> str:
    """Return an error's message without labels: ``VGF: RuntimeError: x`` gives ``x``."""
    text = error.strip()
    while (match := _LABEL.match(text)) is not None:
        text = text[match.end() :]
    return text.strip()


def is_own_failure(
    reason: str, expected_errors: Sequence[str] = (), causes: Sequence[str] = ()
) -> bool:
    """Return True when a test failed on its own check, or with the bug's error (also as
    one of ``causes``, what ``reason`` was raised from): docs/upstream.md, "for the right
    reason"."""
    text = reason.strip()
    if text.startswith(_OWN) and not text.startswith(_NOT_OWN):
        return True
    cores = [c for c in map(_core, (text, *causes)) if len(c) >= _MIN_MATCH]
    return any(
        len(expected) >= _MIN_MATCH and (expected in core or core in expected)
        for expected in map(_core, expected_errors)
        for core in cores
    )


def _not_run(label: str, counts: Counts, expected: Sequence[str], *, stock: bool) -> str:
    """Return why a side's tests did not run as written ("" when they did)."""
    if counts.problem:
        return f"{label}: {counts.problem}"
    if not counts.tests:
        return f"{label}: no test ran ({counts.text})"
    for test in counts.tests:
        if test.state is TestState.ERROR:
            return f"{label}: {test.node}: {test.reason or 'error'}"
        if test.state is TestState.SKIPPED:
            return f"{label}: {test.node} skipped: {test.reason or 'no reason given'}"
        own = is_own_failure(test.reason, expected, test.causes)
        if stock and test.state is TestState.FAILED and not own:
            return f"{label}: {test.node}: {test.reason or 'failed'}"
    if counts.count(TestState.NO_TARGET) == len(counts.tests):
        return f"{label}: every test lowered, none ran: {_no_target(counts)}"
    return ""


def _no_target(counts: Counts) -> str:
    """Return the tests that lowered and found no target to run on, and what they need."""
    nodes = [t.node.rsplit("::", 1)[-1] for t in counts.tests if t.state is TestState.NO_TARGET]
    return f"{', '.join(nodes)} need an executor_runner (upstream's setup_testing*.sh)"


def judge_tests(run: TestRun, expected_errors: Sequence[str] = ()) -> TestVerdict:
    """Decide whether a patch's tests fail before and pass after, for the right reason."""
    for label, counts, stock in (("stock", run.stock, True), ("patched", run.patched, False)):
        reason = _not_run(label, counts, expected_errors, stock=stock)
        if reason:
            return TestVerdict(TestOutcome.COULD_NOT_RUN, f"could not run: {reason}")
    summary = f"{run.stock.text} -> {run.patched.text}"
    failing = [t for t in run.patched.tests if t.state in (TestState.FAILED, TestState.XPASSED)]
    if failing or not run.patched.ok:
        reasons = "; ".join(f"{t.node}: {t.reason}" for t in failing) or run.patched.text
        return TestVerdict(TestOutcome.FAILS_AFTER, f"fails after ({summary}): {reasons}")
    before = [t for t in run.stock.tests if t.state is TestState.FAILED]
    if not before:
        return TestVerdict(TestOutcome.PASSES_BEFORE, f"passes before ({summary})")
    after = {t.node: t.state for t in run.patched.tests}
    if all(after.get(t.node) is not TestState.PASSED for t in before):
        why = f"no test that fails before passes with the patch ({summary})"
        return TestVerdict(TestOutcome.COULD_NOT_RUN, f"could not run: patched: {why}")
    why = failure_reasons(before)
    if run.patched.count(TestState.NO_TARGET):
        why += f"; with the patch, not run here: {_no_target(run.patched)}"
    return TestVerdict(TestOutcome.FAILS_BEFORE_PASSES_AFTER, f"fails before ({summary}): {why}")


REASON_CHARS = 160  # a failure reason up to this long is printed whole
LONG_WORD = 40  # in a longer one, a word over this (a base64 payload) is elided whole


def failure_reasons(tests: Sequence[TestResult]) -> str:
    """Return each test's innermost exception once, with how many tests gave it; reasons
    that differ in one word share a pattern (:func:`_pattern`), long ones are cut between words.

    Example: ``AssertionError: a_int8.glsl is missing`` and ``... a_fp.glsl ...``.
    Becomes: ``2 tests: AssertionError: a_*.glsl is missing``.
    """
    reasons = [t.causes[0] if t.causes else t.reason for t in sorted(tests, key=lambda t: t.node)]
    found = Counter(r.splitlines()[0] if r.strip() else "failed" for r in reasons)
    merged: list[tuple[list[str], int | None, list[str], int]] = []  # words, where, values, n
    for reason, n in found.items():
        words = reason.split(" ")
        for i, (shape, where, values, count) in enumerate(merged):
            apart = [j for j, (a, b) in enumerate(zip(shape, words, strict=False)) if a != b]
            if len(shape) != len(words) or len(apart) != 1 or where not in (None, apart[0]):
                continue
            pool = [*(values or [shape[apart[0]]]), words[apart[0]]]
            if _pattern(pool):  # they share part of the word: one entry
                merged[i] = (shape, apart[0], pool, count + n)
                break
        else:
            merged.append((words, None, [], n))
    texts = []
    for shape, where, values, n in merged:
        words = list(shape)
        if where is not None:
            words[where] = _pattern(values)
        text = _shortened(" ".join(words))
        texts.append(f"{n} tests: {text}" if n > 1 else text)
    return "; ".join(texts)


_SEGMENT = "_./-:'\"(),=[]"  # what separates the segments of a name
_HEAD = re.compile(f".*[{re.escape(_SEGMENT)}]", re.DOTALL)  # up to the last separator
_TAIL = re.compile(f"[{re.escape(_SEGMENT)}].*", re.DOTALL)  # from the first


def _pattern(values: Sequence[str]) -> str:
    """Return the whole name segments ``values`` share as a glob (``a_*.glsl``), or "" when
    they share none (``alpha``, ``beta``: their common ``a`` is no segment)."""
    first, last = min(values), max(values)
    head = next(
        (i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first)
    )
    rest = [v[head:] for v in values]
    tail = 0
    while tail < min(map(len, rest)) and len({v[len(v) - tail - 1] for v in rest}) == 1:
        tail += 1
    prefix = _HEAD.match(first[:head])
    suffix = _TAIL.search(rest[0][len(rest[0]) - tail :]) if tail else None
    if prefix is None and suffix is None:
        return ""
    return f"{prefix.group(0) if prefix else ''}*{suffix.group(0) if suffix else ''}"


def _shortened(reason: str) -> str:
    if len(reason) <= REASON_CHARS:
        return reason
    words = [w if len(w) <= LONG_WORD else "..." for w in reason.split(" ")]
    kept: list[str] = []
    for word in words:
        if len(" ".join([*kept, word, "..."])) > REASON_CHARS:
            return " ".join([*kept, "..."])
        kept.append(word)
    return " ".join(kept)


def suite_changes(stock: Counts, patched: Counts) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (broken, fixed): tests passing on stock and not patched, and the reverse (a
    test one side only ran is neither; so is one not run here with the patches)."""
    before = {t.node: t.state for t in stock.tests}
    after = {t.node: t.state for t in patched.tests}
    both = [n for n in after if n in before]
    good = TestState.PASSED
    kept = (good, TestState.NO_TARGET)
    broken = tuple(n for n in both if before[n] is good and after[n] not in kept)
    fixed = tuple(n for n in both if before[n] in _FAILING and after[n] is good)
    return broken, fixed


# --- behaviour -----------------------------------------------------------------------------


def case_quality(result: ItemResult, limit: Limits, *, vgf: bool) -> Quality:
    """Judge a case by its worst target that ran: TOSA and the executed VGF program (a
    failed VGF lowering counts where the case targets VGF, ``vgf``)."""
    judged = target_qualities(result, limit)
    found = [judged[TOSA]]
    if VGF in judged and (vgf or judged[VGF] is not Quality.FAILED):
        found.append(judged[VGF])
    return next((q for q in (Quality.FAILED, Quality.WRONG) if q in found), found[0])


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
    """Decide a patch's outcome on a release from its cases and tests (``kept``: the patched
    env carries it; without, only stock counts: is the bug still there?)."""
    still = [c for c in bug if c.stock is not Quality.RIGHT]
    names = ", ".join(f"{c.case} ({c.stock_error or c.stock.value})" for c in still)
    kept_regressions = tuple(regressions) if kept and (still or not bug) else ()
    tests = judge_tests(test, [c.stock_error for c in still]) if kept and still and test else None
    not_fixed = [c for c in still if c.patched is not Quality.RIGHT]
    if kept_regressions:
        outcome = Outcome.REGRESSION
        head = f"no bug trigger on {release}, and a regression with the patch"
        head = f"regression with the patch on {release}" if bug else head
        text = f"{head}: {', '.join(regressions)} right on stock, not with the patch"
    elif not bug:
        outcome = Outcome.NO_BUG_TRIGGER
        wrong_other = [c.case for c in other if c.stock is not Quality.RIGHT]
        text = f"no bug trigger; stock {release} is not right on {', '.join(wrong_other)}"
        if not wrong_other:
            cases = ", ".join(c.case for c in other) or "none"
            text = (
                f"no case fails on stock {release}: its trigger cases ({cases}) are right "
                "there, the patch only changes how they lower"
            )
    elif not still:
        outcome = Outcome.FIXED_ON_STOCK
        text = f"fixed upstream in {release}: trigger cases now pass on stock"
        text += f" ({', '.join(c.case for c in bug)})"
    elif not kept:
        outcome, text = Outcome.STILL_FAILS, f"still needed on {release}: stock fails {names}"
    elif not_fixed:
        outcome = Outcome.STILL_FAILS
        text = f"still fails with the patch on {release}: " + ", ".join(
            f"{c.case} ({c.patched_error or c.patched})" for c in not_fixed
        )
    else:
        outcome = Outcome.FAILS_BEFORE_PASSES_AFTER
        text = f"fails on stock {release}, passes with the patch: {names}"
        if tests is not None and tests.outcome is TestOutcome.COULD_NOT_RUN:
            outcome, text = Outcome.COULD_NOT_RUN, f"{text}; but its upstream test {tests.text}"
        elif tests is not None and tests.outcome is not TestOutcome.FAILS_BEFORE_PASSES_AFTER:
            outcome = Outcome.STILL_FAILS
            text += "; but its upstream test does not fail before and pass after"
            text += f" ({tests.outcome.value}: {tests.text})"
    return PatchBehaviour(
        patch, release, tuple(bug), tuple(other), outcome, text, kept_regressions, test, tests
    )


PR_BODY_LIMIT = 65_536  # characters: GitHub refuses a longer PR body
# What a text may say of a target only where it ran and was compared (a claim word and a
# target in one sentence), and the targets by the names a text gives them.
_CLAIM = re.compile(
    r"\b(wrong|right|(?:in)?correct(?:ly)?|fail(?:s|ed|ing)?|broken|breaks?|works?"
    r"|exact(?:ly)?|all zeros|mismatch(?:es)?)\b",
    re.IGNORECASE,
)
_TARGET_NAMES = {
    "TOSA": re.compile(r"\bTOSA\b(?!-\d)"),  # TOSA-1.0+FP names a spec, not the target
    "VGF": re.compile(r"\bVGF\b"),
    "Ethos-U": re.compile(r"\bEthos-U\w*|\bU[58]5\b"),
}
TITLE_MAX = 100  # an issue title's characters, "Arm backend: " included
THIS_CHANGE = re.compile(r"\bthis change\b", re.IGNORECASE)  # no fix exists yet in an issue
# work on the commit a PR text asks of its reviewers: regenerate files, amend, rerun a tool
_REVIEWER_WORK = re.compile(r"\b(regenerat(?:e|es|ing)|amend(?:s|ing)?|re-?run)\b", re.IGNORECASE)
_CITED_PR = re.compile(r"(?<!Fixes )(?<![\w/])#(\d+)\b")


def compared_targets(
    bases: Sequence[OnBase], left_out: str | tuple[str, ...] = NOT_COMPARED
) -> frozenset[str]:
    """Return the targets (TOSA, VGF, Ethos-U) that ran and were compared, or failed, in a
    fix's trigger cases on some base; a target that only lowered (compiled) is not one
    (``left_out``: how the results start that do not count)."""
    return frozenset(
        "Ethos-U" if target.startswith("ethos-u") else target.upper()
        for base in bases
        for target, text in base.target_results
        if not text.startswith(left_out)
    )


_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+[.)])\s")


def _sentences(text: str) -> list[str]:
    """Return the prose of a Markdown or commit text as clauses (code and tables left out;
    a list item starts a clause of its own, ended by a full stop or not)."""
    prose, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if _LIST_ITEM.match(line):
            prose.append("")
        prose.append("" if fenced or line.lstrip().startswith(("|", "```")) else line.strip())
    paragraphs = " ".join(line or "\n" for line in prose).split("\n")
    return [s for p in paragraphs for s in re.split(r"(?<=[.!?;])\s+", p.strip()) if s]


def unmeasured_claims(texts: Sequence[str], compared: frozenset[str]) -> list[str]:
    """Return each sentence that says how a target did where it did not run and compare."""
    problems = []
    for sentence in dict.fromkeys(s for text in texts for s in _sentences(text)):
        claim = _CLAIM.search(sentence)
        unrun = {
            t: found
            for t, name in _TARGET_NAMES.items()
            if t not in compared and (found := name.search(sentence))
        }
        if claim is not None and unrun:
            start = max(0, min(claim.start(), *(m.start() for m in unrun.values())) - 60)
            start = sentence.rfind(" ", 0, start) + 1 if start else 0  # from a word
            quoted = ("..." if start else "") + sentence[start : start + 160]
            problems.append(
                f"the text says '{claim.group(0)}' of {', '.join(unrun)}, which did not run"
                f" and was not compared here (say 'compiled' or 'lowers'): \"{quoted}\""
            )
    return problems


def text_problems(
    texts: Export, bases: Sequence[OnBase], note: UpstreamNote | None, internal: Collection[str]
) -> list[str]:
    """Return what a maintainer would object to in what they read (the commit message, the
    PR body and its first comment, the issue draft): its size, claims, words and citations."""
    problems = []
    if len(texts.pr_body) > PR_BODY_LIMIT:
        problems.append(
            f"the PR body is {len(texts.pr_body):,} characters: GitHub refuses more than"
            f" {PR_BODY_LIMIT:,} (and the merge bot copies it into the squash commit)"
        )
    read = (texts.message, texts.pr_body, texts.comment, texts.issue)
    problems += unmeasured_claims(read, compared_targets(bases))
    names = [n for n in sorted(internal) if any(_names(text, n) for text in read)]
    if names:
        problems.append(
            f"the text names internal corpus case(s) {', '.join(names)}: name the model, the"
            " TOSA spec and the quantizer config (CaseInfo.model)"
        )
    title = texts.issue.partition("\n")[0].removeprefix(ISSUE_TITLE)
    if texts.issue and title.removeprefix(PREFIX) == texts.subject.removeprefix(PREFIX):
        problems.append(
            "the issue draft's title says what the change does, not the symptom: declare"
            " UpstreamNote.symptom in the fix module"
        )
    if len(title) > TITLE_MAX:
        problems.append(
            f"the issue draft's title has {len(title)} characters, over {TITLE_MAX} (a list"
            f" of issues cuts it): shorten UpstreamNote.symptom in the fix module: {title!r}"
        )
    change = next((s.strip() for s in texts.issue.splitlines() if THIS_CHANGE.search(s)), "")
    if change:
        problems.append(
            "the issue draft speaks of this change, but an issue describes the bug before any"
            " fix exists: reword it (the Description's first paragraph, UpstreamNote):"
            f' "{change[:160]}"'
        )
    asked = [
        sentence
        for text in (note.reviewers if note else "", texts.message, texts.pr_body)
        for sentence in _sentences(text)
        if _REVIEWER_WORK.search(sentence)
    ]
    if asked:
        work = dict.fromkeys(w.lower() for s in asked for w in _REVIEWER_WORK.findall(s))
        problems.append(
            f'the PR asks reviewers to {" and ".join(work)} ("{asked[0][:200]}"): do it'
            " before sending"
        )
    declared = {pr.number for pr in note.cited} if note else set()
    undeclared = sorted({int(n) for n in _CITED_PR.findall(texts.message)} - declared)
    if undeclared:
        problems.append(
            f"the description cites {', '.join(f'#{n}' for n in undeclared)}, which the fix"
            " module does not declare (UpstreamNote.regressed_by or related): the PR text"
            " does not link it and its author is not cc'd"
        )
    return problems


SPIRV_B64 = ".spirv.b64"  # base64 of a SPIR-V module, generated from its .glsl
SPIRV_TOOLS = {8: "Khronos Glslang Reference Front End", 13: "Google Shaderc over Glslang"}
_SPIRV_GENERATOR = re.compile(r"(?:^|/)generate_\w*spirv\w*\.py$")


def spirv_header(blob: bytes) -> tuple[int, int, int, int] | None:
    """Return a base64 SPIR-V module's (major, minor, tool id, tool version), or None."""
    try:
        module = base64.b64decode(blob)
    except ValueError:
        return None
    if len(module) < 12:
        return None
    for order in "<>":
        magic, version, generator = struct.unpack(f"{order}3I", module[:12])
        if magic == 0x07230203:
            major, minor = (version >> 16) & 0xFF, (version >> 8) & 0xFF
            return major, minor, generator >> 16, generator & 0xFFFF
    return None


def _spirv_words(header: tuple[int, int, int, int]) -> str:
    tool = SPIRV_TOOLS.get(header[2])
    return f"SPIR-V {header[0]}.{header[1]} from generator {header[2]} v{header[3]}" + (
        f" ({tool})" if tool else ""
    )


def spirv_problems(added: Mapping[str, bytes], base: Mapping[str, bytes]) -> list[str]:
    """Return the SPIR-V blobs a patch adds whose version or generator none of their
    siblings (the blobs of their folder in ``base``) has, or that hold no SPIR-V."""
    script = next((p for p in sorted(base) if _SPIRV_GENERATOR.search(p)), "")
    how = f"regenerate it with the tree's generator{f' ({script})' if script else ''}"
    problems = []
    for path, blob in sorted(added.items()):
        if not path.endswith(SPIRV_B64):
            continue
        folder = path.rpartition("/")[0]
        found = [spirv_header(d) for p, d in sorted(base.items()) if p.endswith(SPIRV_B64)
                 and p.rpartition("/")[0] == folder and p not in added]  # fmt: skip
        siblings = [h for h in found if h is not None]
        own = spirv_header(blob)
        if own is None:
            problems.append(f"{path}: no SPIR-V module (magic 0x07230203) in its base64: {how}")
        elif siblings and (
            own[:2] not in {h[:2] for h in siblings} or own[2] not in {h[2] for h in siblings}
        ):
            theirs = " or ".join(dict.fromkeys(map(_spirv_words, siblings)))
            problems.append(
                f"{path}: {_spirv_words(own)}, its {len(siblings)} siblings are {theirs}: {how}"
            )
    return problems


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def stale_main(main: str, main_date: str, release: str, released: str, refresh: str) -> str:
    """Return why no fix is ready on main when main is older than the release ``released``
    (its date, "" when unknown), else ""; ``refresh``: the command that updates main."""
    where = f"main {main[:10]} ({main_date[:10]})"
    if not released:
        return (
            f"not ready on main: {where} cannot be compared with executorch {release}, whose"
            f" date is not recorded ([released] in patches/upstream.toml); refresh main:"
            f" {refresh}"
        )
    moments = [datetime.datetime.fromisoformat(when) for when in (main_date, released)]
    main_at, released_at = (m if m.tzinfo else m.replace(tzinfo=datetime.UTC) for m in moments)
    if main_at >= released_at:
        return ""
    return (
        f"not ready on main: {where} is older than executorch {release} ({released[:10]});"
        f" refresh it: {refresh}, then run again"
    )


def op_count_change(counts: OpCounts) -> str:
    """Return how a bystander's TOSA operators differ with the patch ("" when they do not),
    e.g. ``CLAMP 0 -> 2 (stock: CONV2D 2, RESCALE 2)``."""
    if counts.stock_error or counts.patched_error:
        if counts.stock_error and counts.patched_error:
            return ""  # lowers on neither side: nothing to compare
        return (
            f"stock {'fails: ' + counts.stock_error if counts.stock_error else 'lowers'},"
            f" with it {'fails: ' + counts.patched_error if counts.patched_error else 'lowers'}"
        )
    ops = sorted({*counts.stock, *counts.patched})
    changed = [op for op in ops if counts.stock.get(op, 0) != counts.patched.get(op, 0)]
    if not changed:
        return ""
    moved = ", ".join(
        f"{op} {counts.stock.get(op, 0)} -> {counts.patched.get(op, 0)}" for op in changed
    )
    kept = ", ".join(f"{op} {n}" for op, n in counts.stock.items() if op not in changed)
    return f"{moved} (stock: {kept or 'nothing else'})"


def submission_problems(
    bases: Sequence[OnBase],
    lint: LintReport | None,
    rules: Sequence[str],
    *,
    lint_asked: bool = True,
    stale: str = "",
    texts: Export | None = None,
    note: UpstreamNote | None = None,
    internal: Collection[str] = (),
    checks: Sequence[LintReport] = (),
    tree: Mapping[str, bytes] | None = None,
) -> tuple[str, ...]:
    """Return what keeps a fix from being sent (empty: send it): upstream's gate, each
    base's ``git am`` and behaviour, what the maintainer reads (``texts``; the SPIR-V it
    adds against ``tree``), as docs/upstream.md lists them. On a ``stale`` main what main
    found holds nothing back."""
    problems = [f"pre-push hook: {rule}" for rule in rules]
    if lint is not None and lint.findings:
        shown = "; ".join(lint.findings[:5])
        problems.append(f"upstream's linters: {len(lint.findings)} finding(s): {shown}")
    elif lint is None and lint_asked and not stale:
        problems.append("upstream's linters did not run: the commit is not on main")
    for check in checks:
        if check.findings:
            shown = "; ".join(check.findings[:8])
            problems.append(f"{check.ran}: {len(check.findings)} line(s) the commit adds: {shown}")
    for base in bases:
        if not (stale and base.base == "main"):
            problems += [f"{base.base}: {problem}" for problem in _on_base(base)]
    if texts is not None:
        problems += text_problems(texts, bases, note, internal)
        added = {p: d for p, d in texts.after.items() if p not in texts.before}
        problems += spirv_problems(added, tree or {})
    return tuple(problems)


def _on_base(base: OnBase) -> list[str]:
    """Return what keeps a fix back on one base: ``git am``, behaviour, tests, bystanders."""
    problems, found = [], base.behaviour
    if not base.lands:
        problems.append(base.own.detail)
    elif found is None:
        problems.append("its trigger cases did not run")
    elif found.outcome is not Outcome.FAILS_BEFORE_PASSES_AFTER:
        problems.append(found.text)
    elif found.test is None:
        problems.append("it adds no test function (def test_...)")
    if base.broken:
        problems.append(f"passing without it, failing with it: {', '.join(base.broken)}")
    for counts in base.bystanders:
        if change := op_count_change(counts):
            problems.append(
                f"changes a model outside its bug: {counts.model}, {counts.spec},"
                f" {counts.target.upper()} operators: {change}"
            )
    return problems


_HOOK_NOISE = re.compile(
    r"^(?:index [0-9a-f]+\.\.[0-9a-f]+|@@ .* @@|diff --git |[IWEF]\d{4} \d\d:\d\d:\d\d"
    r"|\[(?:INFO|SUCCESS)\] |\s*$)"
)  # git's blob ids and hunk positions, torch's timestamped log lines, the hook's chatter
_ADDRESS = re.compile(r"0x[0-9a-f]+")


def hook_findings(
    status: int, output: Sequence[str], main_status: int, main_output: Sequence[str]
) -> tuple[tuple[str, ...], str]:
    """Return (findings, note) of one pre-push check: the lines the commit's run adds to
    what the same check prints on main without it (``main_*``; a diff's context lines aside)."""
    if status == 0:
        return (), ""

    def kept(lines: Sequence[str]) -> list[str]:
        found, in_diff = [], False
        for line in lines:
            in_diff = line.startswith("diff --git ") or (in_diff and line[:1] in " +-@i\\")
            context = in_diff and line.startswith(" ")  # a diff's unchanged lines
            if not context and not _HOOK_NOISE.match(line):
                found.append(_ADDRESS.sub("0x?", line.rstrip()))
        return found

    found = kept(output)
    if main_status == 0:
        return tuple(found) or (f"exit status {status}",), ""
    left = Counter(kept(main_output))
    new = []
    for line in found:
        if left[line] > 0:
            left[line] -= 1
        else:
            new.append(line)
    shared = len(found) - len(new)
    lines = f"{shared} pre-existing line{'s come' if shared != 1 else ' comes'}"
    hosted = f"{lines} from running main's backends/arm over the wheel"
    if new:
        return tuple(new), hosted
    return (), f"the commit adds no line ({hosted})"
