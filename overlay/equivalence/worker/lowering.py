"""One case through every target: TOSA (run on the reference model), VGF, Ethos-U.

Every failure is data in the result, never an exception.
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

from overlay.equivalence import protocol
from overlay.equivalence.worker import departure, ethosu, exact, observe, quantize, vgf_run
from overlay.equivalence.worker.serve import error_info
from overlay.items import CaseInfo

Build = Callable[[], tuple[Any, tuple[Any, ...]]]  # the case's (module, inputs)


def run_case(info: CaseInfo, build: Build, *, keep_bytes: bool = False) -> protocol.ItemResult:
    """Export, quantise, lower and run one case; every failure is data, not an exception."""
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    stage = protocol.Stage.BUILD
    started = time.perf_counter()
    exported_float: Any = None
    inputs: tuple[Any, ...] = ()
    reference_exact: exact.Evaluation | str = ""  # or why there is none ("": not quantised)
    try:
        module, inputs = build()
        if not isinstance(module, torch.fx.GraphModule):
            module = module.eval()
        with torch.no_grad():
            float_out = observe.as_tuple(module(*inputs))
        compile_spec = TosaCompileSpec(info.spec)
        stage = protocol.Stage.EXPORT
        exported_float = exported = torch.export.export(module, inputs)
        reference = module
        if info.quantize is not None:
            stage = protocol.Stage.QUANTIZE
            quantizer = quantize.case_quantizer(info, compile_spec)
            reference = quantize.convert(exported, inputs, quantizer)
            try:  # the converted graph's exact evaluation, or why there is none
                reference_exact = exact.evaluate(reference, inputs)
            except exact.NoExactRule as exc:
                reference_exact = str(exc)
            except Exception as exc:  # the reference's own fault: shown, the case judged as before
                reference_exact = f"the exact reference raised {type(exc).__name__}: {exc}"
            stage = protocol.Stage.EXPORT
            exported = torch.export.export(reference, inputs)
        with torch.no_grad():
            fq_out = observe.as_tuple(reference(*inputs))
        stage = protocol.Stage.LOWER
        lower_start = time.perf_counter()
        edge = to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(compile_spec)])
        lower_seconds = time.perf_counter() - lower_start
        graph, delegates = observe.lowered_graph(edge)
        payloads = observe.delegate_payloads(delegates, keep_bytes)
        reference_exact = _for_program(reference_exact, graph)
    except Exception as exc:
        return protocol.ItemResult(
            status=protocol.RunStatus.FAIL,
            error=error_info(exc, stage),
            # Ethos-U lowers from the float export on its own: it is tried either way
            ethos_u=_ethos_u(exported_float, inputs, info) if exported_float is not None else (),
            seconds=time.perf_counter() - started,
        )
    references = (float_out, fq_out)
    numerics, numerics_error, run_reason = _tosa_numbers(
        edge, inputs, bool(delegates), references, reference_exact
    )
    ethos_u = _ethos_u(exported_float, inputs, info)
    return protocol.ItemResult(
        status=protocol.RunStatus.OK,
        graph=tuple(graph),
        payloads=payloads,
        numerics=numerics,
        numerics_error=numerics_error,
        run_reason=run_reason,
        vgf=_vgf(exported, info, inputs, references, reference_exact) if info.vgf else None,
        ethos_u=ethos_u,
        exact_reason=reference_exact if isinstance(reference_exact, str) else "",
        lower_seconds=lower_seconds,
        seconds=time.perf_counter() - started,
        tosa_ops=observe.tosa_op_counts(bytes(d.processed_bytes) for d in delegates),
    )


def _ethos_u(
    exported_float: Any, inputs: tuple[Any, ...], info: CaseInfo
) -> tuple[protocol.EthosUResult, ...]:
    """Lower the case for every Ethos-U target, when the case asks for it."""
    if not info.ethos_u:
        return ()
    return tuple(ethosu.lower(exported_float, inputs, info, target) for target in ethosu.TARGETS)


def _for_program(reference: exact.Evaluation | str, graph: list[str]) -> exact.Evaluation | str:
    """Return the exact reference if the lowered program is one integer program, else why
    not: it models one delegate between the CPU's quantize and dequantize."""
    if isinstance(reference, str):
        return reference
    cpu = [line for line in graph if line.startswith("cpu:") and "quantize_per_" not in line]
    delegates = [line for line in graph if line.startswith("delegate[")]
    if cpu:
        return f"ops run on the CPU between quantize and dequantize ({cpu[0][5:]})"
    if len(delegates) != 1:
        return f"{len(delegates)} delegates, not one integer program"
    return reference


