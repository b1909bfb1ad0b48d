"""A user's ``--models FILE.py``: its ``CASES`` entries checked by the same checks, torch-free,
twice: read before any worker starts (:func:`read_statically`; what only running it gives is
:data:`UNKNOWN`), then its real objects in a worker (:func:`validate_cases`).

Example: ``CASES = {"mine": {"module": Net, "inputs": (x,), "spec": "TOSA-1.0+INT8"}}``.
Becomes: ``["mine: missing key(s) quantize", "mine: 'spec' must be a TOSA spec string like
'TOSA-1.0+INT', found 'TOSA-1.0+INT8'"]``, with ``Net`` and ``x`` unknown until it runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from overlay.equivalence import corpus
from overlay.items import CaseInfo

SPEC_RE = re.compile(r"^TOSA-1\.0(\+(INT|FP|int16|int4|bf16|fp8|u55|u85|cf))+$")
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
QUANTIZE = (None, "a8w8", "a16w8")
REQUIRED = ("module", "inputs", "spec", "quantize")
OPTIONAL = ("per_channel", "tolerance", "sqnr_db", "timeout", "ethos_u", "expect_broken")
CASE_KEYS = {*REQUIRED, *OPTIONAL}
EXAMPLE = (
    "CASES = {'my_conv': {'module': MyConv, 'inputs': (torch.randn(1, 3, 16, 16),),"
    " 'spec': 'TOSA-1.0+INT', 'quantize': 'a8w8'}}"
)


class _Unknown:
    """A value only running the file gives (a class, a tensor, a call)."""

    def __repr__(self) -> str:
        return "<unknown until the file runs>"


UNKNOWN = _Unknown()


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def validate_case(name: str, entry: object) -> list[str]:
    """Return the problems of one ``CASES`` entry (empty when it is valid).

    Checks what needs no torch; values that are :data:`UNKNOWN` are skipped.
    """
    if entry is UNKNOWN:
        return []
    if not isinstance(entry, Mapping):
        return [f"{name}: expected a dict, found {type(entry).__name__}"]
    given = {k: v for k, v in entry.items() if v is not UNKNOWN}
    problems = []
    missing = sorted(set(REQUIRED) - set(entry))
    if missing:
        problems.append(f"{name}: missing key(s) {', '.join(missing)}")
    unknown = sorted(set(entry) - CASE_KEYS)
    if unknown:
        problems.append(f"{name}: unknown key(s) {', '.join(unknown)}")
    if "module" in given and not callable(given["module"]):
        problems.append(f"{name}: 'module' must be an nn.Module or a zero-argument callable")
    if "inputs" in given and not isinstance(given["inputs"], tuple):
        found = type(given["inputs"]).__name__
        problems.append(f"{name}: 'inputs' must be a tuple of tensors, found {found}")
    spec = given.get("spec")
    if "spec" in given and not (isinstance(spec, str) and SPEC_RE.match(spec)):
        problems.append(
            f"{name}: 'spec' must be a TOSA spec string like 'TOSA-1.0+INT', found {spec!r}"
        )
    quantize = given.get("quantize")
    if "quantize" in given and quantize not in QUANTIZE:
        problems.append(f"{name}: 'quantize' must be None, 'a8w8' or 'a16w8', found {quantize!r}")
    if "tolerance" in given and not _positive(given["tolerance"]):
        found = given["tolerance"]
        problems.append(f"{name}: 'tolerance' must be a positive number, found {found!r}")
    for key in ("sqnr_db", "timeout"):
        value = given.get(key)
        if value is not None and not _positive(value):
            problems.append(f"{name}: {key!r} must be a positive number, found {value!r}")
    for key in ("ethos_u", "per_channel"):
        if key in given and not isinstance(given[key], bool):
            problems.append(f"{name}: {key!r} must be a bool, found {given[key]!r}")
    if "expect_broken" in given and not isinstance(given["expect_broken"], str):
        problems.append(f"{name}: 'expect_broken' must be a reason (str)")
    if isinstance(spec, str) and quantize and "+INT" not in spec:
        problems.append(f"{name}: quantize={quantize!r} needs an INT spec, found {spec}")
    if quantize == "a16w8" and isinstance(spec, str) and "int16" not in spec:
        problems.append(f"{name}: a16w8 needs the +int16 extension, found {spec}")
    return problems


def validate_cases(cases: object, *, origin: str) -> list[str]:
    """Return every problem of a user file's ``CASES`` object."""
    if not isinstance(cases, Mapping) or not cases:
        return [f"{origin}: CASES must be a non-empty dict of case name -> dict"]
    builtin = {c.name for c in corpus.ALL_CASES}
    problems = []
    for name, entry in cases.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.append(f"{origin}: case name {name!r} must be letters, digits, _ . -")
            continue
        if name in builtin:
            problems.append(f"{name}: the name is already a corpus case: rename it")
        problems.extend(validate_case(name, entry))
    return problems


def case_info(name: str, entry: Mapping[str, object], source: Path) -> CaseInfo:
    """Return the torch-free description of a valid entry (see :func:`validate_case`)."""
    get = entry.get
    return CaseInfo(
        name=name,
        spec=str(entry["spec"]),
        quantize=None if entry["quantize"] is None else str(entry["quantize"]),
        per_channel=bool(get("per_channel", True)),
        fast=True,
        source=source.name,
        tolerance=_number(get("tolerance")),
        sqnr_db=_number(get("sqnr_db")),
        group="user",
        timeout=_number(get("timeout")),
        ethos_u=bool(get("ethos_u", False)),
        expect_broken=str(get("expect_broken", "")),
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


# --- reading the file without running it -----------------------------------------------


@dataclass(frozen=True)
class StaticCases:
    """What a models file's ``CASES`` is, read without running the file."""

    names: tuple[str, ...] | None  # None: the names are known only when it runs
    problems: tuple[str, ...]


def _literal(node: ast.expr) -> object:
    """Return the value of a literal expression; tuples and lists keep their shape."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        if len(keys) == len(node.keys):  # no ** spread, no computed key
            return {k: _literal(v) for k, v in zip(keys, node.values, strict=True)}
    return UNKNOWN


def read_statically(tree: ast.Module, origin: str) -> StaticCases:
    """Check the file's ``CASES`` as written; what only running it shows is left out.

    CASES counts as written when it is bound once to a literal and never used again in the
    file (nothing adds entries later).
    """
    value = None  # the expression CASES is last bound to at top level (None: not simply)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CASES" for t in node.targets
        ):
            value = node.value if len(node.targets) == 1 else None
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "CASES"
        ):
            value = node.value
    uses = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "CASES")
    found = _literal(value) if value is not None and uses == 1 else UNKNOWN
    if found is UNKNOWN:
        return StaticCases(None, ())
    problems = tuple(validate_cases(found, origin=origin))
    if isinstance(found, Mapping) and all(isinstance(n, str) for n in found):
        return StaticCases(tuple(found), problems)
    return StaticCases(None, problems)
