"""Export a patch as a ``git format-patch`` style mbox, its diff regenerated against its
``base-commit:`` so ``git am`` applies it there exactly; a message that breaks a rule is
refused."""

from __future__ import annotations

import contextlib
import datetime
import email.policy
import email.utils
import io
import re
import shutil
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.generator import Generator
from email.message import EmailMessage
from pathlib import Path

from overlay import __version__
from overlay._files import write_files
from overlay._git import diff_files, git
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

# Who the Arm backend's commits and PRs cc, and the comments that label its PRs (as upstream
# Arm PRs ask pytorchbot: ciflow/trunk runs the trunk jobs).
ARM_CC = (
    "cc @digantdesai @freddan80 @per @zingo @oscarandersson8218 @mansnils",
    "@Sebastian-Larsson @robell @rascani",
)
LABEL_COMMANDS = (
    "@pytorchbot label ciflow/trunk",
    "@pytorchbot label 'partner: arm'",
    '@pytorchbot label "release notes: arm"',
)
# In a description, "#<0007>" stands for the PR of the series' patch 0007, whose number is
# known only once that PR is open: the PR text keeps the marker and the checklists say
# when to replace it; the commit message names that commit by its subject instead.
SERIES_MARKER = re.compile(r"#<(\d{4})>")
ISSUE_TITLE = "Title: "  # the first line of an issue draft: what to type as its title
_POLICY = email.policy.default.clone(linesep="\n", max_line_length=0)


@dataclass(frozen=True)
class Export:
    """One exported patch: the mbox, the PR body and what applying it must give."""

    name: str
    subject: str
    message: str  # the commit message (subject, blank line, body, trailers)
    mbox: str
    before: dict[str, bytes]  # repository path -> base bytes
    after: dict[str, bytes]  # repository path -> bytes after the fix
    base_commit: str = ""
    pr_body: str = ""
    comment: str = ""  # the measurements: the PR's first comment
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


def series_markers(text: str) -> tuple[int, ...]:
    """Return the patch numbers ``text``'s series markers (``#<0007>``) name, once each."""
    return tuple(dict.fromkeys(int(n) for n in SERIES_MARKER.findall(text)))


def named_by(patches: Sequence[Patch], number: int) -> tuple[int, ...]:
    """Return the numbers of the patches whose description has a marker naming ``number``."""
    return tuple(p.number for p in patches if number in series_markers(p.header["Description"]))


def commit_message(patch: Patch, signer: Identity, series: Mapping[int, str] | None = None) -> str:
    """Return the upstream commit message: subject, wrapped body, cc, Fixes, Signed-off-by
    (a marker ``#<0007>`` becomes ``series``' subject of 0007 in quotes)."""
    subjects = series or {}

    def named(found: re.Match[str]) -> str:
        number = int(found.group(1))
        return f'"{subjects[number]}"' if number in subjects else found.group(0)

    body = wrap(SERIES_MARKER.sub(named, p) for p in dep3_paragraphs(patch))
    fixed = "\n".join(f"Fixes #{n}" for n in patch.issues)
    parts = [upstream_subject(patch), body, "\n".join(ARM_CC), fixed, f"Signed-off-by: {signer}"]
    return "\n\n".join(filter(None, parts)) + "\n"  # no body, no Fixes: no paragraph


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
    payload += f"-- \nexecutorch-arm-overlay {__version__}\n"
    msg.set_content(payload, subtype="plain", charset="utf-8", cte="8bit")
    msg.set_unixfrom(f"From {'0' * 40} Mon Sep 17 00:00:00 2001")
    buffer = io.StringIO()
    Generator(buffer, mangle_from_=False, policy=_POLICY).flatten(msg, unixfrom=True)
    return buffer.getvalue()


