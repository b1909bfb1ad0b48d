"""A tree's state, read once for `status`, `apply` and `verify-install` (one verdict)."""

from __future__ import annotations

import dataclasses
import enum
import itertools
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay import _mutex
from overlay._hashing import sha256_bytes
from overlay.distribution.distinfo import ORIGINAL_FILE, read_text
from overlay.distribution.provenance import PROVENANCE_FILE, local_version, parse_provenance
from overlay.errors import BusyError, InstallCheckError, OverlayError, TargetError
from overlay.lines.selection import describe
from overlay.text.applier import HunkMismatchError, transform, transform_checked
from overlay.text.series import Series
from overlay.tree import journal
from overlay.tree.locate import Target, find_target, safe_file

# A file touched by more fixes than this is classified as pristine, patched or drifted
# only: its partial states would be 2**n reverse applications to try.
MAX_SUBSET_FIXES = 10


class FileState(enum.Enum):
    """Where one target file stands relative to the series."""

    PRISTINE = "pristine"
    PATCHED = "patched"  # every fix that touches the file
    PARTIAL = "partial"  # some of the fixes that touch it
    DRIFTED = "drifted"
    MISSING = "missing"


class MetadataState(enum.Enum):
    """What the dist-info says about the tree."""

    STOCK = "stock"  # as executorch installed it
    IN_PLACE = "patched in place"  # rewritten by `apply` (provenance + the saved original)
    WHEEL = "patched wheel"  # installed from the patched wheel


class TreeState(enum.Enum):
    """The whole tree, as `status` reports it."""

    PRISTINE = "pristine"
    PATCHED = "patched"
    PARTIAL = "partial"  # some fixes in all their files, the others in none
    MIXED = "mixed"  # a fix in some of its files only, and no journal
    DRIFTED = "drifted"
    INTERRUPTED = "interrupted"  # an unfinished journal: `apply` or `revert` settles it
    BUSY = "busy"  # another run holds the lock


@dataclass(frozen=True)
class FileRead:
    """One target file as read once: its checked path, bytes, state and the fixes it holds."""

    repo_path: str
    path: Path
    data: bytes | None  # None: no file
    state: FileState
    fixes: frozenset[int]  # the fixes (numbers) the file holds; empty when drifted
    pristine: bytes | None  # its pinned pristine bytes; None: no file (drifted, missing, or
    # pristine for a file the series creates: ``state`` says which)


@dataclass(frozen=True)
class Record:
    """What the dist-info records."""

    state: MetadataState
    series_digest: str | None  # the series its provenance names
    fixes: frozenset[int] | None  # the fixes its provenance lists, when it names this series


def read_files(series: Series, target: Target) -> dict[str, FileRead]:
    """Read and classify every file the series touches, each exactly once."""
    patched = series.expected_patched_sha256()
    files = {}
    for repo_path in series.targets():
        path = safe_file(series, target, repo_path)
        try:
            data = path.read_bytes() if path.is_file() else None
        except OSError as exc:
            raise TargetError(f"cannot read {path}: {exc}", hint="check permissions") from exc
        digest = None if data is None else sha256_bytes(data)
        mine = series.touching(repo_path)
        found: tuple[FileState, frozenset[int], bytes | None]
        if digest == series.pristine_sha256(repo_path):
            found = FileState.PRISTINE, frozenset(), data
        elif data is None:
            found = FileState.MISSING, frozenset(), None
        elif digest == patched[repo_path]:
            pristine = transform_checked(series, repo_path, data, reverse=True)
            found = FileState.PATCHED, mine, pristine
        elif (partial := _partial(series, repo_path, data, mine)) is not None:
            found = FileState.PARTIAL, *partial
        else:
            found = FileState.DRIFTED, frozenset(), None
        files[repo_path] = FileRead(repo_path, path, data, *found)
    return files


def _partial(
    series: Series, repo_path: str, data: bytes, mine: frozenset[int]
) -> tuple[frozenset[int], bytes | None] | None:
    """Return the proper subset of ``mine`` the file holds and its pristine bytes (None:
    no file), or None when no subset gives it."""
    numbers = sorted(mine)
    if len(numbers) > MAX_SUBSET_FIXES:
        return None
    wanted = series.pristine_sha256(repo_path)
    for size in range(len(numbers) - 1, 0, -1):
        for combo in itertools.combinations(numbers, size):
            patches = series.of(combo)
            try:
                pristine = transform(patches, repo_path, data, reverse=True)
                if (None if pristine is None else sha256_bytes(pristine)) == wanted and transform(
                    patches, repo_path, pristine
                ) == data:
                    return frozenset(combo), pristine
            except HunkMismatchError:
                continue
    return None


