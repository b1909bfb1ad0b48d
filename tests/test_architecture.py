"""The tree's shape: no import cycles, no oversized module without a reason, no twin names."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "overlay"
MAX_LINES = 500
REASONS = ("long because", "longer than", "over 500 lines")  # or a line starting "Size:"


def module_name(path: Path) -> str:
    """Return the dotted module name of a file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Return every overlay module by dotted name."""
    return {module_name(path): path for path in sorted(OVERLAY.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """Return the overlay modules ``path`` imports anywhere (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the submodule when it is one
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            module = target
            while module and module not in known:  # ``import a.b.c`` of a name inside a.b
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
    return found | _packages_run(name, found, known)


def _packages_run(name: str, targets: set[str], known: set[str]) -> set[str]:
    """Return the packages whose ``__init__`` importing ``targets`` runs (not name's own)."""
    packages = set()
    for target in targets:
        parts = target.split(".")
        for size in range(1, len(parts)):
            package = ".".join(parts[:size])
            if package in known and package != name and not name.startswith(package + "."):
                packages.add(package)
    return packages


def import_graph() -> dict[str, set[str]]:
    """Return module -> the overlay modules it imports."""
    found = modules()
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one import cycle as a path a -> ... -> a, or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_resolve_relative_and_submodule_forms(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import os\nfrom overlay import codec\nfrom . import b\nfrom .c import X\n"
        "def f():\n    import overlay.d.e\n",
        encoding="utf-8",
    )
    known = {"overlay", "overlay.codec", "overlay.p", "overlay.p.b", "overlay.p.c", "overlay.d"}
    found = imported("overlay.p.m", source, known)
    assert found == {"overlay.codec", "overlay.p.b", "overlay.p.c", "overlay.d"}
    # importing overlay.d.e runs overlay/d/__init__.py; m's own packages do not count
    known |= {"overlay.d.e"}
    assert _packages_run("overlay.p.m", {"overlay.d.e", "overlay.p.b"}, known) == {"overlay.d"}


def test_no_import_cycles_among_overlay_modules() -> None:
    graph = import_graph()
    assert "overlay.codec" in graph["overlay.dist.provenance"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (function-level imports count): " + " -> ".join(cycle or [])


def test_a_back_edge_in_the_real_graph_is_found() -> None:
    graph = import_graph()
    graph["overlay.codec"].add("overlay.dist.provenance")  # provenance imports codec
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"overlay.codec", "overlay.dist.provenance"}


def _first_paragraph(path: Path) -> str:
    """Return the docstring's one-line summary and the paragraph after it, lower-cased."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return "\n\n".join(doc.split("\n\n")[:2]).lower()


def _says_why(paragraph: str) -> bool:
    lines = paragraph.splitlines()
    return any(r in paragraph for r in REASONS) or any(x.startswith("size:") for x in lines)


def test_no_module_is_over_500_lines_without_saying_why() -> None:
    offenders = []
    for name, path in modules().items():
        size = len(path.read_text(encoding="utf-8").splitlines())
        paragraph = _first_paragraph(path)
        if size > MAX_LINES and not _says_why(paragraph):
            offenders.append(f"{name}: {size} lines, no reason in its docstring's first paragraph")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize(
    ("doc", "counts"),
    [
        ("The journal.\n\nLonger than ~500 lines on purpose: one protocol.", True),
        ("The CLI.\n\nSize: the parser and every command, in one table.", True),
        ("The CLI.\n\nIt parses.\n\nSize: said too late.", False),
        ("The module.\n\nIt is large.", False),
    ],
)
def test_a_size_reason_counts_only_at_the_top(tmp_path: Path, doc: str, counts: bool) -> None:
    path = tmp_path / "m.py"
    path.write_text(f'"""{doc}"""\n', encoding="utf-8")
    assert _says_why(_first_paragraph(path)) is counts


def test_module_basenames_are_unique() -> None:
    names = Counter(path.name for path in OVERLAY.rglob("*.py"))
    twins = [
        f"{name}: " + ", ".join(sorted(str(p.relative_to(ROOT)) for p in OVERLAY.rglob(name)))
        for name, count in sorted(names.items())
        if count > 1 and name not in ("__init__.py", "__main__.py")
    ]
    assert names["__init__.py"] > 1  # packages share __init__.py, which is allowed
    assert not twins, "modules sharing a file name:\n" + "\n".join(twins)
