"""What a lowering is compared on, as protocol data: its graph, payloads and numbers."""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from overlay.equivalence.protocol import ExactCheck, Numerics, OutputDigest, Payload


def as_tuple(value: Any) -> tuple[Any, ...]:
    """Return a module's output as a tuple of tensors."""
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def op_name(target: Any) -> str:
    """Return a stable name for an FX call target (aten/edge/backend op or function)."""
    name = getattr(target, "_name", None) or getattr(target, "__name__", None)
    if hasattr(target, "name") and callable(target.name):
        with contextlib.suppress(TypeError, AttributeError):
            name = target.name()
    return str(name or target)


def graph_text(graph: Any) -> list[str]:
    """Return a canonical text of an FX graph: one line per node, names by position."""
    names: dict[Any, str] = {}
    lines = []
    for index, node in enumerate(graph.nodes):
        names[node] = f"%{index}"

        def show(value: Any) -> str:
            if isinstance(value, list | tuple):
                inner = ", ".join(show(v) for v in value)
                return f"[{inner}]" if isinstance(value, list) else f"({inner})"
            return names.get(value, repr(value))

        target = node.target if node.op != "call_function" else op_name(node.target)
        lines.append(f"%{index} = {node.op} {target} {show(tuple(node.args))}")
    return lines


def lowered_graph(edge: Any) -> tuple[list[str], list[Any]]:
    """Return the canonical lowered graph and the delegate modules, in graph order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    module = edge.exported_program().graph_module
    lines: list[str] = []
    delegates: list[Any] = []
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        if "executorch_call_delegate" in str(node.target):
            lowered = getattr(module, node.args[0].target)
            assert isinstance(lowered, LoweredBackendModule)
            inner = [
                op_name(n.target)
                for n in lowered.original_module.graph.nodes
                if n.op == "call_function"
            ]
            lines.append(f"delegate[{len(delegates)}] {lowered.backend_id}: {', '.join(inner)}")
            delegates.append(lowered)
        elif "getitem" not in str(node.target):
            lines.append(f"cpu: {op_name(node.target)}")
    return lines, delegates


def delegate_payloads(delegates: list[Any], keep_bytes: bool = False) -> tuple[Payload, ...]:
    """Return each delegate's processed bytes as a payload digest (with the bytes, if kept)."""
    processed = ((str(d.backend_id), bytes(d.processed_bytes)) for d in delegates)
    return tuple(
        Payload(
            backend, len(data), hashlib.sha256(data).hexdigest(), data.hex() if keep_bytes else None
        )
        for backend, data in processed
    )


def tosa_op_counts(flatbuffers: Iterable[bytes]) -> dict[str, int]:
    """Return how many TOSA operators of each type the flatbuffers hold, summed, by name.

    Example: the TOSA delegate of a quantised conv -> conv on TOSA-1.0+INT.
    Becomes: ``{"CONST": 16, "CONV2D": 2, "RESCALE": 2, "TRANSPOSE": 2}``.
    """
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph

    names = {value: name for name, value in vars(Op).items() if isinstance(value, int)}
    counts: Counter[str] = Counter()
    for data in flatbuffers:
        graph = TosaGraph.GetRootAs(data, 0)
        for r in range(graph.RegionsLength()):
            region = graph.Regions(r)
            for b in range(region.BlocksLength()):
                block = region.Blocks(b)
                for o in range(block.OperatorsLength()):
                    op = block.Operators(o).Op()
                    counts[names.get(op, f"op {op}")] += 1
    return dict(sorted(counts.items()))


def exact_check(got: tuple[Any, ...], reference: Any) -> ExactCheck:
    """Return a run's outputs against the exact reference (an ``exact.Evaluation``), in
    steps of each output's quantisation: the program's dequantized outputs are taken back
    to their codes. Where the reference has two programs (a 48-bit accumulator rescaled
    directly or through int32), the run is checked against the nearer."""
    checks = [_steps(got, outputs) for outputs in (reference.outputs, reference.through_int32)]
    return min((c for c in checks if c.steps), key=_distance, default=checks[0])


def _distance(check: ExactCheck) -> tuple[int, int]:
    """Order checks by how far the run is: the largest step, then how many values differ."""
    known = [s for s in check.steps if s is not None]
    unknown = len(check.steps) - len(known)
    return (max(known, default=0) if not unknown else 1 << 62, sum(check.differing))


def _steps(got: tuple[Any, ...], outputs: tuple[Any, ...]) -> ExactCheck:
    import torch

    steps: list[int | None] = []
    differing: list[int] = []
    for value, want in zip(got, outputs, strict=False):
        if tuple(value.shape) != tuple(want.codes.shape):
            steps.append(None)
            differing.append(int(want.codes.numel()))
            continue
        codes = torch.round(value.double() / want.scale).to(torch.int64) + want.zero_point
        apart = (codes - want.codes).abs()
        steps.append(int(apart.max()) if apart.numel() else 0)
        differing.append(int((apart > 0).sum()))
    return ExactCheck(steps=tuple(steps), differing=tuple(differing))


def measure(
    got: tuple[Any, ...],
    float_out: tuple[Any, ...],
    fq_out: tuple[Any, ...],
    exact: ExactCheck | None = None,
) -> Numerics:
    """Return a run's outputs against the float, the fake-quantised and the exact reference."""
    return Numerics(
        outputs=tuple(_digest(t) for t in got),
        max_abs_err_vs_float=_per_output(got, float_out, _max_abs),
        max_abs_err_vs_fake_quant=_per_output(got, fq_out, _max_abs),
        reference_max_abs=tuple(
            float(t.double().abs().max()) if t.numel() else 0.0 for t in fq_out
        ),
        reference_range=tuple(
            float(t.double().max() - t.double().min()) if t.numel() else 0.0 for t in fq_out
        ),
        sqnr_db=_per_output(got, fq_out, _sqnr),
        exact=exact,
    )


def _per_output(
    got: tuple[Any, ...], want: tuple[Any, ...], how: Callable[[Any, Any], float]
) -> tuple[float | None, ...]:
    """Return ``how(output, reference)`` in float64 per output (None: the shapes differ)."""
    pairs = zip(got, want, strict=False)
    return tuple(how(a.double(), b.double()) if a.shape == b.shape else None for a, b in pairs)


def _sqnr(a: Any, b: Any) -> float:
    """Return 10 log10(signal power / error power) of one output (inf when bit-equal)."""
    signal, noise = float(b.pow(2).sum()), float((a - b).pow(2).sum())
    if noise == 0.0:
        return math.inf
    return -math.inf if signal == 0.0 else 10.0 * math.log10(signal / noise)


def _max_abs(a: Any, b: Any) -> float:
    return float((a - b).abs().max()) if a.numel() else 0.0


def _digest(tensor: Any) -> OutputDigest:
    data = tensor.detach().contiguous().cpu()
    raw = data.view(-1).numpy().tobytes() if data.numel() else b""
    return OutputDigest(hashlib.sha256(raw).hexdigest(), str(data.dtype), tuple(data.shape))
