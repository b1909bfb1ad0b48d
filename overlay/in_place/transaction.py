"""Apply or revert fixes on an executorch tree: one journaled file-system transaction."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from overlay import _mutex
from overlay._hashing import sha256_bytes
from overlay.distribution.distinfo import METADATA
from overlay.distribution.provenance import is_whole
from overlay.errors import InterruptedRunError, TargetError, UnfinishedRunError
from overlay.in_place.plan import Plan, plan
from overlay.text.series import Series
from overlay.tree import journal
from overlay.tree.locate import Target, find_target
from overlay.tree.state import TreeState, inspect

LOCK_TIMEOUT_S = 120.0


def _journal_changes(plan_: Plan) -> list[journal.Change]:
    """Turn a plan into the journal's changes: sources, bytecode, dist-info files, the rename."""
    root, meta = plan_.target.root, plan_.metadata

    def rel(path: Path) -> str:
        return path.relative_to(root).as_posix()

    like = rel(plan_.target.dist_info / METADATA)  # a created file takes its mode and owner
    changes = [  # new None: a file the series creates, reverted
        journal.Change(rel(c.path), c.new, None if c.old is None else sha256_bytes(c.old), like)
        for c in plan_.changes
    ]
    changes += [journal.Change(rel(b.path), None, b.sha256) for b in plan_.bytecode]
    if meta is not None:
        for file in meta.files:
            link = f"{meta.dist_info}/{file.link_from}" if file.link_from else None
            path = f"{meta.dist_info}/{file.name}"
            changes.append(journal.Change(path, file.new, file.old_sha256, like, link))
        if meta.to != meta.dist_info:
            changes.append(journal.Change(meta.dist_info, to=meta.to))
    return changes


@contextlib.contextmanager
def locked(target: Target, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the target's lock; raise BusyError if another run keeps it :data:`LOCK_TIMEOUT_S`
    seconds. ``waiting`` hears once that the lock is held, and by which pid; a signal held by
    the caller (:func:`journal.held_signals`) stops the wait.
    """
    timeout = LOCK_TIMEOUT_S
    path = journal.lock_file(target.root)
    told = False

    def poll() -> None:
        nonlocal told
        signum = journal.pending_signal()
        if signum is not None:
            raise InterruptedRunError(
                f"interrupted by {signal.Signals(signum).name} while waiting for the lock of"
                f" {target.root}: nothing was changed",
                signum=signum,
            )
        if waiting is not None and not told:
            told = True
            pid = _mutex.holder(path)
            waiting(
                f"waiting up to {timeout:.0f} s for the lock of {target.root}, held by"
                f" {f'pid {pid}' if pid else 'another run'}"
            )

    with contextlib.ExitStack() as stack:
        try:  # only taking the lock: an OSError of the block is the block's own
            busy = f"another overlay run holds the lock on {target.root}"
            hint = "wait for the other run to finish, then retry"
            stack.enter_context(
                _mutex.held(
                    path, timeout=timeout, busy=busy, hint=hint, remove_folder=True, poll=poll
                )
            )
        except OSError as exc:
            raise _lock_error(path, exc) from exc
        journal.hand_over(target.root)
        yield


def _lock_error(path: Path, exc: OSError) -> TargetError:
    if isinstance(exc, IsADirectoryError):
        found, hint = f"{path} is a directory", f"remove it (`rmdir {path}`)"
    elif isinstance(exc, PermissionError):
        owner = path.parent.parent.stat().st_uid
        found = f"permission denied (running as uid {os.geteuid()}, the tree belongs to {owner})"
        hint = "run as the owner of the environment, or with sudo"
    else:
        found, hint = f"{type(exc).__name__}: {exc}", f"make {path.parent} a writable folder"
    return TargetError(
        f"cannot take the lock of {path.parent.parent}",
        expected=f"a lock file at {path} (created beside the dist-info, deleted after the run)",
        found=found,
        hint=hint,
    )


def apply(
    series: Series,
    target: Target,
    *,
    reverse: bool = False,
    fixes: frozenset[int] | None = None,
    waiting: Callable[[str], None] | None = None,
) -> Plan:
    """Apply (or with ``reverse``, revert) ``fixes`` (None: all) under the target's lock.

    First settles a run an earlier command left unfinished (``Plan.recovery`` says how).
    Re-running is a no-op success: files already in the wanted state are left alone.
    ``waiting`` hears when another run holds the lock (see :func:`locked`).
    """
    if (
        not os.access(target.root, os.W_OK | os.X_OK)
        and not journal.state_dir(target.root).is_dir()
    ):
        # no lock can be taken: nothing to do succeeds; else the plan names what is read-only
        return preview(series, target, reverse=reverse, fixes=fixes)
    wanted = journal.Operation.REVERT if reverse else journal.Operation.APPLY
    forward, back = journal.Direction.FORWARD, journal.Direction.BACK
    with locked(target, waiting=waiting):
        # an interrupted run is finished by the same command, undone by the other
        recovery = journal.recover(target.root, lambda run: forward if run is wanted else back)
        current = target if target.is_current() else find_target(target.root)
        result = plan(series, current, reverse=reverse, fixes=fixes)
        named = () if is_whole(series, fixes) else tuple(p.name for p in series.of(result.chosen))
        journal.commit(current.root, wanted, series.digest, _journal_changes(result), fixes=named)
    return dataclasses.replace(result, recovery=recovery)


def preview(
    series: Series,
    target: Target,
    *,
    reverse: bool = False,
    fixes: frozenset[int] | None = None,
) -> Plan:
    """Dry run (`check`, `--dry-run`): refuse an interrupted, busy or mixed tree; else plan."""
    status = inspect(series, target)
    busy = status.problem() if status.state is TreeState.BUSY else None
    if busy is not None:
        raise busy
    if status.state in (TreeState.INTERRUPTED, TreeState.MIXED):
        files = ", ".join(f"{p}: {s.value}" for p, s in status.files.items())
        raise UnfinishedRunError(
            f"{target.root} is between pristine and patched: {status.summary}",
            expected="a tree that is pristine or patched",
            found=f"the journal {journal.journal_file(target.root)}"
            if status.interrupted
            else files,
            hint=f"`executorch-arm-overlay apply --target {target.root}` finishes it,"
            f" `executorch-arm-overlay revert --target {target.root}` undoes it",
        )
    return plan(series, target, reverse=reverse, fixes=fixes)
