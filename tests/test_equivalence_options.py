"""Options: shards stable on every machine, and the choices a report records, written once."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from overlay.equivalence.controller.options import Options, RunChoices, Shard
from overlay.errors import EquivalenceInputError
from overlay.items import ItemId, ItemKind


def test_shards_partition_every_item_stably() -> None:
    items = [ItemId(ItemKind.CASE, f"case{i}") for i in range(200)]
    owners = [[k for k in range(1, 4) if Shard(k, 3).owns(item)] for item in items]
    assert all(len(o) == 1 for o in owners)
    assert min(Counter(o[0] for o in owners).values()) > 40  # spread, not all in one
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    for bad in ("0/2", "3/2", "2", "a/b", "1/0"):
        with pytest.raises(EquivalenceInputError, match="is not K/N"):
            Shard.parse(bad)


def test_the_shard_assignment_is_pinned() -> None:
    # Part of the CI contract (a cache folder per shard): it must not move between versions.
    def owner(name: str, count: int) -> int:
        item = ItemId(ItemKind.CASE, name)
        return next(k for k in range(1, count + 1) if Shard(k, count).owns(item))

    names = ("ok", "after", "fixed2", "regress1", "changed3", "conv_relu_int8")
    assert [owner(n, 3) for n in names] == [2, 1, 2, 1, 3, 3]
    assert [owner(n, 2) for n in names[:5]] == [2, 1, 2, 1, 1]


def test_the_recorded_choices_are_the_options_without_this_machine(tmp_path: Path) -> None:
    options = Options("s", "p", fast=True, only=("a",), out_dir=tmp_path, jobs=3)
    recorded = options.recorded()
    assert type(recorded) is RunChoices
    assert dataclasses.asdict(recorded) == {
        f.name: getattr(options, f.name) for f in dataclasses.fields(RunChoices)
    }
    local = {f.name for f in dataclasses.fields(Options)} - {
        f.name for f in dataclasses.fields(RunChoices)
    }
    assert local == {"out_dir", "timeout", "patches_dir", "pythonpath", "worker_command",
                     "cache_dir", "use_cache", "jobs"}  # fmt: skip
    assert (
        options.builtin_worker
        and not dataclasses.replace(options, worker_command=("fake.py",)).builtin_worker
    )
