"""`python -m overlay canary`: the page is written, bad input is refused before any git work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_canary_fixture import build_line, build_upstream

from overlay.cli import main
from overlay.errors import OverlayError, UpstreamError, UsageError
from overlay.upstream import suite
from overlay.upstream.results import Counts, SuiteRun, TestResult, TestRun, TestState


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(folder))
    monkeypatch.delenv("OVERLAY_UPSTREAM_CLONE", raising=False)
    return folder


def _canary(root: Path, *args: str) -> int:
    return main(["--patches", str(root / "patches"), "canary", "--no-behaviour", *args])


@pytest.fixture
def ran(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, Path, Path, str]:
    """Run the canary once on the fixture; return (root, upstream, page folder, stdout)."""
    up = build_upstream(tmp_path)
    build_line(tmp_path)
    out = tmp_path / "page"
    assert _canary(tmp_path, "--upstream", str(up.repo), "--out", str(out), "--no-gate") == 0
    return tmp_path, up.repo, out, capsys.readouterr().out


def test_the_canary_writes_the_page_and_prints_each_row(
    ran: tuple[Path, Path, Path, str], cache: Path
) -> None:
    _, _, out, printed = ran
    assert "1.2.0 0002-beta-half-scale.patch: conflict; not forwarded; next: port:" in printed
    data = json.loads((out / "status.json").read_text(encoding="utf-8"))
    assert [r["bases"][0]["own"]["status"] for r in data["lines"][0]["rows"]] == [
        "contained", "conflict", "offset", "contained",
    ]  # fmt: skip
    assert (out / "status.html").is_file() and (out / "status.md").is_file()
    assert (cache / "canary").is_dir()  # the scratch repository lives in the cache


def test_a_newly_conflicting_patch_exits_11_after_writing_the_page(
    ran: tuple[Path, Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path, repo, out, _ = ran
    data = json.loads((out / "status.json").read_text(encoding="utf-8"))
    for row in data["lines"][0]["rows"]:
        row["bases"][0]["own"]["status"] = "applies"
    previous = tmp_path / "previous.json"
    previous.write_text(json.dumps(data), encoding="utf-8")
    code = _canary(
        tmp_path, "--upstream", str(repo), "--out", str(out), "--no-gate",
        "--previous", str(previous),
    )  # fmt: skip
    assert code == UpstreamError.exit_code
    assert "0002-beta-half-scale.patch: newly conflicting on main" in capsys.readouterr().err
    assert json.loads((out / "status.json").read_text(encoding="utf-8"))["failures"]


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["--line", "9.9.9"], (UsageError, "there is no release line 9.9.9")),
        (["--previous", "/nonexistent/status.json"], (UpstreamError, "cannot read the previous")),
        ([], (UpstreamError, "no upstream repository to run the canary against")),
    ],
)
def test_bad_input_is_refused_before_any_git_work(
    tmp_path: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    refused: tuple[type[OverlayError], str],
) -> None:
    build_line(tmp_path)
    upstream = ["--upstream", str(tmp_path / "nowhere")] if args else []
    error, message = refused
    assert _canary(tmp_path, *upstream, *args) == error.exit_code
    assert message in capsys.readouterr().err
    assert not cache.exists()


def test_the_suite_fails_when_a_part_wrote_no_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = build_line(tmp_path)
    problem = "part 2 (backends/arm/test/passes/test_a.py): pytest exited with 4"
    passed = Counts((TestResult("t", TestState.PASSED),))
    run = TestRun("pytest", ("t",), passed, Counts(passed.tests, problem), 1.0)
    done = SuiteRun("1.2.0", "1.2.0", run, (), ())
    monkeypatch.setattr(suite, "run_suite", lambda line, **_: done)
    out = str(tmp_path / "out")
    code = main(["--patches", str(root), "upstream-suite", "--line", "1.2.0", "--out", out])
    assert code == UpstreamError.exit_code
    assert f"1.2.0 {problem}" in capsys.readouterr().err
