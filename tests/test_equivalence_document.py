"""equivalence.json: a typed document, valid against its derived schema, read back."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from equivalence_samples import (
    decided,
    fail,
    judge,
    long_report,
    ok,
    report_of,
    scripted_options,
)

from overlay import render
from overlay.cli import main
from overlay.equivalence.controller import outcome
from overlay.equivalence.controller.options import RunChoices
from overlay.equivalence.controller.orchestrator import run
from overlay.errors import EquivalenceInputError
from overlay.items import ItemId, ItemKind


def test_json_report_is_valid_against_the_derived_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    derived = outcome.schema()
    data = json.loads(render.json_text(outcome.to_document(long_report(tmp_path, monkeypatch))))
    jsonschema.Draft202012Validator(derived).validate(data)
    assert (data["schema"], data["tool"]["name"], data["verdict"]) == (
        outcome.REPORT_SCHEMA,
        "executorch-arm-overlay",
        "pass",
    )
    assert data["report"]["created"].endswith("+00:00")
    for path, change in (
        (("verdict",), "maybe"),
        (("report", "verdicts", 0, "results", "c", "status"), "fine"),
        (("report", "verdicts", 0, "results", "c", "unknown"), 1),
        (("report", "verdicts", 0, "results", "d"), {}),  # no such path
        (("summary", "items"), "2"),
        (("report", "options", "shard"), "1/2"),
        (("schema",), 3),
    ):
        broken: Any = json.loads(json.dumps(data))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = change
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, derived)


def test_report_schema_prints_the_derived_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report-schema"]) == 0
    assert json.loads(capsys.readouterr().out) == outcome.schema()


def test_the_schema_is_derived_from_the_document_type() -> None:
    derived = outcome.schema()
    assert derived["title"] == "equivalence.json"
    assert derived["properties"]["schema"] == {"const": outcome.REPORT_SCHEMA}  # type: ignore[index,call-overload]
    defs = derived["$defs"]
    assert isinstance(defs, dict)
    assert {"ItemResult", "Report", "Verdict", "RunChoices", "Shard", "Keys", "Finding"} <= set(
        defs
    )
    choices = defs["RunChoices"]
    assert isinstance(choices, dict) and isinstance(choices["properties"], dict)
    assert set(choices["properties"]) == {
        f.name for f in dataclasses.fields(RunChoices)
    }  # the options' fields, written once


def test_json_round_trips_into_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(scripted_options(tmp_path, monkeypatch))
    path = tmp_path / "r.json"
    path.write_text(render.json_text(outcome.to_document(result)), encoding="utf-8")
    loaded = outcome.load(path)
    assert decided(loaded) == decided(result)
    assert loaded.keys == result.keys and loaded.stats == result.stats
    assert loaded.options == result.options and loaded.workers == result.workers
    path.write_text(json.dumps({"schema": 3}), encoding="utf-8")
    with pytest.raises(EquivalenceInputError, match="not an equivalence report of schema 7"):
        outcome.load(path)
    data = json.loads(render.json_text(outcome.to_document(result)))
    del data["report"]["verdicts"][0]["results"]["a"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EquivalenceInputError, match="does not hold a valid equivalence report"):
        outcome.load(path)
    path.write_text("{torn", encoding="utf-8")
    with pytest.raises(EquivalenceInputError, match="cannot read the report"):
        outcome.load(path)


def test_json_carries_the_verdict_failures_and_every_result() -> None:
    regression = judge(
        ok(), fail("TosaValueError", "no float"), fail("TosaValueError", "no float"), 1
    )
    bad = dataclasses.replace(judge(ok(), ok(), ok(graph=())), item=ItemId(ItemKind.CASE, "bad"))
    rendered = report_of([regression, bad])
    data = json.loads(render.json_text(outcome.to_document(rendered)))
    assert (data["schema"], data["verdict"]) == (outcome.REPORT_SCHEMA, "fail")
    assert data["failures"] == rendered.failures
    first = data["report"]["verdicts"][0]
    assert (first["item"], first["ab"], first["fix"]) == (
        {"kind": "case", "name": "x"},
        "regression",
        1,
    )
    assert first["ab_diffs"] == ["status", "graph", "tosa payload", "numerics"]
    assert first["results"]["b"]["error"]["type"] == "TosaValueError"
    assert data["summary"]["a_vs_b"] == {
        "same": 1, "fixed": 0, "regression": 1, "changed": 0, "still broken": 0, "unchecked": 0
    }  # fmt: skip
    assert json.loads(render.json_text(outcome.to_document(report_of([judge(ok(), ok(), ok())]))))[
        "verdict"
    ] == ("pass")
