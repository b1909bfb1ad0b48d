"""The typed JSON-lines protocol between the orchestrator and its workers, decoded strictly
(another schema version is a :class:`ProtocolError`); stdlib only: workers run it too."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args

from overlay import codec
from overlay.codec import JsonValue
from overlay.errors import EquivalenceError
from overlay.items import CaseInfo, ItemId, ProbeInfo

SCHEMA_VERSION = 4  # 4: the exact reference (Numerics.exact, ItemResult.exact_reason)


class ProtocolError(EquivalenceError):
    """A message does not follow the worker protocol (shape, types or schema version)."""


class PathId(enum.StrEnum):
    """The three paths the equivalence run compares."""

    STOCK = "a"
    RUNTIME = "b"
    PATCHED = "c"

    @property
    def label(self) -> str:
        """Return the path's title in reports."""
        return {"a": "stock", "b": "stock + runtime patch", "c": "diff-patched build"}[self.value]


PATHS = tuple(PathId)  # (a), (b), (c): the order of every table


class RunStatus(enum.StrEnum):
    """Whether an item's run raised."""

    OK = "ok"
    FAIL = "fail"


class Stage(enum.StrEnum):
    """Where an item failed; HARNESS means the worker itself (timeout, crash), not the model."""

    BUILD = "build"
    EXPORT = "export"
    QUANTIZE = "quantize"
    LOWER = "lower"
    NUMERICS = "numerics"
    VGF = "vgf"
    VGF_RUN = "vgf run"
    ETHOSU = "ethos-u"
    PROBE = "probe"
    INIT = "init"
    INPUT = "input"  # the user's --runtime-patch or --models file could not be loaded
    REQUEST = "request"
    HARNESS = "harness"


@dataclass(frozen=True)
class ErrorInfo:
    """An exception as data: type name, normalised message, stage and traceback tail."""

    type: str
    message: str
    stage: Stage
    traceback: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """Return what must be equal for two failures to be the same failure."""
        return self.type, self.message

    @property
    def first_line(self) -> str:
        """Return ``Type: first line of the message``."""
        lines = self.message.strip().splitlines()
        return f"{self.type}: {lines[0] if lines else ''}"


@dataclass(frozen=True)
class Payload:
    """One delegate's processed bytes, by digest (the bytes themselves only on request)."""

    backend: str
    size: int
    sha256: str
    hex: str | None = None


@dataclass(frozen=True)
class OutputDigest:
    """One output tensor, by digest."""

    sha256: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ExactCheck:
    """A run's outputs against the exact reference: the case's converted graph evaluated in
    the target's integer arithmetic (``worker/exact.py``), in quantisation steps."""

    steps: tuple[int | None, ...]  # per output, the largest difference (None: shapes differ)
    differing: tuple[int, ...]  # per output, how many values differ
    first: str = ""  # where the program first departs from it ("": equal, or not told)


@dataclass(frozen=True)
class Numerics:
    """The lowered program's outputs against the float, the fake-quantised model and, for
    a quantised case with an exact reference, that reference."""

    outputs: tuple[OutputDigest, ...]
    max_abs_err_vs_float: tuple[float | None, ...]  # None: the shapes differ
    max_abs_err_vs_fake_quant: tuple[float | None, ...]
    reference_max_abs: tuple[float, ...]  # max |x| of each fake-quantised reference output
    reference_range: tuple[float, ...] = ()  # max - min of each reference output
    sqnr_db: tuple[float | None, ...] = ()  # vs the reference; inf when equal, None: shapes
    exact: ExactCheck | None = None  # None: not quantised, or no exact reference (why: result)

    @property
    def key(self) -> tuple[str, ...]:
        """Return what must be equal for two runs to have the same numbers (bit-exact)."""
        return tuple(o.sha256 for o in self.outputs)


class TargetState(enum.StrEnum):
    """What happened to a case's lowering for a further target (VGF, Ethos-U)."""

    COMPARED = "compared"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class VgfResult:
    """The VGF lowering of a case: payload digests, the failure, or why it was skipped.
    With the emulation installed it was run too (``numerics``; why not: ``run_reason``)."""

    state: TargetState
    payloads: tuple[Payload, ...] = ()
    error: ErrorInfo | None = None
    reason: str = ""
    numerics: Numerics | None = None
    numerics_error: ErrorInfo | None = None
    run_reason: str = ""
    lower_seconds: float | None = None
    run_seconds: float | None = None
    tosa_ops: dict[str, int] = field(default_factory=dict)  # the TOSA its delegates were made of


@dataclass(frozen=True)
class VelaEstimate:
    """Vela's own estimate for one command stream (one delegate)."""

    cycles_total: int
    cycles_npu: int
    inference_seconds: float
    sram_bytes: int
    off_chip_flash_bytes: int
    dram_bytes: int
    macs: int
    encoded_weight_bytes: int


@dataclass(frozen=True)
class EthosUResult:
    """One Ethos-U target's lowering: command-stream digests and Vela's estimates."""

    target: str  # e.g. "ethos-u55-128"
    state: TargetState
    payloads: tuple[Payload, ...] = ()
    estimates: tuple[VelaEstimate, ...] = ()  # one per delegate, in graph order
    error: ErrorInfo | None = None
    reason: str = ""
    cpu_ops: int = 0  # ops left on the CPU
    lower_seconds: float | None = None


