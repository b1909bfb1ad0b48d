"""Fault injection: a failure, SIGKILL, SIGINT or SIGTERM at every checkpoint of apply/revert.

The world is a synthetic 12-file series over three folders, with bytecode of several
interpreters and optimisation levels beside the sources and RECORD rows for some of it.
For every checkpoint the transaction names (staged, kept, journal, step k/N, synced,
committed, cleaned) the run is stopped there; then the next command (`apply` or `revert`,
each on its own copy) must leave exactly the patched or the pristine tree, byte for byte,
with no staging file, no journal and nothing `pip uninstall` would leave behind.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay import _faults, codec
from overlay.codec import CodecError
from overlay.distribution import wheels, wheelzip
from overlay.errors import (
    ApplyError,
    InterruptedRunError,
    OverlayError,
    RollbackError,
    TargetError,
    UnfinishedRunError,
)
from overlay.in_place import transaction
from overlay.text.series import Series, load_series
from overlay.tree import journal, locate, state

from scaffold import (
    created_diff,
    fast_tmp,
    make_diff,
    make_tree,
    patch_text,
    run_forked,
    snapshot,
    unowned,
    write_series,
)

N_FILES = 10
BYTECODE = range(2)  # modules with compiled bytecode of three interpreters/levels
# Files a patch creates (folders of the tree): a module (bytecode in the patched tree) and text
CREATED = {
    "backends/arm/m1/created.py": "CREATED = 1\n",
    "backends/arm/m2/shader.glsl": "#version 450\nvoid main() {}\n",
}
Snapshot = dict[str, bytes | str]


def repo_path(i: int) -> str:
    return f"backends/arm/m{i % 3}/f{i}.py"


def old_text(i: int) -> str:
    return "".join(f"v{j} = {i * 100 + j}\n" for j in range(20))


def new_text(i: int) -> str:
    return old_text(i).replace(f"v5 = {i * 100 + 5}\n", f"v5 = 'patched {i}'\n")


def series_patches(n: int) -> dict[str, str]:
    """Patches of three files each; file 0 is touched by two patches."""
    patches = {}
    for first in range(0, n, 3):
        diffs = "".join(
            make_diff(repo_path(i), old_text(i), new_text(i))
            for i in range(first, min(first + 3, n))
        )
        patches[f"{first // 3 + 1:04d}-p.patch"] = patch_text(f"Patch {first}", diffs)
    second = new_text(0).replace("v9 = 9\n", "v9 = 'nine'\n")
    patches["9999-again.patch"] = patch_text("Again", make_diff(repo_path(0), new_text(0), second))
    created = "".join(created_diff(path, text) for path, text in CREATED.items())
    patches["0500-create.patch"] = patch_text("Create", created)
    return patches


def add_bytecode(root: Path, modules: list[str], tag: bytes, *, record: bool) -> None:
    """Bytecode of several interpreters/levels for ``modules``, plus an unrelated module's.

    Its content starts with ``tag`` (b"old " or b"new "): which sources it came from.
    """
    rows = []
    for module in modules:
        folder, _, name = module.rpartition("/")
        cache = root / "executorch" / folder / "__pycache__"
        cache.mkdir(exist_ok=True)
        stem = name.removesuffix(".py")
        for pyc in (
            f"{stem}.cpython-311.pyc",
            f"{stem}.cpython-311.opt-1.pyc",
            f"{stem}.cpython-312.pyc",
        ):
            (cache / pyc).write_bytes(tag + pyc.encode())
            rel = (cache / pyc).relative_to(root).as_posix()
            rows.append(f"{rel},sha256=x,1" if pyc.endswith("312.pyc") else f"{rel},,")
        if (cache.parent / "other.py").is_file():
            (cache / "other.cpython-311.pyc").write_bytes(b"unrelated")
    if record:
        dist = next(root.glob("executorch-*.dist-info"))
        with (dist / "RECORD").open("a", encoding="utf-8") as handle:
            handle.write("".join(row + "\n" for row in rows))


@dataclass(frozen=True)
class World:
    """A series, its pristine and patched template trees, and their snapshots."""

    patches: Path
    series: Series
    pristine: Path  # P0: stock tree with bytecode
    patched: Path  # P1: P0 applied, then bytecode of the patched modules compiled again
    reverted: Snapshot  # P1 reverted: pristine, no bytecode of the patched modules
    applied: Snapshot  # P0 applied (no bytecode of the patched modules)
    starts: dict[bool, Snapshot] = field(default_factory=dict, compare=False, repr=False)

    def start(self, *, reverse: bool) -> Path:
        """Return the tree a run starts from."""
        return self.patched if reverse else self.pristine

    def start_state(self, *, reverse: bool) -> Snapshot:
        """Return the snapshot of the tree a run starts from, taken once (a template is
        only ever copied: a matrix reads it at every one of its hundreds of cells)."""
        if reverse not in self.starts:
            self.starts[reverse] = snapshot(self.start(reverse=reverse))
        return self.starts[reverse]

    def ends(self, *, reverse: bool) -> tuple[Snapshot, Snapshot]:
        """Return (where the next `apply` must end, where the next `revert` must end)."""
        start = self.start_state(reverse=reverse)
        return (start, self.reverted) if reverse else (self.applied, start)


def build_world(
    base: Path, patches: dict[str, str], sources: dict[str, bytes], bytecode: list[str]
) -> World:
    """Templates for a series: pristine (with bytecode), patched (with new bytecode)."""
    files = dict(sources)
    files.update({f"{p.rpartition('/')[0]}/other.py": b"x = 1\n" for p in sources})
    pristine = make_tree(base / "P0", files)
    series = write_series(base / "patches", patches, sources)
    return templates(base, series, pristine, bytecode)


def templates(base: Path, series: Series, pristine: Path, bytecode: list[str]) -> World:
    """Add bytecode to the pristine tree; make the patched and reverted templates from it."""
    add_bytecode(pristine, bytecode, b"old ", record=True)
    applied_tree = base / "P1-bare"
    shutil.copytree(pristine, applied_tree)
    transaction.apply(series, locate.find_target(applied_tree))
    applied = snapshot(applied_tree)
    patched = base / "P1"
    shutil.copytree(applied_tree, patched)
    created = sorted(p for p in series.created if p.endswith(".py"))
    add_bytecode(patched, [*bytecode, *created], b"new ", record=False)
    reverted_tree = base / "P2"
    shutil.copytree(patched, reverted_tree)
    transaction.apply(series, locate.find_target(reverted_tree), reverse=True)
    return World(series.directory, series, pristine, patched, snapshot(reverted_tree), applied)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A module's scratch folder on tmpfs (the matrix runs ~1000 transactions)."""
    with fast_tmp(tmp_path_factory.mktemp("journal")) as folder:
        yield folder


@pytest.fixture(scope="module")
def world(scratch: Path) -> World:
    sources = {repo_path(i): old_text(i).encode() for i in range(N_FILES)}
    bytecode = [repo_path(i) for i in BYTECODE]
    return build_world(scratch / "world", series_patches(N_FILES), sources, bytecode)


