"""One CLI in pip/uv/git conventions: the tool named as started, one flag per thing,
``--dry-run`` and ``--json`` on the commands that change something, old spellings kept."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import pytest

from overlay._hashing import sha256_file
from overlay.cli import build_parser, invocation, main
from overlay.errors import EnvError
from overlay.text.series import CHECKSUMS_FILE, Series, load_series

from scaffold import make_diff, patch_text, snapshot, write_files, write_series

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches" / "1.2.0"
NAME = invocation.NAME
A = "backends/arm/a.py"
A_OLD = "".join(f"a{i} = {i}\n" for i in range(20))
A_NEW = A_OLD.replace("a4 = 4\n", "a4 = 'four'\n")
WHEEL = "executorch-1.2.0-cp311-cp311-manylinux_2_28_x86_64.whl"
TAG = "cp311-manylinux_2_28_x86_64"
LOCK = f"{TAG}.txt"


def test_in_a_checkout_the_next_step_is_uv_run_from_anywhere(tmp_path: Path) -> None:
    package = ROOT / "overlay"
    assert invocation.prefix(package=package, cwd=ROOT / "tests") == f"uv run {NAME}"
    away = invocation.prefix(package=package, cwd=tmp_path)
    assert away == f"uv run --project {ROOT} {NAME}"


def test_installed_the_next_step_is_the_command_the_user_typed(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "overlay"
    as_module = invocation.prefix(argv=[sys.executable, "-m", "overlay"], package=package)
    assert as_module == f"{sys.executable} -m overlay"
    script = str(tmp_path / "bin" / NAME)  # not what PATH finds: named by its path
    assert invocation.prefix(argv=[sys.executable, script, "status"], package=package) == script


@pytest.mark.parametrize(
    ("text", "localised"),
    [
        (f"run `{NAME} refresh`", f"run `uv run {NAME} refresh`"),
        (f"`{NAME} apply` or `{NAME} revert`", f"`uv run {NAME} apply` or `uv run {NAME} revert`"),
        (f"in ~/.cache/{NAME}/tool now", f"in ~/.cache/{NAME}/tool now"),  # a path stays
        (f"{NAME}-0.1.0.tar.gz is built", f"{NAME}-0.1.0.tar.gz is built"),  # a longer name too
    ],
)
def test_localise_rewrites_the_tool_as_a_command_only(text: str, localised: str) -> None:
    assert invocation.localise(text, f"uv run {NAME}") == localised


def test_usage_and_version_name_the_tool() -> None:
    parser = build_parser(prog=NAME)
    assert parser.format_usage().startswith(f"usage: {NAME} ")
    assert parser.prog == NAME


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["lock", "--tag", "a", "--tag", "b"], "tag", ["a", "b"]),
        (["lock", "--dry-run"], "check", True),
        (["build-wheel", "--tag", "t", "--json"], "json", True),
        (["refresh", "--dry-run"], "dry_run", True),
        (["sync", "--target", "v", "--dry-run", "--json"], "dry_run", True),
        (["apply", "--dry-run", "--json", "--fix", "1"], "fix", ["1"]),
        (["revert", "--dry-run", "--json"], "dry_run", True),
        (["matrix"], "format", "markdown"),
        (["matrix", "--format", "table"], "format", "markdown"),  # the old name: the same report
    ],
)
def test_one_spelling_per_thing(argv: list[str], dest: str, value: object) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == value


def test_sync_dry_run_checks_and_says_what_it_would_do_writing_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))  # no patched wheel yet
    monkeypatch.chdir(tmp_path)
    venv = tmp_path / "venv"
    argv = ["--patches", str(PATCHES), "sync", "--target", str(venv), "--python", "3.11"]
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert f"would build the patched executorch wheel into {Path('dist') / '1.2.0'}/" in said
    assert f"would sync {venv} to {LOCK}: a new Python 3.11 venv" in said
    assert main([*argv, "--dry-run", "--json", "--stock"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True
    assert (report["target"], report["line"]) == (str(venv), "1.2.0")
    assert (report["lock"], report["up_to_date"]) == (f"{LOCK} (stock)", False)
    assert report["builds_wheel"] is False  # stock: nothing to build
    assert (report["executorch"], report["modules"]) == (None, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no venv, no dist, no cache


def test_sync_refuses_a_folder_that_is_not_a_venv_before_any_download(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    before = snapshot(tmp_path)
    argv = ["--patches", str(PATCHES), "sync", "--target", str(folder), "--python", "3.11"]
    assert main([*argv, "--dry-run", "--json"]) == EnvError.exit_code
    report = json.loads(capsys.readouterr().out)
    assert report["error"] == "EnvError"
    assert report["message"] == f"{folder} is not a virtual environment and not empty"
    assert report["found"] == "cat.jpg"
    assert snapshot(tmp_path) == before
    assert main([*argv, "--dist", str(tmp_path / "dist")]) == EnvError.exit_code  # for real
    assert "is not a virtual environment and not empty" in capsys.readouterr().err
    assert snapshot(tmp_path) == before  # refused before the download and the build


def _wheel_and_series(tmp_path: Path) -> tuple[Path, Series]:
    (tmp_path / "wheels").mkdir()
    wheel = write_files(
        tmp_path / "wheels" / WHEEL,
        {
            f"executorch/{A}": A_OLD.encode(),
            "executorch-1.2.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: executorch\n"
            b"Version: 1.2.0\n",
            "executorch-1.2.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
        },
    )
    patches = {"0001-a.patch": patch_text("Change a", make_diff(A, A_OLD, A_NEW))}
    pristine = {A: A_OLD.encode()}
    series = write_series(tmp_path / "patches", patches, pristine, wheel_sha=sha256_file(wheel))
    return wheel, series


def test_build_wheel_json_is_the_report_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    wheel, series = _wheel_and_series(tmp_path)
    dist = tmp_path / "dist"
    argv = ["--patches", str(series.directory), "build-wheel", "--wheel", str(wheel)]
    before = snapshot(tmp_path)
    assert main([*argv, "--dist", str(dist), "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert (planned["action"], planned["downloads"]) == ("built", False)
    assert main([*argv, "--dist", str(dist), "--dry-run"]) == 0
    assert capsys.readouterr().out == f"would write {planned['wheel']} (built)\n"
    assert snapshot(tmp_path) == before  # no dist, no cache
    assert main([*argv, "--dist", str(dist), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["wheel"], report["version"]) == (planned["wheel"], planned["version"])
    assert Path(report["wheel"]).parent == dist
    assert report["built"] is True
    assert report["sha256"] == sha256_file(Path(report["wheel"]))
    assert report["index"] == str(dist / "simple")
    assert main([*argv, "--dist", str(dist), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["built"] is False  # up to date, reused
    assert main([*argv, "--dist", str(dist), "--dry-run"]) == 0
    assert capsys.readouterr().out == f"{report['wheel']}: up to date\n"
    assert main([*argv, "--dist", str(tmp_path / "other"), "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "linked from the cache"


def test_refresh_dry_run_says_whether_the_checksums_would_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))
    wheel, series = _wheel_and_series(tmp_path)
    sums = series.directory / CHECKSUMS_FILE
    argv = ["--patches", str(series.directory), "refresh", "--wheel", str(wheel)]
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert said == f"{sums}: up to date (series {series.short_digest}); nothing written\n"
    committed = sums.read_bytes()
    entry = next(line for line in sums.read_text().splitlines() if line.endswith(A))
    sums.write_text(sums.read_text().replace(entry, "0" * 64 + entry[64:]))
    stale = sums.read_bytes()
    assert main([*argv, "--dry-run"]) == 0
    assert "would be rewritten" in capsys.readouterr().out
    assert main([*argv, "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["path"], report["dry_run"], report["changed"]) == (str(sums), True, True)
    assert sums.read_bytes() == stale
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"wrote {sums}")
    assert sums.read_bytes() == committed


def _noxfile_commands() -> list[tuple[str, list[str]]]:
    """Return each overlay command the noxfile runs: the subcommand and its literal flags."""
    found = []
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        words = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        after = words[words.index("overlay") + 1 :] if "overlay" in words else []
        command = words[0] if name == "_overlay" else next(
            (w for w in after if not w.startswith("-")), None
        )  # fmt: skip
        if command is not None:
            found.append((command, [w for w in words if w.startswith("--")]))
    return found


def test_the_noxfile_runs_the_current_spellings() -> None:
    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = actions[0].choices
    runs = _noxfile_commands()
    assert {c for c, _ in runs} >= {"sync", "lock", "equivalence", "retarget", "canary"}
    for command, flags in runs:
        shown = commands[command].format_help()
        for flag in flags:
            assert flag == "--patches" or f"{flag} " in shown or f"{flag}\n" in shown, (
                command,
                flag,
            )


def test_edit_refuses_a_full_folder_before_any_download(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))  # empty: a fetch downloads
    full = tmp_path / "work"
    full.mkdir()
    (full / "notes.txt").write_text("mine\n")
    argv = ["--patches", str(PATCHES), "edit", "--dir", str(full), "--tag", TAG]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {full} is not empty\n") and "found:    notes.txt" in err
    assert not (tmp_path / "cache").exists()  # refused before the download
    assert main(["--patches", str(PATCHES), "edit", "--dir", str(tmp_path / "new"), "--tag", TAG,
                 "--dry-run"]) == 0  # fmt: skip
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("would download executorch-1.2.0-cp311-cp311-manylinux_2_28_x86_64")
    count = len(load_series(PATCHES).patches)
    assert said[1] == f"would lay out {count} patches as commits in {tmp_path / 'new'}"
    assert not (tmp_path / "new").exists() and not (tmp_path / "cache").exists()
