"""executorch's rules for Arm backend commits (its ``backends/arm/scripts/pre-push``,
CONTRIBUTING.md), and the sign-off identity they carry."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from overlay import _git
from overlay.errors import UpstreamError, UsageError
from overlay.text.applier import decode

PREFIX = "Arm backend: "
MAX_LINE = 72
HOOK = "backends/arm/scripts/pre-push"  # upstream's hook: its VERBS are the subject's verbs
_VERBS = re.compile(r'^VERBS=((?:"[^"]*"\\?[ \t]*\n?)+)', re.MULTILINE)
_ARM_COPYRIGHT = re.compile(r"Copyright .*Arm Limited and/or its affiliates", re.IGNORECASE)
_URL = re.compile(r"https?://\S+")


@dataclass(frozen=True)
class Identity:
    """A commit author / signer."""

    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


PLACEHOLDER = Identity("A", "a@b.c")  # short: checks a message without its signer


def parse_identity(text: str) -> Identity:
    """Parse ``Name <email>`` (a ``--signoff``: anything else is a command-line mistake)."""
    name, address = email.utils.parseaddr(text)
    if not name or "@" not in address:
        raise UsageError(
            "not a sign-off identity",
            expected="'Full Name <user@example.org>'",
            found=repr(text),
            hint="pass --signoff 'Full Name <user@example.org>'",
        )
    return Identity(name, address)


def hook_verbs(hook: str) -> frozenset[str]:
    """Return the verbs the pre-push hook's ``VERBS`` accepts at the start of a subject."""
    match = _VERBS.search(hook)
    if match is None:
        raise UpstreamError(
            f"no VERBS in upstream's {HOOK}",
            expected='VERBS="Add|Fix|..." (the imperative verbs the hook accepts)',
            found=hook[:200] or "an empty file",
            hint="the hook changed upstream: update overlay/upstream/commit_rules.py",
        )
    return frozenset(filter(None, "".join(re.findall(r'"([^"]*)"', match.group(1))).split("|")))


def check_message(message: str, verbs: Collection[str] | None = None) -> list[str]:
    """Return every way ``message`` breaks the Arm backend commit rules (empty: fine;
    ``verbs`` None leaves the verb unchecked)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    problems = []
    if not subject.startswith(PREFIX):
        problems.append(f"subject does not start with {PREFIX!r}: {subject!r}")
    if len(subject) > MAX_LINE:
        problems.append(f"subject is {len(subject)} > {MAX_LINE} characters")
    first = subject.removeprefix(PREFIX).split(" ", 1)[0]
    if verbs is not None and first not in verbs:
        problems.append(
            f"subject should start with an imperative verb the pre-push hook knows: {first!r}"
        )
    if len(lines) > 1 and lines[1] != "":
        problems.append("line 2 (between subject and body) is not empty")
    for number, line in enumerate(lines[1:], start=2):
        if len(_URL.sub("", line)) > MAX_LINE:
            problems.append(f"line {number} is {len(line)} > {MAX_LINE} characters")
    if not any(line.startswith("Signed-off-by: ") for line in lines):
        problems.append("no 'Signed-off-by: ' trailer")
    return problems


def check_license(files: Mapping[str, bytes], year: int) -> list[str]:
    """Return touched files whose Arm copyright header lacks ``<year> Arm`` (the hook's check)."""
    problems = []
    for path, data in files.items():
        head = "\n".join(decode(data).splitlines()[:10])
        if _ARM_COPYRIGHT.search(head) and f"{year} Arm" not in head:
            problems.append(f"{path}: the Arm copyright header lacks '{year} Arm'")
    return problems


def check_signer(signer: Identity) -> None:
    """Refuse a sign-off identity whose trailer would break the commit rules."""
    problems = check_message(f"{PREFIX}Fix it\n\nSigned-off-by: {signer}\n")
    if problems:
        raise UpstreamError(
            f"the sign-off identity {signer} breaks the Arm backend commit rules",
            expected=f"'Signed-off-by: Name <email>' within {MAX_LINE} characters",
            found="; ".join(problems),
            hint="pass one explicitly: --signoff 'Full Name <user@example.org>'",
        )


def signer(signoff: str | None, cwd: Path | None = None) -> Identity:
    """Return the checked sign-off identity: ``--signoff`` if given, else git's user.*."""
    if signoff:
        found = parse_identity(signoff)
    else:
        values = _git.identity(cwd)
        if not all(values):
            raise UpstreamError(
                "no identity for the Signed-off-by trailer",
                expected="git config user.name and user.email, or --signoff",
                found=f"user.name={values[0]!r}, user.email={values[1]!r}",
                hint="run `git config --global user.name ...` (and user.email), "
                "or pass --signoff 'Full Name <user@example.org>'",
            )
        found = Identity(*values)
    check_signer(found)
    return found