@pytest.fixture
def tmp(scratch: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    folder = scratch / re.sub(r"\W", "_", request.node.name)
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def trace(world: World, tmp: Path, *, reverse: bool) -> list[str]:
    """Return the checkpoint names of a clean run, in order."""
    tree = tmp / "traced"
    shutil.copytree(world.patched if reverse else world.pristine, tree)
    log = tmp / "trace.txt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(_faults.TRACE_ENV, str(log))
        transaction.apply(world.series, locate.find_target(tree), reverse=reverse)
    return log.read_text().splitlines()


def run_quietly(world: World, tree: Path, *, reverse: bool) -> Callable[[], int]:
    """What the CLI does for apply/revert, minus parsing: the series comes with the fork."""

    def run() -> int:
        try:
            transaction.apply(world.series, locate.find_target(tree), reverse=reverse)
        except OverlayError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        return 0

    return run


@dataclass(frozen=True)
class Outcome:
    """One cell of the fault matrix."""

    checkpoint: str
    action: str
    exit_code: int
    message: str  # first line of the run's error, if any
    right_after: str  # old | new | torn (journal) | old + leftovers | new + leftovers
    after_apply: str  # patched | pristine | other
    after_revert: str


def strip_bytecode(state: Snapshot) -> Snapshot:
    """Drop the series modules' bytecode: a state change deletes it, a roll-back restores it."""
    return {
        k: v for k, v in state.items() if not (isinstance(v, bytes) and v[:4] in (b"old ", b"new "))
    }


def stale_bytecode(state: Snapshot, *, patched: bool) -> list[str]:
    """Return bytecode compiled from the other state's sources (it must never survive)."""
    other = b"old " if patched else b"new "
    return [k for k, v in state.items() if isinstance(v, bytes) and v.startswith(other)]


def classify(tree: Path, old: Snapshot, new: Snapshot) -> str:
    now = strip_bytecode(snapshot(tree))
    if now == strip_bytecode(old):
        return "old"
    if now == strip_bytecode(new):
        return "new"
    if journal.read_journal(tree) is not None:
        return "torn (journal)"
    bare = {k: v for k, v in now.items() if not k.startswith(journal.STATE_DIR)}
    for name, tree_state in (("old", old), ("new", new)):
        if bare == strip_bytecode(tree_state):
            return f"{name} + leftovers"
    return "other"


def next_command(world: World, tree: Path, *, reverse: bool, expect: Snapshot) -> str:
    """Run apply or revert on the stopped tree; return patched | pristine | what is wrong."""
    target = locate.find_target(tree)
    status = state.inspect(world.series, target)
    if status.state is state.TreeState.MIXED:
        return "mixed without a journal"
    if status.state is state.TreeState.INTERRUPTED:
        with pytest.raises(UnfinishedRunError):
            transaction.preview(world.series, target)  # `check` never says ok on a torn tree
    transaction.apply(world.series, target, reverse=reverse)
    now = snapshot(tree)
    left = unowned(tree)
    if left:
        return f"leftovers {left}"
    if stale_bytecode(now, patched=not reverse):
        return f"stale bytecode {stale_bytecode(now, patched=not reverse)}"
    if strip_bytecode(now) == strip_bytecode(expect):
        return "pristine" if reverse else "patched"
    return "other"


def stop_at(
    world: World, tmp: Path, checkpoint: str, action: str, *, reverse: bool, revert_next: bool
) -> Outcome:
    """Stop the run at ``checkpoint`` with ``action``; classify; run the next command(s)."""
    old = world.start_state(reverse=reverse)
    new = world.reverted if reverse else world.applied
    tree = tmp / "tree"
    shutil.copytree(world.start(reverse=reverse), tree)
    fault = f"{checkpoint}:{action}"
    if action == "raise":  # in process: the failure path of the same process
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(_faults.FAULT_ENV, fault)
            try:
                transaction.apply(world.series, locate.find_target(tree), reverse=reverse)
                code, message = 0, ""
            except ApplyError as exc:
                code, message = exc.exit_code, exc.message
    else:
        child = run_forked(run_quietly(world, tree, reverse=reverse), {_faults.FAULT_ENV: fault})
        code = child.code
        errors = [ln for ln in child.output.splitlines() if ln.startswith(("error:", "child"))]
        message = errors[0] if errors else ""
    right_after = classify(tree, old, new)
    end_apply, end_revert = world.ends(reverse=reverse)
    after_apply = after_revert = "-"
    if right_after in ("old", "new"):  # consistent: one next command (alternating) is enough
        if revert_next:
            after_revert = next_command(world, tree, reverse=True, expect=end_revert)
        else:
            after_apply = next_command(world, tree, reverse=False, expect=end_apply)
    else:  # torn or with leftovers: both ways, each on its own copy
        copy = tmp / "copy"
        shutil.copytree(tree, copy, symlinks=True)
        after_apply = next_command(world, tree, reverse=False, expect=end_apply)
        after_revert = next_command(world, copy, reverse=True, expect=end_revert)
        shutil.rmtree(copy)
    shutil.rmtree(tree)
    return Outcome(checkpoint, action, code, message, right_after, after_apply, after_revert)


EXIT = {"kill": -signal.SIGKILL, "sigint": 128 + signal.SIGINT, "sigterm": 128 + signal.SIGTERM}


def problems(outcome: Outcome) -> list[str]:
    """Return what is wrong with one cell of the matrix (empty: it holds)."""
    wrong = []
    cell = f"{outcome.action} at {outcome.checkpoint!r}"
    if outcome.after_apply not in ("patched", "-") or outcome.after_revert not in ("pristine", "-"):
        wrong.append(
            f"{cell}: next apply -> {outcome.after_apply}, revert -> {outcome.after_revert}"
        )
    if outcome.right_after == "other":
        wrong.append(f"{cell}: left a tree that is neither state, with no journal")
    says_undone = "rolled back" in outcome.message or "nothing was changed" in outcome.message
    if says_undone and outcome.right_after != "old":
        wrong.append(f"{cell}: says {outcome.message!r} over a {outcome.right_after} tree")
    if "had finished" in outcome.message and outcome.right_after != "new":
        wrong.append(f"{cell}: says {outcome.message!r} over a {outcome.right_after} tree")
    if outcome.action == "raise":
        if outcome.exit_code == 0 and not outcome.right_after.startswith("new"):
            wrong.append(f"{cell}: exit 0 over a {outcome.right_after} tree")
        if outcome.exit_code != 0 and not says_undone:
            wrong.append(f"{cell}: failed without saying the tree is as before: {outcome.message}")
    elif outcome.exit_code != EXIT[outcome.action]:
        wrong.append(f"{cell}: exit {outcome.exit_code} ({outcome.message})")
    elif outcome.action != "kill" and not (says_undone or "had finished" in outcome.message):
        wrong.append(f"{cell}: no word on the state: {outcome.message!r}")
    return wrong


def run_matrix(
    world: World, tmp: Path, actions: tuple[str, ...], *, reverse: bool
) -> list[Outcome]:
    outcomes = []
    for index, checkpoint in enumerate(trace(world, tmp, reverse=reverse)):
        for action in actions:
            outcome = stop_at(
                world, tmp, checkpoint, action, reverse=reverse, revert_next=index % 2 == 1
            )
            outcomes.append(outcome)
    return outcomes


def test_the_checkpoints_name_every_step(world: World, tmp: Path) -> None:
    names = trace(world, tmp, reverse=False)
    steps = [n for n in names if n.startswith("step ")]
    # the sources and created files, 3 x 2 stale .pyc; METADATA, RECORD, provenance,
    # original (2); the rename
    writes = N_FILES + len(CREATED) + 5
    assert len(steps) == N_FILES + len(CREATED) + 6 + 5 + 1
    assert names[names.index("journal") + 1] == f"step 1/{len(steps)}"
    assert [n for n in names if n.startswith("staged ")][-1] == f"staged {writes}/{writes}"
    assert names[-3:] == ["synced", "committed", "cleaned"]


def test_created_files_come_with_their_rows_and_go_with_them(world: World) -> None:
    pristine = snapshot(world.pristine)
    record = next(k for k in pristine if k.endswith(".dist-info/RECORD"))
    applied_record = next(v for k, v in world.applied.items() if k.endswith(".dist-info/RECORD"))
    assert isinstance(applied_record, bytes)
    for path, text in CREATED.items():
        assert world.applied[f"executorch/{path}"] == text.encode()
        assert f"executorch/{path},sha256=".encode() in applied_record
        assert f"executorch/{path}" not in world.reverted
    assert world.reverted[record] == pristine[record]  # RECORD byte for byte as before
    assert strip_bytecode(world.reverted) == strip_bytecode(pristine)


@pytest.mark.parametrize("reverse", [False, True], ids=["apply", "revert"])
@pytest.mark.parametrize("action", ["kill", "raise", "sigint", "sigterm"])
def test_stop_at_every_checkpoint(world: World, tmp: Path, action: str, reverse: bool) -> None:
    outcomes = run_matrix(world, tmp, (action,), reverse=reverse)
    assert len(outcomes) > 50
    wrong = [p for o in outcomes for p in problems(o)]
    assert wrong == []
    torn = [o.checkpoint for o in outcomes if o.right_after == "torn (journal)"]
    if action == "kill":  # a kill between the journal and the commit point leaves a journal
        assert torn[0] == "journal" and torn[-1] == "synced"
    else:
        assert torn == []  # in-process failures and signals roll back before exiting


@st.composite
def random_series(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, bytes], list[str]]:
    """1-12 files in 1-3 folders, each with a few edited lines; some with bytecode."""
    count = draw(st.integers(1, 12))
    folders = draw(st.integers(1, 3))
    patches, sources, bytecode = {}, {}, []
    for i in range(count):
        path = f"backends/arm/d{i % folders}/g{i}.py"
        lines = [f"w{j} = {i}_{j}\n" for j in range(draw(st.integers(2, 15)))]
        edited = draw(st.sets(st.integers(0, len(lines) - 1), min_size=1))
        new = [f"w{j} = 'edited'\n" if j in edited else line for j, line in enumerate(lines)]
        old_text_, new_text_ = "".join(lines), "".join(new)
        diff = make_diff(path, old_text_, new_text_)
        patches[f"{i:04d}-edit.patch"] = patch_text(f"Edit {i}", diff)
        sources[path] = old_text_.encode()
        if draw(st.booleans()):
            bytecode.append(path)
    if draw(st.booleans()):  # a patch creating a file in the first folder
        text = "".join(f"n{j} = 0\n" for j in range(draw(st.integers(1, 5))))
        patches["9000-create.patch"] = patch_text(
            "Create", created_diff("backends/arm/d0/n.py", text)
        )
    return patches, sources, bytecode


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    spec=random_series(),
    data=st.data(),
    how=st.tuples(st.sampled_from(["kill", "raise", "sigint", "sigterm"]), st.booleans()),
    revert_next=st.booleans(),
)
def test_random_stop_points_on_random_series(
    scratch: Path,
    spec: tuple[dict[str, str], dict[str, bytes], list[str]],
    data: st.DataObject,
    how: tuple[str, bool],
    revert_next: bool,
) -> None:
    action, reverse = how
    base = scratch / "hypothesis"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    world = build_world(base / "world", *spec)
    checkpoints = trace(world, base, reverse=reverse)
    checkpoint = data.draw(st.sampled_from(checkpoints), label="checkpoint")
    outcome = stop_at(world, base, checkpoint, action, reverse=reverse, revert_next=revert_next)
    assert problems(outcome) == []


