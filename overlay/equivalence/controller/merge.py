"""Shard reports of one run joined into one report, refusing shards of different runs.

A missing shard is not refused here: it fails the merged report (its items have no result).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from overlay.equivalence.controller.outcome import Report
from overlay.equivalence.controller.result_cache import Keys
from overlay.equivalence.controller.scheduler import PathStats
from overlay.equivalence.protocol import PATHS
from overlay.equivalence.verdict import Verdict
from overlay.errors import EquivalenceInputError
from overlay.items import ItemId


def _refuse(what: str, expected: str, found: str) -> EquivalenceInputError:
    return EquivalenceInputError(
        f"cannot merge these reports: {what}",
        expected=expected,
        found=found,
        hint="merge the equivalence.json of every shard of one run (same --shard N, same"
        " inputs, same overlay version)",
    )


def merge(reports: Sequence[Report]) -> Report:
    """Join shard reports of one run into one report (refusing shards of different runs)."""
    if not reports:
        raise _refuse("no reports", "one equivalence.json per shard", "none")
    first = reports[0]
    for report in reports:
        if not report.shards:
            raise _refuse("a report is not a shard", "reports made with --shard K/N", "a whole run")
        if report.keys != first.keys:
            raise _refuse(
                "the shards ran different inputs",
                "the same environments, runtime patch, models and overlay sources",
                _key_difference(first.keys, report.keys),
            )
        if report.selection != first.selection:
            raise _refuse(
                "the shards selected different items",
                "the same options (--fast, --case, --models) on every shard",
                f"{len(first.selection)} vs {len(report.selection)} selected items",
            )
    shards = sorted(s for r in reports for s in r.shards)
    repeated = [str(s) for s, n in Counter(shards).items() if n > 1]
    if len({s.count for s in shards}) != 1 or repeated:
        raise _refuse(
            "shard numbers do not fit together",
            "K/N with one N and every K once",
            ", ".join(str(s) for s in shards),
        )
    by_item: dict[ItemId, Verdict] = {}
    for report in reports:
        for verdict in report.verdicts:
            by_item[verdict.item] = verdict
    order = {item: index for index, item in enumerate(first.selection)}
    stats = {
        p: PathStats(
            **{
                f.name: sum(getattr(r.stats.get(p, PathStats()), f.name) for r in reports)
                for f in dataclasses.fields(PathStats)
            }
        )
        for p in PATHS
    }
    return dataclasses.replace(
        first,
        options=dataclasses.replace(first.options, shard=None),
        verdicts=tuple(sorted(by_item.values(), key=lambda v: order.get(v.item, len(order)))),
        wall_seconds=max(r.wall_seconds for r in reports),
        phase_seconds={f"shard {s}": r.wall_seconds for r in reports for s in r.shards},
        stats=stats,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        shards=tuple(shards),
        merged=True,
    )


def _key_difference(a: Keys | None, b: Keys | None) -> str:
    if a is None or b is None:
        return "a report without cache keys"
    if a.base != b.base:
        return "another overlay version or sources (or pins.toml)"
    for path in PATHS:
        if a.paths.get(path) != b.paths.get(path):
            return f"path ({path.value}) {path.label} ran another environment or runtime patch"
    return "another models file"
