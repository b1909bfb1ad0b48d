"""What a reviewer reads: the pull request's text, the issue to file first, the checklist.

The PR body follows upstream's template (``### Summary``, ``### Test plan``): the problem in
one paragraph (the patch description's first), what the change does, the fix's minimal
reproducer (its ``UpstreamNote``), the trigger cases' numbers per target without and with
the change on each base, every test run on each base (the ones it adds judged fails before
/ passes after, every other one of its test files and ``affected_tests``), the TOSA
operators of models outside its bug where they change, the results of the linters and of
the pre-push hook's checks, ``Fixes #N`` and the cc line (the Arm team and the touched
files' recent authors).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from overlay import fixes
from overlay._table import markdown_table
from overlay.text.series import Patch
from overlay.upstream.export import ARM_CC, LABELS, Export, dep3_paragraphs
from overlay.upstream.results import OnBase, Submission, TestRun
from overlay.upstream.verdicts import op_count_change

NO_RESULT = "-"


def _reproducer(patch: Patch) -> list[str]:
    fix = fixes.by_patch(patch.name)
    if fix is None or not fix.upstream.reproducer:
        return []
    return ["```python", fix.upstream.reproducer.rstrip("\n"), "```", ""]


def _where(base: OnBase, release: str, torch: str) -> str:
    if base.base == "main":
        return f"main ({base.commit[:12]}) on the executorch {release} wheel, torch {torch}"
    return f"executorch {base.base} (torch {torch})"


def numbers_table(bases: Sequence[OnBase]) -> list[str]:
    """Return the trigger cases' results per target and base, without and with the change."""
    rows = []
    for base in bases:
        found = base.behaviour
        for case in (*found.bug_cases, *found.other_cases) if found else ():
            for target in dict.fromkeys([*case.stock_targets, *case.patched_targets]):
                before = case.stock_targets.get(target, NO_RESULT)
                after = case.patched_targets.get(target, NO_RESULT)
                rows.append([f"`{case.case}`", target, base.base, before, after])
    if not rows:
        return []
    header = ("case", "target", "base", "without this change", "with it")
    return [*markdown_table(header, rows), ""]


def _state(run: TestRun, node: str, stock: bool) -> str:
    counts = run.stock if stock else run.patched
    return next((t.state.value for t in counts.tests if t.node == node), NO_RESULT)


def tests_table(bases: Sequence[OnBase]) -> list[str]:
    """Return every test of each base, without and with the change, in a folded table."""
    runs = [(b.base, b.affected) for b in bases if b.affected is not None]
    nodes = list(
        dict.fromkeys(t.node for _, r in runs for c in (r.stock, r.patched) for t in c.tests)
    )
    if not nodes:
        return []
    header = ("test", *(f"{name} {side}" for name, _ in runs for side in ("without", "with")))
    rows = [
        [f"`{node}`", *(_state(r, node, s) for _, r in runs for s in (True, False))]
        for node in nodes
    ]
    return [
        f"<details><summary>Every test ({len(nodes)})</summary>",
        "",
        *markdown_table(header, rows),
        "",
        "</details>",
        "",
    ]


def _plan(base: OnBase) -> list[str]:
    lines = []
    added = base.behaviour.test if base.behaviour else None
    verdict = base.behaviour.test_verdict if base.behaviour else None
    if added is not None:
        lines.append(f"- the tests it adds: without {added.stock.text}, with {added.patched.text}")
        if verdict is not None:
            lines.append(f"  ({verdict.text})")
    if base.affected is not None:
        run = base.affected
        lines.append(f"- all of them: without {run.stock.text}, with {run.patched.text}")
        for counts, side in ((run.stock, "without"), (run.patched, "with")):
            if counts.problem:
                lines.append(f"  ({side}: {counts.problem})")
    if base.broken:
        lines.append(f"- passing without and failing with it: {', '.join(base.broken)}")
    lines += _bystanders(base)
    if base.applies:
        lines.append(f"- {base.applies}")
    return lines


def _bystanders(base: OnBase) -> list[str]:
    """Return the models outside its bug, lowered without and with it: what changed."""
    if not base.bystanders:
        return []
    changed = [(c, op_count_change(c)) for c in base.bystanders]
    changed = [(c, text) for c, text in changed if text]
    models = len({c.case for c in base.bystanders})
    outside = f"- {models} models outside the bug it fixes"
    if not changed:
        return [f"{outside}: the same TOSA operators without and with it"]
    lines = [f"{outside}, TOSA operators without -> with it:"]
    lines += [f"  - {c.model}, {c.spec}, {c.target.upper()}: {text}" for c, text in changed]
    return lines


