"""What only the page shows of an item that differs: drawings (hand-made SVG: no
matplotlib in the controlling env, a byte-stable page) and the fields that differ."""

from __future__ import annotations

import dataclasses
import difflib
import json
from html import escape
from itertools import pairwise, zip_longest

from overlay import codec
from overlay.codec import JsonValue
from overlay.equivalence.protocol import PATHS, ItemResult, PathId
from overlay.equivalence.verdict import BAD, Observation, Verdict, fractions, limits
from overlay.items import CaseInfo

CONTEXT = 2  # equal graph rows kept around a change; longer equal runs are folded
ROW = 22
CELL = 330
GAP = 56
OP_CHARS = 40
MAX_OUTPUTS = 24
PATH_COLOURS = {PathId.STOCK: "#8a8f98", PathId.RUNTIME: "#2f6fbd", PathId.PATCHED: "#e07b1f"}
SKIPPED_FIELDS = {"seconds", "lower_seconds", "run_seconds"}  # timings differ on every run


def _svg(width: float, height: float, parts: list[str]) -> str:
    """Return the shapes as one inline SVG element."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" font-family="system-ui,sans-serif" role="img">'
    )
    return head + "".join(parts) + "</svg>"


# --- graph difference ----------------------------------------------------------------------


def graph_ops(graph: tuple[str, ...]) -> list[tuple[str, str]]:
    """Return a canonical graph as (placement, op) rows: 'CPU' or 'delegate[i] Backend'."""
    rows: list[tuple[str, str]] = []
    for line in graph:
        head, _, rest = line.partition(": ")
        if head == "cpu":
            rows.append(("CPU", rest))
        elif head.startswith("delegate["):
            ops = [op for op in rest.split(", ") if op]
            rows.extend((head, op) for op in ops or ["(empty)"])
        else:
            rows.append(("", line))
    return rows


Aligned = tuple[str, tuple[str, str] | None, tuple[str, str] | None]  # kind, left, right


def align(left: list[tuple[str, str]], right: list[tuple[str, str]]) -> list[Aligned | int]:
    """Align two op lists; an int stands for that many folded equal rows."""
    rows: list[Aligned | int] = []
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs = list(zip(left[i1:i2], right[j1:j2], strict=True))
            if len(pairs) > 2 * CONTEXT + 1:
                head, tail = pairs[:CONTEXT], pairs[-CONTEXT:]
                rows.extend(("equal", a, b) for a, b in head)
                rows.append(len(pairs) - 2 * CONTEXT)
                rows.extend(("equal", a, b) for a, b in tail)
            else:
                rows.extend(("equal", a, b) for a, b in pairs)
        else:
            for a, b in zip_longest(left[i1:i2], right[j1:j2]):
                kind = "replace" if a is not None and b is not None else tag
                rows.append((kind, a, b))
    return rows


def _placement(label: str) -> str:
    if label.startswith("delegate["):
        index = label[len("delegate[") :].split("]", 1)[0]
        backend = label.split(" ", 1)[1].removesuffix("Backend") if " " in label else ""
        return f"{backend} d{index}".strip()
    return label


def _cell(x: int, y: int, op: tuple[str, str] | None, changed: str) -> str:
    if op is None:
        return (
            f'<rect x="{x}" y="{y}" width="{CELL}" height="{ROW - 4}" rx="3" fill="none"'
            ' stroke="#c9ced6" stroke-dasharray="4 3"/>'
        )
    placement, name = op
    fill = "#fbe3c8" if placement == "CPU" else "#d6e6fb" if placement else "#eceff3"
    stroke, width = (changed, 2) if changed else ("#b8bec8", 1)
    short = name if len(name) <= OP_CHARS else name[: OP_CHARS - 1] + "~"
    return (
        f'<rect x="{x}" y="{y}" width="{CELL}" height="{ROW - 4}" rx="3" fill="{fill}"'
        f' stroke="{stroke}" stroke-width="{width}"/>'
        f'<text x="{x + 6}" y="{y + 13}" font-size="11">{escape(short)}</text>'
        f'<text x="{x + CELL - 6}" y="{y + 13}" font-size="10" text-anchor="end"'
        f' fill="#4a5360">{escape(_placement(placement))}</text>'
    )


def graph_svg(
    left: tuple[str, ...],
    right: tuple[str, ...],
    titles: tuple[str, str],
    notes: tuple[str, str] = ("", ""),
) -> str:
    """Return an SVG of two lowered graphs side by side, their differences outlined (a side
    whose lowering failed shows its note instead)."""
    rows = align(graph_ops(left), graph_ops(right))
    width = 2 * CELL + GAP + 20
    height = 30 + ROW * len(rows) + 24
    x_left, x_right = 10, 10 + CELL + GAP
    parts = [
        f'<text x="{x_left}" y="18" font-size="13" font-weight="600">{escape(titles[0])}</text>',
        f'<text x="{x_right}" y="18" font-size="13" font-weight="600">{escape(titles[1])}</text>',
    ]
    for x, graph, note in ((x_left, left, notes[0]), (x_right, right, notes[1])):
        if note and not graph:
            short = note if len(note) <= 60 else note[:59] + "~"
            parts.append(
                f'<text x="{x}" y="{28 + 13}" font-size="12" fill="#c62828">{escape(short)}</text>'
            )
    marks = {"delete": ("-", "#c62828"), "insert": ("+", "#2e7d32"), "replace": ("~", "#b26a00")}
    for index, row in enumerate(rows):
        y = 28 + ROW * index
        if isinstance(row, int):
            parts.append(
                f'<text x="{width // 2}" y="{y + 13}" font-size="11" fill="#5f6b78"'
                f' text-anchor="middle">... {row} equal ops ...</text>'
            )
            continue
        kind, a, b = row
        if left or not notes[0]:
            parts.append(_cell(x_left, y, a, "#c62828" if kind != "equal" else ""))
        if right or not notes[1]:
            parts.append(_cell(x_right, y, b, "#2e7d32" if kind != "equal" else ""))
        if kind in marks:
            sign, colour = marks[kind]
            parts.append(
                f'<text x="{x_left + CELL + GAP // 2}" y="{y + 14}" font-size="16"'
                f' font-weight="700" fill="{colour}" text-anchor="middle">{sign}</text>'
            )
    legend_y = height - 8
    parts.append(
        f'<rect x="{x_left}" y="{legend_y - 10}" width="12" height="10" fill="#fbe3c8"'
        ' stroke="#b8bec8"/>'
        f'<text x="{x_left + 16}" y="{legend_y}" font-size="11">CPU op</text>'
        f'<rect x="{x_left + 80}" y="{legend_y - 10}" width="12" height="10" fill="#d6e6fb"'
        ' stroke="#b8bec8"/>'
        f'<text x="{x_left + 96}" y="{legend_y}" font-size="11">delegated op</text>'
        f'<text x="{x_left + 190}" y="{legend_y}" font-size="11" fill="#5f6b78">outlined:'
        " only on that side (- removed, + added, ~ replaced)</text>"
    )
    return _svg(width, height, parts)


# --- output errors -------------------------------------------------------------------------


def error_svg(verdict: Verdict) -> str:
    """Return an SVG bar chart: each output's error per path, in % of range, and tolerance."""
    errors = {p: fractions(verdict.results[p].numerics) for p in PATHS}
    outputs = min(max((len(e) for e in errors.values()), default=0), MAX_OUTPUTS)
    limit = limits(verdict.info).tolerance * 100
    values = [e * 100 for es in errors.values() for e in es[:outputs] if e is not None]
    top = max([*values, limit]) * 1.15 or 1.0
    bar, group = 22, 3 * 22 + 26
    plot_h, left, base = 170, 56, 40 + 170
    width = max(left + group * outputs + 20, 620)
    height = base + 42

    def y_of(value: float) -> float:
        return base - plot_h * min(value, top) / top

    parts = [
        f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#4a5360"/>',
        f'<line x1="{left}" y1="{base}" x2="{left}" y2="{base - plot_h}" stroke="#4a5360"/>',
        f'<text x="{left - 6}" y="{base + 4}" font-size="10" text-anchor="end">0%</text>',
        f'<text x="{left - 6}" y="{base - plot_h + 4}" font-size="10" text-anchor="end">'
        f"{top:.3g}%</text>",
    ]
    for index, path in enumerate(PATHS):
        x = left + 4 + index * 185
        parts.append(
            f'<rect x="{x}" y="8" width="12" height="10" fill="{PATH_COLOURS[path]}"/>'
            f'<text x="{x + 16}" y="17" font-size="11">({path.value}) {escape(path.label)}</text>'
        )
    for out in range(outputs):
        x0 = left + 14 + out * group
        for index, path in enumerate(PATHS):
            x = x0 + index * bar
            path_errors = errors[path]
            value = path_errors[out] if out < len(path_errors) else None
            if value is None:
                failed = not verdict.results[path].ok
                word = "shape" if out < len(path_errors) else "failed" if failed else "none"
                parts.append(
                    f'<text x="{x + bar / 2 - 1}" y="{base - 4}" font-size="9" fill="#c62828"'
                    f' text-anchor="middle" transform="rotate(-90 {x + bar / 2 - 1}'
                    f' {base - 4})">{word}</text>'
                )
                continue
            y = y_of(value * 100)
            parts.append(
                f'<rect x="{x}" y="{y:.1f}" width="{bar - 4}" height="{base - y:.1f}"'
                f' fill="{PATH_COLOURS[path]}"><title>({path.value}) output {out}:'
                f" {value * 100:.3g}%</title></rect>"
                f'<text x="{x + (bar - 4) / 2}" y="{y - 3:.1f}" font-size="9"'
                f' text-anchor="middle">{value * 100:.2g}</text>'
            )
        parts.append(
            f'<text x="{x0 + 1.5 * bar - 2}" y="{base + 14}" font-size="11"'
            f' text-anchor="middle">output {out}</text>'
        )
    y_limit = y_of(limit)
    parts.append(
        f'<line x1="{left}" y1="{y_limit:.1f}" x2="{width - 10}" y2="{y_limit:.1f}"'
        ' stroke="#c62828" stroke-dasharray="6 4"/>'
        f'<text x="{width - 12}" y="{y_limit - 4:.1f}" font-size="10" fill="#c62828"'
        f' text-anchor="end">tolerance {limit:.3g}%</text>'
        f'<text x="{left}" y="{height - 6}" font-size="11" fill="#5f6b78">error against the'
        " fake-quantised reference, % of each output's range</text>"
    )
    return _svg(width, height, parts)