# --- the real series on the real pinned wheel ------------------------------------------------

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def real_world(scratch: Path) -> World:
    """The real dist-info (a 5,329-row RECORD) and every file of the series' folders."""
    series = load_series(PATCHES)
    source = wheels.fetch_wheel(series.pins.wheel_for("cp311-manylinux_2_28_x86_64"))
    folders = tuple({series.pins.wheel_path(p).rpartition("/")[0] + "/" for p in series.targets()})
    members = wheelzip.read_members(
        source, lambda name: name.startswith(folders) or ".dist-info/" in name
    )
    pristine = scratch / "real" / "P0"
    for name, data in members.items():
        (pristine / name).parent.mkdir(parents=True, exist_ok=True)
        (pristine / name).write_bytes(data)
    return templates(scratch / "real", series, pristine, series.targets()[:1])


@pytest.mark.integration
@pytest.mark.parametrize("reverse", [False, True], ids=["apply", "revert"])
def test_real_series_stopped_at_every_checkpoint(
    real_world: World, tmp: Path, reverse: bool
) -> None:
    outcomes = run_matrix(real_world, tmp, ("kill", "raise", "sigint", "sigterm"), reverse=reverse)
    assert len(outcomes) >= 4 * 25
    assert [p for o in outcomes for p in problems(o)] == []
    torn = {o.checkpoint for o in outcomes if o.right_after == "torn (journal)"}
    steps = {o.checkpoint for o in outcomes if o.checkpoint.startswith("step ")}
    assert steps < torn  # a kill after any step leaves a journal the next run settles


# --- a subset of the fixes (`apply --fix`, `revert --fix`), killed at every checkpoint ---------


def subset_run(
    world: World, tree: Path, fixes: frozenset[int], *, reverse: bool
) -> Callable[[], int]:
    """`apply --fix` (or `revert --fix`) as the CLI runs it, minus parsing."""

    def run() -> int:
        transaction.apply(world.series, locate.find_target(tree), reverse=reverse, fixes=fixes)
        return 0

    return run


@pytest.mark.parametrize(
    ("reverse", "fixes"),
    [(False, frozenset({2, 500})), (True, frozenset({1, 9999}))],
    ids=["apply --fix 2,500", "revert --fix 1,9999"],
)
def test_a_killed_subset_run_is_settled_by_running_it_again(
    world: World, tmp: Path, reverse: bool, fixes: frozenset[int]
) -> None:
    start = world.start(reverse=reverse)
    clean = tmp / "clean"
    shutil.copytree(start, clean)
    log = tmp / "trace.txt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(_faults.TRACE_ENV, str(log))
        subset_run(world, clean, fixes, reverse=reverse)()
    wanted = strip_bytecode(snapshot(clean))
    held = state.inspect(world.series, locate.find_target(clean)).record.fixes
    assert held == (frozenset({2, 3, 4, 500}) if reverse else fixes)  # 9999 needs 1: both go
    checkpoints = log.read_text().splitlines()
    assert len([c for c in checkpoints if c.startswith("step ")]) > 5
    verb = "revert" if reverse else "apply"
    for checkpoint in checkpoints:
        tree = tmp / "tree"
        shutil.copytree(start, tree)
        child = run_forked(
            subset_run(world, tree, fixes, reverse=reverse),
            {_faults.FAULT_ENV: f"{checkpoint}:kill"},
        )
        assert child.code == -signal.SIGKILL, (checkpoint, child.output)
        status = state.inspect(world.series, locate.find_target(tree))
        if status.interrupted is not None:
            numbers = ", ".join(map(str, sorted(fixes)))
            assert status.summary.startswith(f"interrupted {verb} of fixes {numbers} (pid ")
        subset_run(world, tree, fixes, reverse=reverse)()  # the same command again
        assert strip_bytecode(snapshot(tree)) == wanted, checkpoint
        assert unowned(tree) == [], checkpoint
        shutil.rmtree(tree)


# --- the journal's own API on a tiny tree (fast; in-process unless a kill is needed) --------

OLD_X, OLD_Y, NEW_X, NEW_N = b"old x\n", b"old y\n", b"new x\n", b"created\n"
DIST, DIST_TO = "pkg-1.0.dist-info", "pkg-1.0+p.dist-info"
TINY_CHECKPOINTS = [
    "staged 1/2",
    "staged 2/2",
    "kept 1/2",
    "kept 2/2",
    "journal",
    "step 1/4",
    "step 2/4",
    "step 3/4",
    "step 4/4",
    "synced",
    "committed",
    "cleaned",
]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_tree(root: Path) -> Path:
    """A folder with two files (x is mode 0640) and a dist-info folder."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "x.py").write_bytes(OLD_X)
    (root / "pkg" / "x.py").chmod(0o640)
    (root / "pkg" / "y.py").write_bytes(OLD_Y)
    (root / DIST).mkdir()
    (root / DIST / "METADATA").write_bytes(b"m\n")
    return root


def tiny_changes() -> list[journal.Change]:
    """Replace x, create n (like x), delete y, rename the dist-info: four steps."""
    return [
        journal.Change("pkg/x.py", NEW_X, sha(OLD_X)),
        journal.Change("pkg/n.py", NEW_N, None, like="pkg/x.py"),
        journal.Change("pkg/y.py", None, sha(OLD_Y)),
        journal.Change(DIST, to=DIST_TO),
    ]


def tiny_after() -> Snapshot:
    return {
        "pkg/": "<dir>",
        "pkg/x.py": NEW_X,
        "pkg/n.py": NEW_N,
        f"{DIST_TO}/": "<dir>",
        f"{DIST_TO}/METADATA": b"m\n",
    }


def tree_only(root: Path) -> Snapshot:
    """Return the tree without the overlay's state folder."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(journal.STATE_DIR)}


def commit_tiny(root: Path) -> None:
    journal.commit(root, journal.Operation.APPLY, "d" * 64, tiny_changes())


def killed_at(root: Path, checkpoint: str) -> None:
    """Run the tiny apply in a child killed at ``checkpoint`` (the journal stays)."""

    def run() -> int:
        commit_tiny(root)
        return 0

    child = run_forked(run, {_faults.FAULT_ENV: f"{checkpoint}:kill"})
    assert child.code == -signal.SIGKILL, child.output


