"""What a reviewer reads: the PR body, its first comment (the measurements) and the issue
to file first, as docs/upstream.md describes them; and the sender's checklist."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from overlay import fixes
from overlay._table import markdown_table
from overlay.equivalence import corpus
from overlay.errors import EquivalenceInputError
from overlay.fixes.model import PullRequest, UpstreamNote
from overlay.items import CaseInfo
from overlay.text.series import Patch
from overlay.upstream.commit_rules import PREFIX
from overlay.upstream.export import (
    ARM_CC,
    ISSUE_TITLE,
    LABEL_COMMANDS,
    Export,
    dep3_paragraphs,
    series_markers,
)
from overlay.upstream.results import (
    EXACT,
    NOT_COMPARED,
    NOT_DELEGATED,
    Counts,
    OnBase,
    PatchVerdict,
    Review,
    TestOutcome,
    TestState,
)
from overlay.upstream.upstream_tests import new_tests
from overlay.upstream.verdicts import compared_targets, failure_reasons, op_count_change

NO_RESULT = "-"
CONFIGS = {
    "a8w8": "get_symmetric_quantization_config",
    "a16w8": "get_symmetric_a16w8_quantization_config",
    "a8w8_snorm": "get_vgf_snorm_quantization_config",
}


def _note(patch: Patch) -> UpstreamNote | None:
    fix = fixes.by_patch(patch.name)
    return fix.upstream if fix is not None else None


def _reproducer(note: UpstreamNote | None) -> list[str]:
    if note is None or not note.reproducer:
        return []
    return ["```python", note.reproducer.rstrip("\n"), "```", ""]


def _cited(note: UpstreamNote | None) -> list[str]:
    """Return the lines citing the PRs that brought the bug and those related to it."""

    def listed(prs: Sequence[PullRequest]) -> str:
        return ", ".join(f"#{pr.number} ({pr.title}, @{pr.author})" for pr in prs)

    lines = []
    if note is not None and note.regressed_by:
        lines += [f"Regressed by {listed(note.regressed_by)}.", ""]
    if note is not None and note.related:
        lines += [f"Related: {listed(note.related)}.", ""]
    return lines


def _where(base: OnBase, release: str) -> str:
    if base.base == "main":
        when = f", {base.date[:10]}" if base.date else ""
        return f"main's backends/arm ({base.commit[:12]}{when}) over the executorch {release} wheel"
    return f"executorch {base.base}"


def case_words(name: str) -> str:
    """Return a trigger case as upstream reads it: its model, TOSA spec and quantizer config.

    Example: ``conv_relu_cat_mixed_qparams``.
    Becomes: ``` `cat([relu(conv(x)), y * 10])`, x 1x3x8x8, y 1x2x8x8, on TOSA-1.0+INT+FP,
    `TOSAQuantizer` with `get_symmetric_quantization_config()` ```. A case without a model
    keeps its name, which the gate holds back; a case no quantizer config quantizes (float,
    or quantised by hand) is its model and spec alone.
    """
    try:
        info = corpus.info(name)
    except EquivalenceInputError:
        return f"`{name}`"
    quantizer = "VgfQuantizer" if info.targets_vgf else "TOSAQuantizer"
    call = config_call(info)
    how = f", `{quantizer}` with `{call}`" if call else ""
    return f"{info.model or f'`{name}`'}, on {info.spec}{how}"


def config_call(info: CaseInfo) -> str:
    """Return the quantizer config call as code writes it (per-channel is the default), or ""
    where no config quantizes the case: ``get_symmetric_quantization_config()``, or
    ``get_symmetric_quantization_config(is_per_channel=False)`` for a per-tensor case."""
    config = CONFIGS.get(info.quantize or "")
    if config is None:
        return ""
    return f"{config}({'' if info.per_channel else 'is_per_channel=False'})"


def _target(target: str) -> str:
    return {"tosa": "TOSA", "vgf": "VGF"}.get(target, target.replace("ethos-u", "Ethos-U"))


HOW_RUN = {
    "TOSA": "TOSA on the TOSA reference model",
    "VGF": "VGF with the ML SDK scenario runner over the ML emulation layer for Vulkan"
    " (Mesa lavapipe), not an executor_runner",
    "Ethos-U": "Ethos-U compiled by Vela, never run (no FVP)",
}


def how_run(bases: Sequence[OnBase]) -> str:
    """Return how each target of the numbers ran, for the targets they hold."""
    found = compared_targets(bases, NOT_DELEGATED)  # and those that only lowered
    ran = "; ".join(text for family, text in HOW_RUN.items() if family in found)
    texts = [text for base in bases for _, text in base.target_results]
    lines = [
        f"Each model lowered and run: {ran}. Outputs against the fake-quantised model (PyTorch"
        " itself where nothing is quantised): max error as a fraction of the output's range,"
        " SQNR."
    ]
    if any("the exact evaluation" in text for text in texts):
        lines.append(f"Quantised models also against the exact evaluation ({EXACT}).")
    if any(float(m) > 100 for text in texts for m in _OF_RANGE.findall(text)):
        lines.append(
            "A max error above 100% of range means an output value lies outside the"
            " reference's whole range (on an arange image: a neighbouring texel was read)."
        )
    return " ".join(lines)


_OF_RANGE = re.compile(r"max error ([\d.]+)% of range")


def numbers_table(bases: Sequence[OnBase], *, with_change: bool = True) -> list[str]:
    """Return the trigger cases' results per target, without and with the change (without
    only: ``with_change=False``), each case under its model, TOSA spec and quantizer config;
    bases alike share a row, a target not compared is one line aside (docs/upstream.md)."""
    cases: dict[str, dict[tuple[str, str, str], list[str]]] = {}
    for base in bases:
        for case in base.cases:
            rows = cases.setdefault(case.case, {})
            for target in dict.fromkeys([*case.stock_targets, *case.patched_targets]):
                before = case.stock_targets.get(target, NO_RESULT)
                after = case.patched_targets.get(target, NO_RESULT) if with_change else ""
                rows.setdefault((_target(target), before, after), []).append(base.base)

    def aside(target: str, before: str, after: str) -> bool:
        return before.startswith(NOT_COMPARED) and after in (before, "")

    targets = dict.fromkeys(target for rows in cases.values() for target, _, _ in rows)
    every = [
        target
        for target in targets
        if len(cases) > 1
        and all(aside(*key) for rows in cases.values() for key in rows if key[0] == target)
    ]
    same = ", without and with it" if with_change else ""
    lines = _untouched(every, cases, same)
    lines += [""] if lines else []
    header = (
        "target",
        "base",
        *(("without this change", "with it") if with_change else ["result"]),
    )
    for name, rows in cases.items():
        order = list(dict.fromkeys(target for target, _, _ in rows))
        table, asides = [], []
        for (target, before, after), on in sorted(rows.items(), key=lambda r: order.index(r[0][0])):
            if target in every:
                continue
            where = " and ".join(on)
            if aside(target, before, after):
                asides.append(f"- {target} on {where}: {before}{same}")
            else:
                table.append([target, where, before, *([after] if with_change else [])])
        lines += [f"{case_words(name)}:", ""]
        lines += [*markdown_table(header, table), ""] if table else []
        lines += [*asides, ""] if asides else []
    return lines


def _untouched(
    targets: Sequence[str], cases: dict[str, dict[tuple[str, str, str], list[str]]], same: str
) -> list[str]:
    """Return one line per result of the targets not compared on any model, each the same
    without and with the change (targets that read alike share it).

    Example: TOSA not delegated on 5 models (on one, its quantize ops on the CPU as well).
    Becomes: ``- TOSA on main and 1.5.1: not delegated (the CPU runs it) on every model,
    without and with it; nothing to compare.`` (the models' text where they all read alike).
    """
    said: dict[str, list[str]] = {}
    for target in targets:
        rows = [(k[1], on) for found in cases.values() for k, on in found.items() if k[0] == target]
        texts = list(dict.fromkeys(text for text, _ in rows))
        if len(texts) == 1:
            what = texts[0]
        else:  # what each says before its detail
            what = " or ".join(dict.fromkeys(text.split(" (")[0] for text in texts))
            what += " (the CPU runs it)" if what == NOT_DELEGATED else ""
        where = " and ".join(dict.fromkeys(base for _, on in rows for base in on))
        models = sum(any(key[0] == target for key in found) for found in cases.values())
        scope = "every model" if models == len(cases) else f"{models} of the {len(cases)} models"
        text = f"on {where}: {what} on {scope}{same}; nothing to compare."
        said.setdefault(text, []).append(target)
    return [f"- {' and '.join(names)} {text}" for text, names in said.items()]


def tests_table(bases: Sequence[OnBase], added: Sequence[str]) -> list[str]:
    """Return the tests it adds and those whose state changed on a base, by name, without
    and with the change on each base (one pair of columns where every base agrees), a test's
    parametrizations that ended alike on one row; the others counted.

    ``added``: the tests the patch adds (``path::name``; each parametrization is one).
    """
    runs = [(b.base, b.affected) for b in bases if b.affected is not None]
    ended = [
        [{t.node: t.state.value for t in c.tests} for c in (r.stock, r.patched)] for _, r in runs
    ]
    nodes = sorted({node for sides in ended for side in sides for node in side})
    wanted = set(added)
    new = {n for n in nodes if n.split("[")[0] in wanted}
    changed = {n for before, after in ended for n, s in after.items() if before.get(n) != s} - new
    named = [n for n in nodes if n in new or n in changed]
    lines = []
    if named:
        states = {n: [side.get(n, NO_RESULT) for sides in ended for side in sides] for n in named}
        columns = [f"{name} {side}" for name, _ in runs for side in ("without", "with")]
        if all(s == s[:2] * len(runs) for s in states.values()):
            columns = [f"{' and '.join(name for name, _ in runs)} without", "with"]
            states = {n: s[:2] for n, s in states.items()}
        folded: dict[tuple[str, ...], list[str]] = {}
        for node in named:
            test, _, param = node.partition("[")
            folded.setdefault((test, *states[node]), []).append(param.removesuffix("]"))
        rows = [[_tests_cell(key[0], params), *key[1:]] for key, params in folded.items()]
        which = [f"the tests it adds ({len(new)})"] if new else []
        which += [f"the tests whose state changed ({len(changed)})"] if changed else []
        title = " and ".join(which)
        table = markdown_table(("test", *columns), rows)
        lines += [f"{title[:1].upper()}{title[1:]}:", "", *table, ""]
        if any(TestState.NO_TARGET.value in s for s in states.values()):
            lines += [
                f"The tests {TestState.NO_TARGET.value} did not run for this change: they need"
                " an executor_runner built from sources (backends/arm/test/setup_testing*.sh)."
                " The measurements in the first comment stand in for them.",
                "",
            ]
    others = [
        (name, Counts(tuple(t for t in r.stock.tests if t.node not in named))) for name, r in runs
    ]
    sizes = {len(counts.tests) for _, counts in others}
    if sizes - {0}:  # each base counts its own: main and the release may select other tests
        one = len(sizes) == 1
        rest = [f"{name}{'' if one else f', {len(c.tests)}:'} {c.text}" for name, c in others]
        lines += [
            f"The other {f'{sizes.pop()} ' if one else ''}tests end the same without and with"
            f" it ({'; '.join(rest)}).",
            "",
        ]
    return lines


def _tests_cell(test: str, params: Sequence[str]) -> str:
    """Return a test, or its parametrizations that ended alike, for one table cell."""
    if params == [""]:
        return f"`{test}`"
    if len(params) == 1:
        return f"`{test}[{params[0]}]`"
    listed = _axes(params) or ", ".join(params)
    which = f"{len(params)}: {listed}" if len(listed) <= 160 else f"{len(params)} cases"
    return f"`{test}` ({which})"


def _axes(params: Sequence[str]) -> str:
    """Return parametrizations that are every combination of their ids' parts (pytest joins
    stacked parametrize ids with "-") as those parts' axes, "" where they are not.

    Example: ``float-border``, ``float-zeros``, ``int8-border``, ``int8-zeros``.
    Becomes: ``float/int8 x border/zeros``. Only where two axes or more vary.
    """
    parts = [param.split("-") for param in params]
    if len({len(p) for p in parts}) != 1:
        return ""
    axes = [list(dict.fromkeys(values)) for values in zip(*parts, strict=True)]
    if sum(len(axis) > 1 for axis in axes) < 2 or math.prod(map(len, axes)) != len(set(params)):
        return ""
    return " x ".join("/".join(axis) for axis in axes)


def _plan(base: OnBase, *, bystanders: bool = True) -> list[str]:
    """Return one base's Test plan block (its bystanders too unless ``bystanders`` is False)."""
    lines = []
    added = base.behaviour.test if base.behaviour else None
    verdict = base.behaviour.test_verdict if base.behaviour else None
    if added is not None:
        lines.append(f"- the tests it adds: without {added.stock.text}, with {added.patched.text}")
        if verdict is not None and verdict.outcome is TestOutcome.FAILS_BEFORE_PASSES_AFTER:
            failed = [t for t in added.stock.tests if t.state is TestState.FAILED]
            lines.append(f"  (without it: {failure_reasons(failed)})")
        elif verdict is not None:
            lines.append(f"  ({verdict.text})")
    if base.affected is not None:
        run = base.affected
        lines.append(f"- all of them: without {run.stock.text}, with {run.patched.text}")
        for counts, side in ((run.stock, "without"), (run.patched, "with")):
            if counts.problem:
                lines.append(f"  ({side}: {counts.problem})")
    if base.broken:
        lines.append(f"- passing without and failing with it: {', '.join(base.broken)}")
    lines += _bystanders(base) if bystanders else []
    if not base.lands:
        lines.append(f"- {base.own.detail}")
    return lines


