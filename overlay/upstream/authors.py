"""Who a pull request cc's besides the Arm team: the recent owners of the files it touches.

An owner is an author of the touched files' recent commits on main, weighed by the lines
they changed there; a cosmetic commit makes none. A cc by name notifies nobody, so each is
named by GitHub handle: from a noreply e-mail, or as the series resolved it once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from overlay import fixes
from overlay.fixes.model import PullRequest
from overlay.text.series import Patch
from overlay.upstream.commit_rules import Identity
from overlay.upstream.gitrepo import Scratch

AUTHORS = 5  # recent authors of the touched files named in the cc line
AUTHOR_LINES = 5  # fewer changed lines in those files: a header or a rename, not an owner
# A commit whose subject says it is cosmetic makes no owner of the files it touches (each
# pattern with the upstream commit it was written for; matched case-insensitively).
COSMETIC = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\brenam(?:e|ed|es|ing)\b",  # "Renamed testing suite" (#16361)
        r"^(?:arm backend: )?(?:re)?format\b",  # "Format Arm passes (group 6)" (#17364)
        r"\b(?:doc)?formatter\b|\bruff\b|\blint(?:s|ing|er)?\b",  # "Enable docformatter ..."
        r"\bdocstrings?\b",  # "Fixup and make docstrings consistent ..." (#15443)
        r"\bmypy\b|\bpyre\b",  # "Fix mypy warnings in test/misc" (#15354)
        r"\btest sizes?\b",  # "Reduce conv2d unit test sizes" (#15271)
        r"\b(?:remove|drop)\b.*\btosa v?\d+\.\d+",  # "Remove TOSA v0.80 from arm backend" (#13040)
    )
)
# Nor does one that changes only build files there, whose lists name files: "Store
# external Vela blocks in named data" (#21893) only touches backends/arm/BUCK of 0008's.
BUILD_FILES = ("BUCK", "TARGETS", ".bzl")
NOREPLY = "users.noreply.github.com"  # <id>+<handle>@ names the GitHub account
_PR_SUBJECT = re.compile(r"\(#(\d+)\)$")  # a squash-merged PR's subject ends in "(#N)"


def cosmetic(subject: str, changed: Sequence[str]) -> bool:
    """Return True when a commit makes no owner of the files: its subject says it is
    cosmetic (:data:`COSMETIC`), or ``changed`` (its files among them) are build files only.

    Example: "Arm backend: Reduce conv2d unit test sizes (#15271)" gives True; so does
    "Store external Vela blocks in named data" when it changed only ``backends/arm/BUCK``.
    """
    if any(pattern.search(subject) for pattern in COSMETIC):
        return True
    return bool(changed) and all(path.rsplit("/", 1)[-1].endswith(BUILD_FILES) for path in changed)


def _handle(name: str, address: str, known: Mapping[str, str]) -> str:
    """Return the author's GitHub handle ("" when nothing names it)."""
    local, _, domain = address.partition("@")
    if domain == NOREPLY:
        return "@" + local.split("+")[-1]
    return known.get(address.lower(), known.get(name.lower(), ""))


def cited_prs(patches: Sequence[Patch]) -> list[PullRequest]:
    """Return the pull requests the patches' fix modules cite."""
    notes = [fix.upstream for p in patches if (fix := fixes.by_patch(p.name)) and fix.upstream]
    return [pr for note in notes for pr in note.cited]


def series_handles(
    scratch: Scratch, commit: str, cited: Sequence[PullRequest], paths: Sequence[str]
) -> dict[str, str]:
    """Return the handles the series resolves, by each author's lowercased e-mail and name:
    every author of ``paths`` with a noreply e-mail, and the author of each cited PR (its
    commit on ``commit``, whose subject ends in "(#N)") as the fix module names them. One
    resolved for one fix serves every fix of the series the same author touched.

    Example: 0008 cites #21775 by @YufengShi-dudu, committed as ``Yufeng Shi
    <yufeng.shi@arm.com>``; 0003's recent author ``yufeng.shi@arm.com`` is then
    @YufengShi-dudu, not left out.
    """
    known: dict[str, str] = {}
    text = scratch.run("log", "--no-merges", "--format=%an%x1f%ae", commit, "--", *paths)
    for line in filter(None, text.splitlines()):
        name, _, address = line.partition("\x1f")
        if address.partition("@")[2] == NOREPLY and "bot" not in name.lower():
            handle = _handle(name, address, {})
            known.setdefault(address.lower(), handle)
            known.setdefault(name.lower(), handle)
    authors = {pr.number: pr.author for pr in cited}
    if authors:
        greps = [f"--grep=(#{number})" for number in sorted(authors)]
        text = scratch.run("log", "-F", *greps, "--format=%an%x1f%ae%x1f%s", commit)
        for line in filter(None, text.splitlines()):
            name, address, subject = line.split("\x1f", 2)
            found = _PR_SUBJECT.search(subject)
            if found and int(found.group(1)) in authors:
                known[address.lower()] = known[name.lower()] = "@" + authors[int(found.group(1))]
    return known


def recent_authors(
    scratch: Scratch,
    commit: str,
    paths: Sequence[str],
    signer: Identity,
    known: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Return the GitHub handles of the recent authors of ``paths``, most lines changed in
    them first, so a tree-wide cosmetic commit (a header, a rename) weighs little; a cc by
    name notifies nobody: an author whose handle is unknown is left out, and so is one who
    changed fewer than AUTHOR_LINES lines there. A :func:`cosmetic` commit counts no line.

    ``known``: handles the series resolved (:func:`series_handles`), by e-mail and name.

    Example: ``87121123+oscarandersson8218@users.noreply.github.com`` gives
    ``@oscarandersson8218``; ``Zingo Andersen <zingo.andersen@arm.com>`` gives nothing
    unless ``known`` names him.
    """
    text = scratch.run(
        "log", "-40", "--no-merges", "--numstat", "--format=%x1e%an%x1f%ae%x1f%s", commit,
        "--", *paths,
    )  # fmt: skip
    weight: Counter[str] = Counter()
    for entry in text.split("\x1e")[1:]:
        head, *stats = entry.splitlines()
        name, address, subject = head.split("\x1f", 2)
        handle = _handle(name, address, known or {})
        if "bot" in name.lower() or address == signer.email or not handle:
            continue
        changed = [line.split("\t") for line in stats if line.count("\t") >= 2]
        if cosmetic(subject, [row[2] for row in changed]):
            continue
        lines = sum(int(n) for row in changed for n in row[:2] if n.isdigit())
        weight[handle] += max(lines, 1)
    return tuple(who for who, lines in weight.most_common(AUTHORS) if lines >= AUTHOR_LINES)
