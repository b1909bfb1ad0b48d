"""Hosting main's backends/arm on a release's executorch: the shadow, the import check."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from overlay.lines import Line
from overlay.upstream import host
from overlay.upstream.canary import main_behaviour

from scaffold import write_series


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
    "backends/arm/vgf/shaders/grid.spirv.b64": b"AAAA\n",  # a resource, shadowed too
}


def test_modules_are_named_as_executorch_imports_them() -> None:
    assert main_behaviour.modules_of(MAIN) == [
        "executorch.backends.arm",
        "executorch.backends.arm.new_pass",
        "executorch.backends.arm.ok_pass",
    ]


def test_main_is_imported_from_the_shadow_and_its_import_errors_are_reported(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release-site"
    _fake_executorch(release)
    # the release env: its own site-packages first, then the shadow's sitecustomize
    python = tmp_path / "env-python"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{release}:$PYTHONPATH" exec "{sys.executable}" "$@"\n',
        encoding="utf-8",
    )
    python.chmod(0o755)
    wrapped = host.write_shadow(tmp_path / "stock", python, MAIN)
    (failure,) = main_behaviour.import_errors(wrapped, main_behaviour.modules_of(MAIN))
    assert failure.module == "executorch.backends.arm.new_pass" and not failure.optional
    assert failure.error.startswith("ImportError: cannot import name 'NEW_API'")
    optional = main_behaviour.import_errors(wrapped, ["model_explorer_missing"])
    assert [(f.missing, f.optional) for f in optional] == [("model_explorer_missing", True)]
    core = main_behaviour.import_errors(wrapped, ["executorch.backends.arm.gone"])
    assert [(f.missing, f.optional) for f in core] == [("executorch.backends.arm.gone", False)]
    shown = subprocess.run(
        [str(wrapped), "-c", "import executorch.backends.arm as a; print(a.WHERE, a.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == ["main", str((tmp_path / "stock/tree/backends/arm/__init__.py").resolve())]
    assert (
        tmp_path / "stock/tree/backends/arm/vgf/shaders/grid.spirv.b64"
    ).read_bytes() == b"AAAA\n"


def _share(root: Path, releases: tuple[str, ...]) -> None:
    """Add ``releases`` to the matrix of the lines root's shared ``upstream.toml``."""
    shared = root / "upstream.toml"
    known = tomllib.loads(shared.read_text("utf-8"))["matrix_versions"] if shared.exists() else []
    versions = ", ".join(f'"{v}"' for v in dict.fromkeys([*known, *releases]))
    shared.write_text(
        f'matrix_versions = [{versions}]\npython = "3.11"\nplatform = "manylinux_2_28_x86_64"\n',
        encoding="utf-8",
    )


def _line(root: Path, version: str, matrix: tuple[str, ...] = ()) -> Line:
    folder = root / version
    write_series(folder, {}, {}, version=version)
    pins = (folder / "pins.toml").read_text(encoding="utf-8")
    pins = pins.replace(
        'torch = "2.11.0"', 'torch = "2.11.0"\ntorchao = "0.18.0"\ntosa-tools = "2026.2.1"'
    )
    (folder / "pins.toml").write_text(pins, encoding="utf-8")
    _share(root, (version, *matrix))
    return Line(version, folder)


def test_the_newest_release_any_line_knows_hosts_main(tmp_path: Path) -> None:
    old = _line(tmp_path, "1.2.0", ("1.5.1",))
    assert host.newest_release([old]) == ("1.5.1", old)
    own = _line(tmp_path, "1.5.1")
    assert host.newest_release([old, own]) == ("1.5.1", own)


def test_main_meets_its_own_tool_pins_and_torch_stays_with_the_wheel(tmp_path: Path) -> None:
    old = _line(tmp_path, "1.2.0", ("1.5.1",))
    tools = {"tosa-tools": "2026.5.0", "flatbuffers": "24.3.25"}
    assert host.host_runtime(old, "1.5.1", tools, "2.13.0") == {
        "torch": "2.13.0",
        "tosa-tools": "2026.5.0",
    }
    own = host.host_runtime(old, "1.2.0", tools, "2.13.0")
    assert own == {"torch": "2.11.0", "torchao": "0.18.0", "tosa-tools": "2026.5.0"}
    assert list(own) == ["torch", "torchao", "tosa-tools"]  # install order: the line's


def test_pin_candidates_go_from_all_of_mains_tool_pins_to_the_lines_own() -> None:
    by_file = {
        "backends/arm/requirements-arm-vgf-runtime.txt": {"ai-ml-sdk-vgf-library": "0.10.0"},
        "backends/arm/requirements-arm-tosa.txt": {"tosa-tools": "2026.5.0"},
    }
    assert host.pin_candidates(by_file) == [
        (
            "requirements-arm-tosa.txt, requirements-arm-vgf-runtime.txt",
            {"tosa-tools": "2026.5.0", "ai-ml-sdk-vgf-library": "0.10.0"},
        ),
        ("requirements-arm-tosa.txt", {"tosa-tools": "2026.5.0"}),
        ("the line's own pins", {}),
    ]


def test_an_interpreter_that_does_not_answer_is_one_failure_with_its_own_error(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "env-python"
    broken.write_text("#!/bin/sh\necho 'no such torch build' >&2\nexit 3\n", encoding="utf-8")
    broken.chmod(0o755)
    (failure,) = main_behaviour.import_errors(broken, ["executorch.backends.arm"])
    assert failure.module == "(interpreter)" and not failure.optional
    assert failure.error == "the import check did not answer: exit code 3: no such torch build"


def test_an_import_check_that_times_out_names_the_interpreter_and_stays_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "env-python"
    slow.write_text("#!/bin/sh\nsleep 30\n", encoding="utf-8")
    slow.chmod(0o755)
    monkeypatch.setattr(main_behaviour, "IMPORT_TIMEOUT_S", 1.0)
    (failure,) = main_behaviour.import_errors(slow, [f"executorch.m{i}" for i in range(200)])
    assert failure.error.startswith(
        f"the import check did not answer: no answer within 1 s: {slow} -s -P -c <script> "
    )
    assert " ... " in failure.error and failure.error.endswith("executorch.m199")
    assert len(failure.error) < 600
