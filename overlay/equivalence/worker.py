"""One long-lived lowering process per path: ``python -m overlay.equivalence.worker``.

Requests arrive on stdin and replies leave on the original stdout, one protocol line each
(:mod:`overlay.equivalence.protocol`). Library output is sent to stderr so it cannot
corrupt the protocol. The process imports only the overlay package and what its env has
(torch, executorch); the orchestrator puts a folder holding just the package on its path.

A :class:`Runner` does the work; :func:`serve` only speaks the protocol, so tests drive it
with a fake runner and no torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from overlay import runtime
from overlay.equivalence import corpus, probes
from overlay.equivalence.protocol import (
    CaseInfo,
    ErrorInfo,
    ErrorReply,
    EthosUResult,
    InitReply,
    InitRequest,
    ItemKind,
    ItemResult,
    ListReply,
    ListRequest,
    Numerics,
    OutputDigest,
    Payload,
    ProtocolError,
    QuitRequest,
    Reply,
    RunReply,
    RunRequest,
    RunStatus,
    Stage,
    TargetState,
    VgfResult,
    decode_request,
    encode,
)

_ADDRESS_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_MESSAGE_LIMIT = 4000


class Runner(Protocol):
    """What a worker process does with each request."""

    def init(self, request: InitRequest) -> InitReply:
        """Prepare the process (imports, runtime patch, user models)."""

    def cases(self) -> ListReply:
        """Return the items this worker can run."""

    def run(self, request: RunRequest) -> ItemResult:
        """Run one item; a failure of the model is data in the result."""


def _site_prefixes() -> list[str]:
    import sysconfig

    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix}
    return sorted(paths, key=len, reverse=True)


def normalise_message(message: str) -> str:
    """Strip what differs between environments but not between behaviours."""
    for prefix in _site_prefixes():
        message = message.replace(prefix, "<env>")
    message = _ADDRESS_RE.sub("0x?", message)
    return message[:_MESSAGE_LIMIT]


def _root_cause(exc: BaseException) -> BaseException:
    """Return the innermost exception a chain of ``raise ... from`` wraps."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def error_info(exc: BaseException, stage: Stage) -> ErrorInfo:
    """Return an exception as protocol data; a wrapped error leads with its root cause.

    executorch's pass manager re-raises a pass's error as ``Exception: An error occurred
    when running ... after the following passes: [...]``; the root cause is what differs.
    """
    message = str(exc)
    root = _root_cause(exc)
    if root is not exc:
        message = f"{type(root).__name__}: {root}\n(raised as: {message[:300]})"
    return ErrorInfo(
        type=type(exc).__name__,
        message=normalise_message(message),
        stage=stage,
        traceback=normalise_message("".join(traceback.format_exception(exc))[-3000:]),
    )


def load_file_module(path: Path) -> Any:
    """Import a file as a real module (importlib + sys.modules) so export can trace it."""
    path = path.resolve()
    name = "overlay_user_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_callable(spec: str) -> Callable[[], Any]:
    """Resolve ``FILE.py:FUNCTION`` or ``package.module:FUNCTION`` (default ``apply_all``)."""
    target, _, function = spec.partition(":")
    module = load_file_module(Path(target)) if target.endswith(".py") else None
    if module is None:
        module = importlib.import_module(target)
    found = getattr(module, function or "apply_all", None)
    if not callable(found):
        raise AttributeError(f"{target} has no function {function or 'apply_all'!r}")
    return found  # type: ignore[no-any-return]


@dataclass
class UserCase:
    """One case of a user's models file."""

    info: CaseInfo
    module: Any
    inputs: tuple[Any, ...]


