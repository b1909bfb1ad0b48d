"""Torch-free: the result cache, shards and merge-reports, worker counts, progress events,
the 100-column report, the JSON schema and the input checks (with the fake worker)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import overlay
from overlay import cli
from overlay.equivalence import cache, orchestrator, pool, report
from overlay.equivalence.cache import ResultCache
from overlay.equivalence.orchestrator import Options, Report, Shard, run
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    InitReply,
    ItemId,
    ItemKind,
    ItemResult,
    ListReply,
    PathId,
    ProbeInfo,
    RunStatus,
    Stage,
)
from overlay.equivalence.verdict import AB
from overlay.errors import EquivalenceError

A, B, C = PathId.STOCK, PathId.RUNTIME, PathId.PATCHED
ROOT = Path(__file__).resolve().parent.parent
FAKE_WORKER = Path(__file__).resolve().parent / "fake_worker.py"
SCRIPTED = "ok,after,fixed2,regress1,changed3"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Options:
    """Options running the fake worker; (c) has its own executorch sources to edit."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # workers write bytecode
    monkeypatch.setenv("FAKE_CASES", SCRIPTED)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "runs.log"))
    arm = tmp_path / "fake-patched" / "executorch" / "backends" / "arm"
    arm.mkdir(parents=True)
    (tmp_path / "fake-patched" / "executorch" / "__init__.py").write_text("", encoding="utf-8")
    (arm / "pass.py").write_text("VERSION = 1\n", encoding="utf-8")
    patch = tmp_path / "patch.py"
    patch.write_text("def apply() -> None:\n    pass\n", encoding="utf-8")
    return Options(
        stock_python=sys.executable,
        patched_python=sys.executable,
        runtime_patch=f"{patch}:apply",
        out_dir=tmp_path / "out",
        timeout=10.0,
        worker_command=(str(FAKE_WORKER),),
        patches_dir=ROOT / "patches" / "1.2.0",
        pythonpath={C: str(tmp_path / "fake-patched")},
        cache_dir=tmp_path / "cache",
        probes=False,
    )


def runs(options: Options) -> Counter[str]:
    """Return what the fake workers did since the last call: 'init a', 'run c', ..."""
    log = options.out_dir.parent / "runs.log"
    if not log.exists():
        return Counter()
    lines = log.read_text(encoding="utf-8").splitlines()
    log.unlink()
    return Counter(" ".join(line.split()[:2]) for line in lines)


def verdicts(result: Report) -> dict[str, tuple[object, ...]]:
    """Return what was decided per item (no timings)."""
    return {
        str(v.item): (v.bc, v.bc_diffs, v.ab, v.ab_diffs, v.fix, tuple(v.quality.items()))
        for v in result.verdicts
    }


# --- the cache -----------------------------------------------------------------------------


def test_warm_run_starts_no_worker_and_one_changed_path_reruns_alone(fake: Options) -> None:
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
    assert verdicts(warm) == verdicts(cold)
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
    assert verdicts(edited) == verdicts(cold)

    assert fake.runtime_patch is not None
    Path(fake.runtime_patch.partition(":")[0]).write_text(
        "def apply() -> None:\n    return None\n", encoding="utf-8"
    )
    run(fake)
    assert runs(fake) == {"init b": 1, "run b": 5}  # (b) again; (a)'s single-fix runs cached


def test_no_cache_reruns_everything_and_refreshes_the_entries(fake: Options) -> None:
    run(fake)
    runs(fake)
    run(dataclasses.replace(fake, use_cache=False))
    assert runs(fake)["run c"] == 5
    run(fake)
    assert runs(fake) == {}


def test_options_that_change_results_are_in_the_key(fake: Options) -> None:
    run(fake)
    runs(fake)
    run(dataclasses.replace(fake, keep_bytes=True))
    assert runs(fake)["run b"] == 5