def _tosa_numbers(
    edge: Any,
    inputs: tuple[Any, ...],
    has_delegate: bool,
    references: tuple[tuple[Any, ...], tuple[Any, ...]],
    reference_exact: exact.Evaluation | str,
) -> tuple[protocol.Numerics | None, protocol.ErrorInfo | None, str]:
    """Run the lowered program with its TOSA delegates on the reference model (each call's
    TOSA bytes and inputs recorded): its numbers, the error it raised, or why it was not run."""
    if has_delegate and importlib.util.find_spec("tosa_reference_model") is None:
        return None, None, "not installed: tosa_reference_model (pip install tosa-tools)"
    programs: list[tuple[bytes, list[Any]]] = []
    try:
        program = edge.exported_program().module()
        with torch.no_grad():
            if not has_delegate:
                got = observe.as_tuple(program(*inputs))
            else:
                from executorch.backends.arm.test.runner_utils import (
                    TosaReferenceModelDispatch,
                    torch_tensor_to_numpy,
                )

                class Recording(TosaReferenceModelDispatch):  # type: ignore[misc]
                    def _tosa_dispatch(self, lowered: Any, args: Any) -> Any:
                        arrays = [torch_tensor_to_numpy(a) for a in args]
                        programs.append((bytes(lowered.processed_bytes), arrays))
                        return super()._tosa_dispatch(lowered, args)

                with Recording():
                    got = observe.as_tuple(program(*inputs))
        checked = _checked(got, reference_exact, programs)
        return observe.measure(got, *references, checked), None, ""
    except Exception as exc:
        return None, error_info(exc, protocol.Stage.NUMERICS), ""


def _checked(
    got: tuple[Any, ...],
    reference: exact.Evaluation | str,
    programs: list[tuple[bytes, list[Any]]],
) -> protocol.ExactCheck | None:
    """Return a program's outputs against the exact reference, naming where a TOSA
    program (one of ``programs``) first departs from it when they differ (its
    intermediates, dumped)."""
    if isinstance(reference, str):
        return None
    check = observe.exact_check(got, reference)
    if any(step != 0 for step in check.steps) and len(programs) == 1:
        check = dataclasses.replace(
            check, first=departure.tosa_first_difference(reference, *programs[0])
        )
    return check


def _vgf(
    exported: Any,
    info: CaseInfo,
    inputs: tuple[Any, ...],
    references: tuple[tuple[Any, ...], tuple[Any, ...]],
    reference_exact: exact.Evaluation | str,
) -> protocol.VgfResult:
    """Lower the case for VGF, then run the program with its VGF delegates emulated."""
    from executorch.backends.arm.vgf.model_converter import find_model_converter_binary

    if find_model_converter_binary() is None:
        return protocol.VgfResult(
            protocol.TargetState.SKIPPED,
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
            tosa = observe.tosa_op_counts(
                p.read_bytes() for p in sorted(Path(dumped).glob("*.tosa"))
            )
        graph, delegates = observe.lowered_graph(edge)
    except Exception as exc:
        return protocol.VgfResult(
            protocol.TargetState.FAILED, error=error_info(exc, protocol.Stage.VGF)
        )
    reference_exact = _for_program(reference_exact, graph)  # VGF may partition otherwise
    lowered = protocol.VgfResult(
        protocol.TargetState.COMPARED,
        payloads=observe.delegate_payloads(delegates),
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
        numerics = observe.measure(got, *references, _checked(got, reference_exact, []))
    except vgf_run.VgfNotRunnableError as exc:  # the emulation's limit, not the graph's fault
        return dataclasses.replace(lowered, run_reason=str(exc))
    except Exception as exc:
        return dataclasses.replace(
            lowered,
            numerics_error=error_info(exc, protocol.Stage.VGF_RUN),
            run_seconds=time.perf_counter() - started,
        )
    seconds = time.perf_counter() - started
    return dataclasses.replace(lowered, numerics=numerics, run_seconds=seconds)