def _plans(bases: Sequence[OnBase], release: str, torch: str) -> list[str]:
    """Return the Test plan's blocks: one per set of bases that read alike; bystanders that
    read alike on every base once after the blocks, not in each."""
    shared = {tuple(_bystanders(base)) for base in bases}
    once = len(shared) == 1 and bool(shared - {()})
    plans: dict[tuple[str, ...], list[OnBase]] = {}
    for base in bases:
        plans.setdefault(tuple(_plan(base, bystanders=not once)), []).append(base)
    lines = []
    for plan, same in plans.items():
        where = " and on ".join(_where(base, release) for base in same)
        lines += [f"On {where} (torch {torch}):", "", *plan, ""]
    if once and len(plans) > 1:
        lines += [f"On {'both bases' if len(bases) == 2 else 'every base'}:", "", *shared.pop(), ""]
    elif once:  # one block: its bystanders in it
        lines[-1:-1] = shared.pop()
    return lines


def _bystanders(base: OnBase) -> list[str]:
    """Return the models outside its bug, lowered without and with it: what changed."""
    if not base.bystanders:
        return []
    changed = [(c, op_count_change(c)) for c in base.bystanders]
    changed = [(c, text) for c, text in changed if text]
    models = list(dict.fromkeys(c.model or c.case for c in base.bystanders))
    outside = f"- {len(models)} models outside the bug it fixes"
    if not changed:
        same = f"{outside}, the same TOSA operators without and with it (operator counts):"
        return [same, *(f"  - {model}" for model in models)]
    lines = [f"{outside} ({'; '.join(models)}), TOSA operators without -> with it:"]
    lines += [f"  - {c.model}, {c.spec}, {c.target.upper()}: {text}" for c, text in changed]
    return lines


