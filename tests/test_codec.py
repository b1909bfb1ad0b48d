"""The typed codec: dataclasses <-> JSON, strict decoding that names where, derived schemas."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import pytest

from overlay import codec
from overlay.codec import CodecError, JsonValue
from overlay.errors import OverlayError


class Colour(enum.Enum):
    """A colour by name."""

    RED = "red"
    BLUE = "blue"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Inner:
    """An inner record.

    Only the first docstring line is the schema description.
    """

    name: str
    size: int = 0


@dataclasses.dataclass(frozen=True)
class Outer:
    """An outer record holding every kind of field."""

    colour: Colour
    inners: tuple[Inner, ...]
    table: dict[str, float]
    note: str | None
    mode: Literal["fast", "slow"]
    payload: JsonValue = None
    level: Level = Level.LOW
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)


@dataclasses.dataclass(frozen=True)
class Node:
    """A tree node (a recursive type)."""

    label: str
    children: tuple[Node, ...] = ()


@dataclasses.dataclass(frozen=True)
class Flags:
    """Exact scalar types."""

    flag: bool
    count: int
    ratio: float
    text: str
    one: Literal["only"] = "only"


@dataclasses.dataclass(frozen=True)
class Choice:
    """A union that is not Optional: int first, then str."""

    value: int | str


@dataclasses.dataclass
class Undocumented:
    x: int


@dataclasses.dataclass(frozen=True)
class Counted:
    """A record with a field computed at construction (not part of its input)."""

    name: str
    count: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass(frozen=True)
class Zed:
    """Z."""

    a: int


@dataclasses.dataclass(frozen=True)
class Holder:
    """Holds a Zed, an Inner and a tree."""

    z: Zed
    i: Inner
    tree: Node | None = None


OUTER = Outer(
    colour=Colour.BLUE,
    inners=(Inner("a", 1), Inner("b")),
    table={"x": 1.5},
    note=None,
    mode="slow",
    payload={"k": [1, "two", None, True]},
    level=Level.HIGH,
    tags=("t",),
)
OUTER_JSON: dict[str, JsonValue] = {
    "colour": "blue",
    "inners": [{"name": "a", "size": 1}, {"name": "b", "size": 0}],
    "table": {"x": 1.5},
    "note": None,
    "mode": "slow",
    "payload": {"k": [1, "two", None, True]},
    "level": 2,
    "tags": ["t"],
}


def decode(hint: Any, data: object, where: str = "body") -> Any:
    """Decode into any hint (unions and aliases are not ``type[T]`` to mypy)."""
    return codec.decode(hint, data, where)


def error(cls: Any, data: object, where: str = "body") -> CodecError:
    with pytest.raises(CodecError) as info:
        codec.decode(cls, data, where)
    return info.value


# --- encode, dumps, is_json -----------------------------------------------------------------


def test_encode_gives_plain_json_for_every_kind_of_field() -> None:
    assert codec.encode(OUTER) == OUTER_JSON
    assert codec.encode(Colour.RED) == "red"
    assert codec.encode(Level.LOW) == 1
    assert codec.encode((1, [2, (3,)])) == [1, [2, [3]]]
    assert codec.encode({Colour.BLUE: Colour.RED, "b": (None,)}) == {"blue": "red", "b": [None]}
    assert codec.encode((Path("a/b"), PurePosixPath("/c"))) == ["a/b", "/c"]
    for scalar in (None, True, 0, 2.5, "s"):
        assert codec.encode(scalar) == scalar


def test_encode_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(TypeError, match=r"^the codec cannot encode set$"):
        codec.encode({1, 2})
    with pytest.raises(TypeError, match=r"^the codec cannot encode type$"):
        codec.encode(Inner)  # a dataclass type, not an instance
    with pytest.raises(codec.CodecError, match="a dict key") as refused:
        codec.encode({"n": {1: "one"}})  # written as {"1": ...}, a dict[int, str] reads no "1"
    assert refused.value.found == "1"
    assert refused.value.where == "a dict key"
    assert refused.value.expected == "a str or an enum member with a str value"
    with pytest.raises(codec.CodecError, match="a dict key"):
        codec.encode({Level.LOW: "low"})  # an enum whose value is an int: the same


def test_dumps_sorts_keys_and_indents_on_request() -> None:
    assert codec.dumps(Inner("n", 2)) == '{"name": "n", "size": 2}'
    assert codec.dumps({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert codec.dumps({"b": 1, "a": [3]}, indent=1) == '{\n "a": [\n  3\n ],\n "b": 1\n}'
    assert codec.dumps(math.nan) == "NaN"  # allow_nan: a NaN measurement is still written


def test_dumps_then_loads_is_the_identity() -> None:
    assert codec.loads(Outer, codec.dumps(OUTER)) == OUTER
    assert codec.loads(Outer, codec.dumps(OUTER, indent=2)) == OUTER


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (None, True),
        (False, True),
        (3, True),
        (0.5, True),
        ("s", True),
        ([], True),
        ([1, ["x", {"k": None}]], True),
        ({}, True),
        ({"a": {"b": [1.0]}}, True),
        ((1,), False),
        ([1, (2,)], False),
        ({1: "x"}, False),
        ({"a": {2: 1}}, False),
        ({"a": (1,)}, False),
        (object(), False),
        ({"a": object()}, False),
    ],
)
def test_is_json(value: object, plain: bool) -> None:
    assert codec.is_json(value) is plain


# --- decode: success ------------------------------------------------------------------------


def test_decode_builds_the_typed_value() -> None:
    value = codec.decode(Outer, OUTER_JSON)
    assert value == OUTER
    assert type(value.inners) is tuple and type(value.inners[0]) is Inner
    assert value.colour is Colour.BLUE and value.level is Level.HIGH


def test_decode_fills_defaults_and_ignores_nothing() -> None:
    data = {"colour": "red", "inners": [], "table": {}, "note": "n", "mode": "fast"}
    value = codec.decode(Outer, data)
    assert value == Outer(Colour.RED, (), {}, "n", "fast")
    assert (value.payload, value.level, value.tags) == (None, Level.LOW, ())


def test_a_path_is_written_as_text_and_read_back_as_a_path() -> None:
    decoded = decode(Path | None, "out/r.json")
    assert decoded == Path("out/r.json") and type(decoded) is type(Path())
    assert decode(Path | None, None) is None


def test_decode_takes_an_int_for_a_float_and_makes_it_a_float() -> None:
    value = codec.decode(Flags, {"flag": False, "count": 0, "ratio": 2, "text": ""})
    assert value == Flags(False, 0, 2.0, "")
    assert type(value.ratio) is float
    assert codec.decode(float, 0.25) == 0.25


def test_decode_of_a_recursive_type() -> None:
    data = {"label": "r", "children": [{"label": "c", "children": [{"label": "g"}]}]}
    assert codec.decode(Node, data) == Node("r", (Node("c", (Node("g"),)),))


def test_a_union_tries_its_options_in_order() -> None:
    assert codec.decode(Choice, {"value": 3}).value == 3
    assert codec.decode(Choice, {"value": "3"}).value == "3"
    assert decode(int | None, None) is None
    assert decode(int | None, 4) == 4
    assert decode(str | int, 5) == 5  # str does not take 5: the next option does


def test_json_values_pass_through_as_they_are() -> None:
    for value in (None, 1, "x", [1, {"a": None}], {"k": [True]}):
        assert decode(JsonValue, value) == value


def test_loads_parses_json_text() -> None:
    assert codec.loads(Inner, '{"name": "x"}') == Inner("x")
    hint: Any = dict[str, int]
    assert codec.loads(hint, '{"a": 1}') == {"a": 1}


# --- decode: every refusal names where and what ---------------------------------------------


def test_codec_error_says_where_what_and_what_to_do() -> None:
    exc = CodecError("body.x", "an int", "'2'")
    assert isinstance(exc, OverlayError)
    assert exc.message == "malformed data at body.x"
    assert (exc.where, exc.expected, exc.found) == ("body.x", "an int", "\"'2'\"")
    assert exc.hint == (
        "the file or message was written by another version of the overlay:"
        " re-create it with this one"
    )
    assert CodecError("w", "e", "x" * 500).found == "'" + "x" * 199  # repr cut at 200


@pytest.mark.parametrize(
    ("data", "where", "expected", "found"),
    [
        ([1], "body", "an object for Inner", [1]),
        (
            {"name": "x", "extra": 1, "also": 2},
            "body",
            "only the fields of Inner",
            ["also", "extra"],
        ),
        ({"size": 1}, "body.name", "a value for Inner.name", {"size": 1}),
        ({"name": 1}, "body.name", "a str", 1),
        ({"name": "x", "size": "2"}, "body.size", "a int", "2"),
        ({"name": "x", "size": True}, "body.size", "a int", True),
        ({"name": "x", "size": 2.0}, "body.size", "a int", 2.0),
    ],
)
def test_a_wrong_record_is_refused_at_its_field(
    data: object, where: str, expected: str, found: object
) -> None:
    exc = error(Inner, data)
    assert (exc.where, exc.expected, exc.found) == (where, expected, repr(found))
    assert exc.message == f"malformed data at {where}"


def test_the_where_prefix_is_the_callers() -> None:
    assert error(Inner, {"name": 1}, "reply").where == "reply.name"
    with pytest.raises(CodecError) as info:
        codec.loads(Inner, '{"name": 1}', "file.json")
    assert info.value.where == "file.json.name"


def test_init_false_fields_are_not_accepted_as_input() -> None:
    exc = error(Counted, {"name": "n", "count": 1})
    assert (exc.expected, exc.found) == ("only the fields of Counted", "['count']")
    assert codec.decode(Counted, {"name": "n"}) == Counted("n")
    assert codec.schema(Counted, title="c")["properties"] == {"name": {"type": "string"}}


def test_nested_paths_name_list_items_and_object_keys() -> None:
    data: dict[str, Any] = {**OUTER_JSON, "inners": [{"name": "a"}, {"name": 5}]}
    assert error(Outer, data).where == "body.inners[1].name"
    bad_table = {**data, "inners": [], "table": {"x": 1.0, "y": "z"}}
    exc = error(Outer, bad_table)
    assert (exc.where, exc.expected) == ("body.table.y", "a number")


@pytest.mark.parametrize(
    ("hint", "data", "expected"),
    [
        (tuple[int, ...], (1,), "a list"),  # a tuple is not JSON: only lists decode
        (tuple[int, ...], "12", "a list"),
        (dict[str, int], [("a", 1)], "an object"),
        (Colour, "green", "one of ['red', 'blue']"),
        (Level, "1", "one of [1, 2]"),
        (Literal["fast", "slow"], "FAST", "one of ['fast', 'slow']"),
        (float, True, "a number"),
        (float, "1.0", "a number"),
        (float, None, "a number"),
        (bool, 1, "a bool"),
        (int, False, "a int"),
        (str, None, "a str"),
        (Path, 1, "a path (a str)"),
        (Path, ["a"], "a path (a str)"),
        (int | None, "x", "int or NoneType"),
        (int | str, None, "int or str"),
        (JsonValue, (1,), "a JSON value"),
        (JsonValue, {1: 2}, "a JSON value"),
    ],
)
def test_wrong_types_are_refused(hint: Any, data: object, expected: str) -> None:
    exc = error(hint, data, "v")
    assert (exc.where, exc.expected, exc.found) == ("v", expected, repr(data))


def test_a_union_reports_all_options_when_none_fits() -> None:
    exc = error(Choice, {"value": 1.5})
    assert (exc.where, exc.expected) == ("body.value", "int or str")


def test_a_json_value_field_refuses_non_json_data() -> None:
    # JsonValue inside a dataclass resolves to the expanded Union: still checked as JSON
    data = dict(OUTER_JSON)
    exc = error(Outer, {**data, "payload": {"k": (1,)}})
    assert (exc.where, exc.expected) == ("body.payload", "a JSON value")
    assert codec.decode(Outer, {**data, "payload": 3}).payload == 3


def test_loads_refuses_text_that_is_not_json() -> None:
    text = "{" + "x" * 100
    with pytest.raises(CodecError) as info:
        codec.loads(Inner, text, "cache.json")
    exc = info.value
    assert (exc.where, exc.expected, exc.found) == ("cache.json", "JSON text", repr(text[:80]))
    assert isinstance(exc.__cause__, json.JSONDecodeError)


def test_an_unsupported_type_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match=r"^the codec cannot decode <class 'bytes'> \(at x\)$"):
        codec.decode(bytes, b"", "x")
    with pytest.raises(TypeError, match=r"^the codec cannot decode <class 'set'> \(at y\)$"):
        codec.decode(set, [], "y")


# --- schema ---------------------------------------------------------------------------------


def test_schema_of_a_dataclass_inlines_the_root_and_references_the_rest() -> None:
    document = codec.schema(Outer, title="Outer file")
    assert list(document) == [
        "$schema",
        "title",
        "description",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "$defs",
    ]
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["title"] == "Outer file"
    assert document["description"] == "An outer record holding every kind of field."
    assert document["type"] == "object"
    assert document["additionalProperties"] is False
    assert document["required"] == ["colour", "inners", "table", "note", "mode"]
    assert document["properties"] == {
        "colour": {"enum": ["red", "blue"]},
        "inners": {"type": "array", "items": {"$ref": "#/$defs/Inner"}},
        "table": {"type": "object", "additionalProperties": {"type": "number"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "mode": {"enum": ["fast", "slow"]},
        "payload": {},
        "level": {"enum": [1, 2]},
        "tags": {"type": "array", "items": {"type": "string"}},
    }
    assert document["$defs"] == {
        "Inner": {
            "type": "object",
            "description": "An inner record.",
            "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
            "required": ["name"],
            "additionalProperties": False,
        }
    }


def test_schema_description_is_given_or_the_first_docstring_line() -> None:
    assert codec.schema(Inner, title="t", description="mine")["description"] == "mine"
    assert codec.schema(Inner, title="t")["description"] == "An inner record."
    generated = codec.schema(Undocumented, title="t")["description"]
    assert generated == "Undocumented(x: 'int')"  # dataclass writes a docstring when none is


def test_schema_of_a_recursive_type_refers_to_itself() -> None:
    defs: dict[str, JsonValue] = {}
    assert codec.schema_of(Node, defs) == {"$ref": "#/$defs/Node"}
    assert defs == {
        "Node": {
            "type": "object",
            "description": "A tree node (a recursive type).",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["label"],
            "additionalProperties": False,
        }
    }


def test_schema_of_a_non_dataclass_root_is_wrapped() -> None:
    document = codec.schema(tuple[Inner, ...], title="list", description="inners")
    assert document["allOf"] == [{"type": "array", "items": {"$ref": "#/$defs/Inner"}}]
    assert list(document["$defs"]) == ["Inner"]  # type: ignore[arg-type]
    assert document["description"] == "inners"


def test_schema_defs_are_sorted_by_name() -> None:
    document = codec.schema(Holder, title="h")
    assert document["description"] == "Holds a Zed, an Inner and a tree."
    assert list(document["$defs"]) == ["Inner", "Node", "Zed"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (str, {"type": "string"}),
        (Path, {"type": "string"}),
        (type(None), {"type": "null"}),
        (JsonValue, {}),
        (Literal["one"], {"const": "one"}),
        (Literal[1, 2], {"enum": [1, 2]}),
        (Level, {"enum": [1, 2]}),
        (dict[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
        (
            Mapping[Colour, int],
            {
                "type": "object",
                "propertyNames": {"enum": ["red", "blue"]},
                "additionalProperties": {"type": "integer"},
            },
        ),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ],
)
def test_schema_of_each_type(hint: Any, expected: JsonValue) -> None:
    defs: dict[str, JsonValue] = {}
    assert codec.schema_of(hint, defs) == expected
    assert defs == {}


def test_schema_of_an_unsupported_type_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match=r"^no JSON Schema for <class 'bytes'>$"):
        codec.schema_of(bytes, {})


def test_the_schema_accepts_exactly_what_decode_accepts() -> None:
    jsonschema = pytest.importorskip("jsonschema")  # dev extra; skipped only without it
    document = codec.schema(Outer, title="o")
    data: dict[str, Any] = dict(OUTER_JSON)
    jsonschema.validate(data, document)
    bad: dict[str, Any]
    for bad in ({**data, "extra": 1}, {**data, "mode": "other"}, {**data, "inners": [{}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, document)
        with pytest.raises(CodecError):
            codec.decode(Outer, bad)


def test_the_default_where_is_body() -> None:
    with pytest.raises(CodecError) as info:
        codec.decode(Inner, {"name": 1})
    assert info.value.where == "body.name"
    with pytest.raises(CodecError) as info:
        codec.loads(Inner, '{"name": 1}')
    assert info.value.where == "body.name"


def test_none_may_come_first_in_a_union() -> None:
    assert decode(None | int, 3) == 3
    assert decode(None | int, None) is None
    assert error(None | int, "x").expected == "NoneType or int"


def test_an_unsupported_type_in_a_union_names_where_it_is() -> None:
    with pytest.raises(TypeError, match=r"^the codec cannot decode <class 'bytes'> \(at v\.w\)$"):
        decode(bytes | int, 1, "v.w")


def test_a_missing_default_field_does_not_end_the_record() -> None:
    data = {k: v for k, v in OUTER_JSON.items() if k != "payload"}  # level and tags follow it
    value = codec.decode(Outer, data)
    assert (value.payload, value.level, value.tags) == (None, Level.HIGH, ("t",))


def test_schema_of_a_mapping_of_records_defines_the_record() -> None:
    defs: dict[str, JsonValue] = {}
    schema = codec.schema_of(dict[str, Inner], defs)
    assert schema == {"type": "object", "additionalProperties": {"$ref": "#/$defs/Inner"}}
    assert list(defs) == ["Inner"]


def test_a_mapping_keyed_by_an_enum_decodes_its_keys_as_members() -> None:
    keyed: Any = Mapping[Colour, int]  # a hint, not a class
    decoded = codec.decode(keyed, {"red": 1, "blue": 2})
    assert decoded == {Colour.RED: 1, Colour.BLUE: 2}
    assert all(isinstance(key, Colour) for key in decoded)
    assert codec.decode(keyed, json.loads(codec.dumps(decoded))) == decoded
    with pytest.raises(CodecError, match="one of") as bad_key:
        codec.decode(dict[Colour, int], {"green": 1}, where="colours")
    assert bad_key.value.where == "colours"  # a key is named by the object that holds it
