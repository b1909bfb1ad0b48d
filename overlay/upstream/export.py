"""Export patches still needed upstream as ``git format-patch`` style mboxes plus PR bodies.

executorch's rules for Arm backend commits (backends/arm/scripts/pre-push and
CONTRIBUTING.md upstream): subject ``Arm backend: <Imperative ...>``, subject
and body lines at most 72 characters (URLs excepted), a ``Signed-off-by``
trailer, and the issue named in the PR (``Fixes #N``). The diff is regenerated
with git against the release the export is based on, so ``git am`` applies it
to that release's sources exactly.
"""

from __future__ import annotations

import datetime
import email.policy
import email.utils
import io
import re
import tempfile
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.generator import Generator
from email.message import EmailMessage
from pathlib import Path

from overlay import __version__, _git, fixes
from overlay._git import git
from overlay.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.errors import UpstreamError
from overlay.series import PATCH_SUFFIX, Patch, Series
from overlay.upstream.matrix import APPLYING, Matrix, port_for

PREFIX = "Arm backend: "
MAX_LINE = 72
ZERO_SHA = "0" * 40
_URL = re.compile(r"https?://\S+")
# Words that show a subject is not imperative ("Adds", "Added", "Adding").
_NOT_IMPERATIVE = re.compile(r"^[A-Za-z]+(?:s|ed|ing)$")
_IMPERATIVE_S = frozenset({"Pass", "Process", "Address", "Bypass", "Focus", "Access"})
_POLICY = email.policy.default.clone(linesep="\n", max_line_length=0)
_PLACEHOLDER_ID = ("A", "a@b.c")  # a short identity, to check the message without the signer


@dataclass(frozen=True)
class Identity:
    """A commit author / signer."""

    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


_PLACEHOLDER = Identity(*_PLACEHOLDER_ID)


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
    warnings: tuple[str, ...] = ()  # rule breaks caused by the sign-off identity

    @property
    def stem(self) -> str:
        """Return the file name stem, e.g. ``0001-keep-terminal-int16-quantize``."""
        return self.name.removesuffix(PATCH_SUFFIX)


def parse_identity(text: str) -> Identity:
    """Parse ``Name <email>``."""
    name, address = email.utils.parseaddr(text)
    if not name or "@" not in address:
        raise UpstreamError(
            "not a sign-off identity",
            expected="'Full Name <user@example.org>'",
            found=repr(text),
            hint="pass --signoff 'Full Name <user@example.org>'",
        )
    return Identity(name, address)


def git_identity(cwd: Path | None = None) -> Identity:
    """Return user.name/user.email from git config, for the Signed-off-by trailer."""
    values = _git.identity(cwd)
    if not all(values):
        raise UpstreamError(
            "no identity for the Signed-off-by trailer",
            expected="git config user.name and user.email, or --signoff",
            found=f"user.name={values[0]!r}, user.email={values[1]!r}",
            hint="run `git config --global user.name ...` (and user.email), "
            "or pass --signoff 'Full Name <user@example.org>'",
        )
    return Identity(values[0], values[1])


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
    """Return the upstream commit message: subject, wrapped body, Fixes and Signed-off-by."""
    body = wrap(dep3_paragraphs(patch))
    trailers = [f"Fixes #{n}" for n in patch.issues]
    parts = [upstream_subject(patch), body] if body else [upstream_subject(patch)]
    if trailers:
        parts.append("\n".join(trailers))
    parts.append(f"Signed-off-by: {signer}")
    return "\n\n".join(parts) + "\n"


