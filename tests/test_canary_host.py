"""Hosting main's backends/arm on a release's executorch: the shadow, the import check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from overlay.upstream.canary import host


def _fake_executorch(site: Path) -> None:
    """An installed ``executorch`` with a 'release' backends/arm that main's shadow replaces."""
    arm = site / "executorch" / "backends" / "arm"
    arm.mkdir(parents=True)
    (site / "executorch" / "__init__.py").write_text("", encoding="utf-8")
    (site / "executorch" / "backends" / "__init__.py").write_text("", encoding="utf-8")
    (site / "executorch" / "exir.py").write_text("OLD_API = 1\n", encoding="utf-8")
    (arm / "__init__.py").write_text("WHERE = 'release'\n", encoding="utf-8")


MAIN = {
    "backends/arm/__init__.py": b"WHERE = 'main'\n",
    "backends/arm/ok_pass.py": b"from executorch.exir import OLD_API\n",
    "backends/arm/new_pass.py": b"from executorch.exir import NEW_API\n",
}


def test_modules_are_named_as_executorch_imports_them() -> None:
    assert host.modules_of(MAIN) == [
        "executorch.backends.arm",
        "executorch.backends.arm.new_pass",
        "executorch.backends.arm.ok_pass",
    ]


def test_main_is_imported_from_the_shadow_and_its_import_errors_are_reported(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release-site"
    _fake_executorch(release)
    site = host.write_shadow(tmp_path / "stock", MAIN)
    # the release env: its own site-packages first, then the shadow's sitecustomize
    python = tmp_path / "env-python"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{release}:$PYTHONPATH" exec "{sys.executable}" "$@"\n',
        encoding="utf-8",
    )
    python.chmod(0o755)
    wrapped = host.wrapper(tmp_path / "stock", python, site)
    (failure,) = host.import_errors(wrapped, host.modules_of(MAIN))
    assert failure.module == "executorch.backends.arm.new_pass" and not failure.optional
    assert failure.error.startswith("ImportError: cannot import name 'NEW_API'")
    optional = host.import_errors(wrapped, ["model_explorer_missing"])
    assert [(f.missing, f.optional) for f in optional] == [("model_explorer_missing", True)]
    shown = subprocess.run(
        [str(wrapped), "-c", "import executorch.backends.arm as a; print(a.WHERE, a.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == ["main", str((tmp_path / "stock/tree/backends/arm/__init__.py").resolve())]
