"""The CLI maps errors to one message and one exit code; the only place that prints."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import overlay
from overlay.cli import build_parser, main
from overlay.errors import SeriesError, TargetError

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "status",
    "check",
    "apply",
    "revert",
    "build-wheel",
    "refresh",
    "edit",
    "regenerate",
    "verify-install",
    "matrix",
    "export-upstream",
    "retarget",
    "equivalence",
}


def test_status_of_the_series(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--patches", str(ROOT / "patches"), "status", "--series-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("against executorch 1.2.0")
    assert "  4. 0004-distinct-output-transpose-slots.patch: " in "\n".join(lines)


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
    code = main(["--patches", str(ROOT / "patches"), "check", "--target", str(tmp_path)])
    assert code == TargetError.exit_code
    assert capsys.readouterr().err.startswith("error: no single executorch installation")


def test_the_parser_has_exactly_the_documented_commands() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    assert set(actions[0].choices) == COMMANDS


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip().endswith(overlay.__version__)


def test_only_the_cli_prints() -> None:
    offenders = []
    for path in sorted((ROOT / "overlay").rglob("*.py")):
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
                offenders.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    assert offenders == []


def test_the_tests_import_the_installed_package() -> None:
    import importlib.metadata
    import json

    dist = importlib.metadata.distribution("executorch-arm-overlay")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct.get("dir_info", {}).get("editable"):
        pytest.skip("an editable install runs from the checkout by design")
    assert not Path(overlay.__file__).resolve().is_relative_to(ROOT / "overlay")
