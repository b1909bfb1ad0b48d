"""Fault injection: a failure, SIGKILL, SIGINT or SIGTERM at every checkpoint of apply/revert.

The world is a synthetic 12-file series over three folders, with bytecode of several
interpreters and optimisation levels beside the sources and RECORD rows for some of it.
For every checkpoint the transaction names (staged, kept, journal, step k/N, synced,
committed, cleaned) the run is stopped there; then the next command (`apply` or `revert`,
each on its own copy) must leave exactly the patched or the pristine tree, byte for byte,
with no staging file, no journal and nothing `pip uninstall` would leave behind.
"""

from __future__ import annotations

import re
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay.dist import wheels
from overlay.errors import ApplyError, OverlayError, UnfinishedRunError
from overlay.target import journal, transaction
from overlay.text.series import Series, load_series

from scaffold import (
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
        patches[f"{first:04d}-p.patch"] = patch_text(f"Patch {first}", diffs)
    second = new_text(0).replace("v9 = 9\n", "v9 = 'nine'\n")
    patches["9999-again.patch"] = patch_text("Again", make_diff(repo_path(0), new_text(0), second))
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

    def start(self, *, reverse: bool) -> Path:
        """Return the tree a run starts from."""
        return self.patched if reverse else self.pristine

    def ends(self, *, reverse: bool) -> tuple[Snapshot, Snapshot]:
        """Return (where the next `apply` must end, where the next `revert` must end)."""
        start = snapshot(self.start(reverse=reverse))
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
    transaction.apply(series, transaction.find_target(applied_tree))
    applied = snapshot(applied_tree)
    patched = base / "P1"
    shutil.copytree(applied_tree, patched)
    add_bytecode(patched, bytecode, b"new ", record=False)
    reverted_tree = base / "P2"
    shutil.copytree(patched, reverted_tree)
    transaction.apply(series, transaction.find_target(reverted_tree), reverse=True)
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
        mp.setenv(journal.TRACE_ENV, str(log))
        transaction.apply(world.series, transaction.find_target(tree), reverse=reverse)
    return log.read_text().splitlines()


def run_quietly(world: World, tree: Path, *, reverse: bool) -> Callable[[], int]:
    """What the CLI does for apply/revert, minus parsing: the series comes with the fork."""

    def run() -> int:
        try:
            transaction.apply(world.series, transaction.find_target(tree), reverse=reverse)
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
    for name, state in (("old", old), ("new", new)):
        if bare == strip_bytecode(state):
            return f"{name} + leftovers"
    return "other"


def next_command(world: World, tree: Path, *, reverse: bool, expect: Snapshot) -> str:
    """Run apply or revert on the stopped tree; return patched | pristine | what is wrong."""
    target = transaction.find_target(tree)
    status = transaction.inspect(world.series, target)
    if status.state is transaction.TreeState.MIXED:
        return "mixed without a journal"
    if status.state is transaction.TreeState.INTERRUPTED:
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
    old = snapshot(world.start(reverse=reverse))
    new = world.reverted if reverse else world.applied
    tree = tmp / "tree"
    shutil.copytree(world.start(reverse=reverse), tree)
    fault = f"{checkpoint}:{action}"
    if action == "raise":  # in process: the failure path of the same process
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(journal.FAULT_ENV, fault)
            try:
                transaction.apply(world.series, transaction.find_target(tree), reverse=reverse)
                code, message = 0, ""
            except ApplyError as exc:
                code, message = exc.exit_code, exc.message
    else:
        child = run_forked(run_quietly(world, tree, reverse=reverse), {journal.FAULT_ENV: fault})
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
    # the sources, 3 x 2 stale .pyc; METADATA, RECORD, provenance, original (2); the rename
    assert len(steps) == N_FILES + 6 + 5 + 1
    assert names[names.index("journal") + 1] == f"step 1/{len(steps)}"
    assert [n for n in names if n.startswith("staged ")][
        -1
    ] == f"staged {N_FILES + 5}/{N_FILES + 5}"
    assert names[-3:] == ["synced", "committed", "cleaned"]


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
        patches[f"{i:04d}.patch"] = patch_text(f"Edit {i}", make_diff(path, old_text_, new_text_))
        sources[path] = old_text_.encode()
        if draw(st.booleans()):
            bytecode.append(path)
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
    members = wheels.read_members(
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
        transaction.apply(world.series, transaction.find_target(tree), reverse=reverse, fixes=fixes)
        return 0

    return run


@pytest.mark.parametrize(
    ("reverse", "fixes"),
    [(False, frozenset({2, 4})), (True, frozenset({1, 5}))],
    ids=["apply --fix 2,4", "revert --fix 1,5"],
)
def test_a_killed_subset_run_is_settled_by_running_it_again(
    world: World, tmp: Path, reverse: bool, fixes: frozenset[int]
) -> None:
    start = world.start(reverse=reverse)
    clean = tmp / "clean"
    shutil.copytree(start, clean)
    log = tmp / "trace.txt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(journal.TRACE_ENV, str(log))
        subset_run(world, clean, fixes, reverse=reverse)()
    wanted = strip_bytecode(snapshot(clean))
    held = transaction.inspect(world.series, transaction.find_target(clean)).record.fixes
    assert held == (frozenset({2, 3, 4}) if reverse else fixes)  # fix 5 needs fix 1: both go
    checkpoints = log.read_text().splitlines()
    assert len([c for c in checkpoints if c.startswith("step ")]) > 5
    verb = "revert" if reverse else "apply"
    for checkpoint in checkpoints:
        tree = tmp / "tree"
        shutil.copytree(start, tree)
        child = run_forked(
            subset_run(world, tree, fixes, reverse=reverse),
            {journal.FAULT_ENV: f"{checkpoint}:kill"},
        )
        assert child.code == -signal.SIGKILL, (checkpoint, child.output)
        status = transaction.inspect(world.series, transaction.find_target(tree))
        if status.interrupted is not None:
            numbers = ", ".join(map(str, sorted(fixes)))
            assert status.summary.startswith(f"interrupted {verb} of fixes {numbers} of 5 (pid ")
        subset_run(world, tree, fixes, reverse=reverse)()  # the same command again
        assert strip_bytecode(snapshot(tree)) == wanted, checkpoint
        assert unowned(tree) == [], checkpoint
        shutil.rmtree(tree)
