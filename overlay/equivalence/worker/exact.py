"""The exact reference of a quantised case: its converted PT2E graph evaluated in integers,
each op by the TOSA 1.0 operator the lowering emits for it (the rules: docs/equivalence.md,
"The exact reference of a quantised case").
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.ao.quantization.fx._decomposed  # registers torch.ops.quantized_decomposed
import torch.nn.functional as F  # noqa: N812

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
QUANTIZE = (qd.quantize_per_tensor.default,)
DEQUANTIZE = (qd.dequantize_per_tensor.default,)


class NoExactRule(Exception):  # noqa: N818 - it is an answer, not a fault
    """The graph holds something the exact reference has no rule for (the message says what)."""


@dataclass(frozen=True)
class Codes:
    """A quantised tensor: integer codes with their scale and zero point."""

    codes: Any  # int64 tensor
    scale: float
    zero_point: int
    dtype: Any  # torch.int8 or torch.int16


@dataclass(frozen=True)
class Fixed:
    """Integers at a real scale: ``ints * scale[c]`` (``c`` along ``axis``; one scale: per
    tensor), with a clamp (``low``, ``high``, real) still to apply at the next quantize."""

    ints: Any  # float64 tensor holding exact integers (all below 2**53)
    scale: tuple[float, ...]
    axis: int = 1
    low: float = -math.inf
    high: float = math.inf
    source: Codes | None = None  # the codes a dequantize made this from (table ops read them)
    bits: int = 8  # the width of the integers it came from: 16 widens accumulators to 48 bits

    @property
    def per_tensor(self) -> float:
        """Return the one scale of a per-tensor value (a per-channel one has no rule here)."""
        if len(self.scale) != 1 or not (math.isinf(self.low) and math.isinf(self.high)):
            raise NoExactRule("an op on a per-channel or clamped value before its quantize")
        return self.scale[0]


@dataclass(frozen=True)
class Tap:
    """One quantize node of the graph, evaluated exactly: where it is and its codes."""

    name: str  # the node's name in the converted graph
    where: str  # the ops that feed it and their module, e.g. "features.3.block.0: conv2d"
    codes: Codes
    on_cpu: bool  # a quantize of a graph input: it runs on the CPU, not in the program


@dataclass(frozen=True)
class Evaluation:
    """The exact reference of one graph: its outputs' codes and every quantize node's."""

    outputs: tuple[Codes, ...]
    taps: tuple[Tap, ...]  # in graph (topological) order
    downstream: dict[str, tuple[str, ...]]  # a tap's nearest quantize nodes further on
    # the outputs had each 48-bit accumulator gone through int32 (() where none was rescaled)
    through_int32: tuple[Codes, ...] = ()


# --- TOSA's integer arithmetic ----------------------------------------------------------


def scale_parts(scale: float, width: int = 32) -> tuple[int, int]:
    """Return TOSA's (multiplier, shift) for ``scale``: ``scale ~ multiplier * 2**-shift``.

    Example: 0.5 -> (2**30, 31); 1.0 -> (2**30, 30), which leaves integers unchanged.
    """
    offset = width - 1
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << offset))
    if multiplier == 1 << offset:
        multiplier //= 2
        exponent += 1
    shift = offset - exponent
    if shift > 62:
        multiplier >>= min(31, shift - 62)
        shift = 62
    return multiplier, shift


def apply_scale(values: Any, parts: Iterable[tuple[int, int]], axis: int = 1) -> Any:
    """Return TOSA's ``apply_scale`` (single rounding, half up) of int64 ``values``."""
    multipliers, shifts = zip(*parts, strict=True)
    multiplier = torch.tensor(multipliers, dtype=torch.int64)
    shift = torch.tensor(shifts, dtype=torch.int64)
    if len(multipliers) > 1:  # per channel along axis
        shape = [1] * values.dim()
        shape[axis] = -1
        multiplier, shift = multiplier.reshape(shape), shift.reshape(shape)
    rounding = torch.bitwise_left_shift(torch.ones_like(shift), shift - 1)
    return torch.bitwise_right_shift(values * multiplier + rounding, shift)


