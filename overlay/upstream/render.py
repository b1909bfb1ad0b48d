"""One renderer per format for every upstream report: text, Markdown, HTML, and JSON.

A report is first laid out once as blocks (:class:`Heading`, :class:`Para`, :class:`Table`,
:class:`Items`, :class:`Pre`; a status inside them is a :class:`Badge`): the matrix and a
retarget here (:func:`matrix_blocks`, :func:`retarget_blocks`), the canary's status page in
:mod:`overlay.upstream.canary.page`. :func:`text`, :func:`markdown` and :func:`html` render
any blocks; JSON is the report itself through :mod:`overlay.codec` (its schema is derived
from the same dataclasses: :func:`schema`). Strings only; :func:`write` writes the files.
"""

from __future__ import annotations

import html as html_escape
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay import codec
from overlay._table import markdown_table, text_table
from overlay.text.series import PATCH_SUFFIX
from overlay.upstream.results import (
    Counts,
    Matrix,
    OnBase,
    Retarget,
    Sending,
    Status,
    SuiteRun,
    TestState,
)
from overlay.upstream.verdicts import conflict_text

TONES = {
    Status.APPLIES: "ok",
    Status.OFFSET: "ok",
    Status.MERGED: "warn",
    Status.CONTAINED: "info",
    Status.CONFLICT: "bad",
    Status.MOVED: "bad",
    Status.MISSING: "bad",
}


@dataclass(frozen=True)
class Badge:
    """A status: a coloured badge in HTML, bold in Markdown, plain text elsewhere."""

    text: str
    tone: str  # "ok", "warn", "info", "bad"


Inline = str | Badge


@dataclass(frozen=True)
class Heading:
    """A heading: level 1 is the report's title."""

    text: str
    level: int = 1


@dataclass(frozen=True)
class Para:
    """A paragraph; with a tone ("pass", "fail") a banner in HTML."""

    text: str
    tone: str = ""


@dataclass(frozen=True)
class Table:
    """A table: a header and rows of cells."""

    header: tuple[str, ...]
    rows: tuple[tuple[Inline, ...], ...]


@dataclass(frozen=True)
class Item:
    """One list item (its parts joined) at a nesting depth."""

    parts: tuple[Inline, ...]
    depth: int = 0


@dataclass(frozen=True)
class Items:
    """A list, nested by each item's depth (an empty one is left out)."""

    items: tuple[Item, ...]

    def __bool__(self) -> bool:
        """Return True when the list has an item."""
        return bool(self.items)


@dataclass(frozen=True)
class Pre:
    """Preformatted text under a summary line (a diff, a conflict region)."""

    summary: str
    text: str


Block = Heading | Para | Table | Items | Pre


def item(*parts: Inline, depth: int = 0) -> Item:
    """Return a list item."""
    return Item(parts, depth)


def _plain(parts: Sequence[Inline], *, bold: bool = False) -> str:
    return "".join(
        (f"**{p.text}**" if bold else p.text) if isinstance(p, Badge) else p for p in parts
    )


def text(blocks: Sequence[Block]) -> str:
    """Render blocks for a terminal."""
    out: list[str] = []
    for block in blocks:
        if not block:  # an empty list
            continue
        if isinstance(block, Heading):
            out += [block.text if block.level == 1 else f"{block.text}:"]
        elif isinstance(block, Para):
            out += [block.text]
        elif isinstance(block, Table):
            cells = [[_plain([c]) for c in row] for row in block.rows]
            out += text_table(block.header, cells, max_width=200)
        elif isinstance(block, Items):
            out += ["  " * (i.depth + 1) + _plain(i.parts) for i in block.items]
        else:
            out += [f"{block.summary}:", *(f"    {x}" for x in block.text.rstrip().split("\n"))]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def markdown(blocks: Sequence[Block]) -> str:
    """Render blocks as Markdown."""
    out: list[str] = []
    for block in blocks:
        if not block:  # an empty list
            continue
        if isinstance(block, Heading):
            out += ["#" * block.level + " " + block.text]
        elif isinstance(block, Para):
            out += [f"**{block.text}**" if block.tone == "fail" else block.text]
        elif isinstance(block, Table):
            cells = [[_plain([c], bold=True) for c in row] for row in block.rows]
            out += markdown_table(block.header, cells)
        elif isinstance(block, Items):
            out += ["  " * i.depth + "- " + _plain(i.parts, bold=True) for i in block.items]
        else:
            out += [f"{block.summary}:", "", "```", block.text.rstrip(), "```"]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}
