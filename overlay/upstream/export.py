"""Export patches still needed upstream as ``git format-patch`` style mboxes plus PR bodies.

Every message follows executorch's rules for Arm backend commits
(:mod:`overlay.upstream.commit_rules`) and names the issue (``Fixes #N``); an mbox whose
message breaks a rule is refused, never written. The diff is regenerated with git against the
sources the export is based on (``base-commit:`` names that upstream commit), so
``git am`` applies it there exactly.
"""

from __future__ import annotations

import contextlib
import datetime
import email.policy
import email.utils
import io
import re
import shutil
import tempfile
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.generator import Generator
from email.message import EmailMessage
from pathlib import Path

from overlay import __version__, fixes
from overlay._git import git, git_with_env
from overlay.errors import GitError, UpstreamError
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import PATCH_SUFFIX, Patch
from overlay.upstream.commit_rules import (
    MAX_LINE,
    PLACEHOLDER,
    PREFIX,
    Identity,
    check_license,
    check_message,
)
from overlay.upstream.results import TestRun

# Who the Arm backend's commits and PRs cc, and the labels its fixes get.
ARM_CC = (
    "cc @digantdesai @freddan80 @per @zingo @oscarandersson8218 @mansnils",
    "@Sebastian-Larsson @robell @rascani",
)
LABELS = ("release notes: arm", "partner: arm")
ZERO_SHA = "0" * 40
_POLICY = email.policy.default.clone(linesep="\n", max_line_length=0)


@dataclass(frozen=True)
class Evidence:
    """What the export measured for one patch on its base release (for the Test plan)."""

    release: str
    torch: str
    cases: tuple[str, ...]  # "case: stock ... -> patched ..." lines
    test: TestRun | None  # the tests the patch adds, both ways
    affected: TestRun | None = None  # the affected upstream subset (patched, and stock)
    lint: str = ""  # lintrunner's summary, "" when not run


@dataclass(frozen=True)
class Export:
    """One exported patch: the mbox, the PR body and what applying it must give."""

    name: str
    base_version: str
    source: str  # "pinned" or "port <version>"
    subject: str
    message: str  # the commit message (subject, blank line, body, trailers)
    mbox: str
    pr_body: str
    before: dict[str, bytes]  # repository path -> release bytes
    after: dict[str, bytes]  # repository path -> bytes after the fix
    base_commit: str = ""
    issue: str = ""  # a drafted issue when the patch names none
    checklist: str = ""

    @property
    def stem(self) -> str:
        """Return the file name stem, e.g. ``0001-keep-terminal-int16-quantize``."""
        return self.name.removesuffix(PATCH_SUFFIX)


def upstream_subject(patch: Patch) -> str:
    """Return ``Arm backend: <Subject>`` for a patch."""
    subject = patch.subject.rstrip(".")
    subject = subject.removeprefix(PREFIX)
    return PREFIX + subject[:1].upper() + subject[1:]


def dep3_paragraphs(patch: Patch) -> list[str]:
    """Return the long description as paragraphs (DEP-3 ``.`` lines separate them)."""
    paragraphs: list[list[str]] = [[]]
    for line in patch.header["Description"].split("\n")[1:]:
        text = line.strip()
        if text == ".":
            paragraphs.append([])
        elif text:
            paragraphs[-1].append(text)
    return [" ".join(p) for p in paragraphs if p]


def wrap(paragraphs: Iterable[str], width: int = MAX_LINE) -> str:
    """Wrap paragraphs to ``width`` columns, never splitting words or URLs."""
    return "\n\n".join(
        textwrap.fill(p, width, break_long_words=False, break_on_hyphens=False) for p in paragraphs
    )


def commit_message(patch: Patch, signer: Identity) -> str:
    """Return the upstream commit message: subject, wrapped body, cc, Fixes, Signed-off-by."""
    body = wrap(dep3_paragraphs(patch))
    trailers = [f"Fixes #{n}" for n in patch.issues]
    parts = [upstream_subject(patch), body] if body else [upstream_subject(patch)]
    parts.append("\n".join(ARM_CC))
    if trailers:
        parts.append("\n".join(trailers))
    parts.append(f"Signed-off-by: {signer}")
    return "\n\n".join(parts) + "\n"


