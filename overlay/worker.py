"""One long-lived lowering process per path: ``python -m overlay.worker``, JSON lines.

Requests on stdin, one JSON object per line; one JSON reply per request on the original
stdout. Library output is sent to stderr so it cannot corrupt the protocol.

    {"cmd": "init", "runtime_patch": null | "overlay.runtime" | "FILE.py:FUNC",
     "models": null | "FILE.py"}
    {"cmd": "list"}                         -> {"cases": [CaseInfo json], "probes": {...}}
    {"cmd": "case", "name": N, "fixes": null | [n]}   -> case result
    {"cmd": "probe", "name": N, "fixes": null | [n]}  -> probe result
    {"cmd": "quit"}

``fixes`` applies only those overlay.runtime fixes for this one request, then undoes them
(used on the stock path to attribute a difference to one patch).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from overlay import corpus, runtime
from overlay.corpus import CaseInfo

_ADDRESS_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_MESSAGE_LIMIT = 4000


class _State:
    def __init__(self) -> None:
        self.user_cases: dict[str, dict[str, Any]] = {}
        self.user_infos: dict[str, CaseInfo] = {}
        self.runtime_patch: str | None = None


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


def _error(exc: BaseException, stage: str) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": normalise_message(str(exc)),
        "stage": stage,
        "traceback": normalise_message("".join(traceback.format_exception(exc))[-3000:]),
    }


def load_callable(spec: str) -> Callable[[], Any]:
    """Resolve ``FILE.py:FUNCTION`` or ``package.module:FUNCTION`` (default ``apply_all``)."""
    target, _, function = spec.partition(":")
    if target.endswith(".py"):
        module = load_file_module(Path(target))
    else:
        module = importlib.import_module(target)
    return getattr(module, function or "apply_all")  # type: ignore[no-any-return]


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


def _load_models(state: _State, path: str) -> list[str]:
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
        if name in state.user_cases or any(c.name == name for c in corpus.CASES):
            problems.append(f"{name}: the name is already used (corpus or this file)")
        state.user_cases[name] = dict(entry)
        state.user_infos[name] = CaseInfo(
            name=name,
            spec=entry["spec"],
            quantize=entry["quantize"],
            per_channel=entry.get("per_channel", True),
            fast=True,
            source=str(Path(path).name),
        )
    return problems


def _case(state: _State, name: str) -> tuple[CaseInfo, Any, tuple[Any, ...]]:
    if name in state.user_cases:
        import torch

        entry = state.user_cases[name]
        torch.manual_seed(corpus.SEED)
        module = entry["module"]
        if not isinstance(module, torch.nn.Module):
            module = module()
        return state.user_infos[name], module, tuple(entry["inputs"])
    module, inputs = corpus.build(name)
    return corpus.info(name), module, inputs


def _quantizer(info: CaseInfo, compile_spec: Any) -> Any:
    from executorch.backends.arm.quantizer import (
        TOSAQuantizer,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )

    quantizer = TOSAQuantizer(compile_spec)
    if info.quantize == "a8w8":
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=info.per_channel))
    else:
        quantizer.set_global(
            get_symmetric_a16w8_quantization_config(is_per_channel=info.per_channel)
        )
    return quantizer


def _digest(tensor: Any) -> dict[str, Any]:
    data = tensor.detach().contiguous().cpu()
    raw = data.view(-1).numpy().tobytes() if data.numel() else b""
    return {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "dtype": str(data.dtype),
        "shape": list(data.shape),
    }


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _max_abs(got: tuple[Any, ...], want: tuple[Any, ...]) -> list[float | None]:
    errors: list[float | None] = []
    for a, b in zip(got, want, strict=False):
        if a.shape != b.shape:
            errors.append(None)
            continue
        errors.append(float((a.double() - b.double()).abs().max()) if a.numel() else 0.0)
    return errors


def _graph(edge: Any) -> tuple[list[str], list[Any]]:
    """Return the canonical lowered graph and the delegate modules, in graph order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    from overlay.probes import op_name

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


