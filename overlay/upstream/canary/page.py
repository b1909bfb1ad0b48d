"""The status page: Markdown, a self-contained HTML page, and ``status.json`` with its schema.

One row per line and patch (its state on main, upstream, the canary's finding and date,
what to do next), then per line: every target's patches, ports and range-diff, the
forwarded matches with their differences, the bisect results and the export gate.
Strings only; the CLI writes them.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

from overlay import codec
from overlay._table import markdown_table
from overlay.upstream.canary.results import (
    CanaryReport,
    ForwardState,
    LineResult,
    TargetResult,
    TextStatus,
)

SCHEMA_FILE = "status.schema.json"
SCHEMA_TITLE = "executorch-arm-overlay canary status"
ROW_HEADERS = ("Line", "Patch", "On main", "Upstream", "Last result", "Since", "Next step")
STATUS_CLASS = {
    TextStatus.UNCHANGED: "ok",
    TextStatus.OFFSET: "ok",
    TextStatus.MERGED: "warn",
    TextStatus.UPSTREAM: "info",
    TextStatus.CONFLICT: "bad",
    TextStatus.MISSING: "bad",
}


def render_json(report: CanaryReport) -> str:
    """Return ``status.json``."""
    return codec.dumps(report, indent=2) + "\n"


def json_schema() -> dict[str, codec.JsonValue]:
    """Return the JSON Schema of ``status.json``, derived from the result dataclasses."""
    return codec.schema(CanaryReport, title=SCHEMA_TITLE)


def render_schema() -> str:
    """Return the schema as the committed file holds it."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def committed_schema_path() -> Path:
    """Return the committed schema file shipped beside this module."""
    return Path(str(resources.files("overlay.upstream.canary") / SCHEMA_FILE))


def _row_cells(report: CanaryReport) -> list[list[str]]:
    cells = []
    for line in report.lines:
        for row in line.rows:
            main = row.main.value + (" (NEW)" if row.newly_conflicting else "")
            cells.append(
                [line.line, row.patch, main, row.upstream, row.result, row.since, row.next_step]
            )
    return cells


def _target_md(target: TargetResult) -> list[str]:
    out = [f"#### onto {target.target} ({target.commit[:12]})", ""]
    for found in (*target.patches, *target.ports):
        label = f"port {found.port}/{found.patch}" if found.port else found.patch
        detail = f": {found.detail}" if found.detail else ""
        out.append(f"- {label}: **{found.status.value}**{detail}")
        out += [
            f"  - upstream evidence: {e.kind} {e.commit[:12]} {e.detail}" for e in found.evidence
        ]
        for hunk in found.conflicts:
            out += ["", f"  conflict in `{hunk.path}`:", "", "  ```", *(
                f"  {line}" for line in hunk.text.rstrip("\n").split("\n")
            ), "  ```"]  # fmt: skip
    if target.range_diff is not None:
        out += [
            "",
            f"`{target.range_diff.command}`:",
            "",
            "```",
            target.range_diff.text.rstrip(),
            "```",
        ]
    return [*out, ""]


def _line_md(line: LineResult) -> list[str]:
    out = [f"### Line {line.line} (base {line.base[:12] or 'none'})", ""]
    if line.error:
        return [*out, f"**Not replayed:** {line.error}", ""]
    for target in line.targets:
        out += _target_md(target)
    out += ["#### Forwarded", ""]
    for found in line.forwarded:
        where = f" {found.commit[:12]} {found.subject!r} ({found.release or 'no release yet'})"
        out.append(
            f"- {found.patch}: `{found.raw}` -> **{found.state.value}**"
            + (where if found.commit else "")
            + (f", matched by {found.matched_by}" if found.matched_by else "")
        )
        if found.state is ForwardState.MERGED_MODIFIED and found.difference:
            out += [
                "",
                "  ```diff",
                *(f"  {x}" for x in found.difference.rstrip().split("\n")),
                "  ```",
            ]
    out += ["", "#### Bisect (text)", ""]
    out += [
        f"- {b.patch}: {b.kind}: {b.commit} {b.subject!r} ({b.date}; {b.tested} commits tried)"
        for b in line.bisects
    ] or ["- nothing to bisect"]
    if line.gate is not None:
        verdict = "no churn" if line.gate.ok else "**CHURN**"
        out += ["", f"#### Export gate: {verdict}", ""]
        out += [
            f"- {c.name}: {'ok' if c.ok else 'FAILED'} {c.detail}".rstrip()
            for c in line.gate.checks
        ]
    return [*out, ""]


def render_markdown(report: CanaryReport) -> str:
    """Return ``status.md``."""
    verdict = "FAILED" if report.failed else "ok"
    out = [
        f"# Canary: {verdict}",
        "",
        f"upstream {report.upstream} main {report.main[:12]} ({report.main_date});"
        f" run {report.created} in {report.seconds:.1f} s by {report.tool}",
        "",
    ]
    if report.failures:
        out += ["Failures:", "", *(f"- {f}" for f in report.failures), ""]
    out += [*markdown_table(ROW_HEADERS, _row_cells(report)), ""]
    b = report.behaviour
    out += [f"Behaviour on main: **{b.state.value}**" + (f" ({b.wheel})" if b.wheel else ""), ""]
    if b.detail:
        out += [b.detail, ""]
    out += [
        f"- {p.patch}: {p.outcome}: {p.text}" + (f" (tests: {p.test})" if p.test else "")
        for p in b.patches
    ]
    out.append("")
    for line in report.lines:
        out += _line_md(line)
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


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _badge(status: TextStatus, new: bool = False) -> str:
    extra = " (new)" if new else ""
    return f'<span class="badge {STATUS_CLASS[status]}">{_e(status.value + extra)}</span>'


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{_e(summary)}</summary><pre>{_e(body)}</pre></details>"


