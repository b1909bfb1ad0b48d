"""Render the version matrix for a terminal, as Markdown and as JSON (strings only)."""

from __future__ import annotations

import json

from overlay._table import markdown_table, text_table
from overlay.series import PATCH_SUFFIX
from overlay.upstream.matrix import Matrix, Status


def unpinned_note(matrix: Matrix) -> str:
    """Return the ``[matrix.sha256]`` lines to add for releases fetched unverified."""
    lines = [f'"{r.version}" = "{r.sha256}"' for r in matrix.releases.values() if not r.pinned]
    if not lines:
        return ""
    where = f"[matrix.sha256] in {matrix.pins_file}"
    return f"not yet recorded; add under {where}:\n" + "\n".join(lines)


def render_table(matrix: Matrix) -> str:
    """Render the matrix for a terminal."""
    header = ["patch", *matrix.versions]
    rows = [
        [row.name.removesuffix(PATCH_SUFFIX), *(row.cells[v].short for v in matrix.versions)]
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
    note = unpinned_note(matrix)
    if note:
        out += ["", note]
    return "\n".join(out) + "\n"


def render_markdown(matrix: Matrix) -> str:
    """Render the matrix as a Markdown table plus verdicts."""
    rows = [
        [f"`{row.name}`", *(row.cells[v].short for v in matrix.versions), row.verdict.text]
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
    return json.dumps(matrix.as_dict(), indent=2) + "\n"