def export_patch(
    patch: Patch,
    base: Mapping[str, bytes],
    *,
    signer: Identity,
    base_commit: str = "",
    year: int | None = None,
    after: Mapping[str, bytes] | None = None,
    series: Mapping[int, str] | None = None,
) -> Export:
    """Export one patch (exactly applicable to ``base``; ``after``: the files where it was
    merged there instead); refuse any broken rule but the verb, which the caller reports."""
    if after is None:
        paths = [f.path for f in patch.files]
        missing = [p for p in paths if p not in base and p not in patch.creates]
        hint = "retarget the line to the release (its candidate's patch is the port)"
        if missing:
            raise UpstreamError(
                f"{patch.name}: {', '.join(missing)} is not in the base release",
                expected="the files in the release sources",
                found="no such file",
                hint=hint,
            )
        before = {p: base[p] for p in paths if p in base}
        try:
            texts = apply_patch(patch, {p: decode(d) for p, d in before.items()}, allow_offset=True)
        except HunkMismatchError as exc:
            raise UpstreamError(
                f"{patch.name} does not apply to the base release", found=exc.message, hint=hint
            ) from exc
        after = {p: encode(t) for p, t in texts.items()}
    else:
        before, after = {p: base[p] for p in after if p in base}, dict(after)  # new: not in base
    message = commit_message(patch, signer, series)
    problems = check_message(message)
    problems += check_license(after, year or datetime.datetime.now(datetime.UTC).year)
    if problems:
        own = check_message(commit_message(patch, PLACEHOLDER, series))
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
    stat, diff = diff_files(before, after)
    day = patch.header.get("Last-Update", "").strip()
    try:
        date = datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.UTC)
    except ValueError:
        date = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    mbox = format_mbox(
        message=message, author=signer, date=date, diffstat=stat, diff=diff,
        base_commit=base_commit,
    )  # fmt: skip
    subject = message.split("\n", 1)[0]
    return Export(patch.name, subject, message, mbox, before, after, base_commit)


def write_exports(exports: Sequence[Export], out_dir: Path) -> list[Path]:
    """Write ``<stem>.{mbox,pr.md}`` (plus ``.comment.md``, ``.issue.md``, ``.checklist.md``)
    to ``out_dir``."""
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for item in exports:
        files = {"mbox": item.mbox, "pr.md": item.pr_body, "comment.md": item.comment,
                 "issue.md": item.issue, "checklist.md": item.checklist}  # fmt: skip
        for suffix, text in files.items():
            if text or suffix in ("mbox", "pr.md"):
                path = out_dir / f"{item.stem}.{suffix}"
                path.write_text(text, encoding="utf-8", newline="\n")
                written.append(path)
    return written


_TRAILING = frozenset({"a", "an", "and", "at", "by", "for", "in", "of", "on", "only", "so",
                       "that", "the", "to", "with"})  # fmt: skip


def branch_name(item: Export) -> str:
    """Return the branch of a commit: ``arm-`` and its subject's first six words, less
    the small words a cut leaves at the end (``arm-register-vgf-grid-sample``)."""
    words = re.sub(r"[^a-z0-9]+", "-", item.subject.removeprefix(PREFIX).lower()).strip("-")
    kept = words.split("-")[:6]
    while len(kept) > 1 and kept[-1] in _TRAILING:
        kept.pop()
    return "arm-" + "-".join(kept)


def release_repo(dest: Path, files: Mapping[str, bytes], commit: str) -> Path:
    """Make ``dest`` a repository of a release's files (the ones a patch touches)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "release")
    write_files(dest, files)
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"the release's sources ({commit[:12] or 'commit unknown'})")
    return dest


def apply_mbox(repo: Path, item: Export) -> str:
    """Commit the mbox with ``git am`` in ``repo``; return why not ("" when it applied)."""
    mbox = repo.parent / f"{item.stem}.mbox"
    mbox.write_text(item.mbox, encoding="utf-8", newline="\n")
    try:
        git(repo, "am", "-q", "--keep-cr", str(mbox))
    except GitError as exc:
        with contextlib.suppress(GitError):
            git(repo, "am", "--abort")
        said = " ".join((exc.found or exc.message).split())  # one line: a table cell, a list item
        return f"git am fails: {said[:300]}"
    return ""
