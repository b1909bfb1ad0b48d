"""overlay.runtime in-process (torch): guards, idempotence, undo, refusals."""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from overlay import runtime
from overlay.errors import OverlayError, PristineMismatchError, RuntimePatchError

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _clean() -> object:
    runtime.undo()
    yield
    runtime.undo()


def _attribute(number: int) -> object:
    fix = runtime.fix(number)
    _, owner = fix.resolve_owner()
    return vars(owner)[fix.attribute] if isinstance(owner, type) else getattr(owner, fix.attribute)


def test_apply_is_idempotent_and_undo_restores_originals() -> None:
    originals = {f.number: _attribute(f.number) for f in runtime.FIXES}
    assert runtime.apply() == [1, 2, 3, 4]
    patched = {f.number: _attribute(f.number) for f in runtime.FIXES}
    assert all(patched[n] is not originals[n] for n in originals)
    assert runtime.apply() == []
    assert {f.number: _attribute(f.number) for f in runtime.FIXES} == patched
    assert runtime.undo() == [1, 2, 3, 4]
    assert all(_attribute(n) is originals[n] for n in originals)
    assert not any(runtime.is_applied(f.number) for f in runtime.FIXES)


def test_fixes_are_independent() -> None:
    assert runtime.apply([2, 4]) == [2, 4]
    assert [runtime.is_applied(n) for n in (1, 2, 3, 4)] == [False, True, False, True]
    assert runtime.undo([4]) == [4]
    assert [runtime.is_applied(n) for n in (1, 2, 3, 4)] == [False, True, False, False]


def test_refuses_a_function_replaced_by_someone_else() -> None:
    fix = runtime.fix(2)
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


def test_refuses_an_install_that_carries_the_diffs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = runtime.installed_root()
    fake = tmp_path / "executorch"
    target = fake / runtime.fix(4).repo_path
    target.parent.mkdir(parents=True)
    shutil.copyfile(root / runtime.fix(4).repo_path, target)
    with target.open("a", encoding="utf-8") as handle:
        handle.write("\n# patched\n")
    monkeypatch.setattr(runtime, "installed_root", lambda: fake)
    with pytest.raises(PristineMismatchError) as info:
        runtime.check_target([4])
    assert info.value.repo_path == runtime.fix(4).repo_path
    assert info.value.found_sha256 != info.value.expected_sha256
    assert info.value.hint is not None and "refusing to patch twice" in info.value.hint


def test_refuses_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda _: "1.2.0+armfix.abc")
    with pytest.raises(RuntimePatchError, match=r"executorch 1\.2\.0\+armfix"):
        runtime.apply()
    assert not runtime.is_applied(1)


def test_unknown_fix_number() -> None:
    with pytest.raises(OverlayError) as info:
        runtime.fix(7)
    assert (info.value.found, info.value.expected) == ("7", "1, 2, 3, 4")


def test_every_registry_fix_has_a_runtime_builder() -> None:
    from overlay import fixes

    assert [f.number for f in runtime.FIXES] == [f.number for f in fixes.FIXES]
    for item in runtime.FIXES:
        assert item.build.__name__ == item.fix.runtime.builder
        _, owner = item.resolve_owner()
        assert hasattr(owner, item.attribute)
