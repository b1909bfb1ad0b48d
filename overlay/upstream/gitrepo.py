"""The canary's scratch repository: upstream's objects (a local upstream lends them and
is never written to), the canary's own commits, no work tree; git's output pinned."""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay._cache import cache_dir
from overlay._git import git, git_bytes, git_with_env
from overlay.errors import GitError, UpstreamError
from overlay.upstream.results import RangeDiff, RangeDiffPair

MAIN_REF = "refs/upstream/main"
GITHUB = "https://github.com/pytorch/executorch.git"
RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.\d+)$")
# Beyond what overlay._git pins for every command: what changes the canary's log and
# range-diff output (commit ids are shown at a fixed length).
PINNED = (
    "-c", "core.abbrev=12", "-c", "log.showSignature=false", "-c", "diff.renames=false",
    "-c", "log.decorate=false", "-c", "log.mailmap=false",
)  # fmt: skip
DIFF_OPTIONS = ("--no-color", "--no-ext-diff", "--no-renames", "--full-index")
DIFF_PREFIXES = ("--src-prefix=a/", "--dst-prefix=b/")
IDENTITY = {
    "GIT_AUTHOR_NAME": "executorch-arm-overlay canary",
    "GIT_AUTHOR_EMAIL": "canary@localhost",
    "GIT_COMMITTER_NAME": "executorch-arm-overlay canary",
    "GIT_COMMITTER_EMAIL": "canary@localhost",
}
_RANGE_ROW = re.compile(
    r"^\s*(\d+|-):\s+(?:[0-9a-f]+|-+)\s+([=!<>])\s+(\d+|-):\s+(?:[0-9a-f]+|-+)\s(.*)$"
)


@dataclass(frozen=True)
class LogEntry:
    """One upstream commit: id, committer date, subject and body."""

    commit: str
    date: str
    subject: str
    body: str

    @property
    def message(self) -> str:
        """Return subject and body."""
        return f"{self.subject}\n\n{self.body}"


@dataclass(frozen=True)
class Scratch:
    """A bare repository holding upstream's refs (and objects, or borrowing them)."""

    path: Path

    def run(self, *args: str, stdin: str | None = None) -> str:
        """Run git here with the pinned options."""
        return git(self.path, *PINNED, *args, stdin=stdin)

    def rev(self, ref: str) -> str:
        """Return the commit ``ref`` names."""
        return self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()

    def has(self, ref: str) -> bool:
        """Return True when ``ref`` names a commit here."""
        try:
            self.rev(ref)
        except GitError:
            return False
        return True

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        """Return True when ``ancestor`` is ``commit`` or one of its ancestors."""
        try:
            self.run("merge-base", "--is-ancestor", ancestor, commit)
        except GitError:
            return False
        return True

    def date(self, commit: str) -> str:
        """Return the committer date of ``commit`` (ISO 8601)."""
        return self.run("log", "-1", "--format=%cI", commit).strip()

    def files(self, commit: str, paths: Iterable[str]) -> dict[str, bytes]:
        """Return ``{path: bytes}`` at ``commit``; paths not in its tree are left out."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        request = "".join(f"{commit}:{path}\n" for path in wanted).encode()
        data = git_bytes(self.path, "cat-file", "--batch", stdin=request)
        found: dict[str, bytes] = {}
        at = 0
        for path in wanted:
            end = data.index(b"\n", at)
            header = data[at:end].decode("utf-8", errors="replace").split()
            at = end + 1
            if header[-1] == "missing" or len(header) != 3 or header[1] != "blob":
                continue
            size = int(header[2])
            found[path] = data[at : at + size]
            at += size + 1
        return found

    def commit(self, parent: str, files: Mapping[str, bytes], message: str, *, date: str) -> str:
        """Return a new commit: ``parent``'s tree with ``files`` replaced (no work tree)."""
        with tempfile.TemporaryDirectory(prefix="canary-index-", dir=self.path) as tmp:
            env = {**IDENTITY, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
            env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
            git_with_env(self.path, env, "read-tree", f"{parent}^{{tree}}")
            listing = self.run("ls-tree", "-z", parent, "--", *files) if files else ""
            modes = {}  # a replaced file keeps its mode
            for item in filter(None, listing.split("\0")):
                meta, _, path = item.partition("\t")
                modes[path] = meta.split()[0]
            entries = []
            for path, data in files.items():
                blob = git_bytes(self.path, "hash-object", "-w", "--stdin", stdin=data)
                entries.append(f"{modes.get(path, '100644')} {blob.decode().strip()}\t{path}\n")
            git_with_env(self.path, env, "update-index", "--index-info", stdin="".join(entries))
            tree = git_with_env(self.path, env, "write-tree").strip()
            return git_with_env(
                self.path, env, "commit-tree", tree, "-p", parent, stdin=message
            ).strip()

    def log(
        self, revisions: str, paths: Sequence[str] = (), *, first_parent: bool = False
    ) -> list[LogEntry]:
        """Return the commits of ``revisions`` (newest first), touching ``paths`` if given."""
        options = ["--first-parent"] if first_parent else ["--no-merges"]
        text = self.run(
            "log", *options, "--format=%H%x1f%cI%x1f%s%x1f%b%x1e", revisions, "--", *paths
        )
        entries = []
        for record in text.split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) == 4:
                entries.append(LogEntry(*fields))
        return entries

    def diff(self, old: str, new: str, paths: Sequence[str]) -> str:
        """Return the diff ``old`` -> ``new`` of ``paths``, in the series' form."""
        return self.run("diff", *DIFF_OPTIONS, *DIFF_PREFIXES, old, new, "--", *paths)

    def patch_ids(self, revisions: str, paths: Sequence[str]) -> dict[str, str]:
        """Return ``{patch-id: commit}`` of the commits of ``revisions``, diffs cut to ``paths``."""
        text = self.run(
            "log", "--no-merges", "-p", *DIFF_OPTIONS, *DIFF_PREFIXES, "--format=commit %H",
            revisions, "--", *paths,
        )  # fmt: skip
        ids: dict[str, str] = {}
        for line in self.run("patch-id", "--stable", stdin=text).splitlines():
            patch_id, commit = line.split()
            ids.setdefault(patch_id, commit)  # newest first: keep the newest
        return ids

    def patch_id(self, diff: str) -> str:
        """Return the stable patch-id of a diff text ("" for an empty diff)."""
        text = self.run("patch-id", "--stable", stdin=diff)
        return text.split()[0] if text.strip() else ""

    def release_tags(self) -> dict[str, str]:
        """Return ``{tag: version}`` of every ``vX.Y.Z`` tag (no pre-releases)."""
        tags = self.run("tag", "--list", "v*").split()
        return {tag: match.group(1) for tag in tags if (match := RELEASE_TAG.match(tag))}

    def first_release(self, commit: str) -> str:
        """Return the oldest ``vX.Y.Z`` tag containing ``commit`` ("" when none does)."""
        tags = self.run("tag", "--contains", commit, "--list", "v*").split()
        releases = [t for t in tags if RELEASE_TAG.match(t)]
        return min(releases, key=lambda t: Version(t[1:]), default="")

    def range_diff(self, old: tuple[str, str], new: tuple[str, str]) -> RangeDiff:
        """Return ``git range-diff old_base..old_tip new_base..new_tip``, parsed."""
        ranges = (f"{old[0]}..{old[1]}", f"{new[0]}..{new[1]}")
        text = self.run("range-diff", "--no-color", *ranges)
        pairs = []
        for line in text.splitlines():
            match = _RANGE_ROW.match(line)
            if match:
                left, relation, right, subject = match.groups()
                pairs.append(
                    RangeDiffPair(
                        0 if left == "-" else int(left),
                        0 if right == "-" else int(right),
                        relation,
                        subject.strip(),
                    )
                )
        shown = f"git range-diff {old[0][:12]}..{old[1][:12]} {new[0][:12]}..{new[1][:12]}"
        return RangeDiff(shown, text, tuple(pairs))