.banner.pass{background:#dff3e3;color:#185c2a}.banner.fail{background:#fbe0e0;color:#8a1c1c}
table{border-collapse:collapse;width:100%;margin:10px 0}
th,td{border:1px solid #d5d9e0;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600}
.ok{background:#d6f0dc;color:#185c2a}.warn{background:#fff0c2;color:#6b5200}
.info{background:#d6e6fb;color:#17407a}.bad{background:#f8d0d0;color:#8a1c1c}
pre{background:#f5f6f8;border:1px solid #e1e4ea;padding:8px;overflow:auto;font-size:12px}
details{margin:6px 0}summary{cursor:pointer}
"""


def _e(value: str) -> str:
    return html_escape.escape(value, quote=True)


def _html_parts(parts: Sequence[Inline]) -> str:
    return "".join(
        f'<span class="badge {p.tone}">{_e(p.text)}</span>' if isinstance(p, Badge) else _e(p)
        for p in parts
    )


def _html_items(items: Sequence[Item]) -> list[str]:
    out, depth = ["<ul>"], 0
    for each in items:
        while depth < each.depth:
            out.append("<ul>")
            depth += 1
        while depth > each.depth:
            out.append("</ul>")
            depth -= 1
        out.append(f"<li>{_html_parts(each.parts)}</li>")
    return out + ["</ul>"] * (depth + 1)


def html(blocks: Sequence[Block], title: str) -> str:
    """Render blocks as one self-contained HTML page (inline CSS, no script)."""
    out = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>',
        f"<style>{_CSS}</style></head><body>",
    ]
    for block in blocks:
        if not block:  # an empty list
            continue
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_e(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            tone = f" class='banner {block.tone}'" if block.tone else ""
            out.append(f"<p{tone}>{_e(block.text)}</p>")
        elif isinstance(block, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in block.header))
            out.append("</tr></thead><tbody>")
            out += [
                "<tr>" + "".join(f"<td>{_html_parts([c])}</td>" for c in row) + "</tr>"
                for row in block.rows
            ]
            out.append("</tbody></table>")
        elif isinstance(block, Items):
            out += _html_items(block.items)
        else:
            summary = f"<summary>{_e(block.summary)}</summary>"
            out.append(f"<details>{summary}<pre>{_e(block.text)}</pre></details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def json_text(report: object) -> str:
    """Render a report (a result dataclass) as JSON, through the codec."""
    return codec.dumps(report, indent=2) + "\n"


def schema(report: type, title: str) -> str:
    """Return the JSON Schema of a report, derived from its dataclass by the codec."""
    return codec.dumps(codec.schema(report, title=title), indent=2) + "\n"


def write(
    folder: Path, stem: str, blocks: Sequence[Block], report: object, suffixes: Sequence[str]
) -> list[Path]:
    """Write ``<stem>.<suffix>`` for each of ``txt``, ``md``, ``html``, ``json`` asked for."""
    title = next((b.text for b in blocks if isinstance(b, Heading)), stem)
    renderers = {
        "txt": lambda: text(blocks),
        "md": lambda: markdown(blocks),
        "html": lambda: html(blocks, title),
        "json": lambda: json_text(report),
    }
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in suffixes:
        path = folder / f"{stem}.{suffix}"
        path.write_text(renderers[suffix](), encoding="utf-8", newline="\n")
        written.append(path)
    return written


# --- the matrix -------------------------------------------------------------------------------


def unpinned_note(matrix: Matrix) -> str:
    """Return the ``[sha256]`` lines to add (to upstream.toml) for unverified releases."""
    lines = [f'"{v}" = "{w.sha256}"' for v, w in matrix.wheels.items() if not w.pinned]
    if not lines:
        return ""
    where = f"[sha256] in {matrix.pins_file}"
    return f"not yet recorded; add under {where}:\n" + "\n".join(lines)


def matrix_blocks(matrix: Matrix) -> list[Block]:
    """Lay out the matrix: each patch on each release, its verdict and the details."""
    rows = tuple(
        (row.patch.removesuffix(PATCH_SUFFIX), *(r.of(row.patch).short for r in matrix.replays))
        for row in matrix.rows
    )
    items = []
    for row in matrix.rows:
        items.append(item(f"{row.patch}: {row.verdict.text}"))
        for found in matrix.replays:
            cell = found.of(row.patch)
            for label, applied in (("", cell.own), ("port ", cell.port)):
                if applied is not None and applied.status is not Status.APPLIES and applied.detail:
                    status = f"{applied.status.value}: {applied.detail}"
                    items.append(item(f"{found.base} {label}{status}", depth=1))
    wheels = [
        item(f"{w.file} sha256 {w.sha256} ({'recorded' if w.pinned else 'NOT recorded'})")
        for w in matrix.wheels.values()
    ]
    note = unpinned_note(matrix)
    return [
        Heading(f"executorch version matrix (series {matrix.series[:12]})"),
        Table(("patch", *matrix.versions), rows),
        Items(tuple(items)),
        Heading("Wheels", 2),
        Items(tuple(wheels)),
        *([Pre("Unverified releases", note)] if note else []),
    ]


# --- a retarget -----------------------------------------------------------------------------


def _patch_items(result: Retarget) -> list[Item]:
    pinned = {b.patch: b for b in result.pinned}
    out = []
    for verdict in result.patches:
        out.append(item(f"{verdict.name}: {verdict.text}"))
        own = verdict.replayed.own
        if own.conflicts:
            out.append(item(f"its own patch: {conflict_text(own)}", depth=1))
        if verdict.name in pinned:
            before = pinned[verdict.name]
            out.append(item(f"on {result.old_version}: {before.text}", depth=1))
        found = verdict.behaviour
        if found is not None:
            for case in (*found.bug_cases, *found.other_cases):
                patched = f", patched {case.patched.value}" if case.patched else ""
                error = f" [{case.stock_error}]" if case.stock_error else ""
                out.append(item(f"{case.case}: stock {case.stock.value}{patched}{error}", depth=1))
            if found.test is not None:
                out.append(item(f"upstream test: {found.test.text}", depth=1))
                if found.test_verdict is not None:
                    out.append(item(found.test_verdict.text, depth=2))
                out.append(item(found.test.command, depth=2))
        out += [item(f"FLAG: {flag}", depth=1) for flag in verdict.flags]
    return out


def retarget_blocks(result: Retarget) -> list[Block]:
    """Lay out a retarget: the verdict per patch with its evidence, pins, moves, time."""
    ready = "ready to promote" if result.ready else "NOT ready"
    move = f"{result.old_version} -> {result.version}"
    corpus = "fast" if result.fast else "full"
    rows = tuple(
        (
            v.name.removesuffix(PATCH_SUFFIX),
            v.replayed.short,
            v.action.value,
            v.behaviour.outcome.value if v.behaviour else "not checked",
        )
        for v in result.patches
    )
    attempts = []
    for a in result.attempts:
        pins = ", ".join(f"{k} {v}" for k, v in a.runtime.items())
        attempts.append(item(f"tried {pins}: {'ok' if a.ok else a.detail[:200]}"))
        attempts += [item(f"from: {a.origin}", depth=1)] if a.origin else []
    published = [w for w in result.wheels if w.sha256]
    out: list[Block] = [
        Heading(f"retarget executorch {move}: {ready} ({corpus} corpus)"),
        Para(f"candidate: {result.candidate}"),
        *(
            [Items(tuple(item(f"problem: {p}") for p in result.problems))]
            if result.problems
            else []
        ),
        Table(("patch", "text", "verdict", "behaviour"), rows),
        Items(tuple(_patch_items(result))),
        Heading("Runtime pins", 2),
        Para(", ".join(f"{k} {v}" for k, v in result.runtime.items())),
        Items(tuple(attempts)) if attempts else Para("(not checked)"),
        Heading(f"Wheels: {len(published)} of {len(result.wheels)} published", 2),
        Items(tuple(item(f"{w.file} {w.sha256 or 'not published'}") for w in result.wheels)),
    ]
    if result.locks:
        out += [Heading("Locks", 2), Items(tuple(item(path) for path in result.locks))]
    out += [Heading("Runtime form", 2), Items(tuple(map(item, result.runtime_form.splitlines())))]
    if result.moves:
        moves = tuple(
            (m.case, m.old_patched, m.new_patched, m.attribution, m.note) for m in result.moves
        )
        out += [
            Heading(f"What changes for a user moving to {result.version} (patched builds)", 2),
            Table(("case", result.old_version, result.version, "why", "note"), moves),
        ]
    out += [
        Heading("Time", 2),
        Items(tuple(item(f"{k}: {v:.1f} s") for k, v in result.timings.items())),
    ]
    if result.resume:
        out.append(Para(f"resume: {result.resume}"))
    return out


# --- upstream's own suite -------------------------------------------------------------------


def counts_row(label: str, counts: Counts) -> tuple[str, ...]:
    """Return a row of a counts table: the label, then one cell per test state."""
    return (label, *(str(counts.count(s)) for s in TestState))


def suite_blocks(result: SuiteRun) -> list[Block]:
    """Lay out one line's suite run: counts per build, the tests it broke and fixed."""
    run = result.run
    verdict = (
        f"{len(result.broken)} test(s) pass on stock and not with the patches"
        if result.broken
        else "no test passes on stock and fails with the patches"
    )
    problems = [p for p in (run.stock.problem, run.patched.problem) if p]
    return [
        Heading(f"Upstream's Arm tests on the {result.line} line: stock vs patched"),
        Para(f"executorch {result.release}; {verdict}.", "fail" if result.broken else "pass"),
        Table(
            ("build", *(s.value for s in TestState)),
            (counts_row("stock", run.stock), counts_row("patched", run.patched)),
        ),
        *[Para(f"pytest did not run: {p}", "fail") for p in problems],
        Heading("Broken by the patches", 2),
        Items(tuple(item(n) for n in result.broken)),
        Heading("Fixed by the patches", 2),
        Items(tuple(item(n) for n in result.fixed)),
        Heading(f"{len(run.selection)} test files, {run.seconds / 60:.0f} min", 2),
        Pre("command", f"{run.command}"),
    ]


# --- what is sent upstream ------------------------------------------------------------------


def _on_base(base: OnBase) -> str:
    if base.applies:
        return base.applies
    found = base.behaviour
    return found.outcome.value if found is not None else "not measured"


def sending_blocks(report: Sending) -> list[Block]:
    """Lay out an export: each fix on each base, upstream's gate, what keeps it back."""
    bases = [b.base for b in report.submissions[0].bases] if report.submissions else []
    rows: list[tuple[Inline, ...]] = [
        (
            sub.patch.removesuffix(PATCH_SUFFIX),
            *(_on_base(b) for b in sub.bases),
            "not run" if sub.lint is None else f"{len(sub.lint.findings)} finding(s)",
            Badge("ready", "ok") if not sub.problems else Badge("held back", "bad"),
        )
        for sub in report.submissions
    ]
    problems = [item(f"{s.patch}: {p}") for s in report.submissions for p in s.problems]
    return [
        Heading(
            f"Upstream pull requests from the {report.line} line: main ({report.main[:12]})"
            f" and executorch {report.release}"
        ),
        Table(("patch", *bases, "upstream lint", "verdict"), tuple(rows)),
        Heading("Held back", 2),
        Items(tuple(problems)),
        Heading("Not sent", 2),
        Items(tuple(item(f"{name}: {why}") for name, why in report.skipped.items())),
    ]
