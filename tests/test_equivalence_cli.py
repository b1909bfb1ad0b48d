"""The equivalence commands of the CLI: reports written, progress shown, exit codes distinct."""

from __future__ import annotations

import dataclasses
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from equivalence_samples import PATCHES, scripted_options
from rich.console import Console

from overlay import cli
from overlay.cli.equivalence import BarProgress
from overlay.equivalence.controller import options as run_options
from overlay.equivalence.controller.options import CALLER_DIR_ENV, Options
from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.corpus import user_cases
from overlay.errors import EquivalenceError, EquivalenceInputError, exit_codes


def _with_fake_worker(monkeypatch: pytest.MonkeyPatch, fake: Options) -> None:
    build = run_options.options_from_env

    def with_fake_worker(*args: Any, **overrides: Any) -> Options:
        return dataclasses.replace(
            build(*args, **overrides),
            worker_command=fake.worker_command,
            pythonpath=fake.pythonpath,
        )

    monkeypatch.setattr(run_options, "options_from_env", with_fake_worker)


@pytest.mark.parametrize("shown", [("--verbose", True), ("--quiet", False)])
def test_cli_writes_json_markdown_html_with_progress_lines_or_none(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shown: tuple[str, bool],
) -> None:
    flag, lines = shown
    fake = scripted_options(tmp_path, monkeypatch)
    _with_fake_worker(monkeypatch, fake)
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    code = cli.main(
        [
            "--patches", str(PATCHES),  # the scripted fixes 1-3 are the 1.2.0 line's
            "equivalence", "--stock-python", sys.executable, "--patched-python", sys.executable,
            "--runtime-patch", "patch.py:apply", "--no-probes", "--out", "cli-out",
            "--cache-dir", "cli-cache", flag,
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.splitlines()[2].startswith("PASS: ")  # under the title
    assert ("[overlay] (c) 5/5 case:" in captured.err) is lines
    assert ("[overlay] (a) 11/11" in captured.err) is lines  # 6 attribution runs added to (a)
    for name in ("equivalence.json", "equivalence.md", "equivalence.html"):
        assert (tmp_path / "cli-out" / name).is_file()
    assert any((tmp_path / "cli-cache").rglob("*.json"))


def test_progress_bars_show_each_path_with_counts_and_eta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    stream = StringIO()
    console = Console(file=stream, force_terminal=True, width=120, color_system=None)
    with BarProgress(console) as bars:
        run(fake, progress=bars)
    screen = stream.getvalue()
    for line in ("(a) stock", "(b) stock + runtime patch", "(c) diff-patched build"):
        assert line in screen
    assert "11/11" in screen and "5/5" in screen and "eta" in screen


@pytest.mark.parametrize("required", [(), ("--require-executed", "tosa")])
def test_require_executed_fails_a_run_whose_target_did_not_run_here(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    required: tuple[str, ...],
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_CASES", "ok,unrun")
    _with_fake_worker(monkeypatch, fake)
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    argv = [
        "--patches", str(PATCHES), "equivalence", "--stock-python", sys.executable,
        "--patched-python", sys.executable, "--no-probes", "--out", "out", "--cache-dir",
        "cache", "--quiet", *required,
    ]  # fmt: skip
    assert cli.main(argv) == 0  # TOSA ran; VGF lowered, not executed: neither right nor wrong
    out = capsys.readouterr().out
    assert "VGF lowered, not executed here (1 case(s)): not installed: lavapipe" in out
    assert cli.main([*argv, "--require-executed", "vgf"]) == EquivalenceError.exit_code
    err = capsys.readouterr().err
    assert (
        "case:unrun: vgf not executed on (a), (b), (c) (--require-executed vgf): not installed:"
        " lavapipe (apt-get install mesa-vulkan-drivers)"
    ) in err
    assert "case:ok" not in err  # nothing lowered for VGF there: nothing to require


def test_bad_input_and_a_divergence_exit_with_different_codes() -> None:
    codes = dict(exit_codes())
    assert EquivalenceError.exit_code == 10 and EquivalenceInputError.exit_code == 2
    assert codes[2] == "bad command line"  # as argparse's own errors
    assert "divergence" in codes[10]


def test_a_models_file_that_does_not_parse_is_said_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Python given at all: the file's syntax error is still the one error said."""
    (tmp_path / "bad.py").write_text("import torch\ndef f(:\n", encoding="utf-8")
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    for variable in ("OVERLAY_STOCK_PYTHON", "OVERLAY_PATCHED_PYTHON"):
        monkeypatch.delenv(variable, raising=False)
    assert cli.main(["equivalence", "--models", "bad.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --models {tmp_path / 'bad.py'}: not valid Python\n"), err
    assert "  found:    line 2: " in err and "None" not in err
    assert cli.main(["equivalence", "--models", "missing.py"]) == 2
    assert capsys.readouterr().err.startswith("error: --models missing.py: no such file\n")
    (tmp_path / "good.py").write_text(user_cases.EXAMPLE + "\n", encoding="utf-8")
    cli.main(["equivalence", "--models", "good.py"])  # its CASES need not run: no Python given
    err = capsys.readouterr().err
    assert "found:    no --stock-python and no --patched-python\n" in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--models", "models.py"], "CASES cannot run"),
        (["--runtime-patch", "overlay.runtime:nope"], "no such function"),
        (["--runtime-patch", "missing.py:apply"], "--runtime-patch missing.py: no such file"),
        (["--runtime-patch", "no_such_module:apply"], "the module is not importable"),
        (["--shard", "3/2"], "--shard '3/2' is not K/N"),
        (["--case", "no_such_case"], "unknown case(s): no_such_case"),
    ],
)
def test_bad_input_is_refused_before_any_worker_with_its_own_exit_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    (tmp_path / "models.py").write_text("import torch\n\nCASES = {}\n", encoding="utf-8")
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    code = cli.main(
        [
            "equivalence", "--stock-python", sys.executable, "--patched-python", sys.executable,
            "--out", str(tmp_path / "out"), "--no-cache", "--quiet", *argv,
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == EquivalenceInputError.exit_code, err
    assert message in err
    for part in ("  expected: ", "  found:    ", "  next step: "):
        assert part in err, err
    assert not (tmp_path / "out" / "equivalence-logs" / "worker-a.log").exists()  # no worker
