"""The write-ahead journal of an apply or revert on a tree, and its recovery (docs/in-place.md).

Longer than ~500 lines on purpose: staging, the journal, the steps, roll-back and recovery
are one protocol whose halves read each other's private state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from overlay import codec
from overlay._faults import fault_point
from overlay._hashing import sha256_bytes, sha256_file
from overlay.codec import CodecError
from overlay.errors import ApplyError, InterruptedRunError, RollbackError, TargetError

SCHEMA = 1
STATE_DIR = ".executorch-arm-overlay"  # beside the dist-info; removed when a run ends cleanly
LOCK_FILE = "lock"
JOURNAL_FILE = "journal.json"
TX_DIR = "tx"


class Action(enum.Enum):
    """What one step does to its path."""

    WRITE = "write"  # the path gets new bytes (created or replaced)
    DELETE = "delete"  # the path is removed
    RENAME = "rename"  # the folder at path moves to ``to``


class Operation(enum.Enum):
    """The command a journal belongs to."""

    APPLY = "apply"
    REVERT = "revert"


class Direction(enum.Enum):
    """Which way an interrupted transaction is settled."""

    FORWARD = "forward"  # finished: every step done
    BACK = "back"  # undone: every step undone


@dataclass(frozen=True)
class Change:
    """What a run does to ``path``: give it ``data`` (None: remove the file), or move the
    folder there to ``to`` (which must not exist).

    A new file takes the mode and owner of ``like``; ``link_from``, a file that holds exactly
    ``data`` now, is staged by a hardlink (no copy, no fsync) when the file system allows.
    """

    path: str
    data: bytes | None = None
    old_sha256: str | None = None  # None: the path does not exist yet
    like: str | None = None
    link_from: str | None = None
    to: str | None = None


@dataclass(frozen=True)
class Step:
    """One journaled step: the path (relative to the root) and its content before and after."""

    number: int
    action: Action
    path: str
    old_sha256: str | None = None
    new_sha256: str | None = None
    to: str | None = None
    stage: str | None = None  # file in tx/ holding the new bytes
    keep: str | None = None  # file in tx/ holding the old bytes (hardlink or copy)


@dataclass(frozen=True)
class Journal:
    """The journal file: what a transaction is about to do, written before it does it."""

    operation: Operation
    series_digest: str
    pid: int
    started: str  # UTC, ISO 8601
    steps: tuple[Step, ...]
    fixes: tuple[str, ...] = ()  # the patches a `--fix` run applies or reverts; (): all
    schema: int = SCHEMA

    def to_json(self) -> str:
        """Return the journal as JSON text (the codec: keys sorted, enums by value)."""
        return codec.dumps(self, indent=1) + "\n"

    @staticmethod
    def from_json(text: str) -> Journal:
        """Parse a journal strictly; raise CodecError when malformed or naming unsafe paths."""
        journal = codec.loads(Journal, text, where=JOURNAL_FILE)
        if journal.schema != SCHEMA:
            raise CodecError(f"{JOURNAL_FILE}.schema", f"journal schema {SCHEMA}", journal.schema)
        for index, step in enumerate(journal.steps):
            where = f"{JOURNAL_FILE}.steps[{index}]"
            if any(p in ("", ".", "..") for p in step.path.split("/")):  # "/a" starts with ""
                raise CodecError(f"{where}.path", "a plain relative path", step.path)
            for name, value in (("stage", step.stage), ("keep", step.keep)):
                if value is not None and ("/" in value or value in ("", ".", "..")):
                    raise CodecError(f"{where}.{name}", "a file name in tx/", value)
        return journal


@dataclass(frozen=True)
class Recovery:
    """What the next run found of an interrupted one, and what it did about it."""

    journal: Journal | None  # the interrupted run's; None: killed before its journal
    direction: Direction | None
    done: int  # steps that had run when it stopped
    paths: tuple[str, ...]  # paths the recovery wrote, removed or renamed
    removed: tuple[str, ...] = ()  # leftovers of runs killed before a journal, stale staging

    @property
    def summary(self) -> str:
        """Return one line saying what was found and done."""
        run = self.journal
        if run is None:
            return (
                f"removed {len(self.removed)} leftover file(s) of a killed run (no step unfinished)"
            )
        verb = "finished" if self.direction is Direction.FORWARD else "rolled back"
        extra = f"; removed {len(self.removed)} leftover file(s)" if self.removed else ""
        what = run.operation.value + (f" of {', '.join(run.fixes)}" if run.fixes else "")
        return (
            f"an interrupted {what} (pid {run.pid}, started {run.started},"
            f" {self.done} of {len(run.steps)} steps done) was {verb}{extra}"
        )


# --- where things live ---------------------------------------------------------------------


def state_dir(root: Path) -> Path:
    """Return the folder beside the dist-info that holds the lock, the journal and tx/."""
    return root / STATE_DIR


def lock_file(root: Path) -> Path:
    """Return the lock file of the target at ``root``."""
    return state_dir(root) / LOCK_FILE


def journal_file(root: Path) -> Path:
    """Return the journal file of the target at ``root``."""
    return state_dir(root) / JOURNAL_FILE


def read_journal(root: Path) -> Journal | None:
    """Return the unfinished journal at ``root``, None when there is none."""
    path = journal_file(root)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc) from exc
    try:
        return Journal.from_json(text)
    except CodecError as exc:
        raise _unreadable(path, exc) from exc


def _unreadable(path: Path, exc: Exception) -> TargetError:
    found = f"{exc.message} ({exc.found})" if isinstance(exc, CodecError) else str(exc)
    return TargetError(
        f"the journal {path} is unreadable",
        expected="the JSON journal an interrupted apply or revert left",
        found=f"{type(exc).__name__}: {found}",
        hint="restore the tree by reinstalling executorch (`uv pip install --reinstall"
        f" executorch==<pin>`), then delete {path.parent}",
    )


# --- checkpoints: fault injection (tests) and deferred signals -------------------------------


@dataclass
class _Checkpoints:
    """Names each point of a transaction; fires a test fault there; raises a deferred signal
    as InterruptedRunError(its name)."""

    pending: list[int] = field(default_factory=list)

    def __call__(self, name: str, *, interruptible: bool = True) -> None:
        fault_point(name)
        if interruptible and self.pending:
            raise InterruptedRunError(signal.Signals(self.pending[0]).name, signum=self.pending[0])


_HOLDS: list[list[int]] = []  # the signals noted by each active hold, outermost first


def _note(signum: int, _frame: FrameType | None) -> None:
    for pending in _HOLDS:
        pending.append(signum)


@contextlib.contextmanager
def held_signals(
    pending: list[int] | None = None, *, then_ignore: bool = False
) -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM for the block (main thread only): each is noted in the list yielded
    (``pending``), for the code to act on at its next checkpoint.

    A hold inside another starts with the signals the outer one noted and notes new ones in
    both. ``then_ignore``: after the block both are ignored (the work is done and said).
    """
    pending = [] if pending is None else pending
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    if _HOLDS:
        pending.extend(_HOLDS[-1])
    _HOLDS.append(pending)
    old = {}
    if len(_HOLDS) == 1:  # the outermost hold installs the handlers and restores them
        old = {sig: signal.signal(sig, _note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield pending
    finally:
        _HOLDS.pop()
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_IGN if then_ignore else handler)


def pending_signal() -> int | None:
    """Return the first signal the innermost hold noted (None: none, or no hold)."""
    return _HOLDS[-1][0] if _HOLDS and _HOLDS[-1] else None


# --- file helpers ---------------------------------------------------------------------------


def _fsync(path: Path) -> None:
    """fsync a file (errors raise) or a folder (some file systems cannot: ignored)."""
    folder = path.is_dir()
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    except FileNotFoundError:
        if folder:
            return
        raise
    try:
        with contextlib.suppress(OSError) if folder else contextlib.nullcontext():
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_all(paths: Iterable[Path]) -> None:
    """fsync these files and folders at once: the file system commits them together."""
    unique = sorted(set(paths))
    if len(unique) <= 1:
        for path in unique:
            _fsync(path)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(unique))) as pool:
        list(pool.map(_fsync, unique))