def reciprocal_parts(count: int) -> tuple[int, int]:
    """Return TOSA's (multiplier, shift) for dividing a pooling sum by ``count``."""
    k = (count - 1).bit_length()  # 2**k / 2 < count <= 2**k
    return (((1 << 30) + 1) << k) // count, 30 + k


def rescale(value: Fixed, qparams: tuple[Any, ...], through_int32: bool = False) -> Codes:
    """Return a computed value requantised as RESCALE does; ``qparams`` are a quantize
    node's (scale, zero point, qmin, qmax, dtype). ``through_int32``: a 48-bit accumulator
    is first taken to int32 unscaled (saturating), then rescaled with a 31-bit multiplier."""
    scale, zero_point, qmin, qmax, dtype = float(qparams[0]), int(qparams[1]), *qparams[2:]
    width = 16 if value.bits == 48 and not through_int32 else 32
    if value.bits == 48 and through_int32:
        int32 = torch.iinfo(torch.int32)
        value = dataclasses.replace(value, ints=value.ints.clamp(int32.min, int32.max))
    parts = [scale_parts(s / scale, width) for s in value.scale]
    codes = apply_scale(value.ints.round().to(torch.int64), parts, value.axis) + zero_point
    info = torch.iinfo(dtype)
    codes = codes.clamp(info.min, info.max).clamp(qmin, qmax)
    if not math.isinf(value.low):
        codes = codes.clamp(min=_bound(value.low, *qparams))
    if not math.isinf(value.high):
        codes = codes.clamp(max=_bound(value.high, *qparams))
    return Codes(codes, scale, zero_point, dtype)


def _bound(value: float, *qparams: Any) -> int:
    """Return a clamp bound quantised as the graph's quantize op does (on the host)."""
    return int(qd.quantize_per_tensor.default(torch.tensor([value]), *qparams).item())


# --- the rules --------------------------------------------------------------------------


def _fixed(value: Any, op: str) -> Fixed:
    if not isinstance(value, Fixed):
        raise NoExactRule(f"{op} of a value that is not quantised")
    return value


def dequantize(codes: Any, scale: float, zero_point: int, *limits: Any) -> Fixed:
    """Return codes as integers at their scale (``limits``: qmin, qmax, dtype)."""
    source = codes if isinstance(codes, Codes) else None  # else a constant's raw codes
    ints = ((codes if source is None else source.codes).to(torch.int64) - zero_point).double()
    return Fixed(ints, (float(scale),), source=source, bits=torch.iinfo(limits[-1]).bits)


def dequantize_channels(codes: Any, scales: Any, zero_points: Any, *rest: Any) -> Fixed:
    """Return per-channel codes (weights, biases) as integers at their channels' scales
    (``rest``: axis, qmin, qmax, dtype)."""
    axis = rest[0]
    shape = [1] * codes.dim()
    shape[axis] = -1
    ints = (codes.to(torch.int64) - zero_points.reshape(shape)).double()  # constants
    scale = tuple(float(s) for s in scales.tolist())
    return Fixed(ints, scale, axis, bits=torch.iinfo(rest[-1]).bits)


def _accumulated(x: Fixed, weight: Fixed, bias: Any, ints: Any, axis: int) -> Fixed:
    """Return a conv/linear result: the integer sum, the bias, scale s_in * s_w[c]."""
    if bias is not None:
        shape = [1] * ints.dim()
        shape[axis] = -1
        ints = ints + _fixed(bias, "a bias").ints.reshape(shape)
    scale = tuple(x.per_tensor * s for s in weight.scale)
    return Fixed(ints, scale, axis % ints.dim(), bits=48 if x.bits == 16 else 32)


def conv2d(x: Any, weight: Any, bias: Any = None, *args: Any) -> Fixed:
    x, weight = _fixed(x, "conv2d"), _fixed(weight, "conv2d")
    return _accumulated(x, weight, bias, F.conv2d(x.ints, weight.ints, None, *args), 1)


def conv_transpose2d(x: Any, weight: Any, bias: Any = None, *args: Any) -> Fixed:
    x, weight = _fixed(x, "conv_transpose2d"), _fixed(weight, "conv_transpose2d")
    groups = args[3] if len(args) > 3 else 1
    if len(weight.scale) > 1 and groups != 1:
        raise NoExactRule("a grouped conv_transpose2d with per-channel weights")
    return _accumulated(x, weight, bias, F.conv_transpose2d(x.ints, weight.ints, None, *args), 1)


