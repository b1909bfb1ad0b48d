"""The generated tables of the docs: docs/fixes.md's (a fix per row, a line per column; then
each line's evidence per fix, from its evidence.toml or, never promoted, the fix's claims and
the patch's ``Origin:``), the README's (``brief``) and docs/errors.md's exit codes.

The tests check that the committed tables are current; rewrite all three with
``PYTHONPATH=. python tests/docs_tables.py`` in the checkout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from overlay import fixes, lines
from overlay._table import markdown_table
from overlay.errors import OverlayError, error_classes, exit_codes
from overlay.fixes import Registry, overview
from overlay.fixes.model import DiffOnly, Fix
from overlay.lines import Line, evidence
from overlay.lines.evidence import LineEvidence, PatchEvidence, Status
from overlay.text.series import Patch

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- fixes-table:begin (generated: tests/docs_tables.py) -->"
END = "<!-- fixes-table:end -->"
README_BEGIN = "<!-- fixes-by-line:begin (generated: tests/docs_tables.py) -->"
README_END = "<!-- fixes-by-line:end -->"
ERRORS_BEGIN = "<!-- exit-codes:begin (generated: tests/docs_tables.py) -->"
ERRORS_END = "<!-- exit-codes:end -->"


def replace_between(text: str, begin: str, end: str, body: str, *, what: str, doc: str) -> str:
    """Return ``text`` with ``body`` between the marker lines ``begin`` and ``end``."""
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise OverlayError(
            f"no generated table of {what} to update",
            expected=f"the markers {begin} and {end}",
            found="neither" if not found_begin else "only the first",
            hint=f"put both markers on lines of their own in {doc}",
        )
    return f"{head}{begin}\n{body}{end}{tail}"


def _on_line(fix: Fix, line: Line, found: LineEvidence | None) -> str:
    held, patch, _ = overview.held_by(line, fix, found)
    if held is None:
        return "-"
    if held is Status.DROPPED or patch is None:
        return "dropped"
    shown = f"{held.value} (`{patch.name.removesuffix('.patch')}`)"
    if isinstance(fix.runtime.get(line.name), DiffOnly):
        return f"{shown}; diff only"
    forms = fix.runtime_forms(line.name)
    if not forms:
        return f"{shown}; no runtime form declared"
    return f"{shown}; runtime " + ", ".join(f"`{form.qualname}`" for form in forms)


def _evidence(line: Line, fix: Fix, patch: Patch | None, own: PatchEvidence | None) -> list[str]:
    """Return the trigger cases, the upstream test and the upstream reference of one cell."""
    if own is not None:
        cases = ", ".join(
            f"{c.case}: stock {c.stock}" + (f", patched {c.patched}" if c.patched else "")
            for c in own.cases
        )
        upstream = own.applied_upstream
        reason = own.reason.split(": ", 1)[-1] if own.status is Status.DROPPED else ""
        return [cases or "-", own.upstream_test or "-", upstream or reason or "-"]
    claims = fix.claims.get(line.name, ())
    cases = ", ".join(f"{t.case} ({t.effect.value})" for t in claims)
    header = patch.header if patch is not None else {}
    upstream = " ".join(header.get("Applied-Upstream", "").split())  # one line, as evidence
    origin = header.get("Origin", "")
    if overview.UPSTREAM_COMMIT in origin:
        upstream = f"cherry-pick of {origin.split(overview.UPSTREAM_COMMIT, 1)[1][:12]}" + (
            f"; in {upstream}" if upstream else ""
        )
    return [cases or "-", "-", upstream or "-"]


def evidence_table(registry: Registry, lines: Sequence[Line]) -> str:
    """Return the Markdown table of each line's evidence per fix (newest line first)."""
    header = ["line", "fix", "status", "trigger cases", "upstream test", "upstream"]
    rows = []
    for line in reversed(lines):
        found = evidence.load(line.directory)
        for fix in registry.fixes:
            held, patch, own = overview.held_by(line, fix, found)
            if held is not None:
                row = [line.name, str(fix.number), held.value, *_evidence(line, fix, patch, own)]
                rows.append(row)
    return "\n".join(markdown_table(header, rows)) + "\n"


def table(registry: Registry, lines: Sequence[Line], *, brief: bool = False) -> str:
    """Return the Markdown table of every fix against ``lines`` (oldest first).

    ``brief``: the fix's title and how each line holds it, nothing else (the README's).
    """
    found = {line.name: evidence.load(line.directory) for line in lines}
    for line in lines:
        registry.carried_by(line)  # a patch with no fix module is an error here too
    header = ["fix", "what it fixes", *(line.name for line in lines)]
    rows = []
    for fix in registry.fixes:
        if brief:
            held = [str(overview.held_by(line, fix, found[line.name])[0] or "-") for line in lines]
            rows.append([str(fix.number), fix.title, *held])
            continue
        claims = "; ".join(
            f"{release}: " + ", ".join(f"{t.case} ({t.effect.value})" for t in triggers)
            for release, triggers in fix.claims.items()
        )
        declared = "; ".join(
            f"{line}: " + ", ".join(d.name for d in rules)
            for line, rules in fix.divergences.items()
        )
        on_lines = [_on_line(fix, line, found[line.name]) for line in lines]
        rows.append([str(fix.number), fix.title, *on_lines, claims, declared or "-"])
    header += [] if brief else ["claims", "divergences"]
    return "\n".join(markdown_table(header, rows)) + "\n"


def update(text: str, registry: Registry, lines: Sequence[Line]) -> str:
    """Return ``text`` with the table between its markers regenerated."""
    both = f"{table(registry, lines)}\n{evidence_table(registry, lines)}"
    return replace_between(text, BEGIN, END, both, what="fixes", doc="docs/fixes.md")


def update_readme(text: str, registry: Registry, lines: Sequence[Line]) -> str:
    """Return the README ``text`` with its brief table of fixes by line regenerated."""
    brief = table(registry, lines, brief=True)
    return replace_between(
        text, README_BEGIN, README_END, brief, what="fixes by line", doc="README.md"
    )


def errors_table() -> str:
    """Return the Markdown table of every exit code, its meaning and the classes raising it."""
    classes: dict[int, list[str]] = {}  # the classes that set the code themselves
    for cls in error_classes():
        code = cls.__dict__.get("exit_code")
        if isinstance(code, int):
            classes.setdefault(code, []).append(cls.__name__)
    rows = [
        [str(code), meaning, ", ".join(f"`{name}`" for name in classes.get(code, [])) or "-"]
        for code, meaning in exit_codes()
    ]
    return "\n".join(markdown_table(["code", "meaning", "error class"], rows)) + "\n"


def update_errors(text: str) -> str:
    """Return docs/errors.md's ``text`` with its table of exit codes regenerated."""
    return replace_between(
        text, ERRORS_BEGIN, ERRORS_END, errors_table(), what="exit codes", doc="docs/errors.md"
    )


def regenerate(checkout: Path) -> None:
    """Rewrite the generated tables of docs/fixes.md, README.md and docs/errors.md."""
    found = lines.all_lines(checkout / lines.LINES_DIR)
    rewrites: dict[str, Callable[[str], str]] = {
        "docs/fixes.md": lambda text: update(text, fixes.REGISTRY, found),
        "README.md": lambda text: update_readme(text, fixes.REGISTRY, found),
        "docs/errors.md": update_errors,
    }
    for name, rewrite in rewrites.items():
        path = checkout / name
        path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    regenerate(ROOT)
