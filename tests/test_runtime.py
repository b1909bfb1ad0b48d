"""overlay.runtime: line choice, guards, idempotence, undo, refusals.

The machinery runs on a toy fix (tests/toy_fixes) and a fake installed package (no torch);
the real runtime forms run on the installed stock executorch, at one of the release lines
(marked torch): the fixes and forms expected are that line's (its series, the fix modules).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import toy_fix

from overlay import fixes, lines, runtime
from overlay.errors import OverlayError, PristineMismatchError, RuntimePatchError
from overlay.lines.listing import read_series_names

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
    assert toy_fix.REPO_PATH in info.value.message
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


def test_a_form_stands_in_for_another_patchs_function_for_a_while(toy: runtime.Runtime) -> None:
    originals = toy.originals()  # before anybody's patch: stock's functions
    answer = _answer()
    (form,) = originals[99]
    assert form[1] is vars(answer)["value"]

    def foreign(self: object) -> int:
        return 7

    answer.value = foreign  # another runtime patch's form of the same function
    with runtime.swapped(originals[99]):
        assert answer().value() == 42  # the line's form, built on stock's, not on foreign
    assert answer.value is foreign and answer().value() == 7
    _reinstall(toy, "9.10.0")  # a diff-only line: nothing to stand in
    assert toy.originals() == {}


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


# --- the real runtime forms, on the installed stock executorch's line ----------------------


@pytest.fixture
def _clean() -> Iterator[None]:
    runtime.undo()
    yield
    runtime.undo()


def _line() -> lines.Line:
    """Return the release line of the installed stock executorch (from the checkout's data)."""
    return lines.line_for_version(ROOT / "patches", importlib.metadata.version("executorch"))


def _with_forms(line: lines.Line) -> list[int]:
    """Return the line's fixes that have a runtime form there, in series order."""
    return [f.number for f in fixes.carried_by(line) if f.runtime_forms(line.name)]


def _single_form(line: lines.Line) -> list[int]:
    """Return the line's fixes that replace exactly one function there."""
    return [n for n in _with_forms(line) if len(fixes.by_number(n).runtime_forms(line.name)) == 1]


def _attribute(number: int) -> tuple[object, ...]:
    """Return what fix ``number``'s forms replace now (a dict as a copy of its entries)."""
    found = []
    for item in runtime.DEFAULT.fix(number):
        _, owner = item.resolve_owner()
        raw = vars(owner)[item.form.attribute] if isinstance(owner, type) else None
        value = raw if raw is not None else getattr(owner, item.form.attribute)
        found.append(dict(value) if isinstance(value, dict) else value)
    return tuple(found)


def _same(now: object, then: object) -> bool:
    """A function is the same object; a dict (updated in place) holds the same entries."""
    return now == then if isinstance(now, dict) else now is then


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_apply_is_idempotent_and_undo_restores_originals() -> None:
    numbers = _with_forms(_line())
    assert numbers
    originals = {n: _attribute(n) for n in numbers}
    assert runtime.apply() == numbers
    patched = {n: _attribute(n) for n in numbers}
    assert not any(
        _same(p, o) for n in originals for p, o in zip(patched[n], originals[n], strict=True)
    )
    assert all(runtime.is_applied(n) for n in numbers)
    assert runtime.apply() == []
    assert {n: _attribute(n) for n in numbers} == patched
    assert runtime.undo() == numbers
    assert all(
        _same(a, o) for n in originals for a, o in zip(_attribute(n), originals[n], strict=True)
    )
    assert not any(runtime.is_applied(f.number) for f in runtime.FIXES)


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_fixes_are_independent() -> None:
    numbers = _with_forms(_line())
    assert len(numbers) >= 2, "independence needs two fixes with runtime forms"
    chosen = numbers[1::2]  # every other one: 2, 4, 6 on 1.2.0; 3 on 1.5.1
    assert runtime.apply(chosen) == chosen
    assert [runtime.is_applied(n) for n in numbers] == [n in chosen for n in numbers]
    assert runtime.undo([chosen[-1]]) == [chosen[-1]]
    assert [runtime.is_applied(n) for n in numbers] == [n in chosen[:-1] for n in numbers]


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_a_function_replaced_by_someone_else() -> None:
    first, replaced = _single_form(_line())[:2]
    (fix,) = runtime.DEFAULT.fix(replaced)
    _module, owner = fix.resolve_owner()
    original = getattr(owner, fix.form.attribute)

    def foreign(*args: object) -> object:
        return original(*args)

    setattr(owner, fix.form.attribute, foreign)
    try:
        with pytest.raises(RuntimePatchError, match="already replaced"):
            runtime.apply([first, replaced])
        # The failing fix does not hide the others' state: the first went in, on its own.
        assert runtime.is_applied(first) and not runtime.is_applied(replaced)
    finally:
        setattr(owner, fix.form.attribute, original)


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_an_install_that_carries_the_diffs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    number = _single_form(_line())[-1]
    root = runtime.DEFAULT.installed_root()
    fake = tmp_path / "executorch"
    (item,) = runtime.DEFAULT.fix(number)
    form = item.form
    target = fake / form.repo_path
    target.parent.mkdir(parents=True)
    shutil.copyfile(root / form.repo_path, target)
    with target.open("a", encoding="utf-8") as handle:
        handle.write("\n# patched\n")
    monkeypatch.setattr(runtime.DEFAULT, "installed_root", lambda: fake)
    with pytest.raises(PristineMismatchError) as info:
        runtime.DEFAULT.apply([number])  # checked before anything is applied
    assert form.repo_path in info.value.message
    assert info.value.found != info.value.expected
    assert info.value.hint is not None and "refusing to patch twice" in info.value.hint


@pytest.mark.torch
@pytest.mark.usefixtures("_clean")
def test_refuses_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    line = _line()
    first = _with_forms(line)[0]
    patched = f"{line.name}+armfix.abc"
    monkeypatch.setattr(importlib.metadata, "version", lambda _: patched)
    with pytest.raises(RuntimePatchError, match=re.escape(f"executorch {patched}")):
        runtime.apply()
    assert not runtime.is_applied(first)


@pytest.mark.torch
def test_unknown_fix_number() -> None:
    _line()  # an executorch at a line is installed
    known = [f.number for f in runtime.FIXES]
    with pytest.raises(OverlayError) as info:
        runtime.DEFAULT.fix(max(known) + 1)
    assert (info.value.found, info.value.expected) == (
        str(max(known) + 1),
        ", ".join(map(str, known)),
    )


@pytest.mark.torch
def test_a_fix_the_line_does_not_carry_has_no_runtime_form() -> None:
    line = _line()
    carried = {f.number for f in fixes.carried_by(line)}
    dropped = [f.number for f in runtime.FIXES if f.number not in carried]
    if not dropped:
        pytest.skip(f"line {line.name} carries every fix")
    with pytest.raises(RuntimePatchError, match=f"no runtime form on line {re.escape(line.name)}"):
        runtime.DEFAULT.fix(dropped[0])
    with pytest.raises(RuntimePatchError) as info:
        runtime.apply(dropped[:1])
    assert info.value.found == f"fix {dropped[0]}: not in its series"
    assert not runtime.is_applied(dropped[0])


@pytest.mark.torch
def test_every_fix_of_the_installed_line_has_its_runtime_form() -> None:
    line = _line()
    assert runtime.DEFAULT.line().name == line.name
    carried = fixes.carried_by(line)
    listed = [int(name[:4]) for name in read_series_names(line.directory)]
    assert [f.number for f in carried] == listed and listed
    for entry in carried:
        forms = entry.runtime_forms(line.name)
        if not forms:  # diff only on this line, with its reason
            with pytest.raises(RuntimePatchError, match="has no runtime form"):
                runtime.DEFAULT.fix(entry.number)
            continue
        items = runtime.DEFAULT.fix(entry.number)
        assert tuple(item.form for item in items) == forms
        for item in items:
            _, owner = item.resolve_owner()
            assert hasattr(owner, item.form.attribute)
