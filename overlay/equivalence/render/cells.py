"""The cells and words every form of the report shares (text, Markdown, HTML)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from overlay.equivalence import protocol
from overlay.equivalence.protocol import PATHS, PathId
from overlay.equivalence.verdict import (
    AB,
    BC,
    TOSA,
    VGF,
    Quality,
    Verdict,
    limits,
    numerics_quality,
    worst,
)
from overlay.items import CaseInfo, ItemId, ItemKind, ProbeInfo

HEADER = ["item", "a", "b", "c", "err(c)", "a vs b", "b vs c"]

LEGEND = (
    (
        "a, b, c",
        "the three paths: (a) stock executorch, (b) stock + the runtime patch,"
        " (c) the diff-patched build",
    ),
    (
        "ok",
        "lowered and ran; FAIL: raised (details below); num!: lowered, running it failed;"
        " TIME / DIED: the worker timed out / crashed on it",
    ),
    (
        "err(c)",
        "(c)'s largest output error against the fake-quantised reference, in % of"
        " that output's range; ! above the case's tolerance; '-' no outputs (failed, probe)",
    ),
    (
        "a vs b",
        "what the fixes change against stock: same, fixed, changed (both right),"
        " regression, broken (still wrong), unchecked (stock fails, patched lowers, its"
        " numbers not executed here); #N: the one patch that alone causes it, #?: no single"
        " patch",
    ),
    (
        "b vs c",
        "agree; declared (fix N: rule): the same fix written differently, as fix N's rule"
        " (listed below) declares; improved (fix N: rule): (c) right where (b) fails or is"
        " wrong, as declared (the runtime patch lacks a fix the diffs carry); UNDECLARED #N:"
        " the line's form of fix N, in place of the runtime patch's, makes (b) agree with"
        " (c); UNDECLARED or INCOMPLETE fail the run",
    ),
    (
        "right",
        "said only of a target that ran and was compared (TOSA reference model, VGF on the"
        " emulation layer); lowered: not executed here (why: at the top); compiled: an"
        " Ethos-U command stream, never executed here",
    ),
)


def status_code(result: protocol.ItemResult) -> str:
    """Return the table code of one path's result (see LEGEND)."""
    if result.ok:
        return "num!" if result.numerics_error is not None else "ok"
    if result.error is not None and result.error.stage is protocol.Stage.HARNESS:
        return "TIME" if result.error.type == "WorkerTimeout" else "DIED"
    return "FAIL"


def status_text(result: protocol.ItemResult, *, limit: int = 400) -> str:
    """Return 'OK' or 'FAIL: Type: first line of message' for one path's result."""
    if result.ok:
        if result.numerics_error is not None:
            return f"OK (numerics FAIL: {result.numerics_error.type})"
        return "OK"
    text = "FAIL: " + (result.error.first_line if result.error else "?")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_cell(result: protocol.ItemResult, info: CaseInfo | ProbeInfo) -> str:
    """Return the err(c) cell: the largest relative error in %, '!' when TOSA reads wrong."""
    numerics = result.numerics
    if numerics is None or not numerics.max_abs_err_vs_fake_quant:
        return "-"
    found = worst(numerics)
    if found is None:
        return "shape!"
    largest = found[0]
    if numerics.exact is not None:
        wrong = numerics_quality(numerics, None, limits(info)) is Quality.WRONG
    else:
        wrong = largest > limits(info).tolerance
    if 0 < largest < 1e-4:
        return "<0.01%"
    return f"{largest * 100:.2g}%{'!' if wrong else ''}"


def max_error(result: protocol.ItemResult) -> str:
    """Return the max abs error vs the float model, over all outputs, as text."""
    values = result.numerics.max_abs_err_vs_float if result.numerics else ()
    known = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(known) != len(values):
        return "shape!"
    return f"{max(known):.3g}"


def ab_cell(verdict: Verdict) -> str:
    """Return the (a) vs (b) cell: the verdict and the patch that alone causes it."""
    if verdict.ab is AB.SAME:
        return "same"
    word = "broken" if verdict.ab is AB.STILL_BROKEN else verdict.ab.value
    return f"{word} #{verdict.fix if verdict.fix is not None else '?'}"


