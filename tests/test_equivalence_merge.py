"""Shard reports merged give the verdicts of one run; shards of different runs are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from equivalence_samples import C, decided, scripted_options

from overlay import cli, render
from overlay.equivalence.controller import outcome
from overlay.equivalence.controller.options import CALLER_DIR_ENV, Shard
from overlay.equivalence.controller.orchestrator import run
from overlay.equivalence.controller.outcome import merge
from overlay.equivalence.controller.result_cache import Keys
from overlay.errors import EquivalenceError, EquivalenceInputError


def test_two_shards_merged_give_the_verdicts_of_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = scripted_options(tmp_path, monkeypatch)
    whole = run(dataclasses.replace(fake, probes=True, cache_dir=None))
    parts = []
    for index in (1, 2):
        shard = Shard(index, 2)
        options = dataclasses.replace(
            fake, probes=True, shard=shard, cache_dir=None, out_dir=tmp_path / f"shard-{index}"
        )
        part = run(options)
        assert part.verdicts and len(part.verdicts) < len(whole.verdicts)
        assert all(shard.owns(v.item) for v in part.verdicts)
        (options.out_dir / "equivalence.json").write_text(
            render.json_text(outcome.to_document(part)), encoding="utf-8"
        )
        parts.append(options.out_dir / "equivalence.json")
    monkeypatch.setenv(CALLER_DIR_ENV, str(tmp_path))
    code = cli.main(["merge-reports", "shard-1/equivalence.json", "shard-2/equivalence.json"])
    merged = outcome.load(tmp_path / "reports" / "equivalence.json")
    assert decided(merged) == decided(whole)
    assert [v.item for v in merged.verdicts] == [v.item for v in whole.verdicts]  # same order
    assert merged.failures == whole.failures != []  # probe:where differs: (c) has another path
    assert code == EquivalenceError.exit_code
    assert (tmp_path / "reports" / "equivalence.html").is_file()

    half = merge([outcome.load(parts[0])])
    assert half.failures[-1].endswith("(shards missing: 2/2)")
    with pytest.raises(EquivalenceInputError, match="shard numbers do not fit"):
        merge([outcome.load(parts[0]), outcome.load(parts[0])])
    other = dataclasses.replace(outcome.load(parts[1]), keys=dataclasses.replace(
        outcome.load(parts[1]).keys or Keys("", {}, None, ""), paths={C: "other"}
    ))  # fmt: skip
    with pytest.raises(EquivalenceInputError, match="different inputs") as info:
        merge([outcome.load(parts[0]), other])
    assert info.value.found == "path (a) stock ran another environment or runtime patch"
    whole_run = dataclasses.replace(outcome.load(parts[0]), shards=())
    with pytest.raises(EquivalenceInputError, match="a report is not a shard"):
        merge([whole_run])
    with pytest.raises(EquivalenceInputError, match="no reports"):
        merge([])
