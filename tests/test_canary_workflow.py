"""The fork's canary workflow: actionlint passes, and it does what docs/canary.md says."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "canary.yml"
SCRIPTS = Path(sysconfig.get_path("scripts"))
ACTIONLINT = shutil.which("actionlint", path=str(SCRIPTS)) or shutil.which("actionlint")


@pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint is not installed (the dev extra's actionlint wheel)"
)
def test_actionlint_accepts_the_workflow(tmp_path: Path) -> None:
    assert ACTIONLINT is not None
    done = subprocess.run(
        [ACTIONLINT, "-no-color", str(WORKFLOW)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint is not installed (the dev extra's actionlint wheel)"
)
def test_actionlint_really_checks(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = WORKFLOW.read_text(encoding="utf-8").replace("runs-on: ubuntu-latest", "runs-on: [")
    broken.write_text(text.replace("${{ github.run_id }}", "${{ github.nope( }}"), encoding="utf-8")
    assert ACTIONLINT is not None
    done = subprocess.run([ACTIONLINT, "-no-color", str(broken)], capture_output=True, check=False)
    assert done.returncode != 0


def test_the_workflow_is_scheduled_uploads_the_page_and_compares_with_the_last_one() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "schedule:" in text and "cron:" in text
    assert "actions/upload-artifact@" in text and "path: build/canary/" in text
    assert "--previous previous/status.json" in text
    assert "nox -s canary --" in text