# --- the page ------------------------------------------------------------------------------


def untimed(value: JsonValue) -> JsonValue:
    """Return JSON data without its timing fields (SKIPPED_FIELDS), at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in SKIPPED_FIELDS}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def _value(value: object) -> str:
    data = untimed(codec.encode(value))
    text = json.dumps(data, sort_keys=True)
    if len(text) <= 160:
        return f"<code>{escape(text)}</code>"
    pretty = json.dumps(data, sort_keys=True, indent=1)
    summary = f"<summary><code>{escape(text[:150])}...</code></summary>"
    return f"<details>{summary}<pre>{escape(pretty)}</pre></details>"


def field_rows(verdict: Verdict) -> list[str]:
    """Return a table row per result field that differs between the paths, timings left out;
    dataclasses (and same-length tuples of them) are walked into: ``vgf.numerics.sqnr_db``."""
    return _differing("", [verdict.results[p] for p in PATHS])


def _differing(name: str, values: list[object]) -> list[str]:
    """Return the rows of ``values`` (one per path) that differ, walking nested dataclasses."""
    if len({json.dumps(untimed(codec.encode(v)), sort_keys=True) for v in values}) == 1:
        return []
    first = values[0]
    if dataclasses.is_dataclass(first) and all(type(v) is type(first) for v in values):
        rows = []
        for field in dataclasses.fields(first):
            if field.name not in SKIPPED_FIELDS:
                inner = [getattr(v, field.name) for v in values]
                rows += _differing(f"{name}.{field.name}" if name else field.name, inner)
        return rows
    tuples = [v for v in values if isinstance(v, tuple)]
    if (
        name
        and len(tuples) == len(values)
        and len({len(v) for v in tuples}) == 1
        and all(dataclasses.is_dataclass(x) for v in tuples for x in v)
    ):
        return [
            row
            for index in range(len(tuples[0]))
            for row in _differing(f"{name}[{index}]", [v[index] for v in tuples])
        ]
    cells = "".join(f"<td>{_value(v)}</td>" for v in values)
    return [f"<tr><th>{escape(name)}</th>{cells}</tr>"]


def drawings(verdict: Verdict) -> list[str]:
    """Return an item's graph differences, its error chart and its differing fields."""
    a, b, c = (verdict.results[p] for p in PATHS)
    out = []
    for x, y in pairwise(PATHS):
        left, right = verdict.results[x], verdict.results[y]
        if left.graph != right.graph:
            titles = (f"({x.value}) {x.label}", f"({y.value}) {y.label}")
            out.append(graph_svg(left.graph, right.graph, titles, (_note(left), _note(right))))
    numbers_differ = Observation.NUMERICS in (*verdict.ab_diffs, *verdict.bc_diffs)
    wrong = any(q in BAD for judged in verdict.targets.values() for q in judged.values())
    numbered = isinstance(verdict.info, CaseInfo) and any(r.numerics for r in (a, b, c))
    if numbered and (numbers_differ or wrong):
        out.append(error_svg(verdict))
    rows = field_rows(verdict)
    if rows:
        head = "".join(f"<th>({p.value}) {escape(p.label)}</th>" for p in PATHS)
        out.append(f'<table class="fields"><tr><th>field</th>{head}</tr>{"".join(rows)}</table>')
    return out


def _note(result: ItemResult) -> str:
    return f"lowering failed: {result.error.first_line}" if result.error is not None else ""
