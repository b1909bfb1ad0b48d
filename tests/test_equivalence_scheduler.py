"""Scheduling (with the fake worker): workers per path, shared queues, progress events."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from equivalence_samples import A, B, C, runs, scripted_options

from overlay import fixes, lines
from overlay.equivalence.controller import scheduler
from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.controller.scheduler import Event, EventKind
from overlay.equivalence.verdict import AB, BC
from overlay.items import ItemId, ItemKind

ROOT = Path(__file__).resolve().parent.parent


def test_spare_cpus_go_to_the_path_with_the_most_work() -> None:
    assert scheduler.slot_counts({A: 26, B: 26, C: 26}, {A, B, C}, 2) == {A: 1, B: 1, C: 1}
    assert scheduler.slot_counts({A: 0, B: 0, C: 26}, {C}, 2) == {A: 0, B: 0, C: 2}
    assert scheduler.slot_counts({A: 0, B: 0, C: 5}, {C}, 4) == {A: 0, B: 0, C: 1}  # import > gain
    assert scheduler.slot_counts({A: 0, B: 20, C: 40}, {A, B, C}, 8) == {A: 1, B: 3, C: 4}


def test_attribution_tries_the_claimed_fix_first() -> None:
    every = [f.number for f in fixes.FIXES]
    claimed = next(t.case for f in fixes.FIXES if f.number == 3 for t in f.triggers)
    assert scheduler.candidates(ItemId(ItemKind.CASE, claimed), every)[0] == 3
    assert sorted(scheduler.candidates(ItemId(ItemKind.CASE, claimed), every)) == every
    assert scheduler.candidates(ItemId(ItemKind.PROBE, claimed), every) == every


def test_attribution_tries_only_the_fixes_of_the_runs_line() -> None:
    for line in lines.all_lines(ROOT / "patches"):
        carried = scheduler.carried_fixes(line.directory)
        assert carried == tuple(f.number for f in fixes.carried_by(line))
        for case in {t.case for f in fixes.FIXES for t in f.triggers}:
            claimed = [f.number for f, _ in fixes.triggers_of(case) if f.number in carried]
            found = scheduler.candidates(ItemId(ItemKind.CASE, case), carried)
            assert sorted(found) == sorted(carried), (line.name, case)
            assert found[: len(set(claimed))] == list(dict.fromkeys(claimed)), (line.name, case)
    claimer, trigger = next((f, t) for f in fixes.FIXES for t in f.triggers)
    others = tuple(f.number for f in fixes.FIXES if f is not claimer)  # a line without it
    found = scheduler.candidates(ItemId(ItemKind.CASE, trigger.case), others)
    assert claimer.number not in found and sorted(found) == sorted(others)
    assert scheduler.candidates(ItemId(ItemKind.PROBE, "x"), (3, 1)) == [3, 1]


def test_one_path_on_two_cpus_runs_two_workers_that_share_the_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_CASES", ",".join(f"extra{i}" for i in range(10)))
    run(fake)
    assert runs(fake)["init c"] == 1  # three paths with work on 2 CPUs: one worker each
    (Path(fake.pythonpath[C]) / "executorch" / "backends" / "arm" / "pass.py").write_text("2")
    monkeypatch.setenv("FAKE_BARRIER", f"{fake.out_dir.parent / 'barrier'}:2")
    result = run(dataclasses.replace(fake, jobs=2))
    log = (fake.out_dir.parent / "runs.log").read_text(encoding="utf-8").splitlines()
    workers = Counter(line.split()[-1] for line in log if line.startswith("run c"))
    assert runs(fake) == {"init c": 2, "run c": 10}
    assert len(workers) == 2 and all(n >= 1 for n in workers.values())  # both took items
    assert result.stats[C].workers == 2 and result.stats[A].workers == 0


def test_progress_events_count_every_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    events: list[Event] = []
    run(fake, progress=events.append)
    plans = {e.path: (e.total, e.done) for e in events if e.kind is EventKind.PLAN}
    assert plans == {A: (5, 0), B: (5, 0), C: (5, 0)}
    done = Counter(e.path for e in events if e.kind is EventKind.DONE)
    more = Counter(e.path for e in events if e.kind is EventKind.MORE)
    assert done == {A: 5 + more[A], B: 5, C: 5} and more[A] == 6
    events.clear()
    run(fake, progress=events.append)
    assert {e.kind for e in events} == {EventKind.PLAN}
    assert all(e.done == e.total == 5 for e in events)


def test_a_b_vs_c_difference_is_attributed_to_the_fix_whose_line_form_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_CASES", "ok,lacks4")
    result = run(fake)
    (lacks,) = [v for v in result.verdicts if v.item.name == "lacks4"]
    assert (lacks.ab, lacks.bc, lacks.bc_fix) == (AB.SAME, BC.UNDECLARED, 4)
    assert lacks.failures == [
        "case:lacks4: undeclared divergence between (b) and (c): status, graph, numerics"
        " (from fix 4)"
    ]
    # on (b), fixes 1, 2 and 3 in place of the runtime patch's changed nothing; fix 4 did
    assert runs(fake)["run b"] == 2 + 4 and result.stats[B].attribution_runs == 4
    again = run(fake)
    assert runs(fake) == Counter() and [v.bc_fix for v in again.verdicts] == [None, 4]
    assert again.stats[B].attribution_cached == 4


def test_serial_runs_attribute_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    result = run(dataclasses.replace(fake, parallel=False, cache_dir=None))
    assert runs(fake)["run a"] == 5 + 6  # (a) runs last, every attribution run with it
    changed = {v.item.name: (v.ab.value, v.fix) for v in result.verdicts if v.fix is not None}
    assert changed == {"fixed2": ("fixed", 2), "regress1": ("regression", 1),
                       "changed3": ("fixed", 3)}  # fmt: skip
    assert {p: s.workers for p, s in result.stats.items()} == {A: 1, B: 1, C: 1}