def pr_body(patch: Patch, sub: PatchVerdict, comment: str) -> str:
    """Return the PR description in upstream's template: Summary, Test plan; it points to the
    measurements, the first comment (``comment``, from :func:`measurements`)."""
    note = _note(patch)
    lines = ["### Summary", "", *(f"{p}\n" for p in dep3_paragraphs(patch))]
    lines += [f"For reviewers: {note.reviewers}", ""] if note and note.reviewers else []
    lines += _cited(note)
    lines += [f"Fixes #{n}" for n in patch.issues] + ([""] if patch.issues else [])
    reproducer = _reproducer(note)
    if reproducer:
        lines += ["Reproducer:", "", *reproducer]
    lines += ["### Test plan", ""]
    command = next((b.affected.command for b in sub.bases if b.affected), "")
    if command:
        lines += ["Without and with this change:", "", "```", command, "```", ""]
    lines += tests_table(sub.bases, new_tests(patch.diff))
    review = sub.review or Review("", None, ())
    if review.lint is not None:
        lines += [f"{review.lint.summary}", ""]
    if review.checks:
        lines += [f"- {check.summary}" for check in review.checks] + [""]
    if comment:
        lines += ["Measurements per target and base: first comment.", ""]
    cited = note.cited if note else ()  # cc'd: the Arm team and the cited PRs' authors, no one else
    cc = dict.fromkeys([*" ".join(ARM_CC).split()[1:], *(f"@{pr.author}" for pr in cited)])
    lines += [f"cc {' '.join(cc)}", ""]
    return "\n".join(lines)


