"""Render the version matrix for a terminal, as Markdown and as JSON (strings only)."""

from __future__ import annotations

from pathlib import Path

from overlay import codec
from overlay._table import markdown_table, text_table
from overlay.text.series import PATCH_SUFFIX
from overlay.upstream.facts import Status
from overlay.upstream.matrix import Matrix
from overlay.upstream.retarget import Retarget


def unpinned_note(matrix: Matrix) -> str:
    """Return the ``[matrix.sha256]`` lines to add (to upstream.toml) for unverified releases."""
    lines = [f'"{r.version}" = "{r.sha256}"' for r in matrix.releases.values() if not r.pinned]
    if not lines:
        return ""
    where = f"[matrix.sha256] in {matrix.pins_file}"
    return f"not yet recorded; add under {where}:\n" + "\n".join(lines)


def _cell(matrix: Matrix, name: str, version: str, text: str) -> str:
    """Return a cell: the text result, then the behaviour where it was measured."""
    found = matrix.behaviour.get(name, {}).get(version)
    if found is None:
        return text
    return f"{text}; {BEHAVIOUR_SHORT.get(found.outcome.value, found.outcome.value)}"


BEHAVIOUR_SHORT = {
    "fails before, passes after": "fails->passes",
    "already fixed on stock": "fixed on stock",
    "regression with patch": "regresses",
    "still fails with patch": "still fails",
    "no bug trigger": "no bug",
    "could not run": "could not run",
}


def render_table(matrix: Matrix) -> str:
    """Render the matrix for a terminal (text result; behaviour where measured)."""
    header = ["patch", *matrix.versions]
    rows = [
        [
            row.name.removesuffix(PATCH_SUFFIX),
            *(_cell(matrix, row.name, v, row.cells[v].short) for v in matrix.versions),
        ]
        for row in matrix.rows
    ]
    out = [*text_table(header, rows, max_width=200), ""]
    for row in matrix.rows:
        out.append(f"{row.name}: {row.verdict.text}")
        for version in matrix.versions:
            cell = row.cells[version]
            for label, check in (("", cell.check), ("port ", cell.port)):
                if check is not None and check.status not in (Status.APPLIES,) and check.detail:
                    out.append(f"    {version} {label}{check.status.value}: {check.detail}")
    for name, by_release in matrix.behaviour.items():
        for version, found in by_release.items():
            out.append(f"  behaviour {name.removesuffix(PATCH_SUFFIX)} on {version}: {found.text}")
    note = unpinned_note(matrix)
    if note:
        out += ["", note]
    return "\n".join(out) + "\n"


def render_markdown(matrix: Matrix) -> str:
    """Render the matrix as a Markdown table plus verdicts."""
    rows = [
        [
            f"`{row.name}`",
            *(_cell(matrix, row.name, v, row.cells[v].short) for v in matrix.versions),
            row.verdict.text,
        ]
        for row in matrix.rows
    ]
    out = markdown_table(["patch", *matrix.versions, "verdict"], rows)
    out += ["", "Wheels:", ""]
    for release in matrix.releases.values():
        state = "recorded" if release.pinned else "NOT recorded"
        out.append(f"- `{release.wheel.name}` sha256 `{release.sha256}` ({state})")
    return "\n".join(out) + "\n"


def render_json(matrix: Matrix) -> str:
    """Render the matrix as JSON."""
    return codec.dumps(matrix.as_json(), indent=2) + "\n"


# --- retarget ------------------------------------------------------------------------------


def _retarget_rows(result: Retarget) -> list[list[str]]:
    rows = []
    for verdict in result.verdicts:
        found = verdict.behaviour
        rows.append(
            [
                verdict.name.removesuffix(PATCH_SUFFIX),
                verdict.plan.status.value,
                verdict.action.value,
                found.outcome.value if found else "not checked",
            ]
        )
    return rows


def _retarget_lines(result: Retarget, *, markdown: bool) -> list[str]:
    bullet = "- " if markdown else "  "
    out: list[str] = []
    for verdict in result.verdicts:
        out.append(f"{bullet}{verdict.name}: {verdict.text}")
        if verdict.plan.merge_note and verdict.plan.source != "3-way merge":
            out.append(f"    pinned patch 3-way merged: {verdict.plan.merge_note}")
        found = verdict.behaviour
        if found is not None:
            for case in (*found.bug_cases, *found.other_cases):
                patched = f", patched {case.patched.value}" if case.patched else ""
                error = f" [{case.stock_error}]" if case.stock_error else ""
                out.append(f"    {case.case}: stock {case.stock.value}{patched}{error}")
            if found.test is not None:
                test = found.test
                stock = test.stock.text if test.stock else "not run"
                out.append(f"    upstream test: stock {stock}; patched {test.patched.text}")
                if found.test_verdict is not None:
                    out.append(f"      {found.test_verdict.text}")
                out.append(f"      {test.command}")
        for flag in verdict.flags:
            out.append(f"    FLAG: {flag}")
    return out