def test_a_cache_entry_is_typed_atomic_and_a_bad_one_is_a_miss(tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    result = ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "m", Stage.LOWER))
    digest = cache.key("x")
    store.put(digest, result)
    assert store.get(digest, ItemResult) == result
    assert store.get(digest, InitReply) is None  # another type under that key: a miss
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [p.name for p in files] == [f"{digest}.json"]  # no temporary file left
    entry = json.loads(files[0].read_text(encoding="utf-8"))
    assert (entry["cache"], entry["type"], entry["key"]) == (
        cache.CACHE_SCHEMA,
        "ItemResult",
        digest,
    )
    entry["value"]["unknown_field"] = 1  # written by another version of the result type
    files[0].write_text(json.dumps(entry), encoding="utf-8")
    assert store.get(digest, ItemResult) is None
    files[0].write_text("{torn", encoding="utf-8")
    assert store.get(digest, ItemResult) is None
    store.put(digest, result)  # a miss is rewritten
    assert store.get(digest, ItemResult) == result
    assert ResultCache(tmp_path, read=False).get(digest, ItemResult) is None


def test_concurrent_writers_of_one_key_leave_a_whole_entry(tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    results = [ItemResult(RunStatus.OK, graph=(f"cpu: op{i}",) * 200) for i in range(8)]
    digest = cache.key("shared")

    def write(result: ItemResult) -> None:
        for _ in range(20):
            store.put(digest, result)
            assert store.get(digest, ItemResult) in results

    threads = [threading.Thread(target=write, args=(r,)) for r in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get(digest, ItemResult) in results
    assert len(list(tmp_path.rglob("*.tmp"))) == 0


def test_keys_change_with_each_input_and_not_with_paths() -> None:
    keys = cache.Keys("base", {A: "ea", B: "eb", C: "ec"}, "m1", "corpus", "probes")
    case = CaseInfo("x", "TOSA-1.0+INT", "a8w8")
    user = CaseInfo("u", "TOSA-1.0+INT", "a8w8", source="models.py")
    first = keys.result(A, case)
    assert first == cache.Keys("base", {A: "ea", B: "x", C: "y"}, "m2", "corpus", "p").result(
        A, case
    )
    assert len({
        first,
        keys.result(B, case),
        keys.result(A, case, (1,)),
        keys.result(A, case, (), True),
        keys.result(A, dataclasses.replace(case, tolerance=0.1)),
        cache.Keys("base", {A: "ea2"}, None, "corpus", "p").result(A, case),
        cache.Keys("base", {A: "ea"}, None, "corpus2", "p").result(A, case),
    }) == 7  # fmt: skip
    assert keys.result(A, user) != dataclasses.replace(keys, models="m2").result(A, user)


def test_the_key_covers_what_a_worker_can_import_and_nothing_else(tmp_path: Path) -> None:
    package = tmp_path / "overlay"
    shutil.copytree(
        Path(overlay.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    names = {p.relative_to(package).as_posix() for p in cache.worker_sources(package)}
    assert {"equivalence/worker.py", "equivalence/corpus.py", "equivalence/probes.py",
            "equivalence/protocol.py", "runtime.py", "fixes/__init__.py", "lines/pins.py",
            "fixes/model.py", "fixes/f0003_conv_rescale_qparams_from_source.py",
            "equivalence/zoo.py", "equivalence/vgf_run.py",
            "equivalence/ethosu.py"} <= names  # fmt: skip
    assert not names & {"cli/__init__.py", "equivalence/report.py", "equivalence/orchestrator.py",
                        "equivalence/pool.py", "equivalence/cache.py"}  # fmt: skip

    def digest() -> str:
        return cache.sources_digest(package, cache.worker_sources(package))

    before = digest()
    (package / "equivalence" / "report.py").write_text("# another layout\n", encoding="utf-8")
    assert digest() == before  # a controller-only edit keeps every cached result
    with (package / "equivalence" / "corpus.py").open("a", encoding="utf-8") as corpus_file:
        corpus_file.write("\n\ndef late():\n    import overlay.equivalence.report\n")
    assert digest() != before  # a corpus edit changes it; the late import is followed too
    assert package / "equivalence" / "report.py" in cache.worker_sources(package)


# --- shards and merge-reports --------------------------------------------------------------


def test_shards_partition_every_item_stably() -> None:
    items = [ItemId(ItemKind.CASE, f"case{i}") for i in range(200)]
    owners = [[k for k in range(1, 4) if Shard(k, 3).owns(item)] for item in items]
    assert all(len(o) == 1 for o in owners)
    assert min(Counter(o[0] for o in owners).values()) > 40  # spread, not all in one
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    for bad in ("0/2", "3/2", "2", "a/b", "1/0"):
        with pytest.raises(EquivalenceError, match="is not K/N"):
            Shard.parse(bad)


def test_the_shard_assignment_is_pinned() -> None:
    # Part of the CI contract (a cache folder per shard): it must not move between versions.
    def owner(name: str, count: int) -> int:
        item = ItemId(ItemKind.CASE, name)
        return next(k for k in range(1, count + 1) if Shard(k, count).owns(item))

    names = ("ok", "after", "fixed2", "regress1", "changed3", "conv_relu_int8")
    assert [owner(n, 3) for n in names] == [2, 1, 2, 1, 3, 3]
    assert [owner(n, 2) for n in names[:5]] == [2, 1, 2, 1, 1]


def test_two_shards_merged_give_the_verdicts_of_one_run(
    fake: Options, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = run(dataclasses.replace(fake, probes=True, cache_dir=None))
    parts = []
    for index in (1, 2):
        shard = Shard(index, 2)
        options = dataclasses.replace(
            fake, probes=True, shard=shard, cache_dir=None, out_dir=tmp_path / f"shard-{index}"
        )
        part = run(options)
        assert part.verdicts and len(part.verdicts) < len(whole.verdicts)
        assert all(shard.owns(v.item) for v in part.verdicts)
        (options.out_dir / "equivalence.json").write_text(
            report.render_json(part), encoding="utf-8"
        )
        parts.append(options.out_dir / "equivalence.json")
    monkeypatch.setenv(orchestrator.CALLER_DIR_ENV, str(tmp_path))
    code = cli.main(["merge-reports", "shard-1/equivalence.json", "shard-2/equivalence.json"])
    merged = report.load(tmp_path / "reports" / "equivalence.json")
    assert verdicts(merged) == verdicts(whole)
    assert [v.item for v in merged.verdicts] == [v.item for v in whole.verdicts]  # same order
    assert merged.failures == whole.failures != []  # probe:where differs: (c) has another path
    assert code == EquivalenceError.exit_code
    assert (tmp_path / "reports" / "equivalence.html").is_file()

    half = report.merge([report.load(parts[0])])
    assert half.failures[-1].endswith("(shards missing: 2/2)")
    with pytest.raises(EquivalenceError, match="shard numbers do not fit"):
        report.merge([report.load(parts[0]), report.load(parts[0])])
    other = dataclasses.replace(report.load(parts[1]), keys=dataclasses.replace(
        report.load(parts[1]).keys or cache.Keys("", {}, None, "", ""), paths={C: "other"}
    ))  # fmt: skip
    with pytest.raises(EquivalenceError, match="different inputs") as info:
        report.merge([report.load(parts[0]), other])
    assert info.value.found == "path (a) stock ran another environment or runtime patch"


# --- workers, progress ---------------------------------------------------------------------


def test_spare_cpus_go_to_the_path_with_the_most_work() -> None:
    assert pool.slot_counts({A: 26, B: 26, C: 26}, {A, B, C}, 2) == {A: 1, B: 1, C: 1}
    assert pool.slot_counts({A: 0, B: 0, C: 26}, {C}, 2) == {A: 0, B: 0, C: 2}
    assert pool.slot_counts({A: 0, B: 0, C: 5}, {C}, 4) == {A: 0, B: 0, C: 1}  # import > gain
    assert pool.slot_counts({A: 0, B: 20, C: 40}, {A, B, C}, 8) == {A: 1, B: 3, C: 4}


def test_one_path_on_two_cpus_runs_two_workers_that_share_the_items(
    fake: Options, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_progress_events_count_every_result(fake: Options) -> None:
    events: list[orchestrator.Event] = []
    run(fake, progress=events.append)
    plans = {e.path: (e.total, e.done) for e in events if e.kind is orchestrator.EventKind.PLAN}
    assert plans == {A: (5, 0), B: (5, 0), C: (5, 0)}
    done = Counter(e.path for e in events if e.kind is orchestrator.EventKind.DONE)
    more = Counter(e.path for e in events if e.kind is orchestrator.EventKind.MORE)
    assert done == {A: 5 + more[A], B: 5, C: 5} and more[A] == 6
    events.clear()
    run(fake, progress=events.append)
    assert {e.kind for e in events} == {orchestrator.EventKind.PLAN}
    assert all(e.done == e.total == 5 for e in events)


# --- the report ----------------------------------------------------------------------------


def _long_report(fake: Options) -> Report:
    result = run(fake)
    name = "a_case_with_a_name_much_longer_than_the_item_column_allows_for"
    fixed = next(v for v in result.verdicts if v.ab is AB.FIXED)
    info = dataclasses.replace(fixed.info, name=name)
    extra = dataclasses.replace(fixed, item=ItemId(ItemKind.CASE, name), info=info)
    return dataclasses.replace(result, verdicts=(*result.verdicts, extra))


def test_text_report_fits_100_columns_verdict_first_every_column_explained(fake: Options) -> None:
    text = report.render_table(_long_report(fake))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("PASS: ")
    header = next(i for i, line in enumerate(lines) if line.startswith("item "))
    assert header < 6  # the table follows the verdict lines
    assert lines[header].split() == " ".join(report.HEADER).split()
    legend = [label for label, _ in report.LEGEND]
    for column in report.HEADER[1:]:
        assert any(column in label.split(", ") or column == label for label in legend) or (
            column in "abc"
        ), column
    row = next(line for line in lines if line.startswith("a_case_with"))
    assert row.split()[0].endswith("~")  # cut in the table, whole in the details
    assert "case:a_case_with_a_name_much_longer_than_the_item_column_allows_for" in text


def test_json_report_is_valid_against_the_committed_schema(fake: Options) -> None:
    committed = json.loads(report.SCHEMA_FILE.read_text(encoding="utf-8"))
    assert committed == report.json_schema(), (
        "the report schema changed: python -m overlay report-schema >"
        " overlay/equivalence/report.schema.json"
    )
    data = json.loads(report.render_json(_long_report(fake)))
    jsonschema.Draft202012Validator(committed).validate(data)
    assert (data["schema"], data["tool"]["name"], data["verdict"]) == (
        report.REPORT_SCHEMA,
        "executorch-arm-overlay",
        "pass",
    )
    assert data["created"].endswith("+00:00")
    for path, change in (
        (("verdict",), "maybe"),
        (("items", 0, "results", "c", "status"), "fine"),
        (("items", 0, "results", "c", "unknown"), 1),
        (("summary", "items"), -1),
    ):
        broken: Any = json.loads(json.dumps(data))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = change
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, committed)


def test_json_round_trips_into_the_same_verdicts(fake: Options, tmp_path: Path) -> None:
    result = run(fake)
    path = tmp_path / "r.json"
    path.write_text(report.render_json(result), encoding="utf-8")
    loaded = report.load(path)
    assert verdicts(loaded) == verdicts(result)
    assert loaded.keys == result.keys and loaded.stats == result.stats
    path.write_text(json.dumps({"schema": 1}), encoding="utf-8")
    with pytest.raises(EquivalenceError, match="not an equivalence report of schema 3"):
        report.load(path)


# --- selection and inputs ------------------------------------------------------------------

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


@pytest.mark.parametrize(
    ("text", "option", "message"),
    [
        ("def other():\n    pass\n", "--runtime-patch", "defines no go"),
        ("def go(:\n", "--runtime-patch", "not valid Python"),
        ("X = 1\n", "--models", "defines no CASES"),
    ],
)
def test_a_file_that_cannot_work_is_refused_before_any_worker(
    tmp_path: Path, text: str, option: str, message: str
) -> None:
    (tmp_path / "f.py").write_text(text, encoding="utf-8")
    change: dict[str, Any] = (
        {"runtime_patch": "f.py:go"} if option == "--runtime-patch" else {"models": "f.py"}
    )
    with pytest.raises(EquivalenceError, match=message) as info:
        orchestrator.resolve_inputs(dataclasses.replace(Options("py", "py"), **change), tmp_path)
    assert info.value.message.startswith(option)


def test_bad_numbers_and_an_unwritable_out_folder_are_clear_errors(tmp_path: Path) -> None:
    for change in ({"timeout": 0.0}, {"jobs": -1}):
        with pytest.raises(EquivalenceError, match="--timeout must be positive"):
            orchestrator.resolve_inputs(
                dataclasses.replace(Options("py", "py"), **change), tmp_path
            )
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(EquivalenceError, match="cannot write the output folder"):
        run(Options("py", "py", out_dir=tmp_path / "file" / "out"))


def test_bindings_in_blocks_and_imports_count(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text(
        "try:\n    from x import go\nexcept ImportError:\n    go = None\n"
        "if True:\n    CASES = {}\n",
        encoding="utf-8",
    )
    options = Options("py", "py", runtime_patch="f.py:go", models="f.py")
    resolved = orchestrator.resolve_inputs(options, tmp_path)
    assert resolved.models == str(tmp_path / "f.py")
    assert resolved.out_dir == tmp_path / "reports"


def test_an_unimportable_runtime_patch_module_stops_before_any_worker(fake: Options) -> None:
    options = dataclasses.replace(fake, runtime_patch="no_such_package.patch:apply")
    with pytest.raises(EquivalenceError, match="not importable in path \\(b\\)"):
        run(options)
    assert runs(fake) == {}


def test_two_runs_into_one_folder_are_refused(fake: Options) -> None:
    fake.log_dir.mkdir(parents=True)
    import filelock

    with (
        filelock.FileLock(str(fake.log_dir / ".lock")),
        pytest.raises(EquivalenceError, match="another equivalence run"),
    ):
        run(fake)


@pytest.mark.parametrize("shown", [("--verbose", True), ("--quiet", False)])
def test_cli_writes_json_markdown_html_with_progress_lines_or_none(
    fake: Options,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shown: tuple[str, bool],
) -> None:
    flag, lines = shown
    build = orchestrator.options_from_env

    def with_fake_worker(*args: Any, **overrides: Any) -> Options:
        return dataclasses.replace(
            build(*args, **overrides),
            worker_command=fake.worker_command,
            pythonpath=fake.pythonpath,
        )

    monkeypatch.setattr(orchestrator, "options_from_env", with_fake_worker)
    monkeypatch.setenv(orchestrator.CALLER_DIR_ENV, str(tmp_path))
    code = cli.main(
        [
            "equivalence", "--stock-python", sys.executable, "--patched-python", sys.executable,
            "--runtime-patch", "patch.py:apply", "--no-probes", "--out", "cli-out",
            "--cache-dir", "cli-cache", flag,
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith("PASS: ")
    assert ("[overlay] (c) 5/5 case:" in captured.err) is lines
    assert ("[overlay] (a) 11/11" in captured.err) is lines  # 6 attribution runs added to (a)
    for name in ("equivalence.json", "equivalence.md", "equivalence.html"):
        assert (tmp_path / "cli-out" / name).is_file()
    assert any((tmp_path / "cli-cache").rglob("*.json"))


def test_progress_bars_show_each_path_with_counts_and_eta(fake: Options) -> None:
    from io import StringIO

    from rich.console import Console

    stream = StringIO()
    console = Console(file=stream, force_terminal=True, width=120, color_system=None)
    with cli.BarProgress(console) as bars:
        run(fake, progress=bars)
    screen = stream.getvalue()
    for line in ("(a) stock", "(b) stock + runtime patch", "(c) diff-patched build"):
        assert line in screen
    assert "11/11" in screen and "5/5" in screen and "eta" in screen