def test_a_commit_makes_every_change_and_leaves_no_journal(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    commit_tiny(root)
    assert tree_only(root) == tiny_after()
    assert (root / "pkg" / "n.py").stat().st_mode & 0o777 == 0o640  # the mode of ``like``
    assert (root / "pkg" / "x.py").stat().st_mode & 0o777 == 0o640  # a replaced file keeps it
    assert journal.read_journal(root) is None
    assert sorted(p.name for p in journal.state_dir(root).iterdir()) == []


def test_a_commit_of_nothing_touches_nothing(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    journal.commit(root, journal.Operation.APPLY, "d", [])
    assert not journal.state_dir(root).exists()


def test_the_tiny_commit_names_its_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    log = tmp_path / "trace.txt"
    monkeypatch.setenv(_faults.TRACE_ENV, str(log))
    commit_tiny(root)
    assert log.read_text(encoding="utf-8").splitlines() == TINY_CHECKPOINTS


@pytest.mark.parametrize("checkpoint", TINY_CHECKPOINTS)
def test_a_failure_at_any_checkpoint_leaves_the_tree_as_before_or_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint: str
) -> None:
    root = tiny_tree(tmp_path / "t")
    before = tree_only(root)
    monkeypatch.setenv(_faults.FAULT_ENV, f"{checkpoint}:raise")
    index = TINY_CHECKPOINTS.index(checkpoint)
    if checkpoint in ("committed", "cleaned"):  # after the commit point: done, tidied next run
        commit_tiny(root)
        assert tree_only(root) == tiny_after()
        assert journal.read_journal(root) is None
        return
    with pytest.raises(ApplyError) as info:
        commit_tiny(root)
    exc = info.value
    assert type(exc) is ApplyError
    assert tree_only(root) == before
    assert journal.read_journal(root) is None
    assert not (journal.state_dir(root) / journal.TX_DIR).exists()
    cause = f"[Errno 5] injected fault after {checkpoint}"
    if index < TINY_CHECKPOINTS.index("journal"):
        assert exc.message == (
            f"preparing the apply of {root} failed: {cause}; nothing was changed"
        )
        assert exc.expected == "room and permission to stage every file beside the tree"
        assert exc.found == "OSError before the first step"
        assert exc.hint == "fix the cause (disk space, permissions) and run the command again"
    else:
        ran = min(index - TINY_CHECKPOINTS.index("journal"), 4)
        assert (
            exc.message == f"writing {root} failed: {cause}; rolled back: every file is as before"
        )
        assert exc.expected == "all 4 steps of the apply"
        assert exc.found == f"{ran} of 4 done before the failure"
        assert exc.hint == "fix the cause (disk space, permissions) and run the command again"


@pytest.mark.parametrize("action", ["sigint", "sigterm"])
@pytest.mark.parametrize("checkpoint", TINY_CHECKPOINTS)
def test_a_signal_at_any_checkpoint_is_acted_on_and_says_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint: str, action: str
) -> None:
    root = tiny_tree(tmp_path / "t")
    before = tree_only(root)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setenv(_faults.FAULT_ENV, f"{checkpoint}:{action}")
    with pytest.raises(InterruptedRunError) as info:
        commit_tiny(root)
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers  # restored
    exc = info.value
    signum = signal.SIGINT if action == "sigint" else signal.SIGTERM
    name = signal.Signals(signum).name
    assert (exc.signum, exc.exit_code) == (signum, 128 + signum)
    index = TINY_CHECKPOINTS.index(checkpoint)
    if index < TINY_CHECKPOINTS.index("journal"):
        assert exc.message == f"interrupted by {name}: nothing was changed in {root}"
        assert tree_only(root) == before
    elif checkpoint in ("committed", "cleaned"):
        assert exc.message == (
            f"interrupted by {name} after the apply had finished: {root} is patched"
        )
        assert tree_only(root) == tiny_after()
    else:
        ran = min(index - TINY_CHECKPOINTS.index("journal"), 4)
        assert exc.message == (
            f"interrupted by {name} after {ran} of 4 steps of the apply;"
            f" rolled back: every file of {root} is as before"
        )
        assert tree_only(root) == before
    assert journal.read_journal(root) is None


def test_a_revert_interrupted_after_it_finished_says_pristine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    monkeypatch.setenv(_faults.FAULT_ENV, "cleaned:sigint")
    with pytest.raises(InterruptedRunError) as info:
        journal.commit(root, journal.Operation.REVERT, "d", tiny_changes())
    assert info.value.message.endswith(f"after the revert had finished: {root} is pristine")