def bc_cell(verdict: Verdict) -> str:
    """Return the (b) vs (c) cell: the verdict, the rule that declares it or the fix it is."""
    if verdict.rule is not None:
        return f"{verdict.bc.value} (fix {verdict.rule.fix}: {verdict.rule.name})"
    if verdict.bc is BC.AGREE:
        return verdict.bc.value
    return verdict.bc.value.upper() + (f" #{verdict.bc_fix}" if verdict.bc_fix else "")


def bc_text(verdict: Verdict) -> str:
    """Return the (b) vs (c) verdict as words."""
    if verdict.bc is BC.AGREE:
        return "agree"
    if verdict.bc is BC.INCOMPLETE:
        return "INCOMPLETE"
    cause = f", from fix {verdict.bc_fix}" if verdict.bc_fix is not None else ""
    if verdict.rule is not None:
        return bc_cell(verdict) + cause
    return "UNDECLARED: " + ", ".join(d.value for d in verdict.bc_diffs) + cause


def targets_text(verdict: Verdict) -> str:
    """Return every path's targets with their words, e.g. '(a) tosa right, vgf lowered'."""
    return "; ".join(
        f"({path.value}) "
        + ", ".join(
            f"{t} {q.value}" + (" (not executed)" if q is Quality.LOWERED else "")
            for t, q in verdict.targets[path].items()
        )
        for path in PATHS
        if verdict.targets.get(path)
    )


def spec_text(info: CaseInfo | ProbeInfo) -> str:
    """Return a case's spec and quantisation, or 'probe'."""
    return f"{info.spec} {info.quantize or 'fp'}" if isinstance(info, CaseInfo) else "probe"


def item_label(item: ItemId) -> str:
    """Return a case's name, or ``probe:name``."""
    return item.name if item.kind is ItemKind.CASE else str(item)


def payloads_text(payloads: Sequence[protocol.Payload]) -> str:
    """Return payloads as 'size B digest, ...' ('' for none)."""
    return ", ".join(f"{p.size} B {p.sha256[:12]}" for p in payloads)


def vgf_bytes(result: protocol.ItemResult) -> str:
    """Return a result's VGF payloads as 'size B digest', or 'none'."""
    return (payloads_text(result.vgf.payloads) if result.vgf else "") or "none"


# --- per target: TOSA and executed VGF numbers per path, Ethos-U ----------------------------

_NUMBERS = ["steps", "err", "SQNR dB"]  # of each target that ran: see numbers_cells
NUMERICS_HEADER = ["path", "TOSA s", "TOSA", *_NUMBERS, "VGF s", "run s", "VGF", *_NUMBERS]

NUMERICS_NOTE = (
    "TOSA, VGF: right or wrong where the program ran (the TOSA reference model, the VGF"
    " program on the emulation layer), lowered where it was not executed, failed where the"
    " lowering raised; steps: the largest output difference from the exact reference (the"
    " converted graph in the target's integer arithmetic), in quantisation steps, which"
    " decides right for a quantised case ('-': no exact reference, then err and SQNR"
    " decide); err: the largest output error against the fake-quantised reference, in %"
    " of that output's range; SQNR: the lowest output's, in dB; TOSA s / VGF s: lowering"
    " time, run s: running the VGF program on the emulation layer"
)

ETHOSU_HEADER = [
    *("target", "paths", "outcome", "KiB", "cycles", "NPU cycles", "SRAM KiB", "flash KiB"),
    *("CPU ops", "lower s", "command streams / why not"),
]

ETHOSU_NOTE = (
    "paths with the same outcome share a row; compiled: Vela compiled the command streams,"
    " which nothing executes here (never right or wrong); KiB: their size; cycles and"
    " memory: Vela's estimates; CPU ops: ops left outside the delegates"
)


def seconds_cell(value: float | None) -> str:
    """Return seconds with one decimal, or '-'."""
    return "-" if value is None else f"{value:.1f}"


