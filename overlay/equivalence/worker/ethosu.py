"""Ethos-U55 / U85 lowering of a case: Vela command streams and Vela's own estimates
(``vela_compile`` wrapped to read each delegate's summary CSV; its bytes untouched)."""

from __future__ import annotations

import csv
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from overlay.equivalence.protocol import EthosUResult, Stage, TargetState, VelaEstimate
from overlay.equivalence.worker import quantize
from overlay.equivalence.worker.observe import delegate_payloads, lowered_graph
from overlay.equivalence.worker.serve import error_info
from overlay.items import CaseInfo

TARGETS = ("ethos-u55-128", "ethos-u85-256")


def _float(row: dict[str, str], key: str) -> float:
    try:
        return float(row.get(key, "") or 0.0)
    except ValueError:
        return 0.0


def read_summary(path: Path) -> VelaEstimate:
    """Return Vela's estimates from its summary CSV (memory in KiB there, bytes here)."""
    with path.open(encoding="utf-8", newline="") as handle:
        row = next(csv.DictReader(handle))
    return VelaEstimate(
        cycles_total=int(_float(row, "cycles_total")),
        cycles_npu=int(_float(row, "cycles_npu")),
        inference_seconds=_float(row, "inference_time"),
        sram_bytes=int(_float(row, "sram_memory_used") * 1024),
        off_chip_flash_bytes=int(_float(row, "off_chip_flash_memory_used") * 1024),
        dram_bytes=int(_float(row, "dram_memory_used") * 1024),
        macs=int(_float(row, "nn_macs")),
        encoded_weight_bytes=int(_float(row, "total_npu_encoded_weights")),
    )


@contextmanager
def capture_estimates(into: list[VelaEstimate]) -> Iterator[None]:
    """While lowering, give each Vela run its own folder and collect its summary."""
    from executorch.backends.arm.ethosu import backend

    original = backend.vela_compile

    def compile_and_read(
        tosa: bytes,
        args: list[str],
        verbose: bool = False,
        intermediate_path: str | None = None,
        **more: Any,  # arguments newer releases add (1.5.1: block_placements), passed on
    ) -> bytes:
        with tempfile.TemporaryDirectory(prefix="overlay-vela-") as tmp:
            folder = intermediate_path or tmp
            data: bytes = original(tosa, args, verbose, intermediate_path=folder, **more)
            summaries = sorted((Path(folder) / "output").glob("*_summary_*.csv"))
            if summaries:
                into.append(read_summary(summaries[-1]))
            return data

    backend.vela_compile = compile_and_read
    try:
        yield
    finally:
        backend.vela_compile = original


def lower(
    exported_float: Any, inputs: tuple[Any, ...], info: CaseInfo, target: str
) -> EthosUResult:
    """Quantise and lower one case for one Ethos-U target; a failure is data."""
    if info.quantize is None:
        return EthosUResult(target, TargetState.SKIPPED, reason="Ethos-U runs integer graphs only")
    try:
        import ethosu.vela  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        return EthosUResult(
            target, TargetState.SKIPPED, reason="vela not installed (pip install ethos-u-vela)"
        )
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import EthosUQuantizer
    from executorch.exir import to_edge_transform_and_lower

    stage = Stage.QUANTIZE
    estimates: list[VelaEstimate] = []
    try:
        import torch

        spec = EthosUCompileSpec(target)
        quantizer = quantize.configure(EthosUQuantizer(spec), info)
        converted = quantize.convert(exported_float, inputs, quantizer)
        exported = torch.export.export(converted, inputs)
        stage = Stage.ETHOSU
        started = time.perf_counter()
        with capture_estimates(estimates):
            edge = to_edge_transform_and_lower(exported, partitioner=[EthosUPartitioner(spec)])
        seconds = time.perf_counter() - started
        graph, delegates = lowered_graph(edge)
    except Exception as exc:
        return EthosUResult(target, TargetState.FAILED, error=error_info(exc, stage))
    return EthosUResult(
        target,
        TargetState.COMPARED,
        payloads=delegate_payloads(delegates),
        estimates=tuple(estimates),
        cpu_ops=sum(1 for line in graph if line.startswith("cpu: ")),
        lower_seconds=seconds,
    )
