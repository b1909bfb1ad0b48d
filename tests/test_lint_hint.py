"""lintrunner's "run it by hand" hint, pasted into a shell, runs it as the overlay ran it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from overlay.envs.release_venvs import Env
from overlay.envs.venvs import Contents
from overlay.errors import UpstreamError
from overlay.upstream.lint import run_lint

FAKE = """#!/bin/sh
echo "$PWD|$MYPYPATH|$(command -v lintrunner)|$*" > "{seen}"
echo "error: no linters configured" >&2
exit 2
"""


def test_the_hint_of_a_lintrunner_that_fails_reruns_it_in_the_same_place(tmp_path: Path) -> None:
    env = Env(tmp_path / "my env", Contents("lock.txt", "3.11", ""))
    (env.folder / "bin").mkdir(parents=True)
    seen = tmp_path / "seen.txt"
    tool = env.folder / "bin" / "lintrunner"
    tool.write_text(FAKE.format(seen=seen), encoding="utf-8")
    tool.chmod(0o755)
    repo = tmp_path / "a clone"
    repo.mkdir()
    with pytest.raises(UpstreamError) as info:
        run_lint(repo, ["backends/arm/x.py"], env)
    ran = seen.read_text(encoding="utf-8")
    seen.unlink()
    hint = info.value.hint or ""
    assert hint.startswith("run it by hand: cd ")
    subprocess.run(["sh", "-c", hint.removeprefix("run it by hand: ")], check=False)
    assert seen.read_text(encoding="utf-8") == ran
    assert ran == f"{repo}|./src/|{tool}|--output oneline backends/arm/x.py\n"
