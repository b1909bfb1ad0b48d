"""The one error hierarchy of the overlay; only the CLI turns these into output and exit codes."""

from __future__ import annotations

# `check` (like `ruff --check`): every check passed and the target would change.
EXIT_CHANGES_DUE = 21
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


class OverlayError(Exception):
    """Base of every error the overlay raises on purpose."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        expected: str | None = None,
        found: str | None = None,
        hint: str | None = None,
        details: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.found = found
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        parts = [self.message]
        if self.expected is not None:
            parts.append(f"  expected: {self.expected}")
        if self.found is not None:
            parts.append(f"  found:    {self.found}")
        if self.details:
            parts.append(self.details.rstrip("\n"))
        if self.hint is not None:
            parts.append(f"  next step: {self.hint}")
        return "\n".join(parts)


class UsageError(OverlayError):
    """The command line is wrong: an option names something that is not there (a line, a fix,
    a models file); it is refused before anything expensive is looked at."""

    exit_code = 2


class SeriesError(OverlayError):
    """The series file or a patch in it is malformed, missing or unlisted."""

    exit_code = 3


class UnsafePatchError(SeriesError):
    """A patch names a path outside the target (``..``, absolute) or one RECORD does not list."""


class ChecksumMismatchError(SeriesError):
    """The series produced other bytes than SHA256SUMS (or the pristine pin) records."""


class TargetError(OverlayError):
    """The executorch tree to patch is missing, of another version, unreadable or unwritable."""

    exit_code = 4


class UnsupportedReleaseError(TargetError):
    """No release line is pinned to the executorch release asked for or installed."""


class DriftError(TargetError):
    """A target file is neither the pinned pristine file nor the patched one."""


class UnfinishedRunError(TargetError):
    """An apply or revert was interrupted (its journal is there); `apply` or `revert` settles it."""


class PristineMismatchError(DriftError):
    """A file that must be the pinned pristine file is not (install, wheel, work tree, runtime)."""


class ApplyError(OverlayError):
    """A hunk does not match, or writing failed midway (the tree was rolled back)."""

    exit_code = 5


class RollbackError(ApplyError):
    """A failed or interrupted write could not be rolled back (or finished) from its journal."""

    def __init__(self, message: str, *, paths: tuple[str, ...], **kwargs: str | None) -> None:
        super().__init__(message, **kwargs)
        self.paths = paths  # relative to the target root


class InterruptedRunError(ApplyError):
    """SIGINT or SIGTERM stopped apply/revert; the message says the state it left (exit 128+N)."""

    def __init__(self, message: str, *, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class BusyError(OverlayError):
    """Another overlay process holds the target's mutex for too long."""

    exit_code = 6


class WheelError(OverlayError):
    """Downloading, verifying, reading or writing a wheel failed."""

    exit_code = 7


class InstallCheckError(OverlayError):
    """An environment does not carry the patched executorch it should."""

    exit_code = 8


class RuntimePatchError(OverlayError):
    """The runtime monkey-patch cannot be applied or undone safely."""

    exit_code = 9


class EquivalenceError(OverlayError):
    """The equivalence run found a divergence, a finding or an unfinished item, or failed."""

    exit_code = 10


class EquivalenceInputError(UsageError):
    """An equivalence input is wrong (--models, --runtime-patch, --case, --shard, a report)."""


class UpstreamError(OverlayError):
    """Preparing upstream material (version matrix, mbox export) failed."""

    exit_code = 11


class GitError(OverlayError):
    """A git command failed (patch work tree, upstream export)."""

    exit_code = 12


class EnvError(OverlayError):
    """A release environment (a uv venv with torch and executorch) could not be built."""

    exit_code = 13


class LockfileError(OverlayError):
    """A requirements lock file is missing, unreadable, stale, or pins another wheel."""

    exit_code = 20


def error_classes() -> list[type[OverlayError]]:
    """Return OverlayError and every subclass of it, each after its parent."""
    found: list[type[OverlayError]] = [OverlayError]
    for cls in found:  # grows while it is read: breadth first
        found.extend(cls.__subclasses__())
    return found


def exit_codes() -> list[tuple[int, str]]:
    """Return every documented exit code with its meaning, ascending (for ``--help``)."""
    codes = {
        0: "success",
        1: "any other overlay error",
        2: "bad command line",
        EXIT_CHANGES_DUE: "check: every check passed and files would change",
        130: "interrupted (SIGINT, Ctrl-C)",
        EXIT_CLOSED_PIPE: "stdout's reader went away (`| head`): the output stopped, silently",
        143: "terminated (SIGTERM)",
    }
    for cls in error_classes():
        doc = (cls.__doc__ or cls.__name__).strip().splitlines()[0].rstrip(".")
        codes.setdefault(cls.exit_code, doc)
    return sorted(codes.items())