@dataclass
class TorchRunner:
    """The real runner: exports, quantises, lowers and runs cases with torch and executorch."""

    user_cases: dict[str, UserCase] = field(default_factory=dict)

    def init(self, request: InitRequest) -> InitReply:
        """Import torch/executorch once (timed), apply the runtime patch, load user models."""
        started = time.perf_counter()
        import executorch.backends.arm.tosa.partitioner  # noqa: F401 - import once, timed
        import torch

        seconds = time.perf_counter() - started
        if request.runtime_patch:
            load_callable(request.runtime_patch)()
        if request.models:
            problems = self._load_models(request.models)
            if problems:
                raise ValueError("invalid models file:\n" + "\n".join(problems))
        return InitReply(
            python=sys.executable,
            executorch=importlib.metadata.version("executorch"),
            torch=str(torch.__version__),
            import_seconds=seconds,
            runtime_fixes_applied=tuple(
                f.number for f in runtime.FIXES if runtime.is_applied(f.number)
            ),
        )

    def _load_models(self, path: str) -> list[str]:
        import torch

        torch.manual_seed(corpus.SEED)  # inputs made at import time must match on every path
        module = load_file_module(Path(path))
        cases = getattr(module, "CASES", None)
        problems = corpus.validate_cases(cases, origin=path)
        if problems:
            return problems
        assert isinstance(cases, dict)
        for name, entry in cases.items():
            inputs = entry["inputs"]
            if not all(isinstance(t, torch.Tensor) for t in inputs):
                problems.append(f"{name}: every element of 'inputs' must be a torch.Tensor")
            if name in self.user_cases or any(c.name == name for c in corpus.ALL_CASES):
                problems.append(f"{name}: the name is already used (corpus or this file)")
            info = CaseInfo(
                name=name,
                spec=entry["spec"],
                quantize=entry["quantize"],
                per_channel=entry.get("per_channel", True),
                fast=True,
                source=Path(path).name,
                tolerance=entry.get("tolerance"),
                sqnr_db=entry.get("sqnr_db"),
                group="user",
                timeout=entry.get("timeout"),
                ethos_u=entry.get("ethos_u", False),
                expect_broken=entry.get("expect_broken", ""),
            )
            self.user_cases[name] = UserCase(info, entry["module"], tuple(inputs))
        return problems

    def cases(self) -> ListReply:
        """Return the corpus plus the user's cases, and the probes."""
        infos = (*corpus.ALL_CASES, *(c.info for c in self.user_cases.values()))
        return ListReply(cases=tuple(infos), probes=probes.PROBES)

    def run(self, request: RunRequest) -> ItemResult:
        """Run one case or probe, with ``request.fixes`` applied just for it."""
        with _temporary_fixes(request.fixes):
            if request.item.kind is ItemKind.PROBE:
                return run_probe(request.item.name)
            return self.run_case(request.item.name, keep_bytes=request.keep_bytes)

    def _case(self, name: str) -> tuple[CaseInfo, Any, tuple[Any, ...]]:
        if name in self.user_cases:
            import torch

            user = self.user_cases[name]
            torch.manual_seed(corpus.SEED)
            module = user.module
            if not isinstance(module, torch.nn.Module):
                module = module()
            return user.info, module, user.inputs
        module, inputs = corpus.build(name)
        return corpus.info(name), module, inputs

    def run_case(self, name: str, *, keep_bytes: bool = False) -> ItemResult:
        """Export, quantise, lower and run one case; every failure is data, not an exception."""
        import torch

        stage = Stage.BUILD
        started = time.perf_counter()
        exported_float: Any = None
        try:
            info, module, inputs = self._case(name)
            if not isinstance(module, torch.fx.GraphModule):
                module = module.eval()
            with torch.no_grad():
                float_out = _as_tuple(module(*inputs))
            from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
            from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
            from executorch.exir import to_edge_transform_and_lower

            compile_spec = TosaCompileSpec(info.spec)
            stage = Stage.EXPORT
            exported_float = exported = torch.export.export(module, inputs)
            reference = module
            if info.quantize is not None:
                from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

                stage = Stage.QUANTIZE
                prepared = prepare_pt2e(
                    exported.module(check_guards=False),
                    configure_quantizer(_case_quantizer(info, compile_spec), info),
                )
                prepared(*inputs)
                reference = convert_pt2e(prepared)
                stage = Stage.EXPORT
                exported = torch.export.export(reference, inputs)
            with torch.no_grad():
                fq_out = _as_tuple(reference(*inputs))
            stage = Stage.LOWER
            lower_start = time.perf_counter()
            edge = to_edge_transform_and_lower(
                exported, partitioner=[TOSAPartitioner(compile_spec)]
            )
            lower_seconds = time.perf_counter() - lower_start
            graph, delegates = lowered_graph(edge)
            payloads = delegate_payloads(delegates, keep_bytes)
        except Exception as exc:
            return ItemResult(
                status=RunStatus.FAIL,
                error=error_info(exc, stage),
                # Ethos-U lowers from the float export on its own: it is tried either way
                ethos_u=(
                    _ethos_u(exported_float, inputs, info) if exported_float is not None else ()
                ),
                seconds=time.perf_counter() - started,
            )
        numerics: Numerics | None = None
        numerics_error: ErrorInfo | None = None
        try:
            with torch.no_grad():
                got = _run_lowered(edge, inputs, bool(delegates))
            numerics = measure(got, float_out, fq_out)
        except Exception as exc:
            numerics_error = error_info(exc, Stage.NUMERICS)
        ethos_u = _ethos_u(exported_float, inputs, info)
        return ItemResult(
            status=RunStatus.OK,
            graph=tuple(graph),
            payloads=tuple(payloads),
            numerics=numerics,
            numerics_error=numerics_error,
            vgf=_vgf(exported, info, inputs, float_out, fq_out),
            ethos_u=ethos_u,
            lower_seconds=lower_seconds,
            seconds=time.perf_counter() - started,
        )


