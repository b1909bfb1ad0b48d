"""What only the sender can do before a pull request is open, and what keeps it back."""

from __future__ import annotations

from collections.abc import Sequence

from overlay.upstream.export import LABEL_COMMANDS, Export, series_markers
from overlay.upstream.results import PatchVerdict


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