def _payloads(delegates: list[Any], keep_bytes: bool) -> list[dict[str, Any]]:
    result = []
    for lowered in delegates:
        data = bytes(lowered.processed_bytes)
        entry: dict[str, Any] = {
            "backend": lowered.backend_id,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if keep_bytes:
            entry["hex"] = data.hex()
        result.append(entry)
    return result


def _run_lowered(edge: Any, inputs: tuple[Any, ...], has_delegate: bool) -> tuple[Any, ...]:
    program = edge.exported_program().module()
    if not has_delegate:
        return _as_tuple(program(*inputs))
    from executorch.backends.arm.test.runner_utils import TosaReferenceModelDispatch

    with TosaReferenceModelDispatch():
        return _as_tuple(program(*inputs))


def _vgf(exported: Any, info: CaseInfo) -> dict[str, Any]:
    from executorch.backends.arm.vgf.model_converter import find_model_converter_binary

    if find_model_converter_binary() is None:
        return {"skipped": "model-converter not on PATH (pip install ai_ml_sdk_model_converter)"}
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
    from executorch.exir import to_edge_transform_and_lower

    try:
        edge = to_edge_transform_and_lower(
            exported, partitioner=[VgfPartitioner(VgfCompileSpec(info.spec))]
        )
        _, delegates = _graph(edge)
        return {"payloads": _payloads(delegates, keep_bytes=False)}
    except Exception as exc:
        return {"error": _error(exc, "vgf")}


def run_case(state: _State, name: str, *, keep_bytes: bool = False) -> dict[str, Any]:
    """Export, quantise, lower and run one case; every failure is data, not an exception."""
    import torch

    result: dict[str, Any] = {"name": name, "status": "ok", "error": None}
    stage = "build"
    started = time.perf_counter()
    try:
        info, module, inputs = _case(state, name)
        if not isinstance(module, torch.fx.GraphModule):
            module = module.eval()
        with torch.no_grad():
            float_out = _as_tuple(module(*inputs))
        from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
        from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
        from executorch.exir import to_edge_transform_and_lower

        compile_spec = TosaCompileSpec(info.spec)
        stage = "export"
        exported = torch.export.export(module, inputs)
        reference = module
        if info.quantize is not None:
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            stage = "quantize"
            prepared = prepare_pt2e(
                exported.module(check_guards=False), _quantizer(info, compile_spec)
            )
            prepared(*inputs)
            reference = convert_pt2e(prepared)
            stage = "export"
            exported = torch.export.export(reference, inputs)
        with torch.no_grad():
            fq_out = _as_tuple(reference(*inputs))
        stage = "lower"
        lower_start = time.perf_counter()
        edge = to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(compile_spec)])
        result["lower_seconds"] = time.perf_counter() - lower_start
        result["graph"], delegates = _graph(edge)
        result["payloads"] = _payloads(delegates, keep_bytes)
    except Exception as exc:
        result.update(status="fail", error=_error(exc, stage))
        result["seconds"] = time.perf_counter() - started
        return result
    try:
        with torch.no_grad():
            got = _run_lowered(edge, inputs, bool(delegates))
        result["numerics"] = {
            "outputs": [_digest(t) for t in got],
            "max_abs_err_vs_float": _max_abs(got, float_out),
            "max_abs_err_vs_fake_quant": _max_abs(got, fq_out),
            "reference_max_abs": [
                float(t.double().abs().max()) if t.numel() else 0.0 for t in fq_out
            ],
        }
    except Exception as exc:
        result["numerics"] = {"error": _error(exc, "numerics")}
    result["vgf"] = _vgf(exported, info)
    result["seconds"] = time.perf_counter() - started
    return result


def run_probe(name: str) -> dict[str, Any]:
    """Run one probe; a raised exception is the observation."""
    from overlay import probes

    try:
        return {"name": name, "status": "ok", "error": None, "value": probes.run_probe(name)}
    except Exception as exc:
        return {"name": name, "status": "fail", "error": _error(exc, "probe"), "value": None}


@contextmanager
def _temporary_fixes(fixes: list[int] | None) -> Iterator[None]:
    if not fixes:
        yield
        return
    applied = runtime.apply(fixes)
    try:
        yield
    finally:
        runtime.undo(applied)


def _init(state: _State, request: dict[str, Any]) -> dict[str, Any]:
    patch = request.get("runtime_patch")
    reply: dict[str, Any] = {"python": sys.executable}
    started = time.perf_counter()
    import executorch.backends.arm.tosa.partitioner  # noqa: F401 - import once, timed
    import torch

    reply["import_seconds"] = time.perf_counter() - started
    reply["executorch"] = importlib.metadata.version("executorch")
    reply["torch"] = torch.__version__
    if patch:
        load_callable(patch)()
        state.runtime_patch = patch
    reply["runtime_fixes_applied"] = [
        f.number for f in runtime.FIXES if runtime.is_applied(f.number)
    ]
    if request.get("models"):
        problems = _load_models(state, request["models"])
        if problems:
            return {"error": {"type": "InvalidModels", "message": "\n".join(problems)}}
    return reply


def _handle(state: _State, request: dict[str, Any]) -> dict[str, Any]:
    command = request.get("cmd")
    if command == "init":
        return _init(state, request)
    if command == "list":
        infos = [c.to_json() for c in corpus.CASES]
        infos += [c.to_json() for c in state.user_infos.values()]
        from overlay.probes import PROBES

        return {"cases": infos, "probes": PROBES}
    if command in ("case", "probe"):
        fixes = request.get("fixes")
        with _temporary_fixes(fixes):
            if command == "case":
                return run_case(state, request["name"], keep_bytes=bool(request.get("keep_bytes")))
            return run_probe(request["name"])
    return {"error": {"type": "BadRequest", "message": f"unknown command {command!r}"}}


def serve(requests: TextIO | None = None, replies: TextIO | None = None) -> None:
    """Answer requests until ``quit`` or end of input."""
    if replies is None:
        channel = os.dup(1)
        os.dup2(2, 1)  # anything printed by libraries goes to stderr
        sys.stdout = sys.stderr
        replies = io.TextIOWrapper(os.fdopen(channel, "wb"), encoding="utf-8", write_through=True)
    requests = requests or sys.stdin
    import json

    state = _State()
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("cmd") == "quit":
            break
        try:
            reply = _handle(state, request)
        except Exception as exc:
            reply = {"error": _error(exc, str(request.get("cmd")))}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def _activate_env_bin() -> None:
    """Put this interpreter's bin folder on PATH, as activating its venv would.

    Tools installed beside executorch (``model_converter`` for VGF) are found on PATH.
    """
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


if __name__ == "__main__":
    _activate_env_bin()
    serve()