def test_a_killed_run_is_finished_by_the_next_one(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 2/4")
    pending = journal.read_journal(root)
    assert pending is not None and journal.steps_done(root, pending) == 2
    assert (root / "pkg" / "x.py").read_bytes() == NEW_X and (root / "pkg" / "y.py").is_file()
    recovery = journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert recovery is not None
    assert tree_only(root) == tiny_after()
    assert (recovery.journal, recovery.direction) == (pending, journal.Direction.FORWARD)
    assert pending.operation is journal.Operation.APPLY
    assert recovery.done == 2
    assert recovery.paths == ("pkg/y.py", DIST)
    assert recovery.summary == (
        f"an interrupted apply (pid {pending.pid}, started {pending.started},"
        " 2 of 4 steps done) was finished"
    )
    assert journal.read_journal(root) is None
    assert not (journal.state_dir(root) / journal.TX_DIR).exists()


def test_a_killed_run_is_rolled_back_by_the_next_one(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    before = tree_only(root)
    killed_at(root, "step 2/4")
    asked: list[journal.Operation] = []

    def prefer(operation: journal.Operation) -> journal.Direction:
        asked.append(operation)
        return journal.Direction.BACK

    recovery = journal.recover(root, prefer)
    assert asked == [journal.Operation.APPLY]
    assert recovery is not None and recovery.direction is journal.Direction.BACK
    assert tree_only(root) == before
    assert (root / "pkg" / "x.py").stat().st_mode & 0o777 == 0o640
    assert recovery.paths == ("pkg/n.py", "pkg/x.py")  # undone last step first
    assert recovery.summary.endswith("2 of 4 steps done) was rolled back")


def test_a_killed_rename_is_settled_both_ways(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 4/4")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert journal.recover(root, lambda op: journal.Direction.BACK) is not None
    assert (root / DIST).is_dir() and not (root / DIST_TO).exists()
    assert journal.recover(copy, lambda op: journal.Direction.FORWARD) is not None
    assert tree_only(copy) == tiny_after()


def test_recovery_goes_the_other_way_when_a_staged_file_is_gone(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    before = tree_only(root)
    killed_at(root, "step 1/4")
    (journal.state_dir(root) / journal.TX_DIR / "2.new").unlink()  # step 2 cannot run now
    recovery = journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert recovery is not None and recovery.direction is journal.Direction.BACK
    assert tree_only(root) == before


def test_recovery_goes_the_other_way_when_a_kept_file_is_gone(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 1/4")
    (journal.state_dir(root) / journal.TX_DIR / "1.old").unlink()  # step 1 cannot be undone
    recovery = journal.recover(root, lambda op: journal.Direction.BACK)
    assert recovery is not None and recovery.direction is journal.Direction.FORWARD
    assert tree_only(root) == tiny_after()


def test_a_path_in_neither_state_stops_recovery_and_keeps_the_journal(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 2/4")
    (root / "pkg" / "x.py").write_bytes(b"edited by hand\n")
    with pytest.raises(RollbackError) as info:
        journal.recover(root, lambda op: journal.Direction.FORWARD)
    exc = info.value
    assert exc.message == "could not finish the apply: 1 path(s) are in neither state"
    assert exc.paths == ("pkg/x.py",)
    assert exc.expected == "every file as before the run, or every file as after it"
    assert exc.found == f"the journal {journal.journal_file(root)} and these paths"
    assert exc.details == (
        f"    pkg/x.py: conflict, step 1 (write, old sha256 {sha(OLD_X)}, new {sha(NEW_X)})"
    )
    assert exc.hint == (
        f"fix the cause, then run `executorch-arm-overlay revert --target {root}`"
        " (or `apply`): it settles the tree from the journal"
    )
    assert journal.read_journal(root) is not None  # kept for the retry
    assert (root / "pkg" / "n.py").read_bytes() == NEW_N  # the other paths were settled
    assert not (root / "pkg" / "y.py").exists() and (root / DIST_TO).is_dir()
    (root / "pkg" / "x.py").write_bytes(OLD_X)  # repaired: the retry settles it
    back = journal.recover(root, lambda op: journal.Direction.BACK)
    assert back is not None and back.direction is journal.Direction.BACK
    assert journal.read_journal(root) is None


def test_settle_says_why_the_run_failed(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 1/4")
    (root / "pkg" / "x.py").write_bytes(b"other\n")
    pending = journal.read_journal(root)
    assert pending is not None
    with pytest.raises(RollbackError) as info:
        journal.settle(root, pending, journal.Direction.BACK, failed_because="disk full")
    assert info.value.message == (
        f"writing {root} failed: disk full; could not roll back the apply:"
        " 1 path(s) are in neither state"
    )


def test_a_signal_while_recovering_waits_until_the_tree_is_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 2/4")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    monkeypatch.setenv(_faults.FAULT_ENV, "recover 1/4:sigterm")
    with pytest.raises(InterruptedRunError) as info:
        journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert info.value.message == (
        f"interrupted by SIGTERM after settling an interrupted apply: {root} is patched"
    )
    assert info.value.exit_code == 128 + signal.SIGTERM
    assert tree_only(root) == tiny_after() and journal.read_journal(root) is None
    with pytest.raises(InterruptedRunError) as info:
        journal.recover(copy, lambda op: journal.Direction.BACK)
    assert info.value.message.endswith(f"interrupted apply: {copy} is pristine")


def test_leftovers_of_a_run_killed_before_its_journal_are_removed(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    before = tree_only(root)
    assert journal.recover(root, lambda op: journal.Direction.FORWARD) is None  # nothing there
    killed_at(root, "kept 1/2")
    tmp_journal = journal.state_dir(root) / (journal.JOURNAL_FILE + ".tmp")
    tmp_journal.write_text("{", encoding="utf-8")
    recovery = journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert recovery == journal.Recovery(
        None,
        None,
        0,
        (),
        (".executorch-arm-overlay/tx/1.new", ".executorch-arm-overlay/tx/1.old",
         ".executorch-arm-overlay/tx/2.new"),
    )  # fmt: skip
    assert recovery.summary == "removed 3 leftover file(s) of a killed run (no step unfinished)"
    assert tree_only(root) == before
    assert not tmp_journal.exists() and not (journal.state_dir(root) / journal.TX_DIR).exists()


def test_a_recovery_summary_counts_leftovers_it_removed() -> None:
    interrupted = journal.Journal(journal.Operation.REVERT, "d", 7, "T", STEPS)
    recovery = journal.Recovery(interrupted, journal.Direction.BACK, 1, ("a",), ("x", "y"))
    assert recovery.summary == (
        "an interrupted revert (pid 7, started T, 1 of 3 steps done) was rolled back;"
        " removed 2 leftover file(s)"
    )


# --- the journal file ----------------------------------------------------------------------

STEPS = (
    journal.Step(
        1, journal.Action.WRITE, "a/x.py", "0" * 64, "1" * 64, stage="1.new", keep="1.old"
    ),
    journal.Step(2, journal.Action.DELETE, "a/y.py", old_sha256="2" * 64, keep="2.old"),
    journal.Step(3, journal.Action.RENAME, "d.dist-info", to="e.dist-info"),
)


def test_a_journal_round_trips_through_its_json(tmp_path: Path) -> None:
    entry = journal.Journal(journal.Operation.REVERT, "abc", 42, "2026-01-02T03:04:05Z", STEPS)
    text = entry.to_json()
    assert text.endswith("}\n") and text.startswith('{\n "fixes": [],\n "operation": "revert",')
    data = json.loads(text)
    assert list(data) == sorted(data)  # keys sorted: equal journals, equal bytes
    assert data["steps"][2] == {
        "action": "rename",
        "keep": None,
        "new_sha256": None,
        "number": 3,
        "old_sha256": None,
        "path": "d.dist-info",
        "stage": None,
        "to": "e.dist-info",
    }
    assert data["schema"] == journal.SCHEMA == 1 and data["pid"] == 42
    assert journal.Journal.from_json(text) == entry
    journal.state_dir(tmp_path).mkdir()
    journal.journal_file(tmp_path).write_text(text, encoding="utf-8")
    assert journal.read_journal(tmp_path) == entry


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"pid": "12"}, "journal.json.pid"),
        ({"series_digest": 5}, "journal.json.series_digest"),
        ({"step": {"number": "1"}}, "journal.json.steps[0].number"),
        ({"step": {"old_sha256": 3}}, "journal.json.steps[0].old_sha256"),
        ({"extra": 1}, "journal.json"),
    ],
)
def test_journal_values_must_have_their_types(change: dict[str, Any], where: str) -> None:
    data = json.loads(journal.Journal(journal.Operation.APPLY, "d", 1, "s", STEPS[:1]).to_json())
    data["steps"][0].update(change.get("step", {}))
    data.update({k: v for k, v in change.items() if k != "step"})
    with pytest.raises(CodecError) as info:
        journal.Journal.from_json(json.dumps(data))
    assert info.value.where == where


def test_a_journal_without_fixes_is_read_as_all_fixes() -> None:
    data = json.loads(journal.Journal(journal.Operation.APPLY, "d", 1, "s", STEPS[:1]).to_json())
    del data["fixes"]  # written before `--fix` existed
    assert journal.Journal.from_json(json.dumps(data)).fixes == ()


def test_the_journal_schema_validates_its_encoding() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    entry = journal.Journal(journal.Operation.APPLY, "d", 1, "s", STEPS, fixes=("0001-a.patch",))
    document = codec.schema(journal.Journal, title="journal.json")
    jsonschema.validate(json.loads(entry.to_json()), document)
    assert journal.Journal.from_json(entry.to_json()) == entry


@pytest.mark.parametrize(
    ("change", "where", "expected"),
    [
        ({"schema": 2}, "journal.json.schema", "journal schema 1"),
        ({"step": {"path": "/etc/passwd"}}, "journal.json.steps[0].path", "a plain relative path"),
        ({"step": {"path": "a/../b"}}, "journal.json.steps[0].path", "a plain relative path"),
        ({"step": {"path": "a//b"}}, "journal.json.steps[0].path", "a plain relative path"),
        ({"step": {"path": "./a"}}, "journal.json.steps[0].path", "a plain relative path"),
        ({"step": {"path": "a/"}}, "journal.json.steps[0].path", "a plain relative path"),
        ({"step": {"stage": "../x"}}, "journal.json.steps[0].stage", "a file name in tx/"),
        ({"step": {"keep": ".."}}, "journal.json.steps[0].keep", "a file name in tx/"),
        ({"step": {"keep": "."}}, "journal.json.steps[0].keep", "a file name in tx/"),
        ({"step": {"stage": ""}}, "journal.json.steps[0].stage", "a file name in tx/"),
        (
            {"step": {"action": "chmod"}},
            "journal.json.steps[0].action",
            "one of ['write', 'delete', 'rename']",
        ),
        ({"operation": "merge"}, "journal.json.operation", "one of ['apply', 'revert']"),
    ],
)
def test_a_malformed_journal_is_refused(change: dict[str, Any], where: str, expected: str) -> None:
    data = json.loads(journal.Journal(journal.Operation.APPLY, "d", 1, "s", STEPS[:1]).to_json())
    data["steps"][0].update(change.get("step", {}))
    data.update({k: v for k, v in change.items() if k != "step"})
    with pytest.raises(CodecError) as info:
        journal.Journal.from_json(json.dumps(data))
    (value,) = {
        **change.get("step", {}),
        **{k: v for k, v in change.items() if k != "step"},
    }.values()
    assert (info.value.where, info.value.expected, info.value.found) == (
        where,
        expected,
        repr(value),
    )


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b"\xff{}", "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0"),
        (b"{", "CodecError: malformed data at journal.json ('{')"),
        (b'{"schema": 1}', "CodecError: malformed data at journal.json.operation ({'schema': 1})"),
        (b'{"schema": 1, "steps": [3]}', "CodecError: malformed data at journal.json.operation"),
        (b"[]", "CodecError: malformed data at journal.json ([])"),
    ],
)
def test_an_unreadable_journal_is_a_target_error(tmp_path: Path, data: bytes, found: str) -> None:
    journal.state_dir(tmp_path).mkdir()
    path = journal.journal_file(tmp_path)
    path.write_bytes(data)
    with pytest.raises(TargetError) as info:
        journal.read_journal(tmp_path)
    exc = info.value
    assert exc.message == f"the journal {path} is unreadable"
    assert exc.expected == "the JSON journal an interrupted apply or revert left"
    assert exc.found is not None and exc.found.startswith(found)
    assert exc.hint == (
        "restore the tree by reinstalling executorch (`uv pip install --reinstall"
        f" executorch==<pin>`), then delete {path.parent}"
    )


def test_where_the_state_lives(tmp_path: Path) -> None:
    assert journal.state_dir(tmp_path) == tmp_path / ".executorch-arm-overlay"
    assert journal.lock_file(tmp_path) == tmp_path / ".executorch-arm-overlay" / "lock"
    assert journal.journal_file(tmp_path) == tmp_path / ".executorch-arm-overlay" / "journal.json"
    assert journal.read_journal(tmp_path) is None


# --- checkpoints, steps and file helpers ---------------------------------------------------


@pytest.fixture
def signals_seen() -> Iterator[list[int]]:
    """Record SIGINT/SIGTERM sent to this process instead of dying of them."""
    seen: list[int] = []
    old = {
        s: signal.signal(s, lambda n, f: seen.append(n)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield seen
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def test_fault_points_trace_and_fire_only_where_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signals_seen: list[int]
) -> None:
    log = tmp_path / "trace.txt"
    monkeypatch.setenv(_faults.TRACE_ENV, str(log))
    monkeypatch.setenv(_faults.FAULT_ENV, "b:raise")
    _faults.fault_point("a")
    with pytest.raises(OSError, match=r"^\[Errno 5\] injected fault after b$") as info:
        _faults.fault_point("b")
    assert info.value.errno == errno.EIO
    assert log.read_text(encoding="utf-8") == "a\nb\n"
    monkeypatch.setenv(_faults.FAULT_ENV, "c:explode")
    with pytest.raises(ValueError, match=r"^OVERLAY_TEST_FAULT: unknown action 'explode'$"):
        _faults.fault_point("c")
    monkeypatch.setenv(_faults.FAULT_ENV, "step 1/2:raise")  # the name may hold spaces, slashes
    with pytest.raises(OSError, match=r"after step 1/2$"):
        _faults.fault_point("step 1/2")
    _faults.fault_point("step 1/22")
    monkeypatch.setenv(_faults.FAULT_ENV, "step 3/*:raise")  # step 3 of any count
    _faults.fault_point("step 2/14")
    _faults.fault_point("step 13/14")
    _faults.fault_point("step 30/40")  # "step 3/" is the prefix, not "step 3"
    with pytest.raises(OSError, match=r"after step 3/14$"):
        _faults.fault_point("step 3/14")
    monkeypatch.setenv(_faults.FAULT_ENV, "step 3/:raise")  # no star: an exact name
    _faults.fault_point("step 3/14")
    assert signals_seen == []


def test_signal_faults_send_the_signal_named(
    monkeypatch: pytest.MonkeyPatch, signals_seen: list[int]
) -> None:
    monkeypatch.setenv(_faults.FAULT_ENV, "x:sigint")
    _faults.fault_point("x")
    monkeypatch.setenv(_faults.FAULT_ENV, "x:sigterm")
    _faults.fault_point("x")
    assert signals_seen == [signal.SIGINT, signal.SIGTERM]


def test_a_checkpoint_raises_a_pending_signal_only_when_interruptible() -> None:
    check = journal._Checkpoints()
    check("quiet")
    check.pending.append(signal.SIGTERM)
    check("tidy", interruptible=False)
    with pytest.raises(InterruptedRunError) as info:
        check("step")
    assert info.value.signum == signal.SIGTERM and str(info.value) == "SIGTERM"


def test_the_pending_signal_is_the_first_the_innermost_hold_noted() -> None:
    assert journal.pending_signal() is None  # no hold
    with journal.held_signals() as outer:
        assert journal.pending_signal() is None  # held, nothing noted
        outer.extend([signal.SIGTERM, signal.SIGINT])
        assert journal.pending_signal() == signal.SIGTERM
        with journal.held_signals() as inner:  # starts with what the outer hold noted
            assert journal.pending_signal() == signal.SIGTERM
            inner[:] = [signal.SIGINT]
            assert journal.pending_signal() == signal.SIGINT
        assert journal.pending_signal() == signal.SIGTERM
    assert journal.pending_signal() is None


def test_the_status_of_each_kind_of_step_is_read_from_the_disk(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    steps = [
        journal.Step(1, journal.Action.WRITE, "pkg/x.py", sha(OLD_X), sha(NEW_X)),
        journal.Step(2, journal.Action.WRITE, "pkg/n.py", None, sha(NEW_N)),
        journal.Step(3, journal.Action.DELETE, "pkg/y.py", sha(OLD_Y)),
        journal.Step(4, journal.Action.RENAME, DIST, to=DIST_TO),
    ]
    entry = journal.Journal(journal.Operation.APPLY, "d", 1, "s", tuple(steps))
    locate = journal._Locator(root, steps)
    status = [journal._status(s, root, locate) for s in steps]
    assert status == [journal._Status.PENDING] * 4
    assert journal.steps_done(root, entry) == 0
    (root / "pkg" / "x.py").write_bytes(NEW_X)
    (root / "pkg" / "n.py").write_bytes(NEW_N)
    (root / "pkg" / "y.py").unlink()
    (root / DIST).rename(root / DIST_TO)
    status = [journal._status(s, root, locate) for s in steps]
    assert status == [journal._Status.DONE] * 4
    assert journal.steps_done(root, entry) == 4
    (root / "pkg" / "x.py").write_bytes(b"other")
    (root / DIST).mkdir()  # both folders: a conflict
    assert journal._status(steps[0], root, locate) is journal._Status.CONFLICT
    assert journal._status(steps[3], root, locate) is journal._Status.CONFLICT
    shutil.rmtree(root / DIST)
    shutil.rmtree(root / DIST_TO)  # neither folder: a conflict too
    assert journal._status(steps[3], root, locate) is journal._Status.CONFLICT
    assert journal.steps_done(root, entry) == 2


def test_a_path_under_a_renamed_folder_is_found_where_it_is_now(tmp_path: Path) -> None:
    steps = [
        journal.Step(1, journal.Action.WRITE, "d.dist-info/RECORD"),
        journal.Step(2, journal.Action.RENAME, "d.dist-info", to="e.dist-info"),
        journal.Step(3, journal.Action.RENAME, "gone", to=None),
    ]
    locate = journal._Locator(tmp_path, steps)
    assert locate.renames == [("d.dist-info", "e.dist-info")]
    (tmp_path / "d.dist-info").mkdir()
    assert locate("d.dist-info/RECORD") == tmp_path / "d.dist-info" / "RECORD"
    (tmp_path / "d.dist-info").rename(tmp_path / "e.dist-info")
    assert locate("d.dist-info/RECORD") == tmp_path / "e.dist-info" / "RECORD"
    assert locate("d.dist-info") == tmp_path / "d.dist-info"  # the folder itself is not mapped
    assert locate("d.dist-infoX/a") == tmp_path / "d.dist-infoX" / "a"


def test_run_and_undo_each_kind_of_step(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    tx = tmp_path / "tx"
    tx.mkdir()
    (tx / "s").write_bytes(NEW_X)
    (tx / "k").write_bytes(OLD_X)
    write = journal.Step(1, journal.Action.WRITE, "pkg/x.py", stage="s", keep="k")
    create = journal.Step(2, journal.Action.WRITE, "pkg/n.py", stage="n")
    delete = journal.Step(3, journal.Action.DELETE, "pkg/y.py", keep="y")
    rename = journal.Step(4, journal.Action.RENAME, DIST, to=DIST_TO)
    locate = journal._Locator(root, [rename])
    (tx / "n").write_bytes(NEW_N)
    for step in (write, create, delete, rename):
        journal._move(step, root, tx, locate)
    assert tree_only(root) == tiny_after()
    (tx / "k").write_bytes(OLD_X)
    (tx / "y").write_bytes(OLD_Y)
    for step in (rename, delete, create, write):
        journal._move(step, root, tx, locate, back=True)
    assert tree_only(root) == {
        "pkg/": "<dir>",
        "pkg/x.py": OLD_X,
        "pkg/y.py": OLD_Y,
        f"{DIST}/": "<dir>",
        f"{DIST}/METADATA": b"m\n",
    }


def test_possible_needs_the_staged_or_kept_file_of_each_step_to_move(tmp_path: Path) -> None:
    steps = (
        journal.Step(1, journal.Action.WRITE, "a", stage="1.new", keep="1.old"),
        journal.Step(2, journal.Action.WRITE, "b", stage="2.new"),
    )
    entry = journal.Journal(journal.Operation.APPLY, "d", 1, "s", steps)
    done, pending, conflict = (
        journal._Status.DONE,
        journal._Status.PENDING,
        journal._Status.CONFLICT,
    )
    fwd, back = journal.Direction.FORWARD, journal.Direction.BACK
    assert journal._possible(entry, [done, done], fwd, tmp_path)  # nothing left to run
    assert journal._possible(entry, [pending, pending], back, tmp_path)  # nothing to undo
    assert not journal._possible(entry, [done, pending], fwd, tmp_path)  # 2.new is missing
    assert not journal._possible(entry, [done, pending], back, tmp_path)  # 1.old is missing
    (tmp_path / "2.new").write_bytes(b"")
    (tmp_path / "1.old").write_bytes(b"")
    assert journal._possible(entry, [done, pending], fwd, tmp_path)
    assert journal._possible(entry, [done, pending], back, tmp_path)
    assert not journal._possible(entry, [conflict, done], fwd, tmp_path)
    assert not journal._possible(entry, [done, conflict], back, tmp_path)


def test_write_file_writes_every_byte_and_never_through_a_symlink(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # larger than one write may take
    journal._write_file(tmp_path / "f", data, 0o600)
    assert (tmp_path / "f").read_bytes() == data
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600 & ~_umask()
    journal._write_file(tmp_path / "f", b"short")  # truncates
    assert (tmp_path / "f").read_bytes() == b"short"
    (tmp_path / "link").symlink_to(tmp_path / "f")
    with pytest.raises(OSError) as info:
        journal._write_file(tmp_path / "link", b"x")
    assert info.value.errno == errno.ELOOP
    assert (tmp_path / "f").read_bytes() == b"short"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_sha_or_none(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert journal._sha_or_none(tmp_path / "f") == sha(b"x")
    assert journal._sha_or_none(tmp_path / "missing") is None
    assert journal._sha_or_none(tmp_path) is None  # a folder
    assert journal._sha_or_none(tmp_path / "f" / "below") is None  # under a file


def test_fsync_of_files_and_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_bytes(b"x")
    journal._fsync(tmp_path / "f")
    journal._fsync(tmp_path)
    with pytest.raises(FileNotFoundError):
        journal._fsync(tmp_path / "missing")  # a missing file is an error
    synced: list[Path] = []
    monkeypatch.setattr(journal, "_fsync", synced.append)
    journal._fsync_all([])
    assert synced == []
    journal._fsync_all([tmp_path, tmp_path])
    assert synced == [tmp_path]
    synced.clear()
    journal._fsync_all([tmp_path / "b", tmp_path / "a", tmp_path / "b", tmp_path / "c"])
    assert sorted(synced) == [tmp_path / "a", tmp_path / "b", tmp_path / "c"]


def test_folders_fsync_errors_are_ignored_file_errors_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f").write_bytes(b"x")

    def failing(fd: int) -> None:
        raise OSError(errno.EINVAL, "no fsync here")

    monkeypatch.setattr(os, "fsync", failing)
    journal._fsync(tmp_path)
    with pytest.raises(OSError, match="no fsync here"):
        journal._fsync(tmp_path / "f")


def no_hard_links(*args: object, **kwargs: object) -> None:
    """Stand in for os.link on a file system without hard links."""
    raise OSError(errno.EXDEV, "cross-device link")


def not_permitted(*args: object, **kwargs: object) -> None:
    """Stand in for a call a plain user may not make (chown to another owner)."""
    raise PermissionError(errno.EPERM, "not permitted")


def test_keep_links_the_old_file_or_copies_it_with_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "old"
    old.write_bytes(b"kept")
    old.chmod(0o751)
    journal._keep(old, tmp_path / "linked")
    assert (tmp_path / "linked").stat().st_ino == old.stat().st_ino

    monkeypatch.setattr(os, "link", no_hard_links)
    journal._keep(old, tmp_path / "copied")
    copied = (tmp_path / "copied").stat()
    assert (tmp_path / "copied").read_bytes() == b"kept"
    assert copied.st_ino != old.stat().st_ino and copied.st_mode & 0o7777 == 0o751
    assert (copied.st_uid, copied.st_gid) == (old.stat().st_uid, old.stat().st_gid)


def test_link_stage_links_only_a_file_that_holds_the_new_bytes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_bytes(b"new")
    assert journal._link_stage(source, tmp_path / "a", sha(b"new"))
    assert (tmp_path / "a").stat().st_ino == source.stat().st_ino
    assert not journal._link_stage(source, tmp_path / "b", sha(b"other"))
    assert not (tmp_path / "b").exists()  # the wrong link is removed
    assert not journal._link_stage(tmp_path / "missing", tmp_path / "c", sha(b"new"))
    assert not (tmp_path / "c").exists()


def test_stage_writes_with_the_mode_and_owner_of_like(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    like = tmp_path / "like"
    like.write_bytes(b"")
    like.chmod(0o4750)
    journal._stage(tmp_path / "s", b"data", like)
    staged = (tmp_path / "s").stat()
    assert (tmp_path / "s").read_bytes() == b"data" and staged.st_mode & 0o7777 == 0o4750

    monkeypatch.setattr(journal, "give_to", not_permitted)
    with pytest.raises(TargetError) as info:
        journal._stage(tmp_path / "t", b"data", like)
    exc = info.value
    st = like.stat()
    assert exc.message == f"cannot keep the owner of {like} (uid {st.st_uid}, gid {st.st_gid})"
    assert exc.expected == "to run as the owner of the files, or as root"
    assert exc.found == f"running as uid {os.geteuid()}"
    assert exc.hint == f"run as the user who owns {tmp_path}, or with sudo"


def test_give_to_changes_the_owner_only_when_it_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"")
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(os, "chown", lambda *a, **k: calls.append((*a, k)))
    st = path.stat()
    journal.give_to(path, (st.st_uid, st.st_gid))
    assert calls == []
    journal.give_to(path, (st.st_uid + 1, st.st_gid))
    journal.give_to(path, (st.st_uid, st.st_gid + 1))
    assert calls == [
        (path, st.st_uid + 1, st.st_gid, {"follow_symlinks": False}),
        (path, st.st_uid, st.st_gid + 1, {"follow_symlinks": False}),
    ]


def test_root_gives_the_state_folder_to_the_owner_of_the_tree(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only root works in a tree someone else owns")
    root = tiny_tree(tmp_path / "t")
    state = journal.state_dir(root)
    (state / journal.TX_DIR).mkdir(parents=True)
    journal.lock_file(root).write_bytes(b"")
    journal.journal_file(root).write_bytes(b"{}")
    journal.hand_over(root)  # a tree root owns: nothing to hand over
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (state, *state.iterdir())} == {(0, 0)}
    os.chown(root, 1234, 5678)
    journal.hand_over(root)
    owners = {p.name: (p.stat().st_uid, p.stat().st_gid) for p in (state, *state.iterdir())}
    assert owners == {n: (1234, 5678) for n in (journal.STATE_DIR, "lock", "tx", "journal.json")}


def test_prepare_refuses_a_rename_onto_an_existing_folder(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    (root / DIST_TO).mkdir()
    with pytest.raises(TargetError) as info:
        commit_tiny(root)
    exc = info.value
    assert exc.message == f"cannot rename {DIST} to {DIST_TO}: it exists"
    assert exc.expected == "one executorch dist-info folder"
    assert exc.found == f"{root / DIST} and {root / DIST_TO}"
    assert exc.hint == "remove the stale one (reinstall executorch)"
    assert (root / "pkg" / "x.py").read_bytes() == OLD_X
    assert not (journal.state_dir(root) / journal.TX_DIR).exists()


def test_prepare_refuses_a_file_that_changed_since_the_plan(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    (root / "pkg" / "y.py").write_bytes(b"changed\n")
    with pytest.raises(TargetError) as info:
        commit_tiny(root)
    exc = info.value
    assert exc.message == f"{root / 'pkg' / 'y.py'} changed while the run was planning"
    assert exc.expected == f"sha256 {sha(OLD_Y)}"
    assert exc.found == f"sha256 {sha(b'changed' + bytes([10]))}"
    assert exc.hint == "another program writes this tree; stop it and run the command again"
    assert (root / "pkg" / "x.py").read_bytes() == OLD_X


def test_a_write_may_stage_by_linking_a_file_that_holds_its_bytes(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    (root / "ready").write_bytes(NEW_X)
    change = journal.Change("pkg/x.py", NEW_X, sha(OLD_X), link_from="ready")
    journal.commit(root, journal.Operation.APPLY, "d", [change])
    assert (root / "pkg" / "x.py").stat().st_ino == (root / "ready").stat().st_ino
    wrong = journal.Change("pkg/y.py", NEW_N, sha(OLD_Y), link_from="ready")
    journal.commit(root, journal.Operation.APPLY, "d", [wrong])  # not those bytes: a copy
    assert (root / "pkg" / "y.py").read_bytes() == NEW_N
    assert (root / "pkg" / "y.py").stat().st_ino != (root / "ready").stat().st_ino


def test_the_start_time_is_utc_iso_8601() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", journal._started())


def test_a_fault_names_its_checkpoint_up_to_the_last_colon(
    monkeypatch: pytest.MonkeyPatch, signals_seen: list[int]
) -> None:
    monkeypatch.setenv(_faults.FAULT_ENV, "a:b:raise")
    _faults.fault_point("a")
    with pytest.raises(OSError, match=r"after a:b$"):
        _faults.fault_point("a:b")


def test_write_file_creates_files_0644_by_default(tmp_path: Path) -> None:
    journal._write_file(tmp_path / "f", b"x")
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644 & ~_umask()


def test_give_to_looks_at_a_symlink_itself_never_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: giving the target to another owner")
    target = tmp_path / "target"
    target.write_bytes(b"")
    os.chown(target, 1234, 1234)
    link = tmp_path / "link"
    link.symlink_to(target)
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(os, "chown", lambda *a, **k: calls.append(a))
    journal.give_to(link, (0, 0))  # the link is root's already: nothing to do
    assert calls == []


def test_a_kept_copy_survives_an_owner_it_cannot_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "old"
    old.write_bytes(b"kept")

    monkeypatch.setattr(os, "link", no_hard_links)
    monkeypatch.setattr(journal, "give_to", not_permitted)
    journal._keep(old, tmp_path / "copied")
    assert (tmp_path / "copied").read_bytes() == b"kept"


def test_the_start_time_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "XXX+05")  # five hours behind UTC, no tz database needed
    time.tzset()
    try:
        started = datetime.datetime.strptime(journal._started(), "%Y-%m-%dT%H:%M:%SZ")
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        assert abs((now - started).total_seconds()) < 3600  # not five hours off
    finally:
        monkeypatch.undo()
        time.tzset()


def test_every_change_runs_whatever_its_place_in_the_list(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    changes = list(reversed(tiny_changes()))  # the rename and the delete come first
    journal.commit(root, journal.Operation.APPLY, "d", changes)
    assert tree_only(root) == tiny_after()


def test_a_replaced_file_keeps_its_own_mode_even_with_like(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    (root / "pkg" / "y.py").chmod(0o600)
    change = journal.Change("pkg/y.py", b"new y\n", sha(OLD_Y), like="pkg/x.py")
    journal.commit(root, journal.Operation.APPLY, "d", [change])
    assert (root / "pkg" / "y.py").stat().st_mode & 0o777 == 0o600


def test_what_is_made_durable_before_the_journal_and_after_the_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    (root / "ready").write_bytes(NEW_X)
    changes: list[journal.Change] = [
        journal.Change("pkg/x.py", NEW_X, sha(OLD_X), link_from="ready"),  # a link: durable
        journal.Change("pkg/n.py", NEW_N, None, like="pkg/x.py"),  # written: to sync
        journal.Change("pkg/y.py", None, sha(OLD_Y)),  # kept by a link: durable
        journal.Change(DIST, to=DIST_TO),
    ]
    synced: list[set[Path]] = []
    monkeypatch.setattr(journal, "_fsync_all", lambda paths: synced.append(set(paths)))
    journal.commit(root, journal.Operation.APPLY, "d", changes)
    tx = journal.state_dir(root) / journal.TX_DIR
    assert synced == [{tx / "2.new", tx}, {root / "pkg", root}]


def test_a_journal_that_cannot_be_put_in_place_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")

    def refuse(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "no space left")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ApplyError) as info:
        commit_tiny(root)
    assert info.value.message.endswith("[Errno 28] no space left; nothing was changed")
    assert list(journal.state_dir(root).iterdir()) == []
    assert tree_only(root) == {**tree_only(tiny_tree(tmp_path / "fresh"))}


def test_tidying_tx_never_fails_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tiny_tree(tmp_path / "t")
    tx = journal.state_dir(root) / journal.TX_DIR
    (tx / "sub").mkdir(parents=True)
    (tx / "a").write_bytes(b"")

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EPERM, "busy")

    monkeypatch.setattr(os, "rmdir", refuse)
    assert journal._remove_tx(root) == (
        ".executorch-arm-overlay/tx/a",
        ".executorch-arm-overlay/tx/sub",
    )


def test_a_killed_run_leaves_a_journal_that_says_what_it_was(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 3/4")
    pending = journal.read_journal(root)
    assert pending is not None
    assert (pending.operation, pending.series_digest) == (journal.Operation.APPLY, "d" * 64)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", pending.started)
    assert [(s.number, s.action, s.path) for s in pending.steps] == [
        (1, journal.Action.WRITE, "pkg/x.py"),
        (2, journal.Action.WRITE, "pkg/n.py"),
        (3, journal.Action.DELETE, "pkg/y.py"),
        (4, journal.Action.RENAME, DIST),
    ]
    assert pending.steps[0] == journal.Step(
        1, journal.Action.WRITE, "pkg/x.py", sha(OLD_X), sha(NEW_X), stage="1.new", keep="1.old"
    )
    assert pending.steps[1].keep is None and pending.steps[1].old_sha256 is None
    assert pending.steps[2] == journal.Step(
        3, journal.Action.DELETE, "pkg/y.py", sha(OLD_Y), keep="3.old"
    )
    assert pending.steps[3] == journal.Step(4, journal.Action.RENAME, DIST, to=DIST_TO)


def test_a_recovery_names_its_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 2/4")
    log = tmp_path / "trace.txt"
    monkeypatch.setenv(_faults.TRACE_ENV, str(log))
    journal.recover(root, lambda op: journal.Direction.BACK)
    assert log.read_text(encoding="utf-8").splitlines() == [
        "recover 1/4",
        "recover 2/4",
        "recover 3/4",
        "recover 4/4",
        "recovered",
    ]


def test_a_roll_back_that_fails_too_keeps_the_journal_and_says_both_causes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    monkeypatch.setenv(_faults.FAULT_ENV, "step 2/4:raise")
    move = journal._move
    monkeypatch.setattr(journal, "_move", lambda *a, back=False: None if back else move(*a))
    with pytest.raises(RollbackError) as info:
        commit_tiny(root)
    exc = info.value
    assert exc.message == (
        f"writing {root} failed: [Errno 5] injected fault after step 2/4;"
        " could not roll back the apply: 2 path(s) are in neither state"
    )
    assert exc.paths == ("pkg/x.py", "pkg/n.py")
    assert journal.read_journal(root) is not None


def test_settling_reports_every_path_it_could_not_settle(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 1/4")
    (journal.state_dir(root) / journal.TX_DIR / "2.new").unlink()  # step 2 cannot run
    (root / DIST_TO).mkdir()  # step 4: both folders, a conflict
    with pytest.raises(RollbackError) as info:
        journal.recover(root, lambda op: journal.Direction.FORWARD)
    exc = info.value
    assert exc.message == "could not finish the apply: 2 path(s) are in neither state"
    assert exc.paths == ("pkg/n.py", DIST)
    assert exc.details == (
        f"    pkg/n.py: pending, step 2 (write, old sha256 None, new {sha(NEW_N)})\n"
        f"    {DIST}: conflict, step 4 (rename, old sha256 None, new None)"
    )
    assert not (root / "pkg" / "y.py").exists()  # what could run, ran


def test_when_neither_way_is_possible_the_preferred_one_is_tried(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 1/4")
    tx = journal.state_dir(root) / journal.TX_DIR
    (tx / "1.old").unlink()  # step 1 cannot be undone
    (tx / "2.new").unlink()  # step 2 cannot run
    with pytest.raises(RollbackError) as info:
        journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert info.value.message.startswith("could not finish the apply")
    assert info.value.paths == ("pkg/n.py",)


def test_a_recovery_counts_the_steps_that_had_run(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")
    killed_at(root, "step 1/4")
    recovery = journal.recover(root, lambda op: journal.Direction.FORWARD)
    assert recovery is not None and recovery.journal is not None
    assert (len(recovery.journal.steps), recovery.done) == (4, 1)
    assert recovery.paths == ("pkg/n.py", "pkg/y.py", DIST)


def test_a_recovery_names_the_fixes_of_the_interrupted_run(tmp_path: Path) -> None:
    root = tiny_tree(tmp_path / "t")

    def run() -> int:
        journal.commit(
            root, journal.Operation.APPLY, "d" * 64, tiny_changes(), fixes=("0003-b.patch",)
        )
        return 0

    child = run_forked(run, {_faults.FAULT_ENV: "step 2/4:kill"})
    assert child.code == -signal.SIGKILL, child.output
    recovery = journal.recover(root, lambda op: journal.Direction.BACK)
    assert recovery is not None and recovery.journal is not None
    assert recovery.journal.fixes == ("0003-b.patch",)


@pytest.mark.parametrize("owner", [(1, 0), (0, 1)])
def test_root_hands_over_to_any_owner_but_root(tmp_path: Path, owner: tuple[int, int]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only root works in a tree someone else owns")
    root = tiny_tree(tmp_path / "t")
    journal.state_dir(root).mkdir()
    os.chown(root, *owner)
    journal.hand_over(root)
    st = journal.state_dir(root).stat()
    assert (st.st_uid, st.st_gid) == owner


def test_a_read_only_file_is_fsynced() -> None:
    """Files are opened read-only to fsync them: a 0444 file (a staged copy) works too."""
    with tempfile.TemporaryDirectory() as folder:  # under /tmp: any user may enter
        Path(folder).chmod(0o755)
        path = Path(folder) / "ro"
        path.write_bytes(b"x")
        path.chmod(0o444)
        journal._fsync(path)  # here too, so the mutation run knows this test covers _fsync
        nobody = 65534

        def run() -> int:
            if os.geteuid() == 0:  # root may open anything: be a plain user owning the file
                os.chown(path, nobody, nobody)
                os.setgid(nobody)
                os.setuid(nobody)
            journal._fsync(path)
            return 0

        child = run_forked(run)
        assert child.code == 0, child.output


def test_the_journal_names_the_operation_digest_process_and_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tiny_tree(tmp_path / "t")
    written: list[journal.Journal] = []
    write = journal._write_journal

    def spy(where: Path, entry: journal.Journal) -> None:
        written.append(journal.Journal.from_json(entry.to_json()))
        write(where, entry)

    monkeypatch.setattr(journal, "_write_journal", spy)
    journal.commit(root, journal.Operation.REVERT, "e" * 64, tiny_changes())
    (entry,) = written
    assert (entry.operation, entry.series_digest, entry.pid) == (
        journal.Operation.REVERT,
        "e" * 64,
        os.getpid(),
    )
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", entry.started)
    assert [s.number for s in entry.steps] == [1, 2, 3, 4]


def test_root_leaves_the_state_of_its_own_tree_alone(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only root hands the state folder over")
    root = tiny_tree(tmp_path / "t")
    journal.state_dir(root).mkdir()
    os.chown(journal.state_dir(root), 1234, 1234)  # left by another user's run
    journal.hand_over(root)  # root's own tree: nothing to hand over
    st = journal.state_dir(root).stat()
    assert (st.st_uid, st.st_gid) == (1234, 1234)
