"""What an equivalence run judges, as torch-free data: its items and their descriptions."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ItemKind(enum.StrEnum):
    """A corpus case (a whole lowering) or a probe (one patched function on a small graph)."""

    CASE = "case"
    PROBE = "probe"


@dataclass(frozen=True, order=True)
class ItemId:
    """One item of a run: a case or a probe, by name."""

    kind: ItemKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}"


@dataclass(frozen=True)
class CaseInfo:
    """Torch-free description of one corpus (or user) case."""

    name: str
    spec: str
    quantize: str | None  # None, "a8w8", "a8w8_snorm" (VGF's SNORM-safe a8w8) or "a16w8"
    per_channel: bool = True
    fast: bool = False
    note: str = ""
    source: str = "corpus"
    tolerance: float | None = None  # max error vs fake-quant, fraction of range; None: default
    sqnr_db: float | None = None  # min SQNR vs fake-quant per output; None: the scheme's
    group: str = "core"  # "core" (the default run), "zoo" (real networks), "user" (--models)
    timeout: float | None = None  # seconds per path for this case; None: the run's --timeout
    ethos_u: bool = False  # also lower for Ethos-U55/U85 (quantised cases)
    vgf: bool = True  # also lower for VGF (an Ethos-U zoo model too slow to lower twice: no)
    expect_broken: str = ""  # why this case is wrong or fails on every path (else a finding)
    broken_releases: str = ""  # PEP 440 specifier expect_broken is declared for ("": every)
    targets_vgf: bool = False  # quantised for VGF; a failed VGF lowering is a failed case
    model: str = ""  # what it computes, in upstream's words: PR texts name it, never the case

    @property
    def item(self) -> ItemId:
        """Return the item id of this case."""
        return ItemId(ItemKind.CASE, self.name)


@dataclass(frozen=True)
class ProbeInfo:
    """One probe: a patched function run directly on a small FX graph."""

    name: str
    description: str
    fix: int = 0  # the fix whose patched function it calls (runs where the line carries it)

    @property
    def item(self) -> ItemId:
        """Return the item id of this probe."""
        return ItemId(ItemKind.PROBE, self.name)
