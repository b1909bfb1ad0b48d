"""The result cache: typed atomic entries, a bad one is a miss, keys change with each input."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

from equivalence_samples import A, B, C

from overlay.equivalence.controller import result_cache
from overlay.equivalence.controller.result_cache import Keys, ResultCache, RunCache
from overlay.equivalence.protocol import (
    ErrorInfo,
    InitReply,
    ItemResult,
    ListReply,
    RunStatus,
    Stage,
)
from overlay.items import CaseInfo, ProbeInfo


def test_a_cache_entry_is_typed_atomic_and_a_bad_one_is_a_miss(tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    result = ItemResult(RunStatus.FAIL, error=ErrorInfo("ValueError", "m", Stage.LOWER))
    digest = result_cache.key("x")
    store.put(digest, result)
    assert store.get(digest, ItemResult) == result
    assert store.get(digest, InitReply) is None  # another type under that key: a miss
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [p.name for p in files] == [f"{digest}.json"]  # no temporary file left
    entry = json.loads(files[0].read_text(encoding="utf-8"))
    assert (entry["cache"], entry["type"], entry["key"]) == (
        result_cache.CACHE_SCHEMA,
        "ItemResult",
        digest,
    )
    entry["value"]["unknown_field"] = 1  # written by another version of the result type
    files[0].write_text(json.dumps(entry), encoding="utf-8")
    assert store.get(digest, ItemResult) is None
    files[0].write_text("{torn", encoding="utf-8")
    assert store.get(digest, ItemResult) is None
    store.put(digest, result)  # a miss is rewritten
    assert store.get(digest, ItemResult) == result
    assert ResultCache(tmp_path, read=False).get(digest, ItemResult) is None


def test_concurrent_writers_of_one_key_leave_a_whole_entry(tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    results = [ItemResult(RunStatus.OK, graph=(f"cpu: op{i}",) * 200) for i in range(8)]
    digest = result_cache.key("shared")

    def write(result: ItemResult) -> None:
        for _ in range(20):
            store.put(digest, result)
            assert store.get(digest, ItemResult) in results

    threads = [threading.Thread(target=write, args=(r,)) for r in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get(digest, ItemResult) in results
    assert len(list(tmp_path.rglob("*.tmp"))) == 0


def test_keys_change_with_each_input_and_not_with_paths() -> None:
    keys = Keys("base", {A: "ea", B: "eb", C: "ec"}, "m1", "corpus")
    case = CaseInfo("x", "TOSA-1.0+INT", "a8w8")
    user = CaseInfo("u", "TOSA-1.0+INT", "a8w8", source="models.py")
    first = keys.result(A, case)
    assert first == Keys("base", {A: "ea", B: "x", C: "y"}, "m2", "corpus").result(A, case)
    assert len({
        first,
        keys.result(B, case),
        keys.result(A, case, (1,)),
        keys.result(A, case, (), True),
        keys.result(A, dataclasses.replace(case, tolerance=0.1)),
        Keys("base", {A: "ea2"}, None, "corpus").result(A, case),
        Keys("base", {A: "ea"}, None, "corpus2").result(A, case),
    }) == 7  # fmt: skip
    assert keys.result(A, user) != dataclasses.replace(keys, models="m2").result(A, user)
    assert keys.result(A, user) == dataclasses.replace(keys, corpus="c2").result(A, user)
    probe = ProbeInfo("p", "d")
    assert keys.result(A, probe) != dataclasses.replace(keys, corpus="c2").result(A, probe)


def test_a_runs_view_never_caches_harness_failures(tmp_path: Path) -> None:
    keys = Keys("base", {A: "ea", B: "eb", C: "ec"}, None, "corpus")
    view = RunCache(ResultCache(tmp_path), keys, keep_bytes=False)
    case = CaseInfo("x", "TOSA-1.0+INT", "a8w8")
    stuck = ItemResult(RunStatus.FAIL, error=ErrorInfo("WorkerTimeout", "late", Stage.HARNESS))
    view.put_result(A, case, (), stuck)
    assert view.result(A, case) is None
    done = ItemResult(RunStatus.OK, graph=("cpu: add",))
    view.put_result(A, case, (1,), done)
    assert view.result(A, case, (1,)) == done and view.result(A, case) is None
    assert dataclasses.replace(view, keep_bytes=True).result(A, case, (1,)) is None
    init = InitReply("/py", "1.2.0", "2.11.0", 1.0, ())
    view.put_init(B, init)
    assert (view.init(B), view.init(C)) == (init, None)
    listing = ListReply((case,), ())
    view.put_listing(listing)
    assert view.listing() == listing
    nothing = RunCache(ResultCache(None), keys)
    nothing.put_result(A, case, (), done)
    assert (nothing.result(A, case), nothing.init(B), nothing.listing()) == (None, None, None)
