"""The CLI maps errors to one message and one exit code; the only place that prints."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from overlay.cli import build_parser, main
from overlay.errors import SeriesError

ROOT = Path(__file__).resolve().parent.parent


def test_status_of_the_series(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--series-only"]) == 0
    out = capsys.readouterr().out
    assert "against executorch 1.2.0" in out
    assert "4. 0004-distinct-output-transpose-slots.patch" in out


def test_bad_patch_folder_gives_message_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--patches", str(tmp_path), "status", "--series-only"]) == SeriesError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: no series file in")
    assert "next step: point --patches" in err


def test_missing_target_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--target", str(tmp_path)]) == 4
    assert "no single executorch installation" in capsys.readouterr().err


def test_every_command_is_registered() -> None:
    help_text = build_parser().format_help()
    for command in ("status", "check", "apply", "revert", "build-wheel", "refresh", "edit"):
        assert command in help_text


def test_only_the_cli_prints() -> None:
    offenders = []
    for path in sorted((ROOT / "overlay").glob("*.py")):
        if path.name in ("cli.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            calls_builtin = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("print", "exit", "quit")
            )
            sys_exit = (
                isinstance(node, ast.Attribute)
                and node.attr == "exit"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            )
            if calls_builtin or sys_exit:
                offenders.append(f"{path.name}:{getattr(node, 'lineno', 0)}")
    assert offenders == []