def pr_body(patch: Patch, sub: Submission, release: str, torch: str) -> str:
    """Return the PR description in upstream's template: Summary, Test plan."""
    paragraphs = dep3_paragraphs(patch)
    lines = ["### Summary", "", *(f"{p}\n" for p in paragraphs)]
    lines += [f"Fixes #{n}" for n in patch.issues] + ([""] if patch.issues else [])
    reproducer = _reproducer(patch)
    if reproducer:
        lines += ["Reproducer:", "", *reproducer]
    numbers = numbers_table(sub.bases)
    if numbers:
        lines += [
            "Lowered for each target, outputs against the fake-quantised model"
            " (max error as a fraction of the output's range, SQNR):",
            "",
            *numbers,
        ]
    lines += ["### Test plan", ""]
    command = next((b.affected.command for b in sub.bases if b.affected), "")
    if command:
        lines += ["Without and with this change:", "", "```", command, "```", ""]
    for base in sub.bases:
        lines += [f"On {_where(base, release, torch)}:", "", *_plan(base), ""]
    lines += tests_table(sub.bases)
    if sub.lint is not None:
        lines += [f"{sub.lint.summary}", ""]
    if sub.checks:
        lines += [f"- {check.summary}" for check in sub.checks] + [""]
    lines += [cc_line(sub.authors), ""]
    return "\n".join(lines)


def cc_line(authors: Sequence[str]) -> str:
    """Return the cc line: the Arm team, then the touched files' recent authors."""
    team = " ".join(ARM_CC).removeprefix("cc ").split()
    return "cc " + " ".join(dict.fromkeys([*team, *authors]))


def drafted_issue(patch: Patch, sub: Submission, release: str, torch: str) -> str:
    """Return an issue text for a fix that names no upstream issue (to file before the PR)."""
    lines = [f"### 🐛 Describe the bug: {patch.subject}", "", dep3_paragraphs(patch)[0], ""]
    lines += _reproducer(patch)
    lines += numbers_table([b for b in sub.bases if b.behaviour is not None])
    lines += ["### Versions", "", f"executorch {release} and main, torch {torch}, Linux x86_64."]
    return "\n".join(lines) + "\n"


def checklist(item: Export, sub: Submission, where: str, branch: str) -> str:
    """Return what only a person can do before the PR is open, and what keeps it back."""
    lines = [f"# Before opening the pull request for {item.stem}", ""]
    lines += [f"- [ ] Not ready: {problem}" for problem in sub.problems]
    lines += [
        "- [ ] Sign the PyTorch CLA (https://code.facebook.com/cla) with the identity"
        " of the Signed-off-by line, if not done yet.",
        "- [ ] Read the diff and the PR text; you sign off on them (DCO).",
    ]
    if item.issue:
        lines.append(
            f"- [ ] No upstream issue names this bug: open one from {item.stem}.issue.md,"
            " then add `Fixes #N` to the PR text."
        )
    lines += [
        f"- [ ] Push the branch: `git -C {where} push <your fork> {branch}`, then open"
        f" the PR against pytorch/executorch `main` with the text of {item.stem}.pr.md.",
        f"- [ ] Ask for the labels {', '.join(repr(label) for label in LABELS)}"
        " (only maintainers can set them).",
        "- [ ] Run `backends/arm/scripts/pre-push` in your clone: its docgen, VGF op-support"
        " and public API checks ran here on main's backends/arm hosted on the release's"
        " wheel, not on a source build of executorch.",
    ]
    return "\n".join(lines) + "\n"


def with_texts(
    item: Export,
    patch: Patch,
    sub: Submission,
    *,
    release: str,
    torch: str,
    branch: tuple[str, str],
) -> Export:
    """Return the export with its PR body, issue draft (when no issue names it), checklist.

    ``branch``: the repository and the branch the commit is on.
    """
    issue = "" if patch.issues else drafted_issue(patch, sub, release, torch)
    done = replace(item, pr_body=pr_body(patch, sub, release, torch), issue=issue)
    return replace(done, checklist=checklist(done, sub, *branch))
