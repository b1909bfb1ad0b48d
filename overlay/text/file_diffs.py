"""What one file diff may do: edit a file or create a text file; anything else is refused."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from unidiff.patch import PatchedFile

from overlay.errors import SeriesError, UnsafePatchError

DEV_NULL = "/dev/null"
_REFUSED_HINT = (
    "the overlay edits files and creates text files; it does not delete, rename, copy,"
    " change modes or carry binary content: drop that part of the diff"
)


def check_repo_path(raw: str, *, patch: str) -> str:
    """Validate a path from a diff header and return it as a clean relative POSIX path."""
    problem = None
    if not raw or "\0" in raw or "\\" in raw:
        problem = "an empty path or one with NUL or backslash characters"
    elif raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        problem = "an absolute path"
    elif any(part in ("..", ".", "") for part in raw.split("/")):
        problem = "a path with '..', '.' or empty components"
    if problem is not None:
        raise UnsafePatchError(
            f"patch {patch} names an unsafe path",
            expected="a relative path inside the executorch tree, like backends/arm/...",
            found=f"{raw!r} ({problem})",
            hint="regenerate the patch from a clean work tree (`executorch-arm-overlay edit`)",
        )
    return str(PurePosixPath(raw))


def _strip_prefix(raw: str, prefix: str, *, patch: str) -> str:
    if not raw.startswith(prefix):
        raise SeriesError(
            f"patch {patch} is not a -p1 diff",
            expected=f"paths starting with {prefix!r} (git diff style)",
            found=repr(raw),
            hint="regenerate the patch with `git diff` or `executorch-arm-overlay edit`",
        )
    return raw[len(prefix) :]


# git extended header lines (``git diff`` output between ``diff --git`` and ``---``) that
# make `git apply` do more than the hunks say; a patch carrying any of them is refused,
# never applied without it. ``new file mode 100644`` is allowed on a ``--- /dev/null`` diff.
_GIT_ACTIONS = {
    "old mode ": "changes the file mode of",
    "new mode ": "changes the file mode of",
    "new file mode ": "creates",
    "deleted file mode ": "deletes",
    "rename from ": "renames",
    "rename to ": "renames",
    "copy from ": "copies",
    "copy to ": "copies",
    "similarity index ": "renames or copies",
    "dissimilarity index ": "rewrites (git diff -B)",
    "GIT binary patch": "contains a binary diff for",
    "Binary files ": "contains a binary diff for",
}
NEW_FILE_MODE = "new file mode 100644"
# The only extended lines allowed: ``diff --git`` and an ``index`` line of a regular file.
_ALLOWED_INFO = re.compile(r"^(diff --git .*|index [0-9a-f]+\.\.[0-9a-f]+( 100644| 100755)?)\n?$")


def creates(patched_file: PatchedFile) -> bool:
    """Return True when the file diff creates its file (``--- /dev/null``)."""
    return bool(patched_file.source_file == DEV_NULL)


def refuse_git_actions(diff: str, *, name: str) -> None:
    """Refuse every git extended header line, wherever it is (unidiff drops some).

    ``new file mode 100644`` passes when the file diff after it starts ``--- /dev/null``.
    """
    lines = diff.splitlines()
    path = "?"
    for index, line in enumerate(lines):
        if line.startswith(("diff --git ", "+++ b/")):
            path = line.rsplit(" b/", 1)[-1]
        kind = next((k for prefix, k in _GIT_ACTIONS.items() if line.startswith(prefix)), None)
        if kind is None or (line == NEW_FILE_MODE and _creation_follows(lines, index)):
            continue
        if path == "?":  # no `diff --git` line before it: name the file diff after it
            after = (ln for ln in lines[index:] if ln.startswith(("+++ b/", "--- a/")))
            path = next(after, "? ?").split(" ", 1)[1].removeprefix("b/").removeprefix("a/")
        raise UnsafePatchError(
            f"patch {name} {kind} {path}",
            expected="text hunks that edit files the pinned wheel ships or create text files"
            f" ('{NEW_FILE_MODE}' with '--- {DEV_NULL}')",
            found=repr(line),
            hint=_REFUSED_HINT,
        )


def _creation_follows(lines: list[str], index: int) -> bool:
    """Return True when the next file header after ``lines[index]`` is ``--- /dev/null``, or
    a binary diff follows (refused as such)."""
    for line in lines[index + 1 :]:
        if line.startswith(("Binary files ", "GIT binary patch")):
            return True
        if line.startswith("--- "):
            return line == f"--- {DEV_NULL}"
        if line.startswith(("diff --git ", "@@ ")):
            return False
    return False


def check_file_diff(patched_file: PatchedFile, *, name: str) -> None:
    if patched_file.is_binary_file:
        raise UnsafePatchError(
            f"patch {name} contains a binary diff for {patched_file.path}",
            expected="text hunks only",
            found="a binary patch",
            hint=_REFUSED_HINT,
        )
    deletes = patched_file.target_file == DEV_NULL
    if deletes or patched_file.is_rename or patched_file.is_symlink:
        kind = "deletes" if deletes else "renames or links"
        raise UnsafePatchError(
            f"patch {name} {kind} {patched_file.path}",
            expected="edits of files the pinned wheel ships, or new text files",
            found=f"a diff that {kind} a file",
            hint=_REFUSED_HINT,
        )
    for line in (str(info) for info in patched_file.patch_info or ()):
        if not _ALLOWED_INFO.match(line) and line.rstrip("\n") != NEW_FILE_MODE:
            raise UnsafePatchError(
                f"patch {name} has an extended header line the applier would ignore",
                expected="'diff --git' and 'index <a>..<b> 100644' (or 100755) only",
                found=repr(line.rstrip("\n")),
                hint="regenerate the patch with `git diff` of a content-only change",
            )
    if not patched_file:
        raise SeriesError(
            f"patch {name} has no hunk for {patched_file.path}",
            expected="one or more @@ hunks per file",
            found="a file header with nothing to apply",
            hint="drop the empty file diff",
        )
    if any("\0" in line.value for hunk in patched_file for line in hunk):
        raise UnsafePatchError(
            f"patch {name} carries binary content for {patched_file.path}",
            expected="text lines (no NUL bytes)",
            found="a NUL byte in a hunk line",
            hint=_REFUSED_HINT,
        )
    new = creates(patched_file)
    sides = (patched_file.source_file, patched_file.target_file)
    for raw in sides[1:] if new else sides:
        check_repo_path(raw, patch=name)
    target = _strip_prefix(patched_file.target_file, "b/", patch=name)
    source = target if new else _strip_prefix(patched_file.source_file, "a/", patch=name)
    if source != target:
        raise UnsafePatchError(
            f"patch {name} changes a file's path",
            expected="the same path after a/ and b/",
            found=f"{source!r} -> {target!r}",
            hint=_REFUSED_HINT,
        )
    check_repo_path(source, patch=name)
    if new and (len(patched_file) != 1 or patched_file[0].source_length != 0):
        raise SeriesError(
            f"patch {name} creates {target} from more than nothing",
            expected=f"one hunk '@@ -0,0 +1,N @@' after '--- {DEV_NULL}'",
            found=f"{len(patched_file)} hunk(s), the first from line"
            f" {patched_file[0].source_start}",
            hint="regenerate the patch with `git diff`",
        )
