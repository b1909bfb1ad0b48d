"""One case through every target: TOSA (run on the reference model), VGF, Ethos-U.

The case is exported, quantised when it says so (the fake-quantised module is the
reference every path is judged against), lowered with the TOSA partitioner and run with
``tosa_reference_model``; then lowered for VGF and, when the emulation is installed, run
(:mod:`.vgf_run`); then, when the case asks, lowered for each Ethos-U target
(:mod:`.ethosu`). Every failure is data in the result, never an exception.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from overlay.equivalence.protocol import (
    ErrorInfo,
    EthosUResult,
    ItemResult,
    Numerics,
    RunStatus,
    Stage,
    TargetState,
    VgfResult,
)
from overlay.equivalence.worker import ethosu, quantize, vgf_run
from overlay.equivalence.worker.observe import (
    as_tuple,
    delegate_payloads,
    lowered_graph,
    measure,
    tosa_op_counts,
)
from overlay.equivalence.worker.serve import error_info
from overlay.items import CaseInfo

Build = Callable[[], tuple[Any, tuple[Any, ...]]]  # the case's (module, inputs)


def run_case(info: CaseInfo, build: Build, *, keep_bytes: bool = False) -> ItemResult:
    """Export, quantise, lower and run one case; every failure is data, not an exception."""
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    stage = Stage.BUILD
    started = time.perf_counter()
    exported_float: Any = None
    inputs: tuple[Any, ...] = ()
    try:
        module, inputs = build()
        if not isinstance(module, torch.fx.GraphModule):
            module = module.eval()
        with torch.no_grad():
            float_out = as_tuple(module(*inputs))
        compile_spec = TosaCompileSpec(info.spec)
        stage = Stage.EXPORT
        exported_float = exported = torch.export.export(module, inputs)
        reference = module
        if info.quantize is not None:
            stage = Stage.QUANTIZE
            quantizer = quantize.case_quantizer(info, compile_spec)
            reference = quantize.convert(exported, inputs, quantizer)
            stage = Stage.EXPORT
            exported = torch.export.export(reference, inputs)
        with torch.no_grad():
            fq_out = as_tuple(reference(*inputs))
        stage = Stage.LOWER
        lower_start = time.perf_counter()
        edge = to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(compile_spec)])
        lower_seconds = time.perf_counter() - lower_start
        graph, delegates = lowered_graph(edge)
        payloads = delegate_payloads(delegates, keep_bytes)
    except Exception as exc:
        return ItemResult(
            status=RunStatus.FAIL,
            error=error_info(exc, stage),
            # Ethos-U lowers from the float export on its own: it is tried either way
            ethos_u=_ethos_u(exported_float, inputs, info) if exported_float is not None else (),
            seconds=time.perf_counter() - started,
        )
    numerics: Numerics | None = None
    numerics_error: ErrorInfo | None = None
    run_reason = ""
    if delegates and importlib.util.find_spec("tosa_reference_model") is None:
        run_reason = "not installed: tosa_reference_model (pip install tosa-tools)"
    else:
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
        run_reason=run_reason,
        vgf=_vgf(exported, info, inputs, float_out, fq_out) if info.vgf else None,
        ethos_u=ethos_u,
        lower_seconds=lower_seconds,
        seconds=time.perf_counter() - started,
        tosa_ops=tosa_op_counts(bytes(d.processed_bytes) for d in delegates),
    )


def _ethos_u(
    exported_float: Any, inputs: tuple[Any, ...], info: CaseInfo
) -> tuple[EthosUResult, ...]:
    """Lower the case for every Ethos-U target, when the case asks for it."""
    if not info.ethos_u:
        return ()
    return tuple(ethosu.lower(exported_float, inputs, info, target) for target in ethosu.TARGETS)


def _run_lowered(edge: Any, inputs: tuple[Any, ...], has_delegate: bool) -> tuple[Any, ...]:
    program = edge.exported_program().module()
    if not has_delegate:
        return as_tuple(program(*inputs))
    from executorch.backends.arm.test.runner_utils import TosaReferenceModelDispatch

    with TosaReferenceModelDispatch():
        return as_tuple(program(*inputs))


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
        with tempfile.TemporaryDirectory() as dumped:  # the TOSA each VGF delegate is made of
            spec = VgfCompileSpec(info.spec).dump_intermediate_artifacts_to(dumped)
            started = time.perf_counter()
            edge = to_edge_transform_and_lower(exported, partitioner=[VgfPartitioner(spec)])
            lower_seconds = time.perf_counter() - started
            tosa = tosa_op_counts(p.read_bytes() for p in sorted(Path(dumped).glob("*.tosa")))
        _, delegates = lowered_graph(edge)
    except Exception as exc:
        return VgfResult(TargetState.FAILED, error=error_info(exc, Stage.VGF))
    lowered = VgfResult(
        TargetState.COMPARED,
        payloads=tuple(delegate_payloads(delegates, False)),
        lower_seconds=lower_seconds,
        tosa_ops=tosa,
    )
    if not delegates:
        return dataclasses.replace(lowered, run_reason="no VGF delegate to run")
    emulation = vgf_run.find_emulation(Path.cwd() / "vgf-layers")
    if isinstance(emulation, str):
        return dataclasses.replace(lowered, run_reason=emulation)
    started = time.perf_counter()
    try:
        with torch.no_grad():
            got = vgf_run.run_program(edge, inputs, emulation)
        numerics = measure(got, float_out, fq_out)
    except vgf_run.VgfNotRunnableError as exc:  # the emulation's limit, not the graph's fault
        return dataclasses.replace(lowered, run_reason=str(exc))
    except Exception as exc:
        return dataclasses.replace(
            lowered,
            numerics_error=error_info(exc, Stage.VGF_RUN),
            run_seconds=time.perf_counter() - started,
        )
    seconds = time.perf_counter() - started
    return dataclasses.replace(lowered, numerics=numerics, run_seconds=seconds)