def measurements(sub: PatchVerdict, release: str, torch: str) -> str:
    """Return the PR's first comment ("" when nothing was measured): how each target ran,
    the trigger cases' numbers, each base's test plan in detail."""
    numbers = numbers_table(sub.bases)
    lines = [how_run(sub.bases), "", *numbers] if numbers else []
    lines += _plans(sub.bases, release, torch)
    return "\n".join(["### Measurements", "", *lines]) if lines else ""


def drafted_issue(patch: Patch, sub: PatchVerdict, release: str, torch: str) -> str:
    """Return an issue text for a fix that names no upstream issue (to file before the PR):
    its title (the symptom the fix module declares), the bug, the PRs it cites, the
    reproducer and the numbers."""
    note = _note(patch)
    title = PREFIX + (note.symptom if note is not None and note.symptom else patch.subject)
    lines = [f"{ISSUE_TITLE}{title}", "", "### 🐛 Describe the bug", ""]
    lines += [dep3_paragraphs(patch)[0], "", *_cited(note), *_reproducer(note)]
    numbers = numbers_table(sub.bases, with_change=False)  # an unmeasured base has no case
    lines += [how_run(sub.bases), "", *numbers] if numbers else []
    main = next((b for b in sub.bases if b.base == "main"), None)
    on_main = (
        f" and main ({', '.join(filter(None, (main.commit[:12], main.date[:10])))})" if main else ""
    )
    lines += ["### Versions", "", f"executorch {release}{on_main}, torch {torch}, Linux x86_64."]
    return "\n".join(lines) + "\n"