def _write_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _sha_or_none(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def give_to(path: Path, owner: tuple[int, int]) -> None:
    """Make ``path`` belong to ``owner`` (uid, gid) when it does not already."""
    st = os.stat(path, follow_symlinks=False)
    if (st.st_uid, st.st_gid) != owner:
        os.chown(path, *owner, follow_symlinks=False)


class _Locator:
    """Map a journal path to where it is now, following a folder rename that may have run."""

    def __init__(self, root: Path, steps: Sequence[Step]) -> None:
        self.root = root
        self.renames = [(s.path, s.to) for s in steps if s.action is Action.RENAME and s.to]

    def __call__(self, rel: str) -> Path:
        for src, dst in self.renames:
            if rel.startswith(src + "/") and not (self.root / src).exists():
                return self.root / (dst + rel[len(src) :])
        return self.root / rel


# --- the transaction ------------------------------------------------------------------------


class _Status(enum.Enum):
    PENDING = "pending"
    DONE = "done"
    CONFLICT = "conflict"


def _status(step: Step, root: Path, locate: _Locator) -> _Status:
    """Say from the disk whether ``step`` has run."""
    if step.action is Action.RENAME:
        src, dst = (root / step.path).exists(), (root / str(step.to)).exists()
        if src == dst:
            return _Status.CONFLICT
        return _Status.DONE if dst else _Status.PENDING
    found = _sha_or_none(locate(step.path))
    if found == step.new_sha256:
        return _Status.DONE
    if found == step.old_sha256:
        return _Status.PENDING
    return _Status.CONFLICT


def steps_done(root: Path, journal: Journal) -> int:
    """Return how many steps of ``journal`` have run, read from the disk."""
    locate = _Locator(root, journal.steps)
    return sum(1 for s in journal.steps if _status(s, root, locate) is _Status.DONE)


def _move(step: Step, root: Path, tx: Path, locate: _Locator, *, back: bool = False) -> None:
    """Run ``step`` (``back``: undo it) from its files in tx/."""
    if step.action is Action.RENAME:
        folders = root / step.path, root / str(step.to)
        os.rename(*(reversed(folders) if back else folders))
        return
    source = step.keep if back else step.stage  # None: delete (a created file, when undone)
    if source is None:
        os.unlink(locate(step.path))
    else:
        os.replace(tx / source, locate(step.path))


def _stage(staged: Path, data: bytes, like: Path, *, keep_owner: bool = True) -> None:
    """Write ``data`` to ``staged`` with the mode and owner of ``like`` (fsynced later);
    ``keep_owner`` False: an owner that cannot be given is left as it is."""
    st = like.stat()
    _write_file(staged, data)
    os.chmod(staged, st.st_mode & 0o7777)
    try:
        give_to(staged, (st.st_uid, st.st_gid))
    except PermissionError as exc:
        if not keep_owner:
            return
        raise TargetError(
            f"cannot keep the owner of {like} (uid {st.st_uid}, gid {st.st_gid})",
            expected="to run as the owner of the files, or as root",
            found=f"running as uid {os.geteuid()}",
            hint=f"run as the user who owns {like.parent}, or with sudo",
        ) from exc


def _link_stage(source: Path, staged: Path, sha256: str) -> bool:
    """Stage a hardlink of ``source`` if it holds the bytes of ``sha256``; True if it did."""
    try:
        os.link(source, staged, follow_symlinks=False)
    except OSError:
        return False
    if sha256_file(staged) == sha256:
        return True
    staged.unlink()
    return False


def _keep(path: Path, kept: Path) -> None:
    """Keep the old file at ``kept``: a hardlink (no copy, same inode) or else a copy."""
    try:
        os.link(path, kept, follow_symlinks=False)
    except OSError:
        _stage(kept, path.read_bytes(), path, keep_owner=False)


def _started() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _prepare(
    root: Path, tx: Path, changes: Sequence[Change], check: _Checkpoints
) -> tuple[Step, ...]:
    """Stage every new file and keep every old one in tx/; return the journal's steps."""
    steps: list[Step] = []
    writes = sum(1 for c in changes if c.data is not None)
    for number, change in enumerate(changes, start=1):
        if change.to is not None:
            if (root / change.to).exists():
                raise TargetError(
                    f"cannot rename {change.path} to {change.to}: it exists",
                    expected="one executorch dist-info folder",
                    found=f"{root / change.path} and {root / change.to}",
                    hint="remove the stale one (reinstall executorch)",
                )
            steps.append(Step(number, Action.RENAME, change.path, to=change.to))
        elif change.data is None:
            steps.append(Step(number, Action.DELETE, change.path, change.old_sha256))
        else:
            stage, new = f"{number}.new", sha256_bytes(change.data)
            like = change.path if change.old_sha256 is not None else change.like or change.path
            linked = change.link_from and _link_stage(root / change.link_from, tx / stage, new)
            if not linked:
                _stage(tx / stage, change.data, root / like)
            steps.append(
                Step(number, Action.WRITE, change.path, change.old_sha256, new, stage=stage)
            )
            check(f"staged {sum(1 for s in steps if s.stage)}/{writes}")
    olds = [i for i, s in enumerate(steps) if s.action is not Action.RENAME and s.old_sha256]
    for kept, index in enumerate(olds, start=1):
        step = steps[index]
        keep = f"{step.number}.old"
        _keep(root / step.path, tx / keep)
        found = sha256_file(tx / keep)
        if found != step.old_sha256:
            raise TargetError(
                f"{root / step.path} changed while the run was planning",
                expected=f"sha256 {step.old_sha256}",
                found=f"sha256 {found}",
                hint="another program writes this tree; stop it and run the command again",
            )
        steps[index] = dataclasses.replace(step, keep=keep)
        check(f"kept {kept}/{len(olds)}")
    # what this run wrote (not the links to existing files) durable before the journal
    _fsync_all([*(p for p in tx.iterdir() if p.stat().st_nlink == 1), tx])
    return tuple(steps)


def _write_journal(root: Path, journal: Journal) -> None:
    path = journal_file(root)
    tmp = path.with_name(path.name + ".tmp")
    _write_file(tmp, journal.to_json().encode())
    _fsync(tmp)  # its bytes before its name
    os.replace(tmp, path)
    _fsync(path.parent)


def _sync_parents(root: Path, steps: Sequence[Step], locate: _Locator) -> None:
    _fsync_all({locate(s.path).parent for s in steps} | {root})


def _finish(root: Path) -> None:
    """Remove the journal: the commit point (not fsynced: a journal a power loss brings back
    has every step done, and the next run settles it again either way without harm)."""
    journal_file(root).unlink(missing_ok=True)


def _remove_tx(root: Path) -> tuple[str, ...]:
    tx = state_dir(root) / TX_DIR
    if not tx.exists():
        return ()
    removed = tuple(sorted(str(p.relative_to(root)) for p in tx.iterdir()))
    shutil.rmtree(tx, ignore_errors=True)
    (state_dir(root) / (JOURNAL_FILE + ".tmp")).unlink(missing_ok=True)
    return removed


def commit(
    root: Path,
    operation: Operation,
    series_digest: str,
    changes: Sequence[Change],
    *,
    fixes: tuple[str, ...] = (),
) -> None:
    """Run ``changes`` on ``root`` as one transaction; the caller holds the target's lock.

    ``fixes`` names the patches of a ``--fix`` run. A failure (or SIGINT/SIGTERM) after the
    journal is written is rolled back from it; if that fails too, the journal stays.
    """
    if not changes:
        return
    check = _Checkpoints()
    tx = state_dir(root) / TX_DIR
    with held_signals(check.pending):
        try:
            _remove_tx(root)
            tx.mkdir(parents=True)
            steps = _prepare(root, tx, changes, check)
            journal = Journal(operation, series_digest, os.getpid(), _started(), steps, fixes)
            _write_journal(root, journal)
        except (OSError, InterruptedRunError, TargetError) as exc:
            _finish(root)  # no step ran: the journal, if written, is void
            _remove_tx(root)
            if isinstance(exc, InterruptedRunError):
                raise InterruptedRunError(
                    f"interrupted by {exc}: nothing was changed in {root}", signum=exc.signum
                ) from None
            if isinstance(exc, TargetError):
                raise
            raise ApplyError(
                f"preparing the {operation.value} of {root} failed: {exc}; nothing was changed",
                expected="room and permission to stage every file beside the tree",
                found=f"{type(exc).__name__} before the first step",
                hint="fix the cause (disk space, permissions) and run the command again",
            ) from exc
        hand_over(root)
        locate = _Locator(root, steps)
        try:
            check("journal")
            for step in steps:
                _move(step, root, tx, locate)
                check(f"step {step.number}/{len(steps)}")
            _sync_parents(root, steps, locate)
            check("synced")
        except (OSError, InterruptedRunError) as exc:
            _roll_back_after(root, journal, exc)
        _finish(root)  # the commit point
        with contextlib.suppress(OSError):  # a failure to tidy up is repaired next time
            check("committed", interruptible=False)
            _remove_tx(root)
            check("cleaned", interruptible=False)
    done = f"the {operation.value} had finished"
    _raise_held(check.pending, done, root, patched=operation is Operation.APPLY)


def _raise_held(pending: Sequence[int], done: str, root: Path, *, patched: bool) -> None:
    """Raise for a signal held until ``done`` ran to its end, saying the state it left."""
    if pending:
        state = "patched" if patched else "pristine"
        raise InterruptedRunError(
            f"interrupted by {signal.Signals(pending[0]).name} after {done}: {root} is {state}",
            signum=pending[0],
        )


def _roll_back_after(root: Path, journal: Journal, exc: OSError | InterruptedRunError) -> None:
    """Undo a failed or interrupted transaction from its journal; always raise."""
    locate = _Locator(root, journal.steps)
    ran = sum(1 for s in journal.steps if _status(s, root, locate) is not _Status.PENDING)
    total = len(journal.steps)
    what = journal.operation.value
    settle(root, journal, Direction.BACK, failed_because=str(exc))
    if isinstance(exc, InterruptedRunError):
        raise InterruptedRunError(
            f"interrupted by {exc} after {ran} of {total} steps of the {what};"
            f" rolled back: every file of {root} is as before",
            signum=exc.signum,
        ) from None
    raise ApplyError(
        f"writing {root} failed: {exc}; rolled back: every file is as before",
        expected=f"all {total} steps of the {what}",
        found=f"{ran} of {total} done before the failure",
        hint="fix the cause (disk space, permissions) and run the command again",
    ) from exc


def hand_over(root: Path) -> None:
    """As root in someone else's tree, give the state folder to the tree's owner."""
    st = root.stat()
    owner = st.st_uid, st.st_gid
    if os.geteuid() != 0 or owner == (0, 0):
        return
    folder = state_dir(root)
    for path in (folder, folder / LOCK_FILE, folder / TX_DIR, folder / JOURNAL_FILE):
        with contextlib.suppress(OSError):
            give_to(path, owner)


def settle(
    root: Path, journal: Journal, direction: Direction, *, failed_because: str | None = None
) -> tuple[str, ...]:
    """Bring every step of ``journal`` to ``direction`` (all done or all undone), verified;
    return the paths it changed. A RollbackError names each path it could not settle (the
    journal stays for a retry)."""
    tx = state_dir(root) / TX_DIR
    locate = _Locator(root, journal.steps)
    order = journal.steps if direction is Direction.FORWARD else tuple(reversed(journal.steps))
    want = _Status.DONE if direction is Direction.FORWARD else _Status.PENDING
    touched: list[str] = []
    check = _Checkpoints()
    for index, step in enumerate(order, start=1):
        status = _status(step, root, locate)
        if status is not want and status is not _Status.CONFLICT:
            with contextlib.suppress(OSError):  # verified below, path by path
                _move(step, root, tx, locate, back=direction is Direction.BACK)
                touched.append(step.path)
        check(f"recover {index}/{len(order)}", interruptible=False)
    unsettled = [s for s in journal.steps if _status(s, root, locate) is not want]
    if unsettled:
        verb = "finish" if direction is Direction.FORWARD else "roll back"
        cause = f"writing {root} failed: {failed_because}; " if failed_because else ""
        raise RollbackError(
            f"{cause}could not {verb} the {journal.operation.value}:"
            f" {len(unsettled)} path(s) are in neither state",
            expected="every file as before the run, or every file as after it",
            found=f"the journal {journal_file(root)} and these paths",
            details="\n".join(
                f"    {s.path}: {_status(s, root, locate).value}, step {s.number}"
                f" ({s.action.value}, old sha256 {s.old_sha256}, new {s.new_sha256})"
                for s in unsettled
            ),
            hint=f"fix the cause, then run `executorch-arm-overlay revert --target {root}`"
            " (or `apply`): it settles the tree from the journal",
            paths=tuple(s.path for s in unsettled),
        )
    _sync_parents(root, journal.steps, locate)
    _finish(root)
    check("recovered", interruptible=False)
    _remove_tx(root)
    return tuple(touched)


def recover(root: Path, prefer: Callable[[Operation], Direction]) -> Recovery | None:
    """Settle an interrupted transaction at ``root`` (caller holds the lock); None if none.

    ``prefer`` picks the direction from the interrupted operation; when that way is
    impossible (a staged or kept file is gone, a path holds other content) the other way
    is tried. Without a journal, a leftover tx/ is removed: no step of it ran.
    """
    journal = read_journal(root)
    tx = state_dir(root) / TX_DIR
    if journal is None:
        leftovers = _remove_tx(root)
        return Recovery(None, None, 0, (), leftovers) if leftovers else None
    locate = _Locator(root, journal.steps)
    statuses = [_status(s, root, locate) for s in journal.steps]
    direction = prefer(journal.operation)
    if not _possible(journal, statuses, direction, tx):
        other = Direction.BACK if direction is Direction.FORWARD else Direction.FORWARD
        if _possible(journal, statuses, other, tx):
            direction = other
    signals = _Checkpoints()
    with held_signals(signals.pending):  # a signal waits until the tree is settled
        paths = settle(root, journal, direction)  # tx/ was this journal's own
    patched = (direction is Direction.FORWARD) == (journal.operation is Operation.APPLY)
    done = f"settling an interrupted {journal.operation.value}"
    _raise_held(signals.pending, done, root, patched=patched)
    return Recovery(journal, direction, statuses.count(_Status.DONE), paths)


def _possible(
    journal: Journal, statuses: Sequence[_Status], direction: Direction, tx: Path
) -> bool:
    for step, status in zip(journal.steps, statuses, strict=True):
        if status is _Status.CONFLICT:
            return False
        if direction is Direction.FORWARD and status is _Status.PENDING:
            needed = step.stage
        elif direction is Direction.BACK and status is _Status.DONE:
            needed = step.keep
        else:
            needed = None
        if needed and not (tx / needed).exists():
            return False
    return True
