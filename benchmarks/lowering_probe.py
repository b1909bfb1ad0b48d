"""One lowering, measured from inside: phases, every pass, optionally a cProfile.

Run by ``bench_lowering.py`` with the Python of an equivalence env (stock or patched
executorch, either line), one fresh process per sample:

    python benchmarks/lowering_probe.py --model gru --size 8 [--profile out.pstats]

It builds the model (``gru``/``lstm``: the zoo's keyword spotter over ``size`` frames;
``conv``: ``size`` conv + ReLU layers), exports it, quantises it (a8w8, per channel) and
lowers it with the TOSA partitioner for TOSA-1.0+INT, as the equivalence worker does, and
prints one :class:`Sample` as JSON (through ``overlay.codec``). Each phase has its wall and
CPU time; each pass (every ``PassBase`` subclass, the Arm pipeline's and exir's) its
exclusive CPU time, its runs, how many of them retraced the graph (``call_submodule``)
and how many retraces left it as it was (the same ops in the same order): a retrace that
changes nothing is work a target pre-check would have skipped. torch is imported inside
functions only, so the controller can import the dataclasses.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # overlay.codec (standard library only) and the zoo

from overlay import codec  # noqa: E402

MODELS = ("gru", "lstm", "conv")
SPEC = "TOSA-1.0+INT"


@dataclass(frozen=True)
class Phase:
    """Wall and CPU seconds of one phase of a lowering."""

    name: str
    wall: float
    cpu: float


@dataclass(frozen=True)
class PassTime:
    """One pass class over a lowering: exclusive CPU seconds, runs, retraces, no-op retraces."""

    name: str
    seconds: float
    runs: int
    retraces: int
    unchanged_retraces: int


@dataclass(frozen=True)
class Sample:
    """One lowering of one model at one size in one environment."""

    model: str
    size: int
    executorch: str
    torch: str
    nodes: int  # nodes of the quantised export the lowering starts from
    delegates: int
    cpu_ops: int  # call_function nodes left outside the delegates
    payload_sha256: str  # of every delegate's payload, in graph order: the same lowering?
    phases: tuple[Phase, ...]
    passes: tuple[PassTime, ...] = field(default=())

    def phase(self, name: str) -> Phase:
        """Return the phase ``name`` (a zero phase when it did not run)."""
        return next((p for p in self.phases if p.name == name), Phase(name, 0.0, 0.0))


def build(model: str, size: int) -> tuple[Any, tuple[Any, ...]]:
    """Return the model and its inputs, made under the corpus seed."""
    import torch

    from overlay.equivalence.corpus import SEED, zoo

    torch.manual_seed(SEED)
    if model in ("gru", "lstm"):
        return zoo.keyword_spotter(model, frames=size)
    layers: list[torch.nn.Module] = []
    for i in range(size):
        layers += [torch.nn.Conv2d(3 if i == 0 else 8, 8, 3, padding=1), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).eval(), (torch.randn(1, 3, 16, 16),)


class PassClock:
    """Times every pass class by wrapping each ``__call__`` a ``PassBase`` subclass defines.

    Exclusive time: a pass that runs passes inside it is charged only for its own work.
    A retrace is a ``call_submodule`` of exir's ``ExportPass`` while the pass runs."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.runs: dict[str, int] = {}
        self.retraces: dict[str, int] = {}
        self.unchanged: dict[str, int] = {}
        self._stack: list[list[Any]] = []  # [name, seconds spent in nested passes, retraced]
        self._wrapped: set[type] = set()

    def install(self) -> None:
        """Wrap every pass class imported so far (call again after lazy imports)."""
        from executorch.exir.pass_base import _ExportPassBase
        from torch.fx.passes.infra.pass_base import PassBase

        def subclasses(cls: type) -> Iterator[type]:
            sub: type
            for sub in cls.__subclasses__():
                yield sub
                yield from subclasses(sub)

        for cls in (PassBase, *subclasses(PassBase)):
            if "__call__" in cls.__dict__ and cls not in self._wrapped:
                self._wrapped.add(cls)
                setattr(cls, "__call__", self._timed(cls.__dict__["__call__"]))  # noqa: B010
        if _ExportPassBase not in self._wrapped:
            self._wrapped.add(_ExportPassBase)
            retrace = _ExportPassBase.call_submodule

            def counted(pass_: Any, *args: Any, **kwargs: Any) -> Any:
                if self._stack:
                    self._stack[-1][2] = True
                return retrace(pass_, *args, **kwargs)

            _ExportPassBase.call_submodule = counted

    def _timed(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(pass_: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
            name = type(pass_).__name__
            before = ops(module)
            self._stack.append([name, 0.0, False])
            started = time.process_time()
            result = None
            try:
                result = call(pass_, module, *args, **kwargs)
                return result
            finally:
                elapsed = time.process_time() - started
                _, nested, retraced = self._stack.pop()
                self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - nested
                self.runs[name] = self.runs.get(name, 0) + 1
                if retraced:
                    self.retraces[name] = self.retraces.get(name, 0) + 1
                    after = ops(getattr(result, "graph_module", module))
                    if before is not None and before == after:
                        self.unchanged[name] = self.unchanged.get(name, 0) + 1
                if self._stack:  # the caller is charged for neither this pass nor its check
                    self._stack[-1][1] += time.process_time() - started

        return timed

    def times(self) -> tuple[PassTime, ...]:
        """Return every pass that ran, slowest first."""
        return tuple(
            PassTime(
                name,
                seconds,
                self.runs[name],
                self.retraces.get(name, 0),
                self.unchanged.get(name, 0),
            )
            for name, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])
        )