def checklist(
    item: Export,
    sub: PatchVerdict,
    where: str,
    branch: str,
    stale: str = "",
    *,
    named_by: Sequence[int] = (),
) -> str:
    """Return what only a person can do before the PR is open, and what keeps it back.

    ``branch``: "" where `git am` failed on main (nothing was committed to push);
    ``stale``: why main is too old to tell whether the fix is ready there ("" when it is not);
    ``named_by``: the patches whose text names this one's PR by a marker (``#<0007>``),
    to be edited once it is open, as this text's own markers are once theirs are.
    """
    lines = [f"# Before opening the pull request for {item.stem}", ""]
    lines += [f"- [ ] Not ready: {problem}" for problem in sub.flags]
    lines += [f"- [ ] {stale[:1].upper()}{stale[1:]}"] if stale else []
    lines += [
        "- [ ] Sign the PyTorch CLA (https://code.facebook.com/cla) with the identity"
        " of the Signed-off-by line, if not done yet.",
        "- [ ] Read the diff and the PR text; you sign off on them (DCO).",
        "- [ ] Open the series' PRs in the order of their numbers.",
    ]
    if item.issue:
        lines.append(
            f"- [ ] No upstream issue names this bug: open one from {item.stem}.issue.md"
            f" (its first line is the title), then add `Fixes #N` to the PR text."
        )
    command = (
        f"`git -C {where} push <your fork> {branch}`, then open the PR against"
        f" pytorch/executorch `main` with the text of {item.stem}.pr.md."
    )
    if not branch:
        push = (
            f"- [ ] No branch to push: `git am` of {item.stem}.mbox failed on main (the"
            " report says why); once main takes it, run the export again."
        )
    elif stale:  # this run's branch sits on the stale main, with whatever a local main holds
        push = (
            "- [ ] Once main is refreshed and the export has run again, push the branch that"
            f" run writes (from its folder), not this one: {command}"
        )
    else:
        push = f"- [ ] Push the branch (from this folder): {command}"
    post = f"- [ ] Post {item.stem}.comment.md as the PR's first comment (the measurements)."
    lines += [
        push,
        *([post] if item.comment else []),
        "- [ ] On the open PR, comment each of these (pytorchbot sets the labels; ciflow/trunk"
        " runs the trunk jobs, and pytorchbot takes a ciflow label only from someone with"
        " write access: otherwise ask a cc'd Arm maintainer to add it):",
        *(f"  - `{command}`" for command in LABEL_COMMANDS),
        "- [ ] Run `backends/arm/scripts/pre-push` in your clone: its docgen, VGF op-support"
        " and public API checks ran here on main's backends/arm hosted on the release's"
        " wheel, not on a source build of executorch.",
    ]
    own = f"#<{item.stem[:4]}>"
    lines += [
        f"- [ ] After opening the PR of {n:04d}, edit this PR's text: replace #<{n:04d}> with"
        f" that PR's number."
        for n in series_markers(item.pr_body)
    ]
    lines += [
        f"- [ ] Then edit {n:04d}'s PR text: replace {own} with this PR's number." for n in named_by
    ]
    return "\n".join(lines) + "\n"
