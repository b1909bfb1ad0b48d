"""The table of exit codes in ``docs/errors.md``, generated from :mod:`overlay.errors`."""

from __future__ import annotations

from overlay._table import markdown_table, replace_between
from overlay.errors import error_classes, exit_codes

BEGIN = "<!-- exit-codes:begin (generated: overlay.errors_doc) -->"
END = "<!-- exit-codes:end -->"
DOC = "docs/errors.md"


def table() -> str:
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


def update(text: str) -> str:
    """Return ``text`` with the table between its markers regenerated."""
    return replace_between(text, BEGIN, END, table(), what="exit codes", doc=DOC)
