"""One run (with the fake worker): the result cache across runs, selection, the output folder."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from equivalence_samples import A, B, C, decided, runs, scripted_options

from overlay import _mutex
from overlay.equivalence import corpus
from overlay.equivalence.controller import orchestrator
from overlay.equivalence.controller.options import Options, Shard
from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.protocol import ListReply
from overlay.equivalence.verdict import AB
from overlay.equivalence.worker import vgf_run
from overlay.errors import BusyError, EquivalenceInputError
from overlay.items import CaseInfo, ItemKind, ProbeInfo

# --- the cache across runs -----------------------------------------------------------------


def test_warm_run_starts_no_worker_and_one_changed_path_reruns_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    cold = run(fake)
    assert runs(fake) == {
        "init a": 1, "init b": 1, "init c": 1,
        "run a": 5 + 6,  # 5 cases + single-fix runs: fixed2 (1, 2), regress1 (1), changed3 (1..3)
        "run b": 5, "run c": 5,
    }  # fmt: skip
    expected = {"fixed2": (AB.FIXED, 2), "regress1": (AB.REGRESSION, 1), "changed3": (AB.FIXED, 3)}
    assert {v.item.name: (v.ab, v.fix) for v in cold.verdicts if v.ab is not AB.SAME} == expected

    warm = run(fake)
    assert runs(fake) == {}  # answered from the cache: no worker started at all
    assert decided(warm) == decided(cold)
    assert {p: (s.ran, s.cached, s.workers) for p, s in warm.stats.items()} == {
        A: (0, 5, 0),
        B: (0, 5, 0),
        C: (0, 5, 0),
    }
    assert warm.workers[B].init == cold.workers[B].init  # the description comes from the cache

    arm = Path(fake.pythonpath[C]) / "executorch" / "backends" / "arm"
    (arm / "pass.py").write_text("VERSION = 2\n", encoding="utf-8")  # "edit one patch"
    edited = run(fake)
    assert runs(fake) == {"init c": 1, "run c": 5}  # only (c); attribution from the cache
    assert decided(edited) == decided(cold)

    Path(fake.runtime_patch.partition(":")[0]).write_text(
        "def apply() -> None:\n    return None\n", encoding="utf-8"
    )
    run(fake)
    assert runs(fake) == {"init b": 1, "run b": 5}  # (b) again; (a)'s single-fix runs cached


def test_no_cache_reruns_everything_and_refreshes_the_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    run(fake)
    runs(fake)
    run(dataclasses.replace(fake, use_cache=False))
    assert runs(fake)["run c"] == 5
    run(fake)
    assert runs(fake) == {}


def test_options_that_change_results_are_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    run(fake)
    runs(fake)
    run(dataclasses.replace(fake, keep_bytes=True))
    assert runs(fake)["run b"] == 5


def test_the_report_records_the_choices_not_this_machines_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    result = run(dataclasses.replace(fake, shard=Shard(1, 2)))
    assert type(result.options) is not Options  # no folders, timeouts or worker command
    assert result.options.shard == Shard(1, 2) and result.shards == (Shard(1, 2),)
    assert result.options.runtime_patch == fake.runtime_patch
    names = ("ok", "after", "fixed2", "regress1", "changed3")
    assert [str(i) for i in result.selection] == [f"case:{n}" for n in names]


# --- selection -----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent

LISTING = ListReply(
    cases=(
        CaseInfo("corpus_case", "TOSA-1.0+INT", "a8w8", fast=True),
        CaseInfo("mine", "TOSA-1.0+INT", "a8w8", fast=True, source="models.py"),
    ),
    probes=(ProbeInfo("p", "d"),),
)


def test_models_run_only_the_users_cases_unless_the_corpus_is_asked_for() -> None:
    def names(**change: Any) -> list[str]:
        options = dataclasses.replace(Options("py", "py"), **change)
        return [str(i) for i in orchestrator.select(LISTING, options)[0]]

    assert names() == ["case:corpus_case", "case:mine", "probe:p"]
    assert names(models="models.py") == ["case:mine"]
    assert names(models="models.py", with_corpus=True) == [
        "case:corpus_case", "case:mine", "probe:p"
    ]  # fmt: skip
    assert names(models="models.py", only=("corpus_case",)) == ["case:corpus_case"]
    parts = [orchestrator.select(LISTING, Options("py", "py", shard=Shard(k, 2))) for k in (1, 2)]
    (first, selection), (second, again) = parts
    assert selection == again and len(selection) == 3
    assert set(first) | set(second) == set(selection) and not set(first) & set(second)


def test_a_case_a_models_file_does_not_list_is_refused_after_the_listing() -> None:
    options = Options("py", "py", models="models.py", only=("theirs",))
    with pytest.raises(EquivalenceInputError, match="unknown case") as info:
        orchestrator.select(LISTING, options)
    assert (
        info.value.hint
        == "list them with `executorch-arm-overlay equivalence --list --models models.py`"
    )


def _select(**change: Any) -> list[str]:
    listing = ListReply(corpus.ALL_CASES, corpus.PROBES)
    infos, _ = orchestrator.select(listing, Options("py", "py", **change))
    return [i.name for i in infos if i.kind is ItemKind.CASE]


def test_groups_select_cases() -> None:
    core = _select()
    assert core == [c.name for c in corpus.CASES]
    assert _select(group="zoo") == [c.name for c in corpus.ZOO_CASES]
    assert len(_select(group="all")) == len(corpus.ALL_CASES)
    fast = _select(fast=True)
    assert [n for n in fast if n.startswith("zoo_")] == ["zoo_grid_warp_int16_grid_intfp16"]
    assert _select(group="zoo", fast=True) == ["zoo_grid_warp_int16_grid_intfp16"]
    listing = ListReply(corpus.ALL_CASES, corpus.PROBES)
    kinds = {
        group: {i.kind for i in orchestrator.select(listing, Options("py", "py", group=group))[0]}
        for group in (None, "zoo", "all")
    }
    assert kinds == {None: set(ItemKind), "zoo": {ItemKind.CASE}, "all": set(ItemKind)}


def test_the_corpus_is_listed_without_a_worker() -> None:
    listing = orchestrator.list_items(Options("no-such-python", "no-such-python"))
    assert listing == ListReply(corpus.ALL_CASES, corpus.PROBES)


# --- the output folder ---------------------------------------------------------------------


def test_an_unwritable_out_folder_is_a_clear_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(EquivalenceInputError, match="cannot write the output folder"):
        run(Options("py", "py", out_dir=tmp_path / "file" / "out"))


def test_two_runs_into_one_folder_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    fake.log_dir.mkdir(parents=True)
    with (
        _mutex.held(fake.log_dir / ".lock", timeout=0, busy="held", hint=""),
        pytest.raises(BusyError, match="another equivalence run") as busy,
    ):
        run(fake)
    assert f"held by pid {os.getpid()}" in (busy.value.found or "")
    assert not (fake.log_dir / ".lock").exists()  # the holder deletes it on release


def test_a_run_starts_without_the_vgf_executions_an_earlier_run_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    kept = fake.log_dir / vgf_run.RUNS / ("0" * 64)
    kept.mkdir(parents=True)
    run(fake)
    assert not kept.parent.exists()  # the emulator or its files may have changed since


def test_a_probe_runs_on_the_lines_that_carry_its_fix() -> None:
    listing = ListReply(corpus.ALL_CASES, corpus.PROBES)

    def probes(line: str) -> set[int]:
        options = Options("py", "py", patches_dir=ROOT / "patches" / line)
        infos, _ = orchestrator.select(listing, options)
        return {i.fix for i in infos.values() if isinstance(i, ProbeInfo)}

    assert probes("1.2.0") == {1, 2, 3, 4}
    assert probes("1.5.1") == {1, 3}  # 2 and 4 dropped: their functions are upstream's now
    unbound = ListReply((), (ProbeInfo("control", "d"),))
    infos, _ = orchestrator.select(
        unbound, Options("py", "py", patches_dir=ROOT / "patches" / "1.5.1")
    )
    assert [i.name for i in infos] == ["control"]