def _diff_with_git(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> tuple[str, str]:
    """Return (diffstat, full-index diff) of ``before`` -> ``after``, computed by git."""
    with tempfile.TemporaryDirectory(prefix="overlay-export-") as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q")
        git(repo, "config", "core.autocrlf", "false")
        for path, data in before.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(data)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        for path, data in after.items():
            (repo / path).write_bytes(data)
        stat = git(repo, "diff", "--stat=72", "--summary")
        diff = git(repo, "diff", "--full-index")
    return stat, diff


def format_mbox(
    *,
    message: str,
    author: Identity,
    date: datetime.datetime,
    diffstat: str,
    diff: str,
    number: int = 1,
    total: int = 1,
    base_commit: str = "",
) -> str:
    """Build one ``git format-patch --base`` style message with the stdlib email package."""
    subject, _, rest = message.partition("\n")
    counter = f"[PATCH {number}/{total}]" if total > 1 else "[PATCH]"
    msg = EmailMessage(policy=_POLICY)
    msg["From"] = email.utils.formataddr((author.name, author.email))
    msg["Date"] = email.utils.format_datetime(date)
    msg["Subject"] = f"{counter} {subject}"
    base = f"\nbase-commit: {base_commit}\n" if base_commit else ""
    payload = rest.lstrip("\n") + "---\n" + diffstat + "\n" + diff + base
    payload += f"-- \n{_signature()}\n"
    msg.set_content(payload, subtype="plain", charset="utf-8", cte="8bit")
    msg.set_unixfrom(f"From {ZERO_SHA} Mon Sep 17 00:00:00 2001")
    buffer = io.StringIO()
    Generator(buffer, mangle_from_=False, policy=_POLICY).flatten(msg, unixfrom=True)
    return buffer.getvalue()


def _signature() -> str:
    return f"executorch-arm-overlay {__version__}"


def drafted_issue(patch: Patch, evidence: Evidence) -> str:
    """Return an issue text for a fix that names no upstream issue (to file before the PR)."""
    lines = [
        f"### 🐛 Describe the bug: {patch.subject}",
        "",
        "\n\n".join(dep3_paragraphs(patch)[:1]),
        "",
        f"Seen with executorch {evidence.release} and torch {evidence.torch}:",
        "",
        *[f"- {case}" for case in evidence.cases],
        "",
    ]
    fix = fixes.by_patch(patch.name)
    if fix is not None and fix.upstream.reproducer:
        lines += ["Reproducer:", "", "```python", fix.upstream.reproducer.rstrip("\n"), "```", ""]
    lines += [
        "### Versions",
        "",
        f"executorch {evidence.release}, torch {evidence.torch}, Linux x86_64, CPU only.",
    ]
    return "\n".join(lines) + "\n"


def pr_body(patch: Patch, message: str, evidence: Evidence) -> str:
    """Return the PR description in upstream's template: Summary, Test plan."""
    lines = ["### Summary", "", "\n\n".join(dep3_paragraphs(patch)), ""]
    lines += [f"Fixes #{n}" for n in patch.issues]
    if patch.issues:
        lines.append("")
    lines += [" ".join(ARM_CC), "", "### Test plan", ""]
    test = evidence.test
    if test is not None:
        stock = test.stock.text if test.stock else "not run"
        lines += [
            f"Added a test; ran it with `backends/arm/test/pytest.ini` on executorch"
            f" {evidence.release} (torch {evidence.torch}), without and with this change:",
            "",
            "```",
            test.command,
            "```",
            "",
            f"- without this change: {stock}",
            f"- with this change: {test.patched.text}",
            "",
        ]
    if evidence.affected is not None:
        affected = evidence.affected
        before = f" (without it: {affected.stock.text})" if affected.stock else ""
        lines += [
            f"Affected Arm tests, with this change: {affected.patched.text}{before}:",
            "",
            "```",
            affected.command,
            "```",
            "",
        ]
    if evidence.cases:
        lines += [
            f"End to end on executorch {evidence.release} (quantize, lower to TOSA and VGF,"
            " run the TOSA reference model):",
            "",
        ]
        lines += [f"- {case}" for case in evidence.cases]
        lines.append("")
    if evidence.lint:
        lines += [f"lintrunner on the changed files: {evidence.lint}", ""]
    return "\n".join(lines)


def checklist(
    item_stem: str, branch: str, where: Path | None, evidence: Evidence, issue: bool
) -> str:
    """Return what only a person can do before the PR is open."""
    lines = [f"# Before opening the pull request for {item_stem}", ""]
    lines += [
        "- [ ] Sign the PyTorch CLA (https://code.facebook.com/cla) with the identity"
        " of the Signed-off-by line, if not done yet.",
        "- [ ] Read the diff and the PR text; you sign off on them (DCO).",
    ]
    if issue:
        lines.append(
            f"- [ ] No upstream issue names this bug: open one from {item_stem}.issue.md,"
            " then add `Fixes #N` to the PR text."
        )
    if where is not None:
        lines.append(
            f"- [ ] Push the branch: `git -C {where} push <your fork> {branch}`, then open"
            " the PR against pytorch/executorch `main` with the text of"
            f" {item_stem}.pr.md."
        )
    else:
        lines.append(f"- [ ] `git am {item_stem}.mbox` in your clone, push, open the PR.")
    lines += [
        f"- [ ] Ask for the labels {', '.join(repr(label) for label in LABELS)}"
        " (only maintainers can set them).",
        "- [ ] Run `backends/arm/scripts/pre-push` in your clone: its docgen, VGF op-support"
        " and public API checks need a source build of executorch.",
    ]
    if not evidence.lint:
        lines.append(
            "- [ ] Run `lintrunner` in your clone: no upstream clone was given here, so the"
            " linters did not run."
        )
    return "\n".join(lines) + "\n"


def _patched(
    patch: Patch, release: Mapping[str, bytes]
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    paths = [f.path for f in patch.files]
    missing = [p for p in paths if p not in release]
    if missing:
        raise UpstreamError(
            f"{patch.name}: {', '.join(missing)} is not in the base release",
            expected="the files in the release sources",
            found="no such file",
            hint="retarget the line to the release (its candidate's patch is the port)",
        )
    before = {p: release[p] for p in paths}
    try:
        after = apply_patch(patch, {p: decode(d) for p, d in before.items()}, allow_offset=True)
    except HunkMismatchError as exc:
        raise UpstreamError(
            f"{patch.name} does not apply to the base release",
            found=exc.message,
            hint="retarget the line to the release (its candidate's patch is the port)",
        ) from exc
    return before, {p: encode(t) for p, t in after.items()}


def export_patch(
    patch: Patch,
    release: Mapping[str, bytes],
    base_version: str,
    *,
    signer: Identity,
    evidence: Evidence | None = None,
    source: str = "pinned",
    base_commit: str = "",
    year: int | None = None,
    number: int = 1,
    total: int = 1,
) -> Export:
    """Export one patch (exactly applicable to ``release``); refuse any broken rule."""
    before, after = _patched(patch, release)
    message = commit_message(patch, signer)
    problems = check_message(message)
    problems += check_license(after, year or datetime.datetime.now(datetime.UTC).year)
    if problems:
        own = check_message(commit_message(patch, PLACEHOLDER))
        hint = (
            "shorten the patch's Description (its first line is the subject) or fix the"
            " header of the touched file"
            if own or len(problems) > len(check_message(message))
            else "pass a shorter identity: --signoff 'Full Name <user@example.org>'"
        )
        raise UpstreamError(
            f"{patch.name}: refusing to write an mbox that breaks the Arm backend rules",
            expected=f"'{PREFIX}<Verb> ...', every line <= {MAX_LINE} (trailers too),"
            " Signed-off-by, the current year in touched Arm headers",
            found="; ".join(problems),
            hint=hint,
        )
    stat, diff = _diff_with_git(before, after)
    day = patch.header.get("Last-Update", "").strip()
    try:
        date = datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.UTC)
    except ValueError:
        date = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    mbox = format_mbox(
        message=message,
        author=signer,
        date=date,
        diffstat=stat,
        diff=diff,
        number=number,
        total=total,
        base_commit=base_commit,
    )
    found = evidence or Evidence(base_version, "", (), None)
    issue = drafted_issue(patch, found) if not patch.issues else ""
    subject = message.split("\n", 1)[0]
    return Export(
        patch.name,
        base_version,
        source,
        subject,
        message,
        mbox,
        pr_body(patch, message, found),
        before,
        after,
        base_commit,
        issue,
    )


def write_exports(exports: Sequence[Export], out_dir: Path) -> list[Path]:
    """Write ``<base>/<stem>.{mbox,pr.md}`` (plus ``.issue.md``, ``.checklist.md``)."""
    written = []
    for item in exports:
        folder = out_dir / item.base_version
        folder.mkdir(parents=True, exist_ok=True)
        files = {"mbox": item.mbox, "pr.md": item.pr_body}
        if item.issue:
            files["issue.md"] = item.issue
        if item.checklist:
            files["checklist.md"] = item.checklist
        for suffix, text in files.items():
            path = folder / f"{item.stem}.{suffix}"
            path.write_text(text, encoding="utf-8", newline="\n")
            written.append(path)
    return written


def branch_name(item: Export) -> str:
    """Return the branch a commit is made on, e.g. ``arm-fix-int16-grid-sample-grids``."""
    words = re.sub(r"[^a-z0-9]+", "-", item.subject.removeprefix(PREFIX).lower()).strip("-")
    return "arm-" + "-".join(words.split("-")[:6])


def make_branch(
    item: Export, dest: Path, *, base: Mapping[str, bytes] | None, clone: Path | None
) -> str:
    """Commit the export with ``git am`` on a new branch of ``dest``; return the branch.

    ``dest`` becomes a clone of ``clone`` checked out at the base commit (sparse:
    ``backends/arm`` and the root files), or, without a clone, a repository of the base
    release's sources. Either way ``git push`` to a fork is the only step left.
    """
    branch = branch_name(item)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if clone is not None:
        git(dest.parent, "clone", "-q", "--shared", "--no-checkout", str(clone), dest.name)
        git(dest, "sparse-checkout", "set", "backends/arm")
        git(dest, "checkout", "-q", "-b", branch, item.base_commit)
    else:
        dest.mkdir(parents=True)
        git(dest, "init", "-q", "-b", branch)
        for path, data in (base or {}).items():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(data)
        git(dest, "add", "-A")
        git(
            dest,
            "commit",
            "-q",
            "-m",
            f"executorch {item.base_version} sources ({item.base_commit[:12]})",
        )
    mbox = dest.parent / f"{item.stem}.mbox"
    mbox.write_text(item.mbox, encoding="utf-8", newline="\n")
    try:
        git(dest, "am", "-q", "--keep-cr", str(mbox))
    except GitError:
        # A partial clone (blobs outside backends/arm absent) cannot write a full tree:
        # apply the same diff and commit the tree with the missing blobs referenced.
        with contextlib.suppress(GitError):
            git(dest, "am", "--abort")
        _commit_missing_ok(dest, item, mbox)
    return branch


def _commit_missing_ok(dest: Path, item: Export, mbox: Path) -> None:
    git(dest, "reset", "-q")
    git(dest, "checkout", "-q", "HEAD", "--", *item.before)
    git(dest, "apply", "--index", str(mbox))
    tree = git(dest, "write-tree", "--missing-ok").strip()
    date = email.message_from_string(item.mbox.split("\n", 1)[1])["Date"]
    name, address = email.utils.parseaddr(
        email.message_from_string(item.mbox.split("\n", 1)[1])["From"]
    )
    environment = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": address,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": address,
    }
    commit = git_with_env(dest, environment, "commit-tree", tree, "-p", "HEAD", stdin=item.message)
    git(dest, "update-ref", "HEAD", commit.strip())