def linear(x: Any, weight: Any, bias: Any = None) -> Fixed:
    x, weight = _fixed(x, "linear"), _fixed(weight, "linear")
    return _accumulated(x, weight, bias, x.ints @ weight.ints.T, -1)


def clamped(low: float, high: float) -> Callable[..., Fixed]:
    def rule(x: Any, lo: float | None = low, hi: float | None = high) -> Fixed:
        value = _fixed(x, "a clamp")
        lo = -math.inf if lo is None else float(lo)
        hi = math.inf if hi is None else float(hi)
        return dataclasses.replace(value, low=max(value.low, lo), high=min(value.high, hi))

    return rule


def added(sign: int) -> Callable[..., Fixed]:
    def rule(a: Any, b: Any, alpha: float = 1) -> Fixed:
        a, b = _fixed(a, "add"), _fixed(b, "add")
        if alpha != 1:
            raise NoExactRule("add or sub with alpha")
        common = 2 * max(a.per_tensor, b.per_tensor) / (1 << (12 if a.bits == 16 else 20))
        ints = [
            apply_scale(v.ints.to(torch.int64), [scale_parts(v.per_tensor / common)])
            for v in (a, b)
        ]
        return Fixed((ints[0] + sign * ints[1]).double(), (common,), bits=32)

    return rule


def multiplied(name: str, product: Callable[[Any, Any], Any]) -> Callable[..., Fixed]:
    """A product (``mul``: 32-bit; ``matmul``: 48-bit from int16) at the scales' product."""

    def rule(a: Any, b: Any) -> Fixed:
        a, b = _fixed(a, name), _fixed(b, name)
        wide = 48 if name == "matmul" and a.bits == 16 else 32
        return Fixed(product(a.ints, b.ints), (a.per_tensor * b.per_tensor,), bits=wide)

    return rule


def reduce_sum(x: Any, dims: Any = None, keepdim: bool = False) -> Fixed:
    x = _fixed(x, "sum")
    return Fixed(x.ints.sum(dims, keepdim), (x.per_tensor,), bits=32)


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0, *options: Any) -> Fixed:
    """Return AVG_POOL2D's codes; ``options``: ceil_mode, count_include_pad (moot without
    padding), divisor_override."""
    x = _fixed(x, "avg_pool2d")
    ceil_mode = bool(options[0]) if options else False
    divisor = options[2] if len(options) > 2 else None
    if any(_pair(padding)) or ceil_mode or divisor is not None:
        raise NoExactRule("avg_pool2d with padding, ceil_mode or a divisor")
    kh, kw = _pair(kernel)
    sums = F.avg_pool2d(x.ints, (kh, kw), stride or (kh, kw), divisor_override=1)
    ints = apply_scale(sums.round().to(torch.int64), [reciprocal_parts(kh * kw)])
    return Fixed(ints.double(), (x.per_tensor,), bits=x.bits)


