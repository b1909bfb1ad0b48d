"""The one typed codec: frozen dataclasses <-> JSON, decoded strictly, with a derived schema.

Standard library only: the worker protocol runs it inside the locked proof envs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from overlay.errors import OverlayError

JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]  # noqa: UP007 - a recursive alias needs Union

T = TypeVar("T")
_SCALARS = {float: "a number", Path: "a path (a str)", bool: "a bool", int: "a int", str: "a str"}


class CodecError(OverlayError):
    """Data does not have the shape of the type it is decoded into."""

    def __init__(self, where: str, expected: str, found: object) -> None:
        super().__init__(
            f"malformed data at {where}",
            expected=expected,
            found=repr(found)[:200],
            hint="the file or message was written by another version of the overlay:"
            " re-create it with this one",
        )
        self.where = where


def encode(value: object) -> JsonValue:
    """Encode a value: dataclasses as objects, enums by value, tuples as lists, paths as text."""
    if isinstance(value, enum.Enum):
        encoded: JsonValue = value.value
        return encoded
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        for key in value:  # JSON keys are text: an int key would be written but not read back
            if not isinstance(key.value if isinstance(key, enum.Enum) else key, str):
                raise CodecError("a dict key", "a str or an enum member with a str value", key)
        return {str(encode(k)): encode(v) for k, v in value.items()}  # an enum key: its value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"the codec cannot encode {type(value).__name__}")


def dumps(value: object, *, indent: int | None = None) -> str:
    """Return the JSON text of ``value`` (keys sorted, so equal values give equal bytes)."""
    return json.dumps(encode(value), sort_keys=True, indent=indent, allow_nan=True)


def is_json(value: object) -> bool:
    """Return True when ``value`` is plain JSON data (no tuples, no non-string keys)."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v) for k, v in value.items())
    return False


def decode(cls: type[T], data: object, where: str = "body") -> T:
    """Decode ``data`` into ``cls`` (a dataclass, enum or plain type), strictly."""
    value: T = _decode(cls, data, where)
    return value


def loads(cls: type[T], text: str, where: str = "body") -> T:
    """Parse JSON text and decode it into ``cls``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(where, "JSON text", text[:80]) from exc
    return decode(cls, data, where)


def _is_json_hint(hint: Any) -> bool:
    return hint is JsonValue or hint == _JSON_HINT


def _decode(hint: Any, data: object, where: str) -> Any:
    if _is_json_hint(hint):
        if not is_json(data):
            raise CodecError(where, "a JSON value", data)
        return data
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if data is None and type(None) in options:
            return None
        for option in (o for o in options if o is not type(None)):
            with contextlib.suppress(CodecError):
                return _decode(option, data, where)
        raise CodecError(where, " or ".join(_name(o) for o in options), data)
    if origin is Literal:
        if data in get_args(hint):
            return data
        raise CodecError(where, f"one of {list(get_args(hint))}", data)
    if origin is tuple:
        if not isinstance(data, list):
            raise CodecError(where, "a list", data)
        item = get_args(hint)[0]
        return tuple(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(data))
    if origin in (dict, Mapping):
        key, item = get_args(hint)
        if not isinstance(data, dict):
            raise CodecError(where, "an object", data)
        return {_decode(key, k, where): _decode(item, v, f"{where}.{k}") for k, v in data.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(data)
        except ValueError:
            raise CodecError(where, f"one of {[m.value for m in hint]}", data) from None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _decode_dataclass(hint, data, where)
    if hint is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if hint is Path and type(data) is str:
        return Path(data)
    if hint in (bool, int, str) and type(data) is hint:
        return data
    if hint in _SCALARS:
        raise CodecError(where, _SCALARS[hint], data)
    raise TypeError(f"the codec cannot decode {hint!r} (at {where})")


def _decode_dataclass(cls: type[Any], data: object, where: str) -> Any:
    if not isinstance(data, dict):
        raise CodecError(where, f"an object for {cls.__name__}", data)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise CodecError(where, f"only the fields of {cls.__name__}", unknown)
    values = {}
    for name, field in fields.items():
        if name not in data:
            if _required(field):
                raise CodecError(f"{where}.{name}", f"a value for {cls.__name__}.{name}", data)
            continue
        values[name] = _decode(hints[name], data[name], f"{where}.{name}")
    return cls(**values)


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _name(hint: Any) -> str:
    return str(getattr(hint, "__name__", hint))


def schema(cls: type[Any], *, title: str, description: str = "") -> dict[str, JsonValue]:
    """Return the JSON Schema (draft 2020-12) of ``cls``, exactly what :func:`decode` takes."""
    defs: dict[str, JsonValue] = {}
    root = schema_of(cls, defs)
    document: dict[str, JsonValue] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": description or _doc(cls),
    }
    if isinstance(root, dict) and "$ref" in root:
        name = str(root["$ref"]).rsplit("/", 1)[-1]
        body = defs.pop(name)
        assert isinstance(body, dict)
        document.update({k: v for k, v in body.items() if k != "description"})
    else:
        document["allOf"] = [root]
    document["$defs"] = dict(sorted(defs.items()))
    return document


def schema_of(hint: Any, defs: dict[str, JsonValue]) -> JsonValue:
    """Return the JSON Schema of one type; dataclasses go into ``defs`` and are referenced."""
    if _is_json_hint(hint):
        return {}
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return {"anyOf": [schema_of(option, defs) for option in get_args(hint)]}
    if origin is Literal:
        values: list[JsonValue] = list(get_args(hint))
        return {"const": values[0]} if len(values) == 1 else {"enum": values}
    if origin is tuple:
        return {"type": "array", "items": schema_of(get_args(hint)[0], defs)}
    if origin in (dict, Mapping):
        key, item = get_args(hint)
        names = {} if key is str else {"propertyNames": schema_of(key, defs)}
        return {"type": "object", **names, "additionalProperties": schema_of(item, defs)}
    if hint is type(None):
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        name = hint.__name__
        if name not in defs:
            defs[name] = {}  # a placeholder stops recursion
            hints = typing.get_type_hints(hint)
            fields = [f for f in dataclasses.fields(hint) if f.init]
            defs[name] = {
                "type": "object",
                "description": _doc(hint),
                "properties": {f.name: schema_of(hints[f.name], defs) for f in fields},
                "required": [f.name for f in fields if _required(f)],
                "additionalProperties": False,
            }
        return {"$ref": f"#/$defs/{name}"}
    simple = {float: "number", int: "integer", bool: "boolean", str: "string", Path: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON Schema for {hint!r}")


def _doc(cls: type[Any]) -> str:
    return (cls.__doc__ or cls.__name__).strip().splitlines()[0]


@dataclasses.dataclass(frozen=True)
class _Probe:
    """Resolves JsonValue the way typing.get_type_hints does inside a dataclass."""

    value: JsonValue


_JSON_HINT = typing.get_type_hints(_Probe)["value"]