def fix_states(series: Series, files: dict[str, FileRead]) -> tuple[frozenset[int], frozenset[int]]:
    """Return (the fixes all their files hold, the fixes only some of their files hold)."""
    applied, half = set(), set()
    for number in series.numbers:
        held = [
            number in read.fixes for path, read in files.items() if number in series.touching(path)
        ]
        if held and all(held):
            applied.add(number)
        elif any(held):
            half.add(number)
    return frozenset(applied), frozenset(half)


def read_record(series: Series, dist_info: Path) -> Record:
    """Return what the dist-info records: stock, in place or wheel, the series and fixes."""
    provenance_file = dist_info / PROVENANCE_FILE
    if not provenance_file.exists():
        return Record(MetadataState.STOCK, None, None)
    provenance = parse_provenance(read_text(provenance_file))
    digest = provenance.series_digest if provenance else None
    fixes = None
    if provenance is not None and digest == series.digest:
        fixes = series.numbers_of(p.name for p in provenance.patches)
    state = MetadataState.IN_PLACE if (dist_info / ORIGINAL_FILE).exists() else MetadataState.WHEEL
    return Record(state, digest, fixes)


@dataclass(frozen=True)
class Status:
    """The state of a target as `status`, `check`, `apply` and `verify-install` see it."""

    target: Target
    series: Series = dataclasses.field(compare=False, repr=False)
    state: TreeState = TreeState.PRISTINE
    files: dict[str, FileState] = dataclasses.field(default_factory=dict)  # empty: busy, torn
    digests: dict[str, str] = dataclasses.field(default_factory=dict)  # sha256 now, "missing"
    record: Record = Record(MetadataState.STOCK, None, None)
    applied: frozenset[int] = frozenset()  # the fixes all their files hold
    half: frozenset[int] = frozenset()  # the fixes some of their files hold
    interrupted: journal.Journal | None = None
    steps_done: int = 0
    holder: int | None = None  # the pid holding the lock when busy (None: unknown)

    @property
    def complete(self) -> bool:
        """Return True when files and dist-info both say: every fix of this series."""
        return self.problem() is None

    def problem(self, rebuild: str = "apply again") -> OverlayError | None:
        """Return why the tree is not this series, whole and recorded; None when it is.

        The one verdict of `status` (``complete``) and `verify-install`: a BusyError while
        another run writes the tree, else an InstallCheckError; ``rebuild`` is the next step
        for a tree of another series or release.
        """
        site, series = self.target.root, self.series
        if self.interrupted is not None:
            return InstallCheckError(
                f"an interrupted {self.interrupted.operation.value} left {site} half-written",
                expected="a tree that is pristine or patched",
                found=f"the journal {journal.journal_file(site)} (pid {self.interrupted.pid})",
                hint=f"run `executorch-arm-overlay apply --target {site}` (or `revert`)",
            )
        if self.state is TreeState.BUSY:
            return BusyError(
                f"another overlay run is writing {site}",
                expected="no other run",
                found=f"{journal.lock_file(site)} held by {self._holder}",
                hint="wait for it to finish, then check again",
            )
        recorded = self.record.fixes
        if recorded is not None and recorded != series.numbers:
            return InstallCheckError(
                f"executorch in {site} holds {describe(series, recorded)} of this series",
                expected=f"{describe(series, series.numbers)} (executorch {local_version(series)})",
                found=f"{describe(series, recorded)} (executorch {self.target.version})",
                hint=f"apply the rest: `executorch-arm-overlay apply --target {site}`",
            )
        if self.target.version != Version(local_version(series)):
            return InstallCheckError(
                "this environment does not carry this patch series",
                expected=f"executorch {local_version(series)}",
                found=f"executorch {self.target.version}",
                hint=rebuild,
            )
        if self.record.series_digest != series.digest:
            return InstallCheckError(
                f"{PROVENANCE_FILE} does not name this series",
                expected=series.digest,
                found=self.record.series_digest or "no readable provenance file",
                hint=rebuild,
            )
        for repo_path, wanted in series.expected_patched_sha256().items():
            found = self.digests.get(repo_path, "missing")
            if found != wanted:
                return InstallCheckError(
                    f"{self.target.file(repo_path, series.pins.package_dir)} is not the"
                    " patched file",
                    expected=wanted,
                    found=found,
                    hint=f"something rewrote the install; {rebuild}",
                )
        return None

    @property
    def _holder(self) -> str:
        return f"pid {self.holder}" if self.holder else "pid unknown"

    @property
    def summary(self) -> str:
        """Return the one-line state `status` prints."""
        series, meta, recorded = self.series, self.record.state, self.record.fixes
        if self.interrupted is not None:
            run = self.interrupted
            subset = series.numbers_of(run.fixes)
            what = run.operation.value + (f" of {describe(series, subset)}" if run.fixes else "")
            return (
                f"interrupted {what} (pid {run.pid}, started {run.started},"
                f" {self.steps_done} of {len(run.steps)} steps done): run `apply` or `revert`"
            )
        if self.state is TreeState.BUSY:
            return f"busy: another overlay run ({self._holder}) is writing this tree"
        if self.state in (TreeState.DRIFTED, TreeState.MIXED):
            if self.state is TreeState.MIXED:
                halves = describe(series, self.half)
                return f"mixed: {halves} in some of their files only: run `apply` or `revert`"
            return str(self.state.value)
        holds = describe(series, self.applied)
        if meta is MetadataState.STOCK and self.applied:
            return f"{holds} in the files, a stock dist-info: run `apply` to record them in it"
        if meta is not MetadataState.STOCK and not self.applied:
            return f"pristine files, {meta.value} dist-info: run `revert` or `apply`"
        if meta is not MetadataState.STOCK and recorded != self.applied:
            said = (
                describe(series, recorded)
                if recorded is not None
                else f"series {(self.record.series_digest or '?')[:10]}"
            )
            return f"{holds} in the files, but the dist-info names {said}: run `apply`"
        if self.state is TreeState.PATCHED:
            return f"patched ({meta.value}, executorch {self.target.version})"
        if self.state is TreeState.PARTIAL:
            return (
                f"partial: {holds} ({meta.value}, executorch {self.target.version}):"
                " `apply` adds the rest, `revert` removes them"
            )
        return str(self.state.value)