def adaptive_avg_pool2d(x: Any, size: Any) -> Fixed:
    height, width = _fixed(x, "adaptive_avg_pool2d").ints.shape[-2:]
    oh, ow = _pair(size)
    if height % oh or width % ow:
        raise NoExactRule("adaptive_avg_pool2d with uneven windows")
    return avg_pool2d(x, (height // oh, width // ow))


def _pair(value: Any) -> tuple[int, int]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    return (int(items[0]), int(items[-1]))


def max_pool2d(x: Any, *args: Any) -> Fixed:
    value = _fixed(x, "max_pool2d")
    args = (args[0], args[1] or None, *args[2:]) if len(args) > 1 else args  # [] = kernel
    return dataclasses.replace(value, ints=F.max_pool2d(value.ints, *args), source=None)


def cat(values: Any, dim: int = 0) -> Fixed:
    fixed = [_fixed(v, "cat") for v in values]
    if len({v.per_tensor for v in fixed}) != 1:
        raise NoExactRule("cat of inputs quantised with different scales")
    return dataclasses.replace(fixed[0], ints=torch.cat([v.ints for v in fixed], dim), source=None)


def reshaped(target: Any) -> Callable[..., Any]:
    """A view, slice or reduction that moves integers without changing them."""

    def rule(x: Any, *args: Any, **kwargs: Any) -> Any:
        x = _fixed(x, str(target))
        x.per_tensor  # noqa: B018 - refuses a per-channel value
        out = target(x.ints, *args, **kwargs)
        if isinstance(out, list | tuple):
            return [dataclasses.replace(x, ints=o, source=None) for o in out]
        return dataclasses.replace(x, ints=out, source=None)

    return rule


# Ops that move integers without changing them: views, slices, selections, maxima.
MOVES = (
    "flatten.using_ints view.default reshape.default _unsafe_view.default permute.default"
    " transpose.int squeeze.dim squeeze.dims unsqueeze.default clone.default"
    " contiguous.default slice.Tensor slice_copy.Tensor select.int expand.default"
    " amax.default chunk.default split.Tensor dropout.default"
)
# Ops the lowering turns into an int8 TABLE.
TABLES = (
    "sigmoid.default tanh.default hardsigmoid.default hardswish.default silu.default"
    " gelu.default exp.default log.default reciprocal.default rsqrt.default erf.default"
)


def _ops(names: str) -> list[Any]:
    """Return aten overloads by ``name.overload``."""
    return [operator.attrgetter(name)(aten) for name in names.split()]


RULES: dict[Any, Callable[..., Any]] = {
    aten.conv2d.default: conv2d,
    aten.conv2d.padding: conv2d,
    aten.conv_transpose2d.input: conv_transpose2d,
    aten.linear.default: linear,
    aten.relu.default: clamped(0.0, math.inf),
    aten.relu_.default: clamped(0.0, math.inf),
    aten.hardtanh.default: clamped(-1.0, 1.0),
    aten.hardtanh_.default: clamped(-1.0, 1.0),
    aten.clamp.default: clamped(-math.inf, math.inf),
    aten.add.Tensor: added(1),
    aten.sub.Tensor: added(-1),
    aten.mul.Tensor: multiplied("mul", operator.mul),
    aten.bmm.default: multiplied("matmul", operator.matmul),
    aten.matmul.default: multiplied("matmul", operator.matmul),
    aten.sum.dim_IntList: reduce_sum,
    aten.avg_pool2d.default: avg_pool2d,
    aten.adaptive_avg_pool2d.default: adaptive_avg_pool2d,
    aten.max_pool2d.default: max_pool2d,
    aten.cat.default: cat,
    **{target: reshaped(target) for target in _ops(MOVES)},
}
TABLE_OPS = set(_ops(TABLES))
# Constants, by overload or (as 1.2.0's graphs hold some) by packet: evaluated as they are.
FACTORIES = {*_ops("zeros.default ones.default full.default"), aten.zeros, aten.ones, aten.full}


def table(node: Any, x: Any, *args: Any, **kwargs: Any) -> Codes:
    """Return a table op's codes: the host-computed int8 TABLE, looked up."""
    x = _fixed(x, str(node.target))
    users = list(node.users)
    if x.source is None or x.bits != 8 or len(users) != 1 or users[0].target not in QUANTIZE:
        raise NoExactRule(f"{node.target} other than int8 between a dequantize and a quantize")
    dq = node.args[0]
    q_args = users[0].args[1:]
    domain = torch.arange(-128, 128, dtype=torch.int8).clamp(dq.args[3], dq.args[4])
    entries = qd.quantize_per_tensor.default(
        node.target(qd.dequantize_per_tensor.default(domain, *dq.args[1:]), *args, **kwargs),
        *q_args,
    ).to(torch.int64)
    return Codes(entries[x.source.codes + 128], float(q_args[0]), int(q_args[1]), q_args[-1])


def quantize(x: Any, *qparams: Any, through_int32: bool = False) -> Codes:
    """Return a quantize node's codes (``qparams``: scale, zero point, qmin, qmax, dtype)."""
    if isinstance(x, Codes):  # a table op's codes, already in this quantize's terms
        return x
    if isinstance(x, Fixed):
        return rescale(x, qparams, through_int32)
    codes = qd.quantize_per_tensor.default(x, *qparams)
    return Codes(codes.to(torch.int64), float(qparams[0]), int(qparams[1]), qparams[-1])


# --- the evaluation ---------------------------------------------------------------------


def evaluate(module: Any, inputs: tuple[Any, ...]) -> Evaluation:
    """Evaluate a converted PT2E graph exactly (see the module docstring): with each
    48-bit accumulator rescaled directly, and, if there was one, through int32 too.

    Raises :class:`NoExactRule` naming the first op the reference has no rule for.
    """
    direct, rescaled_48_bits = _evaluate(module, inputs, through_int32=False)
    if not rescaled_48_bits:
        return direct
    other, _ = _evaluate(module, inputs, through_int32=True)
    return dataclasses.replace(direct, through_int32=other.outputs)


def _evaluate(
    module: Any, inputs: tuple[Any, ...], *, through_int32: bool
) -> tuple[Evaluation, bool]:
    """Return the evaluation, and whether a quantize node took in a 48-bit accumulator."""
    values: dict[Any, Any] = {}
    wide = False
    placeholders = iter(inputs)
    taps: list[Tap] = []
    outputs: tuple[Codes, ...] = ()
    for node in module.graph.nodes:
        if node.op == "placeholder":
            values[node] = next(placeholders)
        elif node.op == "get_attr":
            values[node] = operator.attrgetter(node.target)(module)
        elif node.op == "output":
            found = [values[n] for n in node.args[0]]
            if any(not isinstance(v, Fixed) or v.source is None for v in found):
                raise NoExactRule("a graph output that is not a dequantized quantize")
            outputs = tuple(v.source for v in found)
        else:
            args = tuple(_resolve(a, values) for a in node.args)
            kwargs = {k: _resolve(v, values) for k, v in node.kwargs.items()}
            if node.target in QUANTIZE:
                wide = wide or (isinstance(args[0], Fixed) and args[0].bits == 48)
                values[node] = quantize(*args, **kwargs, through_int32=through_int32)
                on_cpu = node.args[0].op == "placeholder"
                taps.append(Tap(node.name, _where(node), values[node], on_cpu))
            else:
                values[node] = _call(node, args, kwargs)
    return Evaluation(outputs, tuple(taps), _downstream(module)), wide


def _call(node: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    target = node.target
    if target in DEQUANTIZE:
        return dequantize(*args, **kwargs)
    if target == qd.dequantize_per_channel.default:
        return dequantize_channels(*args, **kwargs)
    if target in TABLE_OPS:
        return table(node, *args, **kwargs)
    if target in FACTORIES:
        return target(*args, **kwargs)
    if target is operator.getitem:
        return args[0][args[1]]
    rule = RULES.get(target)
    if rule is None:
        raise NoExactRule(f"no exact rule for {target}")
    return rule(*args, **kwargs)


def _resolve(arg: Any, values: dict[Any, Any]) -> Any:
    if isinstance(arg, torch.fx.Node):
        return values[arg]
    if isinstance(arg, list | tuple):
        return type(arg)(_resolve(a, values) for a in arg)
    return arg


def _where(node: Any) -> str:
    """Return what feeds a quantize node: its module and the ops since the dequantizes."""
    ops: list[str] = []
    module = ""
    pending = [node.args[0]]
    while pending:
        current = pending.pop()
        if not isinstance(current, torch.fx.Node) or current.op != "call_function":
            continue
        if current.target in (*QUANTIZE, *DEQUANTIZE, qd.dequantize_per_channel.default):
            continue
        ops.insert(0, str(getattr(current.target, "_opname", current.target)))
        stack = current.meta.get("nn_module_stack") or {}
        module = module or (next(reversed(stack.values()))[0] if stack else "")
        pending.extend(current.all_input_nodes)
    name = " + ".join(ops) or "input"
    return f"{module}: {name}" if module else name


def _downstream(module: Any) -> dict[str, tuple[str, ...]]:
    """Return each quantize node's nearest quantize nodes further on (through any ops)."""
    found: dict[str, tuple[str, ...]] = {}
    for node in module.graph.nodes:
        if node.target not in QUANTIZE:
            continue
        seen: set[Any] = set()
        pending, near = list(node.users), []
        while pending:
            current = pending.pop()
            if current not in seen:
                seen.add(current)
                near += [current.name] if current.target in QUANTIZE else []
                pending += [] if current.target in QUANTIZE else list(current.users)
        found[node.name] = tuple(near)
    return found
