"""The export gate: regenerating and exporting a line changes no byte, whatever git config."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_canary_fixture import BASE, _commit, build_line

from overlay import _git, worktree
from overlay._git import git
from overlay.text.series import load_series
from overlay.upstream.canary import gate
from overlay.upstream.canary.rebase import commit_series, replay_onto
from overlay.upstream.gitrepo import open_upstream
from overlay.upstream.results import Status

from scaffold import created_diff, make_diff, write_series

SOURCES = {path: text.encode() for path, text in BASE.items()}


@pytest.fixture
def hostile_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(gate.HOSTILE_GITCONFIG, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def test_a_canonical_line_passes_under_a_hostile_home(tmp_path: Path, hostile_home: Path) -> None:
    line = build_line(tmp_path / "repo") / "1.2.0"
    result = gate.run_gate(line, SOURCES, "ab" * 20, tmp_path / "scratch")
    assert result.ok, result.checks
    names = [c.name for c in result.checks]
    assert names[:4] == [
        "regenerate (your git config)",
        "regenerate (a hostile git config)",
        "export twice",
        "export (a hostile git config)",
    ]


def test_mboxes_are_the_same_bytes_with_and_without_a_hostile_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    series = load_series(build_line(tmp_path / "repo") / "1.2.0")
    clean = tmp_path / "clean.gitconfig"
    clean.write_text("", encoding="utf-8")
    with gate.global_git_config(clean):
        plain = gate.exported(series, SOURCES, "ab" * 20)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(gate.HOSTILE_GITCONFIG, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    hostile = gate.exported(series, SOURCES, "ab" * 20)
    assert hostile == plain
    assert all(text.startswith("From 0000") for text in plain.values())  # real mboxes
    assert "diff --git a/backends/arm/_passes/alpha_pass.py b/" in next(iter(plain.values()))


def test_without_the_pinned_git_settings_the_gate_sees_churn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_git, "_PINNED", ())
    line = build_line(tmp_path / "repo") / "1.2.0"
    result = gate.run_gate(line, SOURCES, "ab" * 20, tmp_path / "scratch")
    failed = {c.name: c.detail for c in result.checks if not c.ok}
    assert not result.ok
    assert "regenerate (a hostile git config)" in failed
    assert "export (a hostile git config)" in failed


def test_a_series_regenerate_would_rewrite_is_churn(tmp_path: Path) -> None:
    path = next(iter(BASE))
    text = BASE[path].replace("return x + 1", "return x + 2")
    header = "Description: Return x + 2\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
    folder = tmp_path / "1.2.0"
    write_series(folder, {"0001-a.patch": header + make_diff(path, BASE[path], text)}, SOURCES)
    result = gate.run_gate(folder, SOURCES, "ab" * 20, tmp_path / "scratch")
    assert not result.ok
    assert result.checks[0].detail == (
        "regenerating the series changed: 0001-a.patch, SHA256SUMS, series"
    )  # a bare diff (no git header) and a series file without regenerate's comments


def test_the_gate_exports_a_subject_whatever_its_verb(tmp_path: Path) -> None:
    series = load_series(build_line(tmp_path / "repo") / "1.2.0")
    patch = series.patches[0]
    assert patch.subject == "Return x + 2 in alpha"  # "Return" is no hook verb
    mbox = gate.exported(series, SOURCES, "ab" * 20)[patch.name]
    assert "Subject: [PATCH] Arm backend: Return x + 2 in alpha" in mbox


def test_a_line_creating_a_file_passes_the_gate_and_rebases_onto_upstream(
    tmp_path: Path,
) -> None:
    """Regenerate reproduces the new-file patch, its mbox is the same bytes under a hostile
    config, and the canary commits it on its base and replays it onto main, creating it."""
    path = next(iter(BASE))
    shader = "backends/arm/vgf/shaders/nearest.glsl"
    created = "// Copyright 2026 Arm Limited and/or its affiliates.\nvoid main() {}\n"
    diff = make_diff(path, BASE[path], BASE[path].replace("x + 1", "x + 2"))
    header = "Description: Add a nearest shader\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
    folder = tmp_path / "1.2.0"
    series = write_series(
        folder, {"0008-nearest.patch": header + diff + created_diff(shader, created)}, SOURCES
    )
    worktree.create(series, SOURCES, tmp_path / "canonical")
    worktree.regenerate(tmp_path / "canonical", folder)  # the canonical (git) form
    result = gate.run_gate(folder, SOURCES, "ab" * 20, tmp_path / "scratch")
    assert result.ok, result.checks
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = _commit(repo, dict(BASE), "Initial Arm backend", 1)
    main = _commit(repo, {"backends/arm/other.py": "x = 1\n"}, "Arm backend: Add other", 2)
    scratch = open_upstream(str(repo), tmp_path / "scratch-repo")
    line = commit_series(scratch, load_series(folder), base)
    assert scratch.files(line.tip, [shader]) == {shader: created.encode()}
    found, _, tip = replay_onto(scratch, line, ("main", main), line_name="1.2.0", ports={})
    assert found.patches[0].own.status is Status.APPLIES
    assert scratch.files(tip, [shader]) == {shader: created.encode()}
