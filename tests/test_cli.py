"""The CLI maps errors to one message and one exit code; the only place that prints."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import overlay
from overlay import codec, fixes, lines, render
from overlay.cli import build_parser, invocation, json_output, main, output
from overlay.errors import EXIT_CHANGES_DUE, InstallCheckError, SeriesError, TargetError
from overlay.fixes import overview
from overlay.text.series import load_series

from scaffold import make_diff, make_tree, patch_text, write_series

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "canary",
    "lines",
    "status",
    "check",
    "apply",
    "revert",
    "build-wheel",
    "lock",
    "sync",
    "refresh",
    "edit",
    "regenerate",
    "verify-install",
    "matrix",
    "export-upstream",
    "upstream-suite",
    "retarget",
    "retire-line",
    "equivalence",
    "merge-reports",
    "report-schema",
}


def test_lines_lists_both_lines_with_their_fixes_by_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--patches", str(ROOT / "patches"), "lines"]) == 0
    shown = capsys.readouterr().out
    found = overview.summaries(fixes.REGISTRY, lines.all_lines(ROOT / "patches"))
    for line in found:
        head = f"{line.name}{' (the default)' if line.default else ''}: executorch {line.name},"
        assert f"{head} torch {line.torch}\n" in shown
    held = found[0].fixes[0]
    assert f"\n  fix {held.number} {held.status.value}:" in shown
    assert main(["--patches", str(ROOT / "patches"), "lines", "--json"]) == 0
    report = codec.loads(tuple[overview.LineSummary, ...], capsys.readouterr().out)
    assert report == found


def test_status_of_the_series(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--patches", str(ROOT / "patches" / "1.2.0"), "status", "--series-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("against executorch 1.2.0")
    assert "  4. 0004-distinct-output-transpose-slots.patch: " in "\n".join(lines)


def test_bad_patch_folder_gives_message_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--patches", str(tmp_path), "status", "--series-only"]) == SeriesError.exit_code
    err = capsys.readouterr().err
    assert err.startswith(f"error: no release line in {tmp_path}\n")
    assert f"found:    no line folder and no series file at {tmp_path}, named by --patches" in err
    assert "next step: pass --patches a lines root or one series folder, or drop it" in err
    (tmp_path / "series").write_text("")  # a series folder: its loader says what is wrong
    assert main(["--patches", str(tmp_path), "status", "--series-only"]) == SeriesError.exit_code
    assert capsys.readouterr().err.startswith("error: ")


def test_missing_target_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--patches", str(ROOT / "patches" / "1.2.0"), "check", "--target", str(tmp_path)])
    assert code == TargetError.exit_code
    assert capsys.readouterr().err.startswith(f"error: executorch is not installed in {tmp_path}")


def test_a_venv_without_executorch_names_the_release_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    default = lines.default_line(ROOT / "patches").name
    for argv, release in (
        (["status"], default),
        (["apply"], default),
        (["apply", "--line", "1.2.0"], "1.2.0"),
    ):
        code = main(["--patches", str(ROOT / "patches"), *argv, "--target", str(venv)])
        err = capsys.readouterr().err
        assert code == TargetError.exit_code, err
        assert err.startswith(f"error: executorch is not installed in {venv}\n"), err
        python = venv.resolve() / "bin" / "python"
        assert (
            f"  next step: install it (`{python} -m pip install executorch=={release}`, or"
            f" `uv pip install --python {python} executorch=={release}`), then run this command"
            " again\n"
        ) in err


def test_a_bad_line_is_a_command_line_error_before_anything_is_looked_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["status", "--target", str(tmp_path / "nothing")],
        ["build-wheel"],
        ["sync", "--target", "v"],
    ):
        assert main(["--patches", str(ROOT / "patches"), *argv, "--line", "9.9.9"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: there is no release line 9.9.9\n"), err
    assert not (tmp_path / "nothing").exists() and list(tmp_path.iterdir()) == []


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
        if path.name == "__main__.py" or "cli" in path.relative_to(ROOT).parts:
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
    """``overlay`` is what its installation says, and it is these tests' own code.

    A wheel install (nox): the package is the installed files, never the checkout, and they
    hold exactly the checkout's sources (a stale install would test old code). An editable
    install: the package is the checkout the install points at, and that is the checkout
    these tests belong to (not another clone). Under mutmut (``nox -s mutants``): the
    mutated copy beside these tests in ``mutants/``.
    """
    import importlib.metadata
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    package = Path(overlay.__file__).resolve().parent
    if "MUTANT_UNDER_TEST" in os.environ:  # set by mutmut for every run it makes
        assert ROOT.name == "mutants"
        assert package == ROOT / "overlay"
        return
    dist = importlib.metadata.distribution("executorch-arm-overlay")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct.get("dir_info", {}).get("editable"):
        assert Path(url2pathname(urlparse(direct["url"]).path)).resolve() == ROOT
        assert package == ROOT / "overlay"
        return
    # The installed files, never the checkout's sources (a nox venv may live inside the checkout).
    assert not package.is_relative_to(ROOT / "overlay")
    assert package.parent.name == "site-packages"
    installed = {
        str(f): f.read_binary()
        for f in dist.files or ()
        if f.parts[0] == "overlay" and f.suffix == ".py" and f.parts[1] != "patches"
    }
    assert Path(str(dist.locate_file("overlay/__init__.py"))).resolve() == package / "__init__.py"
    checkout = {
        p.relative_to(ROOT).as_posix(): p.read_bytes() for p in (ROOT / "overlay").rglob("*.py")
    }
    assert installed.keys() == checkout.keys()
    assert [name for name in installed if installed[name] != checkout[name]] == []


def _synthetic(tmp_path: Path) -> tuple[Path, Path]:
    old = "".join(f"a{i} = {i}\n" for i in range(20))
    new = old.replace("a4 = 4\n", "a4 = 'four'\n")
    path = "backends/arm/a.py"
    root = make_tree(tmp_path / "site", {path: old.encode()})
    patches = {"0001-a.patch": patch_text("Change a", make_diff(path, old, new))}
    write_series(tmp_path / "patches", patches, {path: old.encode()})
    return root, tmp_path / "patches"


def test_check_exits_21_when_changes_are_due_and_0_when_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    root, patches = _synthetic(tmp_path)
    base = ["--patches", str(patches)]
    assert main([*base, "check", "--target", str(root)]) == EXIT_CHANGES_DUE == 21
    assert capsys.readouterr().out.splitlines()[-1] == "1 file(s) would change"
    assert main([*base, "check", "--target", str(root), "--json"]) == 21
    report = json.loads(capsys.readouterr().out)
    assert report.pop("plan")["after"] == [1]  # the plan's details: tests/test_in_place.py
    assert report == {
        "target": str(root),
        "reverse": False,
        "changes_due": True,
        "would_change": ["backends/arm/a.py"],
        "unchanged": [],
    }
    assert main([*base, "apply", "--target", str(root)]) == 0
    assert main([*base, "check", "--target", str(root)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to do"
    assert main([*base, "check", "--reverse", "--target", str(root)]) == 21


def test_status_json_is_the_typed_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    root, patches = _synthetic(tmp_path)
    assert main(["--patches", str(patches), "status", "--target", str(root), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {f.name for f in dataclasses.fields(json_output.StatusReport)}
    assert report["target"] == str(root) and report["target_version"] == "1.2.0"
    assert report["files"] == [{"repo_path": "backends/arm/a.py", "state": "pristine"}]
    assert [p["name"] for p in report["series"]["patches"]] == ["0001-a.patch"]
    assert report["series"]["wheel_version"].startswith("1.2.0+armfix.")


def test_errors_under_json_are_a_typed_report_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["--patches", str(ROOT / "patches" / "1.2.0"), "check", "--target", str(tmp_path), "--json"]
    )
    assert code == TargetError.exit_code
    report = json.loads(capsys.readouterr().out)
    assert (report["error"], report["exit_code"]) == ("TargetError", 4)
    assert (
        report["hint"] == "pass --target the venv (or site-packages folder) that holds executorch"
    )


def test_verify_install_json_names_a_missing_executorch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("version_info = 3.11.7\n")
    args = ["--patches", str(ROOT / "patches" / "1.2.0"), "verify-install", "--target", str(venv)]
    assert main([*args, "--json"]) == InstallCheckError.exit_code
    report = json.loads(capsys.readouterr().out)
    site = venv / "lib" / "python3.11" / "site-packages"
    assert report["message"] == f"executorch is missing: not installed in {site}"  # first, alone
    assert report["expected"].startswith("executorch 1.2.0+armfix.")
    in_checkout = invocation.command(f"sync --target {venv} --line 1.2.0")
    assert report["hint"] == in_checkout


def test_help_lists_every_exit_code() -> None:
    text = build_parser().format_help()
    codes = [line.split()[0] for line in text.split("exit codes:\n")[1].splitlines()]
    assert codes == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "10",
        "11",
        "12",
        "13",
        "20",
        "21",
        "130",
        "141",
        "143",
    ]
    assert "  21  check: every check passed and files would change" in text
    assert "  20  A requirements lock file is missing, unreadable, stale" in text


class Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        """Return True: a terminal."""
        return True


def test_a_report_prints_as_markdown_rendered_by_rich_on_a_terminal_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conflict = render.Badge("conflict", "bad")
    table = render.Table(("patch", "1.2.0"), (("0001-a", conflict),))
    blocks: list[render.Block] = [render.Heading("Matrix"), table]
    output.show(blocks)  # a pipe, a file, a CI log: the Markdown itself
    assert (
        capsys.readouterr().out
        == "# Matrix\n\n| patch | 1.2.0 |\n|---|---|\n| 0001-a | **conflict** |\n"
    )
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    output.show(blocks)
    shown = terminal.getvalue()
    assert all(word in shown for word in ("Matrix", "patch", "1.2.0", "0001-a", "conflict"))
    assert not any(mark in shown for mark in ("# Matrix", "| patch |", "|---|", "**conflict**"))


def test_python_dash_m_overlay_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "overlay", "--version"], capture_output=True, text=True, check=True
    )
    assert proc.stdout == f"executorch-arm-overlay {overlay.__version__}\n"


def test_a_missing_interpreter_fails_nox(tmp_path: Path) -> None:
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not installed here")
    proc = subprocess.run(
        [nox, "-f", str(ROOT / "noxfile.py"), "-s", "unit", "--force-python", "3.99",
         "--envdir", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Python interpreter 3.99 not found" in proc.stderr


@pytest.mark.parametrize(("present", "wanted"), [(["3.12"], ["3.12"]), ([], ["3.11", "3.12"])])
def test_nox_builds_and_tests_with_the_pythons_this_machine_has(
    tmp_path: Path, present: list[str], wanted: list[str]
) -> None:
    """Only 3.12 here: every session runs on it. None: all are listed, and nox says which
    interpreter is missing (the test above)."""
    nox = shutil.which("nox")
    if nox is None:
        pytest.skip("nox is not installed here")
    for version in present:  # found on PATH, never run by a listing
        (tmp_path / f"python{version}").write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / f"python{version}").chmod(0o755)
    proc = subprocess.run(
        [nox, "-f", str(ROOT / "noxfile.py"), "--list", "--json",
         "-s", "build_patched_executorch", "unit", "tests"],
        env={**os.environ, "PATH": str(tmp_path), "PYENV_ROOT": str(tmp_path / "no-pyenv")},
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listed = [(s["name"], s["python"]) for s in json.loads(proc.stdout)]
    assert listed == [
        *(("build_patched_executorch", v) for v in wanted),
        *(("unit", v) for v in wanted),
        ("tests", wanted[0]),
    ]


def test_a_retarget_starts_from_the_newest_line_before_its_release(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from overlay.cli import upstream

    default = argparse.Namespace(patches=str(ROOT / "patches"), version="1.5.1")
    assert upstream._retarget_from(default) == ROOT / "patches" / "1.2.0"
    assert "retargeting the 1.2.0 line to executorch 1.5.1" in capsys.readouterr().err
    newer = argparse.Namespace(patches=str(ROOT / "patches"), version="1.6.0")
    assert upstream._retarget_from(newer) == ROOT / "patches" / "1.5.1"
    given = argparse.Namespace(patches=str(ROOT / "patches" / "1.5.1"), version="1.5.1")
    assert upstream._retarget_from(given) == ROOT / "patches" / "1.5.1"


def test_export_upstream_refuses_a_fix_the_line_lacks_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = lines.all_lines(ROOT / "patches")[0]
    absent = max(p.number for p in load_series(line.directory).patches) + 90
    argv = ["--patches", str(ROOT / "patches"), "export-upstream", "--line", line.name]
    argv += ["--fix", str(absent), "--out", str(tmp_path / "out"), "--upstream", str(tmp_path)]
    assert main([*argv, "--signoff", "Jane Doe <jane.doe@example.org>"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: line {line.name} does not carry fix {absent}\n"), err
    assert "next step: name fixes the line carries" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", ["--patches", "OVERLAY_PATCHES"])
@pytest.mark.parametrize("folder", ["empty", "missing"])
def test_lines_of_an_empty_or_missing_root_is_an_error_naming_who_named_it(
    tmp_path: Path,
    given: str,
    folder: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not silence and exit 0; and `status` blames the one that named it (issue 36, item 11)."""
    root = tmp_path / folder
    if folder == "empty":
        root.mkdir()
    flag = ["--patches", str(root)] if given == "--patches" else []
    if given == "OVERLAY_PATCHES":
        monkeypatch.setenv("OVERLAY_PATCHES", str(root))
    source = f"--patches {root}" if flag else f"$OVERLAY_PATCHES ({root})"
    for command in (["lines"], ["status", "--series-only"]):
        assert main([*flag, *command]) == SeriesError.exit_code
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(f"error: no release line in {root}\n")
        assert f"named by {source}\n" in captured.err
        assert ("--patches" in captured.err.split("next step:")[1]) == bool(flag)


def test_edit_refuses_where_regenerate_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside a checkout, `edit` is refused as `regenerate` is, before any download (issue 36,
    item 13)."""
    monkeypatch.delenv("OVERLAY_PATCHES", raising=False)
    monkeypatch.chdir(tmp_path)
    for command in ("edit", "regenerate"):
        assert main([command, "--dir", str(tmp_path / "work")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {command} works on the release lines of a checkout"), err
    assert not (tmp_path / "work").exists()