def fail_cell(error: protocol.ErrorInfo | None) -> str:
    """Return a failure's cell with its type (``FAIL: VgfConverterError``)."""
    return "FAIL" if error is None else f"FAIL: {error.type}"


def numbers_cells(
    numerics: protocol.Numerics | None, error: protocol.ErrorInfo | None
) -> list[str]:
    """Return [steps, err, SQNR] of one run's worst output (see NUMERICS_NOTE)."""
    if error is not None:
        return ["-", fail_cell(error), "-"]
    if numerics is None:
        return ["-", "-", "-"]
    check = numerics.exact  # the largest difference from the exact reference, in steps
    most = "-" if check is None else str(max((s or 0 for s in check.steps), default=0))
    if check is not None and None in check.steps:
        most = "shape!"
    found = worst(numerics)
    if found is None:
        return [most, "shape!", "-"]
    fraction, sqnr = found
    return [most, f"{100 * fraction:.2f}%", "-" if sqnr is None else f"{sqnr:.1f}"]


def numerics_rows(verdict: Verdict) -> list[list[str]]:
    """Return one row per path (see NUMERICS_HEADER): TOSA and the executed VGF program."""
    rows = []
    for path in PATHS:
        result = verdict.results[path]
        vgf = result.vgf
        judged = verdict.targets.get(path, {})  # right, wrong, failed, lowered, '-'
        word, vgf_word = (judged[t].value if t in judged else "-" for t in (TOSA, VGF))
        if vgf is None or vgf.state is protocol.TargetState.SKIPPED:
            vgf_cells = ["-"] * 6
        elif vgf.state is protocol.TargetState.FAILED:
            vgf_cells = [fail_cell(vgf.error), "-", vgf_word, "-", "-", "-"]
        else:
            vgf_cells = [
                seconds_cell(vgf.lower_seconds),
                seconds_cell(vgf.run_seconds),
                vgf_word,
                *numbers_cells(vgf.numerics, vgf.numerics_error),
            ]
        lowered = seconds_cell(result.lower_seconds) if result.ok else fail_cell(result.error)
        tosa = numbers_cells(result.numerics, result.numerics_error)
        rows.append([f"({path.value})", lowered, word, *tosa, *vgf_cells])
    return rows


def ethos_groups(verdict: Verdict) -> list[tuple[str, protocol.EthosUResult]]:
    """Return (paths, result) per Ethos-U target and distinct outcome, e.g. ('abc', ...)."""
    found: dict[tuple[str, object], list[tuple[PathId, protocol.EthosUResult]]] = {}
    for path in PATHS:
        for result in verdict.results[path].ethos_u:
            same = dataclasses.replace(result, lower_seconds=None)  # one row: timings left out
            found.setdefault((result.target, same), []).append((path, result))
    return [("".join(p.value for p, _ in group), group[0][1]) for group in found.values()]


def ethos_row(paths: str, result: protocol.EthosUResult) -> list[str]:
    """Return one Ethos-U row (see ETHOSU_HEADER)."""
    timed = [seconds_cell(result.lower_seconds)]
    if result.state is not protocol.TargetState.COMPARED:
        failed = result.state is protocol.TargetState.FAILED
        note = (result.error.first_line if result.error else "?") if failed else result.reason
        cells = [result.target, paths, "FAIL" if failed else "skipped"]
        return [*cells, *["-"] * (len(ETHOSU_HEADER) - len(cells) - 2), *timed, note]
    est = result.estimates
    return [
        result.target,
        paths,
        Quality.COMPILED.value,
        f"{sum(p.size for p in result.payloads) / 1024:.1f}" if result.payloads else "none",
        str(sum(e.cycles_total for e in est)),
        str(sum(e.cycles_npu for e in est)),
        f"{sum(e.sram_bytes for e in est) / 1024:.1f}",
        f"{sum(e.off_chip_flash_bytes for e in est) / 1024:.1f}",
        str(result.cpu_ops),
        *timed,
        payloads_text(result.payloads) or "no delegate",
    ]
