"""The mutation list stays in step with the code: each original text occurs exactly once."""

from __future__ import annotations

import pytest

import mutants


@pytest.mark.parametrize(("name", "module", "old", "new"), mutants.MUTATIONS)
def test_each_mutation_still_applies(name: str, module: str, old: str, new: str) -> None:
    text = (mutants.ROOT / module).read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{name}: update tests/mutants.py for {module}"
    assert old != new
