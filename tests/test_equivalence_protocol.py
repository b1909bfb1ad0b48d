"""The worker protocol: every message round-trips; a malformed one is a ProtocolError."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from equivalence_samples import CASE, ITEM, ethos, lowered, measured, ok, vgf

from overlay.equivalence import protocol
from overlay.equivalence.protocol import (
    PATHS,
    ErrorInfo,
    ErrorReply,
    ExactCheck,
    InitReply,
    InitRequest,
    ListReply,
    ListRequest,
    Numerics,
    PathId,
    ProtocolError,
    QuitRequest,
    RunReply,
    RunRequest,
    Stage,
)
from overlay.items import ProbeInfo

MESSAGES: list[protocol.Request | protocol.Reply] = [
    InitRequest(runtime_patch="x.py:apply", models=None),
    ListRequest(),
    RunRequest(ITEM, fixes=(1, 3), keep_bytes=True),
    QuitRequest(),
    InitReply("/py", "1.2.0", "2.11.0", 3.5, (1, 2)),
    ListReply((CASE,), (ProbeInfo("p", "d"),)),
    RunReply(ITEM, ok(value={"k": [1, None, "s"]})),
    RunReply(ITEM, ok(numerics=Numerics((), (None,), (float("inf"),), (0.0,)))),
    ErrorReply(ErrorInfo("ValueError", "bad", Stage.INIT, "tb")),
    ErrorReply(ErrorInfo("InputError", "no CASES", Stage.INPUT)),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: protocol.Request | protocol.Reply) -> None:
    line = protocol.encode(message)
    assert "\n" not in line
    decoded = (
        protocol.decode_request(line)
        if isinstance(message, InitRequest | ListRequest | RunRequest | QuitRequest)
        else protocol.decode_reply(line)
    )
    assert decoded == message
    assert type(decoded) is type(message)


def _envelope(kind: str, body: object, schema: int = protocol.SCHEMA_VERSION) -> str:
    return json.dumps({"schema": schema, "type": kind, "body": body})


@pytest.mark.parametrize(
    ("line", "where"),
    [
        (_envelope("run", {"item": {"kind": "case", "name": "x"}, "extra": 1}), "body"),
        (_envelope("run", {"item": {"kind": "model", "name": "x"}}), "body.item.kind"),
        (_envelope("run", {"item": {"kind": "case"}}), "body.item.name"),
        (_envelope("run", {"item": {"kind": "case", "name": 3}}), "body.item.name"),
        (
            _envelope("run", {"item": {"kind": "case", "name": "x"}, "fixes": ["1"]}),
            "body.fixes[0]",
        ),
        (_envelope("teleport", {}), "type"),
        ("{not json", "line"),
        (json.dumps({"type": "list", "body": {}}), "envelope"),
    ],
)
def test_malformed_messages_are_protocol_errors(line: str, where: str) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_request(line)
    assert info.value.message == f"malformed protocol message at {where}"


def test_another_schema_is_refused() -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.decode_request(_envelope("list", {}, schema=99))
    assert info.value.found == "schema 99"


def test_a_reply_is_not_a_request() -> None:
    with pytest.raises(ProtocolError):
        protocol.decode_request(protocol.encode(ErrorReply(ErrorInfo("E", "m", Stage.INIT))))


def test_new_results_round_trip_the_protocol() -> None:
    deep = measured(error=0.106, sqnr=27.0)
    result = lowered(deep, vgf=vgf(deep), ethos_u=(ethos("ethos-u85-256"),))
    inf = lowered(measured(0.0, math.inf))
    exact = ExactCheck(steps=(1, None), differing=(7, 4), first="features.5: conv2d (q_10)")
    checked = lowered(dataclasses.replace(deep, exact=exact))
    unruled = dataclasses.replace(inf, exact_reason="no exact rule for aten.grid_sampler.default")
    for message in (RunReply(ITEM, r) for r in (result, inf, checked, unruled)):
        assert protocol.decode_reply(protocol.encode(message)) == message
    assert protocol.SCHEMA_VERSION == 4


def test_the_paths_come_in_table_order() -> None:
    assert PATHS == (PathId.STOCK, PathId.RUNTIME, PathId.PATCHED)
    assert [p.label for p in PATHS] == ["stock", "stock + runtime patch", "diff-patched build"]
