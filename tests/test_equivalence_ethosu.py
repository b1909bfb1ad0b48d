"""Ethos-U (torch-free part): Vela's summary CSV read into its estimates, in bytes."""

from __future__ import annotations

from pathlib import Path

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