@dataclass(frozen=True)
class ItemResult:
    """Everything one path observed for one item; a failure is data, not an exception."""

    status: RunStatus
    error: ErrorInfo | None = None
    graph: tuple[str, ...] = ()  # canonical lowered graph: cpu ops and delegate contents
    payloads: tuple[Payload, ...] = ()  # TOSA payloads, one per delegate
    numerics: Numerics | None = None
    numerics_error: ErrorInfo | None = None  # lowering worked, running it did not
    run_reason: str = ""  # why the TOSA program was not run (no reference model here)
    vgf: VgfResult | None = None
    ethos_u: tuple[EthosUResult, ...] = ()
    value: JsonValue = None  # a probe's observation
    lower_seconds: float | None = None
    seconds: float = 0.0
    tosa_ops: dict[str, int] = field(default_factory=dict)  # TOSA operators by type, all delegates
    exact_reason: str = ""  # why a quantised case has no exact reference (fake-quant judges)

    @property
    def ok(self) -> bool:
        """Return True when the item ran without raising."""
        return self.status is RunStatus.OK


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitRequest:
    """Import torch/executorch once, apply the runtime patch, load user models."""

    runtime_patch: str | None = None  # "FILE.py:FUNCTION" or "module:FUNCTION"
    models: str | None = None  # a user's models file


@dataclass(frozen=True)
class ListRequest:
    """Ask for the cases (corpus plus user models) and probes this worker can run."""


@dataclass(frozen=True)
class RunRequest:
    """Run one item; ``fixes`` applies only those runtime fixes for this request."""

    item: ItemId
    fixes: tuple[int, ...] = ()
    keep_bytes: bool = False


@dataclass(frozen=True)
class QuitRequest:
    """Stop the worker."""


Request = InitRequest | ListRequest | RunRequest | QuitRequest

# --- replies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitReply:
    """What the worker runs on."""

    python: str
    executorch: str
    torch: str
    import_seconds: float  # importing executorch's Arm backend (torch loads at process start)
    runtime_fixes_applied: tuple[int, ...]


@dataclass(frozen=True)
class ListReply:
    """The items this worker can run."""

    cases: tuple[CaseInfo, ...]
    probes: tuple[ProbeInfo, ...]


@dataclass(frozen=True)
class RunReply:
    """One item's result on this worker's path."""

    item: ItemId
    result: ItemResult


@dataclass(frozen=True)
class ErrorReply:
    """The request itself failed (a bad runtime patch or models file, a bad request)."""

    error: ErrorInfo


Reply = InitReply | ListReply | RunReply | ErrorReply

_TYPES: dict[str, type[Any]] = {
    "init": InitRequest,
    "list": ListRequest,
    "run": RunRequest,
    "quit": QuitRequest,
    "init-reply": InitReply,
    "list-reply": ListReply,
    "run-reply": RunReply,
    "error": ErrorReply,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}

T = TypeVar("T")


def _fail(where: str, expected: str, data: object) -> ProtocolError:
    return ProtocolError(
        f"malformed protocol message at {where}",
        expected=expected,
        found=repr(data)[:200],
        hint="the orchestrator and the worker must be the same overlay version",
    )


def from_json(cls: type[T], data: object, where: str = "body") -> T:
    """Decode ``data`` into the dataclass ``cls``, strictly (a ProtocolError otherwise)."""
    try:
        return codec.decode(cls, data, where)
    except codec.CodecError as exc:
        raise _fail(exc.where, exc.expected or "", exc.found) from exc


def encode(message: Request | Reply) -> str:
    """Return one protocol line (no newline) for a request or reply."""
    envelope = {
        "schema": SCHEMA_VERSION,
        "type": _NAMES[type(message)],
        "body": codec.encode(message),
    }
    return json.dumps(envelope, sort_keys=True, allow_nan=True)


def _envelope(line: str, kinds: tuple[type[Any], ...], what: str) -> Any:
    """Parse one line: its envelope, checked before the body, then the body as one of
    ``kinds`` (the members of Request or Reply)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _fail("line", "one JSON object", line) from exc
    if not isinstance(data, Mapping) or set(data) != {"schema", "type", "body"}:
        raise _fail("envelope", "an object with schema, type and body", data)
    if data["schema"] != SCHEMA_VERSION:
        raise ProtocolError(
            "the worker speaks another protocol schema",
            expected=f"schema {SCHEMA_VERSION}",
            found=f"schema {data['schema']!r}",
            hint="run the orchestrator and the workers from the same overlay version",
        )
    cls = _TYPES.get(str(data["type"]))
    if cls is None:
        raise _fail("type", f"one of {sorted(_TYPES)}", data["type"])
    if cls not in kinds:
        raise _fail("type", what, cls.__name__)
    return from_json(cls, data["body"])


def decode_request(line: str) -> Request:
    """Parse one request line."""
    request: Request = _envelope(line, get_args(Request), "a request")
    return request


def decode_reply(line: str) -> Reply:
    """Parse one reply line."""
    reply: Reply = _envelope(line, get_args(Reply), "a reply")
    return reply