def check_message(message: str) -> list[str]:
    """Return every way ``message`` breaks the Arm backend commit rules (empty: fine)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    problems = []
    if not subject.startswith(PREFIX):
        problems.append(f"subject does not start with {PREFIX!r}: {subject!r}")
    if len(subject) > MAX_LINE:
        problems.append(f"subject is {len(subject)} > {MAX_LINE} characters")
    first = subject.removeprefix(PREFIX).split(" ", 1)[0]
    if not first[:1].isupper() or (
        _NOT_IMPERATIVE.match(first) and first not in _IMPERATIVE_S and not first.endswith("ss")
    ):
        problems.append(f"subject should start with a capitalised imperative verb: {first!r}")
    if len(lines) > 1 and lines[1] != "":
        problems.append("line 2 (between subject and body) is not empty")
    for number, line in enumerate(lines[1:], start=2):
        if len(_URL.sub("", line)) > MAX_LINE:
            problems.append(f"line {number} is {len(line)} > {MAX_LINE} characters")
    if not any(line.startswith("Signed-off-by: ") for line in lines):
        problems.append("no 'Signed-off-by: ' trailer")
    return problems


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
) -> str:
    """Build one ``git format-patch`` style message with the stdlib email package."""
    subject, _, rest = message.partition("\n")
    counter = f"[PATCH {number}/{total}]" if total > 1 else "[PATCH]"
    msg = EmailMessage(policy=_POLICY)
    msg["From"] = email.utils.formataddr((author.name, author.email))
    msg["Date"] = email.utils.format_datetime(date)
    msg["Subject"] = f"{counter} {subject}"
    payload = rest.lstrip("\n") + "---\n" + diffstat + "\n" + diff + f"-- \n{_signature()}\n"
    msg.set_content(payload, subtype="plain", charset="utf-8", cte="8bit")
    msg.set_unixfrom(f"From {ZERO_SHA} Mon Sep 17 00:00:00 2001")
    buffer = io.StringIO()
    Generator(buffer, mangle_from_=False, policy=_POLICY).flatten(msg, unixfrom=True)
    return buffer.getvalue()


def _signature() -> str:
    return f"executorch-arm-overlay {__version__}"


def corpus_cases(stem: str) -> list[str]:
    """Return the equivalence-corpus cases that trigger patch ``stem``, one line each."""
    entry = fixes.by_patch(stem)
    if entry is None:
        return []
    return [
        f"`{t.case}`: {t.why}; the run finds it {t.effect.value} by the patch"
        for t in entry.triggers
    ]


def pr_body(
    patch: Patch, message: str, base_version: str, source: str, release: Mapping[str, bytes]
) -> str:
    """Return the Markdown PR description: Summary, Test plan with reproducer and test file."""
    stem = patch.name.removesuffix(PATCH_SUFFIX)
    entry = fixes.by_patch(stem)
    note = entry.upstream if entry is not None else None
    subject = message.split("\n", 1)[0]
    summary = "\n\n".join(dep3_paragraphs(patch))
    lines = [f"# {subject}", "", "### Summary", "", summary, ""]
    lines += [f"Fixes #{n}" for n in patch.issues]
    if patch.issues:
        lines.append("")
    lines += [
        f"Based on executorch {base_version} ({source} diff of the overlay patch `{patch.name}`).",
        "",
    ]
    if note is not None and note.narrowing:
        lines += ["### Difference from the overlay patch", "", note.narrowing, ""]
    lines += ["### Test plan", ""]
    if note is None:
        lines += ["No reproducer recorded for this patch in the fix registry.", ""]
    else:
        exists = note.test_file in release
        where = "exists" if exists else f"does not exist yet in {base_version}: create it"
        lines += [
            f"Add a regression test to `{note.test_file}` ({where}) built on this "
            "reproducer, then run:",
            "",
            "```",
            f"pytest -c /dev/null {note.test_file}",
            "```",
            "",
        ]
        cases = corpus_cases(stem)
        if cases:
            lines += ["The overlay's equivalence corpus runs:", ""]
            lines += [f"- {case}" for case in cases]
            lines.append("")
        lines += ["Reproducer (self-contained, with executorch's test helpers):", ""]
        lines += ["```python", note.reproducer.rstrip("\n"), "```", ""]
    lines += [
        f"`git am` of this patch onto the executorch {base_version} sources gives the "
        "overlay's patched files (checked by the overlay's tests).",
        "",
    ]
    return "\n".join(lines)


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
            hint="write a port under patches/ports/<version>/ for the new layout",
        )
    before = {p: release[p] for p in paths}
    try:
        after = apply_patch(patch, {p: decode(d) for p, d in before.items()}, allow_offset=True)
    except HunkMismatchError as exc:
        raise UpstreamError(
            f"{patch.name} does not apply to the base release",
            found=exc.message,
            hint="write a port under patches/ports/<version>/",
        ) from exc
    return before, {p: encode(t) for p, t in after.items()}


def export_patch(
    patch: Patch,
    release: Mapping[str, bytes],
    base_version: str,
    *,
    signer: Identity,
    source: str = "pinned",
    number: int = 1,
    total: int = 1,
) -> Export:
    """Export one patch (exactly applicable to ``release``) as an mbox and a PR body."""
    before, after = _patched(patch, release)
    message = commit_message(patch, signer)
    problems = check_message(commit_message(patch, _PLACEHOLDER))
    if problems:
        raise UpstreamError(
            f"{patch.name}: the commit message breaks the Arm backend rules",
            expected=f"'{PREFIX}<Imperative ...>', lines <= {MAX_LINE}, Signed-off-by",
            found="; ".join(problems),
            hint="shorten the patch's Description lines (its first line is the subject)",
        )
    # Whatever is left comes from the identity: export, but warn (upstream's hook refuses it).
    warnings = tuple(
        f"{patch.name}: {problem} (the Signed-off-by line); pass a shorter "
        "--signoff 'Name <email>' before sending"
        for problem in check_message(message)
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
    )
    body = pr_body(patch, message, base_version, source, release)
    subject = message.split("\n", 1)[0]
    return Export(
        patch.name, base_version, source, subject, message, mbox, body, before, after, warnings
    )


def export_upstream(
    series: Series,
    ports: Mapping[str, Mapping[str, Patch]],
    matrix: Matrix,
    *,
    signer: Identity,
    names: Sequence[str] = (),
    base_version: str | None = None,
) -> list[Export]:
    """Export every patch the matrix says is still needed upstream (or ``names``)."""
    base = base_version or matrix.newest
    if base not in matrix.releases:
        raise UpstreamError(
            f"executorch {base} is not in the matrix",
            expected=", ".join(matrix.versions),
            found=base,
            hint="add it with --versions",
        )
    release = matrix.releases[base].files
    wanted = [series.get(n) for n in names] or [
        p for p in series.patches if matrix.row(p.name).verdict.needs_upstream
    ]
    exports = []
    for number, patch in enumerate(wanted, start=1):
        cell = matrix.row(patch.name).cells[base]
        found = port_for(ports, patch.name, base)
        chosen, source = patch, "pinned"
        if found is not None and cell.port is not None and cell.port.status in APPLYING:
            chosen, source = found[1], f"port {found[0]}"
        elif cell.check.status not in APPLYING:
            raise UpstreamError(
                f"{patch.name} does not apply to executorch {base}",
                expected="the pinned patch or a port that applies",
                found=cell.effective.detail or cell.effective.status.value,
                hint=f"write patches/ports/{base}/{patch.name} against {base}, then re-run",
            )
        exports.append(
            export_patch(
                chosen,
                release,
                base,
                signer=signer,
                source=source,
                number=number,
                total=len(wanted),
            )
        )
    return exports


def write_exports(exports: Sequence[Export], out_dir: Path) -> list[Path]:
    """Write ``<base>/<stem>.mbox`` and ``<base>/<stem>.pr.md`` for each export."""
    written = []
    for item in exports:
        folder = out_dir / item.base_version
        folder.mkdir(parents=True, exist_ok=True)
        mbox = folder / f"{item.stem}.mbox"
        body = folder / f"{item.stem}.pr.md"
        mbox.write_text(item.mbox, encoding="utf-8", newline="\n")
        body.write_text(item.pr_body, encoding="utf-8", newline="\n")
        written += [mbox, body]
    return written
