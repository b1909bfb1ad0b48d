"""Worker processes (with the fake worker): timeouts, crashes, restarts, what they can see,
and the environments described (a bad Python or runtime patch module) before any starts."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import pytest
from equivalence_samples import A, B, C, fake_options, runs, scripted_options

from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.controller.processes import LIBRARY_DAYS, worker_library
from overlay.equivalence.protocol import Stage
from overlay.equivalence.verdict import BC
from overlay.errors import EquivalenceInputError


def test_a_timeout_and_a_crash_fail_one_item_each_and_the_run_goes_on(tmp_path: Path) -> None:
    result = run(fake_options(tmp_path, probes=False))
    by_name = {v.item.name: v for v in result.verdicts}
    assert list(by_name) == ["ok", "slow", "crash", "after"]
    assert by_name["ok"].bc is BC.AGREE and by_name["after"].bc is BC.AGREE
    slow, crash = by_name["slow"], by_name["crash"]
    assert slow.bc is BC.INCOMPLETE and crash.bc is BC.INCOMPLETE
    for path in (A, B, C):
        slow_error, crash_error = slow.results[path].error, crash.results[path].error
        assert slow_error is not None and crash_error is not None
        assert (slow_error.type, slow_error.stage) == ("WorkerTimeout", Stage.HARNESS)
        assert (crash_error.type, crash_error.stage) == ("WorkerDied", Stage.HARNESS)
        assert "case:crash" in crash_error.message and "exit code 3" in crash_error.message
        assert "raise --timeout" in slow_error.message  # the run's timeout: raise it
    assert [f.split(":")[1] for f in result.failures] == ["slow", "crash"]
    assert result.verdicts[-1].results[C].graph == ("cpu: add",)  # restarted worker answered


def test_workers_see_only_the_overlay_package_and_run_in_the_out_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CASES", "ok")
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    options = fake_options(tmp_path)
    result = run(options)
    assert [str(v.item) for v in result.verdicts] == ["case:ok", "probe:where"]
    where = result.verdicts[1]
    value = where.results[C].value
    assert isinstance(value, dict)
    (library,) = (tmp_path / "cache" / "worker-library").iterdir()  # the package's copy
    imported = Path(str(value["overlay"])).resolve()
    assert imported.is_relative_to(library.resolve() / "overlay")
    assert sorted(p.name for p in library.iterdir()) == ["overlay"]
    assert Path(str(value["cwd"])).resolve() == options.log_dir.resolve()
    assert (options.log_dir / "worker-c.log").is_file()
    assert not (library / "overlay" / "patches").exists()
    assert result.failures == []
    # the output folder holds reports and logs only: no package copy
    assert not [p for p in options.out_dir.rglob("*.py")]


def test_the_worker_library_is_one_copy_per_overlay_digest(tmp_path: Path) -> None:
    first = worker_library(tmp_path)
    assert first.parent == tmp_path and (first / "overlay" / "codec.py").is_file()
    copied = {p.relative_to(first / "overlay") for p in (first / "overlay").rglob("*")}
    assert copied and all(p.suffix == ".py" for p in copied if (first / "overlay" / p).is_file())
    (first / "overlay" / "marker.py").write_text("", encoding="utf-8")
    assert worker_library(tmp_path) == first  # the same sources: the same copy, reused
    assert (first / "overlay" / "marker.py").is_file()
    stale, fresh = tmp_path / ("0" * 16), tmp_path / ("1" * 16)
    for old, days in ((stale, LIBRARY_DAYS + 1), (fresh, LIBRARY_DAYS - 1)):
        (old / "overlay").mkdir(parents=True)
        when = time.time() - days * 86400
        os.utime(old, (when, when))
    shutil.rmtree(first)  # a new copy is made: copies unused for LIBRARY_DAYS go
    assert worker_library(tmp_path) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, fresh.name])


def test_a_case_timeout_overrides_the_run_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CASES", "slow,patient")
    result = run(fake_options(tmp_path, probes=False))
    by_name = {v.item.name: v for v in result.verdicts}
    assert by_name["patient"].bc is BC.AGREE  # 6 s of work under its own 30 s
    slow = by_name["slow"].results[C].error
    assert slow is not None and slow.type == "WorkerTimeout" and "within 5 s" in slow.message


def test_a_missing_python_is_a_clear_input_error(tmp_path: Path) -> None:
    with pytest.raises(EquivalenceInputError) as info:
        run(fake_options(tmp_path, stock_python=str(tmp_path / "no-python")))
    assert "cannot run the Python of path (a) stock" in str(info.value)
    assert info.value.hint is not None and "--stock-python" in info.value.hint


def test_an_unimportable_runtime_patch_module_stops_before_any_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    options = dataclasses.replace(fake, runtime_patch="no_such_package.patch:apply")
    with pytest.raises(EquivalenceInputError, match="not importable in path \\(b\\)"):
        run(options)
    assert runs(fake) == {}


def test_a_runtime_patch_module_without_the_function_stops_before_any_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    with pytest.raises(EquivalenceInputError) as info:
        run(dataclasses.replace(fake, runtime_patch="overlay.runtime:nope"))
    assert runs(fake) == {}  # no worker started: the module was read, not imported
    error = info.value
    assert error.message == (
        "--runtime-patch overlay.runtime:nope: no such function in path (b) stock + runtime patch"
    )
    assert error.expected == "a top-level function nope in overlay.runtime"
    assert error.found is not None and error.found.startswith(
        "overlay.runtime (runtime.py) defines no nope; its functions: "
    )
    assert "apply_all" in error.found
    assert error.hint == (
        "name the function that applies the patch: --runtime-patch overlay.runtime:FUNCTION"
    )


def test_a_models_file_the_worker_refuses_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    models = tmp_path / "invalid_models.py"
    models.write_text("CASES = dict(made_at_run_time())\n", encoding="utf-8")
    with pytest.raises(EquivalenceInputError, match="could not start: an input is wrong") as info:
        run(dataclasses.replace(fake, models=str(models)))
    assert info.value.found is not None and "x: CASES is empty" in info.value.found
    assert info.value.hint is not None and "worker-a.log" in info.value.hint