def is_url(source: str) -> bool:
    """Return True when ``source`` is a git URL rather than a local folder."""
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", source)) or (
        ":" in source and "@" in source.split(":", 1)[0]
    )


def open_upstream(source: str, root: Path | None = None) -> Scratch:
    """Return the scratch repository for ``source`` (a folder or a URL), with ``main``
    (as ``refs/upstream/main``) and every ``v*`` tag fetched."""
    local = None if is_url(source) else Path(source).resolve()
    if local is not None and not local.exists():
        raise UpstreamError(
            f"no upstream repository at {local}",
            expected="a pytorch/executorch clone or mirror, or a git URL",
            found="no such folder",
            hint="pass --upstream https://github.com/pytorch/executorch.git or a local clone",
        )
    key = hashlib.sha256(str(local or source).encode()).hexdigest()[:16]
    path = (root or cache_dir() / "canary") / key / "repo.git"
    if not (path / "HEAD").is_file():
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "--bare")
        git(path, "config", "gc.auto", "0")
    scratch = Scratch(path)
    remote = source
    if local is not None:
        common = git(local, "rev-parse", "--path-format=absolute", "--git-common-dir")
        objects = Path(common.strip()) / "objects"
        alternates = path / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(f"{objects}\n", encoding="utf-8")
        remote = str(local)
    try:
        git(
            path, "fetch", "-q", "--no-tags", "--force", remote,
            f"+refs/heads/main:{MAIN_REF}", "+refs/tags/v*:refs/tags/v*",
        )  # fmt: skip
    except GitError as exc:
        raise UpstreamError(
            f"cannot fetch main and the release tags of {source}",
            expected="a repository with a main branch",
            found=exc.found,
            hint="check the URL or path (a clone of pytorch/executorch)",
        ) from exc
    return scratch


def refresh_command(source: str) -> str:
    """Return how the user brings the ``main`` :func:`open_upstream` reads from
    ``source`` up to upstream's (``git -C ... pull``/``fetch``, or ``--upstream <GitHub>``)."""
    instead = f"`--upstream {GITHUB}`"
    if is_url(source):
        return instead if source != GITHUB else "run it again (main is fetched each run)"
    local = Path(source).resolve()
    checked_out = (
        git(local, "rev-parse", "--is-bare-repository").strip() == "false"
        and git(local, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    )
    verb = f"pull --ff-only {GITHUB} main" if checked_out else f"fetch {GITHUB} main:main"
    return f"`git -C {local} {verb}`, or {instead}"
