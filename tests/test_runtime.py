"""overlay.runtime: line choice, guards, idempotence, undo, refusals.

The machinery runs on a toy fix (tests/toy_fixes) and a fake installed package (no torch);
the real runtime forms run on the installed stock executorch 1.2.0 (marked torch).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import toy_fix

from overlay import fixes, lines, runtime
from overlay.errors import OverlayError, PristineMismatchError, RuntimePatchError

ROOT = Path(__file__).resolve().parent.parent

# --- the machinery, on the toy fix ---------------------------------------------------------


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[runtime.Runtime]:
    """A runtime over the toy lines (9.9.0, 9.10.0) with toyexec 9.9.0 installed."""
    site = toy_fix.install_package(tmp_path / "site", "9.9.0")
    monkeypatch.syspath_prepend(str(site))
    toy_fix.forget_package()
    registry = fixes.from_modules([toy_fix.load_module()])
    yield runtime.Runtime(registry, toy_fix.write_lines(tmp_path / "patches"))
    toy_fix.forget_package()


def _answer() -> Any:
    return importlib.import_module("toyexec.backends.toy.answer").Answer


def _reinstall(toy: runtime.Runtime, version: str, source: str = toy_fix.PRISTINE) -> None:
    assert toy.root is not None
    site = toy.root.parent / "site"
    shutil.rmtree(site)
    toy_fix.install_package(site, version, source)
    importlib.invalidate_caches()
    toy_fix.forget_package()


def test_the_toy_form_applies_and_undoes_on_its_line(toy: runtime.Runtime) -> None:
    original = vars(_answer())["value"]
    assert _answer()().value() == 41 and not toy.is_applied(99)
    assert toy.line().name == "9.9.0"
    assert toy.apply() == [99]
    assert _answer()().value() == 42 and toy.is_applied(99)
    assert toy.apply() == [] and toy.apply([99]) == []  # idempotent: guarded
    assert _answer()().value() == 42
    assert toy.undo() == [99]
    assert vars(_answer())["value"] is original and _answer()().value() == 41
    assert not toy.is_applied(99) and toy.undo() == []


def test_a_diff_only_line_gets_no_runtime_form(toy: runtime.Runtime) -> None:
    _reinstall(toy, "9.10.0")
    assert toy.line().name == "9.10.0"
    assert toy.forms(toy.line()) == () and toy.apply() == []
    with pytest.raises(RuntimePatchError) as info:
        toy.apply([99])
    assert info.value.found is not None and "diff only: the 9.10.0 port" in info.value.found
    assert _answer()().value() == 41


def test_a_version_without_a_line_is_refused_naming_the_lines(toy: runtime.Runtime) -> None:
    _reinstall(toy, "9.8.0")
    with pytest.raises(RuntimePatchError) as info:
        toy.apply()
    assert info.value.expected == "toyexec at one of the supported lines: 9.9.0, 9.10.0"
    assert info.value.found == "toyexec 9.8.0"
    assert not toy.is_applied(99) and toy.undo() == []
    assert _answer()().value() == 41


def test_a_patched_build_is_refused(toy: runtime.Runtime) -> None:
    _reinstall(toy, "9.9.0+armfix.abc")
    with pytest.raises(RuntimePatchError, match="stock executorch releases only") as info:
        toy.apply()
    assert info.value.found == "toyexec 9.9.0+armfix.abc"
    assert info.value.hint is not None and "already carries the fixes" in info.value.hint
    assert _answer()().value() == 41


def test_a_touched_file_is_refused(toy: runtime.Runtime) -> None:
    _reinstall(toy, "9.9.0", toy_fix.PRISTINE.replace("41", "42"))
    with pytest.raises(PristineMismatchError) as info:
        toy.apply()
    assert info.value.repo_path == toy_fix.REPO_PATH
    assert info.value.hint is not None and "refusing to patch twice" in info.value.hint
    assert not toy.is_applied(99)


def test_a_function_replaced_by_someone_else_is_refused(toy: runtime.Runtime) -> None:
    answer = _answer()
    original = answer.value

    def foreign(self: object) -> int:
        return int(original(self))

    answer.value = foreign
    with pytest.raises(RuntimePatchError, match="already replaced") as info:
        toy.apply([99])
    assert info.value.expected == "the 9.9.0 function toyexec.backends.toy.answer.Answer.value"
    assert answer.value is foreign and not toy.is_applied(99)


def test_a_series_folder_as_root_is_its_own_line(toy: runtime.Runtime) -> None:
    assert toy.root is not None
    single = runtime.Runtime(toy.registry, toy.root / "9.9.0")  # as $OVERLAY_PATCHES in a worker
    assert single.apply() == [99] and single.undo() == [99]
    other = runtime.Runtime(toy.registry, toy.root / "9.10.0")
    with pytest.raises(RuntimePatchError) as info:
        other.apply()
    assert info.value.expected == "toyexec at one of the supported lines: 9.10.0"


def test_unknown_and_uncarried_fixes(toy: runtime.Runtime) -> None:
    with pytest.raises(OverlayError) as info:
        toy.fix(7)
    assert (info.value.found, info.value.expected) == ("7", "99")
    assert toy.root is not None
    (toy.root / "9.9.0" / "series").write_text("", encoding="utf-8")
    assert toy.apply() == []
    with pytest.raises(RuntimePatchError, match=r"no runtime form on line 9\.9\.0") as error:
        toy.apply([99])
    assert error.value.found == "fix 99: not in its series"


def test_the_default_runtime_reads_the_default_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lines.PATCHES_ENV, str(ROOT / "patches"))
    assert runtime.DEFAULT.root is None and runtime.DEFAULT.registry is fixes.REGISTRY
    assert runtime.DEFAULT.package_dir() == "executorch"
    assert runtime.FIXES == fixes.FIXES


# --- the real runtime forms, on stock executorch 1.2.0 --------------------------------------


@pytest.fixture
def _clean() -> Iterator[None]:
    runtime.undo()
    yield
    runtime.undo()


def _attribute(number: int) -> tuple[object, ...]:
    found = []
    for form in runtime.fix(number):
        _, owner = form.resolve_owner()
        raw = vars(owner)[form.attribute] if isinstance(owner, type) else None
        found.append(raw if raw is not None else getattr(owner, form.attribute))
    return tuple(found)


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_apply_is_idempotent_and_undo_restores_originals() -> None:
    originals = {f.number: _attribute(f.number) for f in runtime.FIXES}
    assert runtime.apply() == [1, 2, 3, 4, 5, 6]
    patched = {f.number: _attribute(f.number) for f in runtime.FIXES}
    assert all(p is not o for n in originals for p, o in zip(patched[n], originals[n], strict=True))
    assert runtime.apply() == []
    assert {f.number: _attribute(f.number) for f in runtime.FIXES} == patched
    assert runtime.undo() == [1, 2, 3, 4, 5, 6]
    assert all(a is o for n in originals for a, o in zip(_attribute(n), originals[n], strict=True))
    assert not any(runtime.is_applied(f.number) for f in runtime.FIXES)


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_fixes_are_independent() -> None:
    assert runtime.apply([2, 4]) == [2, 4]
    assert [runtime.is_applied(n) for n in (1, 2, 3, 4)] == [False, True, False, True]
    assert runtime.undo([4]) == [4]
    assert [runtime.is_applied(n) for n in (1, 2, 3, 4)] == [False, True, False, False]


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_a_function_replaced_by_someone_else() -> None:
    (fix,) = runtime.fix(2)
    _module, owner = fix.resolve_owner()
    original = getattr(owner, fix.attribute)

    def foreign(*args: object) -> object:
        return original(*args)

    setattr(owner, fix.attribute, foreign)
    try:
        with pytest.raises(RuntimePatchError, match="already replaced"):
            runtime.apply([1, 2])
        # The failing fix does not hide the others' state: fix 1 went in, on its own.
        assert runtime.is_applied(1) and not runtime.is_applied(2)
    finally:
        setattr(owner, fix.attribute, original)


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_an_install_that_carries_the_diffs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = runtime.installed_root()
    fake = tmp_path / "executorch"
    (form,) = runtime.fix(4)
    target = fake / form.repo_path
    target.parent.mkdir(parents=True)
    shutil.copyfile(root / form.repo_path, target)
    with target.open("a", encoding="utf-8") as handle:
        handle.write("\n# patched\n")
    monkeypatch.setattr(runtime.DEFAULT, "installed_root", lambda: fake)
    with pytest.raises(PristineMismatchError) as info:
        runtime.check_target([4])
    assert info.value.repo_path == form.repo_path
    assert info.value.found_sha256 != info.value.expected_sha256
    assert info.value.hint is not None and "refusing to patch twice" in info.value.hint


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda _: "1.2.0+armfix.abc")
    with pytest.raises(RuntimePatchError, match=r"executorch 1\.2\.0\+armfix"):
        runtime.apply()
    assert not runtime.is_applied(1)


@pytest.mark.torch
def test_unknown_fix_number() -> None:
    with pytest.raises(OverlayError) as info:
        runtime.fix(7)
    assert (info.value.found, info.value.expected) == ("7", "1, 2, 3, 4, 5, 6")


@pytest.mark.torch
def test_every_fix_of_the_installed_line_has_its_runtime_form() -> None:
    line = runtime.DEFAULT.line()
    carried = fixes.carried_by(line)
    assert [f.number for f in carried] == [1, 2, 3, 4, 5, 6]
    for entry in carried:
        items = runtime.fix(entry.number)
        assert tuple(item.form for item in items) == entry.runtime_forms(line.name)
        assert len(items) == (2 if entry.number == 6 else 1)
        for item in items:
            _, owner = item.resolve_owner()
            assert hasattr(owner, item.attribute)
