"""The table of fixes in ``docs/fixes.md``, generated from the registry and the release lines.

Example: the registry's four fixes and ``patches/1.2.0/``.
Becomes: one row per fix (patch, title), one column per line saying how that line carries
it (``runtime Owner.attribute``, ``diff only``, or ``-`` for not carried), then its claims
by release and its declared divergences; :func:`update` puts it between the markers of a
Markdown text.
"""

from __future__ import annotations

from collections.abc import Sequence

from overlay._table import markdown_table
from overlay.errors import OverlayError
from overlay.fixes import Registry
from overlay.fixes.model import DiffOnly, Fix
from overlay.lines import Line

BEGIN = "<!-- fixes-table:begin (generated: overlay.fixes.overview) -->"
END = "<!-- fixes-table:end -->"


def _on_line(fix: Fix, line: Line, carried: Sequence[Fix]) -> str:
    if fix not in carried:
        return "-"
    if isinstance(fix.runtime.get(line.name), DiffOnly):
        return "diff only"
    forms = fix.runtime_forms(line.name)
    if not forms:
        return "carried, no runtime form declared"
    return "runtime " + ", ".join(f"`{form.qualname}`" for form in forms)


def _claims(fix: Fix) -> str:
    return "; ".join(
        f"{release}: " + ", ".join(f"{t.case} ({t.effect.value})" for t in triggers)
        for release, triggers in fix.claims.items()
    )


def _divergences(fix: Fix) -> str:
    return "; ".join(
        f"{line}: " + ", ".join(d.id for d in declared)
        for line, declared in fix.divergences.items()
    )


def table(registry: Registry, lines: Sequence[Line]) -> str:
    """Return the Markdown table of every fix against ``lines`` (oldest first)."""
    carried = {line.name: registry.carried_by(line) for line in lines}
    header = ["fix", "patch", *(line.name for line in lines), "claims", "divergences"]
    rows = [
        [
            str(fix.number),
            f"`{fix.stem}`: {fix.title}",
            *(_on_line(fix, line, carried[line.name]) for line in lines),
            _claims(fix),
            _divergences(fix) or "-",
        ]
        for fix in registry.fixes
    ]
    return "\n".join(markdown_table(header, rows)) + "\n"


def update(text: str, registry: Registry, lines: Sequence[Line]) -> str:
    """Return ``text`` with the table between its markers regenerated."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise OverlayError(
            "no generated table of fixes to update",
            expected=f"the markers {BEGIN} and {END}",
            found="neither" if not begin else "only the first",
            hint="put both markers on lines of their own in docs/fixes.md",
        )
    return f"{head}{BEGIN}\n{table(registry, lines)}{END}{tail}"