def _ethos_u(
    exported_float: Any, inputs: tuple[Any, ...], info: CaseInfo
) -> tuple[EthosUResult, ...]:
    """Lower the case for every Ethos-U target, when the case asks for it."""
    if not info.ethos_u:
        return ()
    from overlay.equivalence import ethosu

    return tuple(ethosu.lower(exported_float, inputs, info, target) for target in ethosu.TARGETS)


def _case_quantizer(info: CaseInfo, compile_spec: Any) -> Any:
    """Return the quantizer a case is lowered with: VGF's for VGF cases, else TOSA's."""
    if info.targets_vgf:
        from executorch.backends.arm.quantizer import VgfQuantizer
        from executorch.backends.arm.vgf import VgfCompileSpec

        return VgfQuantizer(VgfCompileSpec(info.spec))
    from executorch.backends.arm.quantizer import TOSAQuantizer

    return TOSAQuantizer(compile_spec)


def configure_quantizer(quantizer: Any, info: CaseInfo) -> Any:
    """Set the case's global quantisation config (a8w8 or a16w8) on an Arm quantizer."""
    from executorch.backends.arm.quantizer import (
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )

    if info.quantize == "a8w8":
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=info.per_channel))
    else:
        quantizer.set_global(
            get_symmetric_a16w8_quantization_config(is_per_channel=info.per_channel)
        )
    return quantizer


def measure(got: tuple[Any, ...], float_out: tuple[Any, ...], fq_out: tuple[Any, ...]) -> Numerics:
    """Return a run's outputs against the float and the fake-quantised references."""
    return Numerics(
        outputs=tuple(_digest(t) for t in got),
        max_abs_err_vs_float=_max_abs(got, float_out),
        max_abs_err_vs_fake_quant=_max_abs(got, fq_out),
        reference_max_abs=tuple(
            float(t.double().abs().max()) if t.numel() else 0.0 for t in fq_out
        ),
        reference_range=tuple(
            float(t.double().max() - t.double().min()) if t.numel() else 0.0 for t in fq_out
        ),
        sqnr_db=_sqnr(got, fq_out),
    )


def _sqnr(got: tuple[Any, ...], want: tuple[Any, ...]) -> tuple[float | None, ...]:
    """Return 10 log10(signal power / error power) per output (inf when bit-equal)."""
    values: list[float | None] = []
    for a, b in zip(got, want, strict=False):
        if a.shape != b.shape:
            values.append(None)
            continue
        signal = float(b.double().pow(2).sum())
        noise = float((a.double() - b.double()).pow(2).sum())
        if noise == 0.0:
            values.append(math.inf)
        elif signal == 0.0:
            values.append(-math.inf)
        else:
            values.append(10.0 * math.log10(signal / noise))
    return tuple(values)


def _digest(tensor: Any) -> OutputDigest:
    data = tensor.detach().contiguous().cpu()
    raw = data.view(-1).numpy().tobytes() if data.numel() else b""
    return OutputDigest(hashlib.sha256(raw).hexdigest(), str(data.dtype), tuple(data.shape))


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _max_abs(got: tuple[Any, ...], want: tuple[Any, ...]) -> tuple[float | None, ...]:
    errors: list[float | None] = []
    for a, b in zip(got, want, strict=False):
        if a.shape != b.shape:
            errors.append(None)
            continue
        errors.append(float((a.double() - b.double()).abs().max()) if a.numel() else 0.0)
    return tuple(errors)


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
                probes.op_name(n.target)
                for n in lowered.original_module.graph.nodes
                if n.op == "call_function"
            ]
            lines.append(f"delegate[{len(delegates)}] {lowered.backend_id}: {', '.join(inner)}")
            delegates.append(lowered)
        elif "getitem" not in str(node.target):
            lines.append(f"cpu: {probes.op_name(node.target)}")
    return lines, delegates


def delegate_payloads(delegates: list[Any], keep_bytes: bool) -> list[Payload]:
    """Return each delegate's processed bytes as a payload digest (with the bytes, if kept)."""
    result = []
    for lowered in delegates:
        data = bytes(lowered.processed_bytes)
        result.append(
            Payload(
                backend=str(lowered.backend_id),
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                hex=data.hex() if keep_bytes else None,
            )
        )
    return result