def _tree_state(
    files: dict[str, FileRead], applied: frozenset[int], half: frozenset[int]
) -> TreeState:
    kinds = {read.state for read in files.values()}
    if kinds & {FileState.DRIFTED, FileState.MISSING}:
        return TreeState.DRIFTED
    if half:
        return TreeState.MIXED
    if kinds == {FileState.PRISTINE}:
        return TreeState.PRISTINE
    if kinds == {FileState.PATCHED}:
        return TreeState.PATCHED
    return TreeState.PARTIAL if applied else TreeState.PRISTINE


def inspect(series: Series, target: Target) -> Status:
    """Read the state of ``target`` without changing it (a busy lock is reported, not waited)."""
    path = journal.lock_file(target.root)
    try:
        fd = _mutex.acquire(path, timeout=0)
        busy = fd is None
    except OSError:
        fd, busy = None, False  # a read-only tree: read without the lock
    try:
        record = read_record(series, target.dist_info)
        if busy:
            return Status(target, series, TreeState.BUSY, record=record, holder=_mutex.holder(path))
        pending = journal.read_journal(target.root)
        if pending is not None:
            done = journal.steps_done(target.root, pending)
            return Status(
                target, series, TreeState.INTERRUPTED, record=record, interrupted=pending,
                steps_done=done,
            )  # fmt: skip
        files = read_files(series, target)
        applied, half = fix_states(series, files)
        return Status(
            target,
            series,
            _tree_state(files, applied, half),
            {p: read.state for p, read in files.items()},
            {p: "missing" if read.data is None else sha256_bytes(read.data)
             for p, read in files.items()},
            record,
            applied,
            half,
        )  # fmt: skip
    finally:
        if fd is not None:
            _mutex.release(path, fd, remove_folder=True)


def read_installed(series: Series, site: Path) -> Status:
    """Return the state of the installation at ``site``; an unreadable one is an
    InstallCheckError (what `verify-install` reports)."""
    try:
        return inspect(series, find_target(site))
    except TargetError as exc:
        raise InstallCheckError(
            f"the executorch installation in {site} cannot be read: {exc.message}",
            expected=exc.expected,
            found=exc.found,
            hint=exc.hint,
        ) from exc


def verified(series: Series, site: Path, *, rebuild: str) -> Status:
    """Return the state of the installation at ``site``; raise unless it is complete.

    What `verify-install` asks: the same reader and verdict as `status`.
    """
    status = read_installed(series, site)
    problem = status.problem(rebuild)
    if problem is not None:
        raise problem
    return status