def _line_html(line: LineResult) -> list[str]:
    out = [f"<h2>Line {_e(line.line)} <small>base {_e(line.base[:12])}</small></h2>"]
    if line.error:
        return [*out, f"<p class='banner fail'>Not replayed: {_e(line.error)}</p>"]
    for target in line.targets:
        out.append(f"<h3>onto {_e(target.target)} ({_e(target.commit[:12])})</h3><ul>")
        for found in (*target.patches, *target.ports):
            label = f"port {found.port}/{found.patch}" if found.port else found.patch
            out.append(f"<li>{_e(label)}: {_badge(found.status)} {_e(found.detail)}")
            for e in found.evidence:
                out.append(
                    f"<br>upstream evidence: {_e(e.kind)} {_e(e.commit[:12])} {_e(e.detail)}"
                )
            for hunk in found.conflicts:
                out.append(_details(f"conflict in {hunk.path}", hunk.text))
            out.append("</li>")
        out.append("</ul>")
        if target.range_diff is not None:
            rd = target.range_diff
            out.append(_details(f"range-diff: {rd.command}", rd.text))
    out.append("<h3>Forwarded</h3><ul>")
    for track in line.forwarded:
        where = (
            f" {track.commit[:12]} “{track.subject}” ({track.release or 'no release yet'})"
            if track.commit
            else ""
        )
        state = f"<b>{_e(track.state.value)}</b>{_e(where)}"
        out.append(f"<li>{_e(track.patch)}: <code>{_e(track.raw)}</code> → {state}")
        if track.difference:
            out.append(_details("difference from the forwarded patch", track.difference))
        out.append("</li>")
    out.append("</ul><h3>Bisect (text)</h3><ul>")
    for b in line.bisects:
        tried = f"({_e(b.date)}, {b.tested} commits tried)"
        out.append(
            f"<li>{_e(b.patch)}: {_e(b.kind)}: <code>{_e(b.commit)}</code> {_e(b.subject)} {tried}"
        )
    out.append("</ul>")
    if line.gate is not None:
        cls = "pass" if line.gate.ok else "fail"
        verdict = "no churn" if line.gate.ok else "churn"
        out.append(f"<h3>Export gate</h3><p class='banner {cls}'>{verdict}</p><ul>")
        out += [
            f"<li>{_e(c.name)}: {'ok' if c.ok else 'FAILED'} {_e(c.detail)}</li>"
            for c in line.gate.checks
        ]
        out.append("</ul>")
    return out


def render_html(report: CanaryReport) -> str:
    """Return ``status.html``: one self-contained page (inline CSS, no script)."""
    cls = "fail" if report.failed else "pass"
    verdict = (
        "FAILED: " + "; ".join(report.failures)
        if report.failed
        else "ok: nothing new conflicts, no export churn"
    )
    rows = []
    for line in report.lines:
        for row in line.rows:
            rows.append(
                "<tr>" + "".join(
                    f"<td>{cell}</td>"
                    for cell in (
                        _e(line.line), _e(row.patch) + f"<br><small>{_e(row.subject)}</small>",
                        _badge(row.main, row.newly_conflicting), _e(row.upstream), _e(row.result),
                        _e(row.since), _e(row.next_step),
                    )
                ) + "</tr>"
            )  # fmt: skip
    b = report.behaviour
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>Canary status</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>Canary: every release line against upstream main</h1>",
        f"<p>upstream {_e(report.upstream)} main <code>{_e(report.main[:12])}</code>"
        f" ({_e(report.main_date)}); run {_e(report.created)} in {report.seconds:.1f} s"
        f" by {_e(report.tool)}</p>",
        f"<div class='banner {cls}'>{_e(verdict)}</div>",
        "<table><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in ROW_HEADERS)
        + "</tr></thead><tbody>",
        *rows,
        "</tbody></table>",
        f"<h2>Behaviour on main: {_e(b.state.value)} {_e(b.wheel)}</h2><p>{_e(b.detail)}</p><ul>",
        *(
            f"<li>{_e(p.patch)}: {_e(p.outcome)}: {_e(p.text)}"
            + (f"<br>tests: {_e(p.test)}" if p.test else "")
            + "</li>"
            for p in b.patches
        ),
        "</ul>",
    ]
    for line in report.lines:
        parts += _line_html(line)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_page(report: CanaryReport, out_dir: Path) -> list[Path]:
    """Write ``status.{md,html,json}`` to ``out_dir``; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "status.md": render_markdown(report),
        "status.html": render_html(report),
        "status.json": render_json(report),
    }
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8", newline="\n")
    return [out_dir / name for name in files]