def render_retarget(result: Retarget) -> str:
    """Render a retarget for a terminal."""
    ready = "ready to promote" if result.ready else "NOT ready"
    out = [
        f"retarget executorch {result.old_version} -> {result.version}: {ready}"
        f" ({'fast' if result.fast else 'full'} corpus)",
        "",
        *text_table(["patch", "text", "verdict", "behaviour"], _retarget_rows(result)),
        "",
        *_retarget_lines(result, markdown=False),
        "",
        "runtime pins: " + ", ".join(f"{k} {v}" for k, v in result.runtime.items()),
    ]
    for attempt in result.attempts:
        pins = ", ".join(f"{k} {v}" for k, v in attempt.runtime.items())
        out.append(f"  tried {pins}: {'ok' if attempt.ok else attempt.detail[:160]}")
        if attempt.origin:
            out.append(f"    from: {attempt.origin}")
    published = [w for w in result.wheels if w.sha256]
    out.append(f"wheels: {len(published)} of {len(result.wheels)} published")
    for wheel in result.wheels:
        out.append(f"  {wheel.file} {wheel.sha256[:16] or 'not published'}")
    if result.locks:
        out.append(f"locks: {len(result.locks)} in {result.locks[0].parent}")
        out += [f"  {path.name}" for path in result.locks]
    out += ["runtime form:", *(f"  {line}" for line in result.runtime_form.splitlines())]
    if result.moves:
        out += ["", f"moving from {result.old_version} to {result.version} (patched builds):"]
        rows = [
            [m.case, m.old_patched, m.new_patched, m.attribution, ", ".join(m.changes) or "-"]
            for m in result.moves
        ]
        out += text_table(["case", result.old_version, result.version, "why", "changes"], rows)
        out += [
            f"  {m.case}: covered by {m.covered_by}, the {result.version} line's own fix"
            for m in result.moves
            if m.covered_by
        ]
    out += ["", "time: " + ", ".join(f"{k} {v:.0f} s" for k, v in result.timings.items())]
    out.append(f"candidate: {result.candidate}")
    if result.resume:
        out.append(f"resume: {result.resume}")
    for problem in result.problems:
        out.append(f"problem: {problem}")
    return "\n".join(out) + "\n"


def render_retarget_markdown(result: Retarget) -> str:
    """Render a retarget as Markdown."""
    out = [
        f"# Retarget executorch {result.old_version} -> {result.version}",
        "",
        f"Candidate: `{result.candidate}`; "
        + ("ready to promote." if result.ready else "**not ready**: " + "; ".join(result.problems)),
        "",
        *markdown_table(["patch", "text", "verdict", "behaviour"], _retarget_rows(result)),
        "",
        *_retarget_lines(result, markdown=True),
        "",
        "## Runtime pins",
        "",
    ]
    rows = [
        [", ".join(f"{k} {v}" for k, v in a.runtime.items()), "ok" if a.ok else a.detail[:200]]
        for a in result.attempts
    ]
    out += markdown_table(["tried", "result"], rows) if rows else ["(not checked)"]
    out += ["", "## Wheels", ""]
    out += [f"- `{w.file}` `{w.sha256 or 'not published'}`" for w in result.wheels]
    if result.locks:
        out += ["", "## Locks", ""]
        out += [f"- `{path}`" for path in result.locks]
    out += ["", "## Runtime form", "", result.runtime_form, ""]
    if result.moves:
        out += [f"## What changes for a user moving to {result.version}", ""]
        rows = [[m.case, m.old_patched, m.new_patched, m.attribution, m.note] for m in result.moves]
        out += markdown_table(["case", result.old_version, result.version, "why", "note"], rows)
        out.append("")
    out += ["## Time", ""]
    out += [f"- {k}: {v:.1f} s" for k, v in result.timings.items()]
    if result.resume:
        out += ["", f"Resume: `{result.resume}`"]
    return "\n".join(out) + "\n"


def render_retarget_json(result: Retarget) -> str:
    """Render a retarget as JSON."""
    return codec.dumps(result.as_json(), indent=2) + "\n"


def write_matrix(matrix: Matrix, folder: Path) -> list[Path]:
    """Write ``matrix.txt``, ``matrix.json`` and ``matrix.md`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "matrix.txt": render_table(matrix),
        "matrix.json": render_json(matrix),
        "matrix.md": render_markdown(matrix),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files]


def retarget_texts(result: Retarget) -> dict[str, str]:
    """Return the retarget report by file suffix: ``txt``, ``md`` and ``json``."""
    return {
        "txt": render_retarget(result),
        "md": render_retarget_markdown(result),
        "json": render_retarget_json(result),
    }