def _run_lowered(edge: Any, inputs: tuple[Any, ...], has_delegate: bool) -> tuple[Any, ...]:
    program = edge.exported_program().module()
    if not has_delegate:
        return _as_tuple(program(*inputs))
    from executorch.backends.arm.test.runner_utils import TosaReferenceModelDispatch

    with TosaReferenceModelDispatch():
        return _as_tuple(program(*inputs))


def _vgf(
    exported: Any,
    info: CaseInfo,
    inputs: tuple[Any, ...],
    float_out: tuple[Any, ...],
    fq_out: tuple[Any, ...],
) -> VgfResult:
    """Lower the case for VGF, then run the program with its VGF delegates emulated."""
    from executorch.backends.arm.vgf.model_converter import find_model_converter_binary

    if find_model_converter_binary() is None:
        return VgfResult(
            TargetState.SKIPPED,
            reason="model-converter not on PATH (pip install ai_ml_sdk_model_converter)",
        )
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
    from executorch.exir import to_edge_transform_and_lower

    try:
        started = time.perf_counter()
        edge = to_edge_transform_and_lower(
            exported, partitioner=[VgfPartitioner(VgfCompileSpec(info.spec))]
        )
        lower_seconds = time.perf_counter() - started
        _, delegates = lowered_graph(edge)
    except Exception as exc:
        return VgfResult(TargetState.FAILED, error=error_info(exc, Stage.VGF))
    lowered = VgfResult(
        TargetState.COMPARED,
        payloads=tuple(delegate_payloads(delegates, False)),
        lower_seconds=lower_seconds,
    )
    if not delegates:
        return dataclasses.replace(lowered, run_reason="no VGF delegate to run")
    import torch

    from overlay.equivalence import vgf_run

    emulation = vgf_run.find_emulation(Path.cwd() / "vgf-layers")
    if isinstance(emulation, str):
        return dataclasses.replace(lowered, run_reason=emulation)
    started = time.perf_counter()
    try:
        with torch.no_grad():
            got = vgf_run.run_program(edge, inputs, emulation)
        numerics = measure(got, float_out, fq_out)
    except Exception as exc:
        return dataclasses.replace(
            lowered,
            numerics_error=error_info(exc, Stage.VGF_RUN),
            run_seconds=time.perf_counter() - started,
        )
    seconds = time.perf_counter() - started
    return dataclasses.replace(lowered, numerics=numerics, run_seconds=seconds)


def run_probe(name: str) -> ItemResult:
    """Run one probe; a raised exception is the observation."""
    started = time.perf_counter()
    try:
        value = probes.run_probe(name)
    except Exception as exc:
        return ItemResult(
            status=RunStatus.FAIL,
            error=error_info(exc, Stage.PROBE),
            seconds=time.perf_counter() - started,
        )
    return ItemResult(status=RunStatus.OK, value=value, seconds=time.perf_counter() - started)


@contextmanager
def _temporary_fixes(fixes: tuple[int, ...]) -> Iterator[None]:
    if not fixes:
        yield
        return
    applied = runtime.apply(fixes)
    try:
        yield
    finally:
        runtime.undo(applied)


def handle(runner: Runner, line: str) -> Reply | None:
    """Answer one request line; None means quit. Nothing raised escapes."""
    try:
        request = decode_request(line)
    except ProtocolError as exc:
        return ErrorReply(error_info(exc, Stage.REQUEST))
    if isinstance(request, QuitRequest):
        return None
    try:
        if isinstance(request, InitRequest):
            return runner.init(request)
        if isinstance(request, ListRequest):
            return runner.cases()
        return RunReply(request.item, runner.run(request))
    except Exception as exc:
        stage = Stage.INIT if isinstance(request, InitRequest) else Stage.REQUEST
        return ErrorReply(error_info(exc, stage))


def serve(requests: TextIO, replies: TextIO, runner: Runner) -> None:
    """Answer requests until a quit request or the end of input."""
    for line in requests:
        if not line.strip():
            continue
        reply = handle(runner, line)
        if reply is None:
            break
        replies.write(encode(reply) + "\n")
        replies.flush()


def _activate_env_bin() -> None:
    """Put this interpreter's bin folder on PATH, as activating its venv would.

    Tools installed beside executorch (``model_converter`` for VGF) are found on PATH.
    """
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def main() -> None:
    """Serve on stdin/stdout, with library output moved to stderr."""
    _activate_env_bin()
    channel = os.dup(1)
    os.dup2(2, 1)  # anything printed by libraries goes to stderr
    sys.stdout = sys.stderr
    replies = io.TextIOWrapper(os.fdopen(channel, "wb"), encoding="utf-8", write_through=True)
    serve(sys.stdin, replies, TorchRunner())


if __name__ == "__main__":
    main()
