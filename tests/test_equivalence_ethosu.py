"""Ethos-U (torch-free part): Vela's summary CSV read into its estimates, in bytes."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from overlay.equivalence.protocol import VelaEstimate
from overlay.equivalence.worker import ethosu


def test_vela_summary_is_read_in_bytes(tmp_path: Path) -> None:
    csv = tmp_path / "out_summary_Ethos_U55_High_End_Embedded.csv"
    csv.write_text(
        "experiment,sram_memory_used,off_chip_flash_memory_used,dram_memory_used,cycles_total,"
        "cycles_npu,inference_time,nn_macs,total_npu_encoded_weights\n"
        "default,4.0,0.390625,0.0,5712,5136,1.1424e-05,55296,320\n",
        encoding="utf-8",
    )
    assert ethosu.read_summary(csv) == VelaEstimate(
        5712, 5136, 1.1424e-05, 4096, 400, 0, 55296, 320
    )


def test_a_missing_or_odd_column_reads_as_zero(tmp_path: Path) -> None:
    csv = tmp_path / "summary.csv"
    csv.write_text("cycles_total,sram_memory_used\nn/a,2.0\n", encoding="utf-8")
    assert ethosu.read_summary(csv) == VelaEstimate(0, 0, 0.0, 2048, 0, 0, 0, 0)


def test_the_vela_wrapper_passes_on_arguments_newer_releases_add(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}

    def vela_compile(
        tosa: bytes,
        args: list[str],
        verbose: bool = False,
        intermediate_path: str | None = None,
        block_placements: object = None,  # executorch 1.5.1's extra argument
    ) -> bytes:
        seen.update(args=args, block_placements=block_placements)
        output = Path(str(intermediate_path)) / "output"
        output.mkdir()
        (output / "x_summary_U55.csv").write_text("cycles_total,cycles_npu\n7,5\n")
        return tosa[::-1]

    names = ["executorch", "executorch.backends", "executorch.backends.arm"]
    for name in [*names, "executorch.backends.arm.ethosu"]:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    backend = types.ModuleType("executorch.backends.arm.ethosu.backend")
    backend.vela_compile = vela_compile  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, backend.__name__, backend)
    monkeypatch.setattr(sys.modules["executorch.backends.arm.ethosu"], "backend", backend, False)
    estimates: list[VelaEstimate] = []
    with ethosu.capture_estimates(estimates):
        data = backend.vela_compile(b"ab", ["--x"], block_placements=[1])
    assert data == b"ba"  # Vela's bytes, untouched
    assert seen == {"args": ["--x"], "block_placements": [1]}
    assert [(e.cycles_total, e.cycles_npu) for e in estimates] == [(7, 5)]
    assert backend.vela_compile is vela_compile  # put back