def ops(module: Any) -> tuple[tuple[str, str], ...] | None:
    """Return a graph's (op, target) sequence; None for what is not a GraphModule."""
    import torch

    graph = getattr(module, "graph", None)
    if not isinstance(module, torch.fx.GraphModule) or graph is None:
        return None
    return tuple((n.op, str(n.target)) for n in graph.nodes)


@contextmanager
def phase_clock(phases: list[Phase], name: str) -> Iterator[None]:
    """Append the wall and CPU time of the block as phase ``name``."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        phases.append(Phase(name, time.perf_counter() - wall, time.process_time() - cpu))


@contextmanager
def phases_inside_lowering(phases: list[Phase]) -> Iterator[None]:
    """Time the parts of ``to_edge_transform_and_lower``: ATen decompositions, the edge
    dialect passes, partitioning, the Arm pass pipeline; the rest (TOSA serialisation,
    verifiers, delegate bookkeeping) is the lowering's total minus these."""
    import torch
    from executorch.backends.arm._passes.arm_pass_manager import ArmPassManager
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir.program import _program

    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)

        def clocked(*args: Any, **kwargs: Any) -> Any:
            with phase_clock(phases, name):
                return original(*args, **kwargs)

        patched.append((owner, attribute, original))
        setattr(owner, attribute, clocked)

    wrap(torch.export.ExportedProgram, "run_decompositions", "decompositions")
    wrap(_program, "_generate_edge_program", "edge passes")
    wrap(TOSAPartitioner, "partition", "partition")
    wrap(ArmPassManager, "transform_to_backend_pipeline", "arm pipeline")
    try:
        yield
    finally:
        for owner, attribute, original in reversed(patched):
            setattr(owner, attribute, original)


def merged(phases: list[Phase]) -> tuple[Phase, ...]:
    """Sum phases of the same name (decompositions run more than once), in first order."""
    total: dict[str, Phase] = {}
    for p in phases:
        seen = total.get(p.name, Phase(p.name, 0.0, 0.0))
        total[p.name] = Phase(p.name, p.wall + seen.wall, p.cpu + seen.cpu)
    return tuple(total.values())


def measure(model: str, size: int, profile: Path | None) -> Sample:
    """Export, quantise and lower once; return what was measured."""
    import importlib.metadata

    import torch
    from executorch.backends.arm.quantizer import (
        TOSAQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    module, inputs = build(model, size)
    phases: list[Phase] = []
    spec = TosaCompileSpec(SPEC)
    with phase_clock(phases, "export"):
        exported = torch.export.export(module, inputs)
    with phase_clock(phases, "quantize"):
        quantizer = TOSAQuantizer(spec)
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
        prepared(*inputs)
        converted = convert_pt2e(prepared)
    with phase_clock(phases, "export quantized"):
        program = torch.export.export(converted, inputs)
    clock = PassClock()
    clock.install()
    inner: list[Phase] = []
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
    with phases_inside_lowering(inner), phase_clock(phases, "lower"):
        clock.install()
        if profiler is not None:
            profiler.enable()
        edge = to_edge_transform_and_lower(program, partitioner=[TOSAPartitioner(spec)])
        if profiler is not None:
            profiler.disable()
    if profiler is not None and profile is not None:
        profiler.dump_stats(str(profile))
    program_out = edge.exported_program()
    calls = [n for n in program_out.graph.nodes if n.op == "call_function"]
    delegates = sum(1 for n in calls if "executorch_call_delegate" in str(n.target))
    digest = hashlib.sha256()
    for node in calls:
        if "executorch_call_delegate" in str(node.target):
            digest.update(getattr(program_out.graph_module, node.args[0].target).processed_bytes)
    return Sample(
        model=model,
        size=size,
        executorch=importlib.metadata.version("executorch"),
        torch=str(torch.__version__),
        nodes=len(program.graph.nodes),
        delegates=delegates,
        payload_sha256=digest.hexdigest(),
        cpu_ops=sum(
            1
            for n in calls
            if "executorch_call_delegate" not in str(n.target) and "getitem" not in str(n.target)
        ),
        phases=(*phases, *merged(inner)),
        passes=clock.times(),
    )


def main() -> int:
    """Measure one lowering; print its Sample as JSON on stdout."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=MODELS, required=True)
    parser.add_argument("--size", type=int, required=True, help="frames (gru, lstm), layers (conv)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the lowering here")
    args = parser.parse_args()
    sample = measure(args.model, args.size, args.profile)
    sys.stdout.write(codec.dumps(sample) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
