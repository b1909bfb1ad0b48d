"""Every user input is checked before a worker starts: expected, found, a next step that works."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from overlay.equivalence.controller import options as run_options
from overlay.equivalence.controller.options import CALLER_DIR_ENV, Options, Shard
from overlay.errors import EquivalenceInputError

VALID_MODELS = (
    "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\n"
    "CASES = {'mine': {'module': Net, 'inputs': (torch.randn(1, 3),),"
    " 'spec': 'TOSA-1.0+INT', 'quantize': 'a8w8'}}\n"
)


def _refused(tmp_path: Path, **change: Any) -> EquivalenceInputError:
    """Resolve options from ``tmp_path``; return the input error (no Python is started)."""
    options = dataclasses.replace(Options("py", "py"), **change)
    with pytest.raises(EquivalenceInputError) as info:
        run_options.resolve_inputs(options, tmp_path)  # "py" runs nothing: files are read, not run
    error = info.value
    assert error.expected and error.found and error.hint, error  # every part is there
    return error


def test_relative_user_files_are_read_from_the_callers_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = tmp_path / "caller"
    (caller / "seed").mkdir(parents=True)
    (caller / "seed" / "patch.py").write_text("def go():\n    pass\n", encoding="utf-8")
    (caller / "models.py").write_text(VALID_MODELS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the caller's folder: nox runs from the noxfile's
    monkeypatch.setenv(CALLER_DIR_ENV, str(caller))
    options = run_options.options_from_env(
        "py", "py", runtime_patch="seed/patch.py:go", models="models.py", only=("mine",)
    )
    assert options.runtime_patch == f"{(caller / 'seed' / 'patch.py').resolve()}:go"
    assert options.models == str((caller / "models.py").resolve())
    module_spec = run_options.options_from_env("py", "py", runtime_patch="overlay.runtime:apply")
    assert module_spec.runtime_patch == "overlay.runtime:apply"


@pytest.mark.parametrize(
    ("change", "option"),
    [
        ({"runtime_patch": "missing/patch.py:go"}, "--runtime-patch"),
        ({"models": "missing.py"}, "--models"),
        ({"runtime_patch": "not a module:go"}, "--runtime-patch"),
        ({"runtime_patch": "overlay.runtime:not-a-name"}, "--runtime-patch"),
    ],
)
def test_a_bad_user_file_fails_before_any_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, str], option: str
) -> None:
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    with pytest.raises(EquivalenceInputError) as info:
        run_options.options_from_env("py", "py", **change)
    assert info.value.message.startswith(option)
    assert info.value.hint is not None and option in info.value.hint


@pytest.mark.parametrize(
    ("text", "option", "message", "hint"),
    [
        ("def other():\n    pass\n", "--runtime-patch", "defines no go", "f.py:FUNCTION"),
        ("def go(:\n", "--runtime-patch", "not valid Python", "fix the syntax error"),
        ("X = 1\n", "--models", "defines no CASES", "CASES = {'my_conv'"),
    ],
)
def test_a_file_that_cannot_work_is_refused_before_any_worker(
    tmp_path: Path, text: str, option: str, message: str, hint: str
) -> None:
    (tmp_path / "f.py").write_text(text, encoding="utf-8")
    change: dict[str, Any] = (
        {"runtime_patch": "f.py:go"} if option == "--runtime-patch" else {"models": "f.py"}
    )
    error = _refused(tmp_path, **change)
    assert message in error.message and error.message.startswith(option)
    assert error.hint is not None and hint in error.hint


def test_a_runtime_patch_file_names_its_functions_when_the_one_asked_for_is_missing(
    tmp_path: Path,
) -> None:
    (tmp_path / "seed.py").write_text(
        "def apply_arm_backend_monkey_patch():\n    pass\n\ndef _helper():\n    pass\n",
        encoding="utf-8",
    )
    error = _refused(tmp_path, runtime_patch="seed.py:apply")
    assert error.found == "its functions: apply_arm_backend_monkey_patch"
    assert (
        error.hint == "name the function that applies the patch: --runtime-patch seed.py:FUNCTION"
    )


def test_an_empty_cases_is_refused_before_any_worker(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text("import torch\n\nCASES = {}\n", encoding="utf-8")
    error = _refused(tmp_path, models="models.py")
    assert error.message == f"--models {tmp_path / 'models.py'}: CASES cannot run"
    assert error.found == "models.py: CASES must be a non-empty dict of case name -> dict"
    assert error.expected is not None and "'spec': 'TOSA-1.0+INT'" in error.expected
    assert error.hint == "fix CASES in models.py"


def test_a_misspelt_literal_entry_is_refused_before_any_worker(tmp_path: Path) -> None:
    text = VALID_MODELS.replace("'quantize': 'a8w8'", "'quantise': 'a8w8'")
    (tmp_path / "models.py").write_text(text, encoding="utf-8")
    error = _refused(tmp_path, models="models.py")
    assert error.found == "mine: missing key(s) quantize; mine: unknown key(s) quantise"


def test_cases_built_at_run_time_are_left_to_the_worker(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(
        "CASES = {}\nfor n in ('a', 'b'):\n    CASES[n] = {}\n", encoding="utf-8"
    )
    resolved = run_options.resolve_inputs(Options("py", "py", models="models.py"), tmp_path)
    assert resolved.models == str(tmp_path / "models.py")
    # its names are known only when it runs: --case is checked after the listing
    later = Options("py", "py", models="models.py", only=("a",))
    assert run_options.resolve_inputs(later, tmp_path).only == ("a",)


def test_an_unknown_case_is_refused_before_any_worker(tmp_path: Path) -> None:
    error = _refused(tmp_path, only=("conv_relu_int8", "conv_relu_int9"))
    assert error.message == "unknown case(s): conv_relu_int9"
    assert error.found == "conv_relu_int9 (nearest: conv_relu_int8)"
    assert "conv_relu_int8" in (error.expected or "")
    assert error.hint == "list them with `executorch-arm-overlay equivalence --list`"
    (tmp_path / "models.py").write_text(VALID_MODELS, encoding="utf-8")
    mine = _refused(tmp_path, models="models.py", only=("mine", "yours"))
    assert mine.found == "yours" and "mine" in (mine.expected or "")  # nothing near "yours"
    assert mine.hint == (
        "list them with `executorch-arm-overlay equivalence --list"
        f" --models {tmp_path / 'models.py'}`"
    )
    resolved = run_options.resolve_inputs(
        Options("py", "py", models="models.py", only=("mine", "conv_relu_int8")), tmp_path
    )
    assert resolved.only == ("mine", "conv_relu_int8")  # a corpus case may be named too


def test_another_worker_program_lists_its_own_cases(tmp_path: Path) -> None:
    options = Options("py", "py", only=("fake_case",), worker_command=("fake_worker.py",))
    assert run_options.resolve_inputs(options, tmp_path).only == ("fake_case",)


def test_bad_numbers_a_bad_shard_and_an_unknown_group_are_refused(tmp_path: Path) -> None:
    for change in ({"timeout": 0.0}, {"jobs": -1}):
        assert "--timeout must be positive" in _refused(tmp_path, **change).message
    for shard in (Shard(3, 2), Shard(0, 2)):
        assert _refused(tmp_path, shard=shard).message == f"--shard '{shard}' is not K/N"
    error = _refused(tmp_path, group="mystery")
    assert (error.message, error.found) == ("unknown group 'mystery'", "mystery")
    assert error.expected == "core, zoo, all"


def test_bindings_in_blocks_and_imports_count(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text(
        "try:\n    from x import go\nexcept ImportError:\n    go = None\n"
        "if True:\n    CASES = {}\n",
        encoding="utf-8",
    )
    options = Options("py", "py", runtime_patch="f.py:go", models="f.py")
    resolved = run_options.resolve_inputs(options, tmp_path)
    assert resolved.models == str(tmp_path / "f.py")
    assert resolved.out_dir == tmp_path / "reports"


def test_no_python_to_run_the_paths_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OVERLAY_STOCK_PYTHON", raising=False)
    monkeypatch.delenv("OVERLAY_PATCHED_PYTHON", raising=False)
    with pytest.raises(EquivalenceInputError, match="no stock or patched Python") as info:
        run_options.options_from_env(None, "py")
    assert info.value.hint is not None and "--stock-python" not in info.value.message
    assert "nox -s equivalence" in info.value.hint and "stock executorch" in info.value.hint
