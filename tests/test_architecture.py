"""The tree's shape and the rules of docs/architecture.md, each shown to fail when broken.

No import cycles; the layers (data -> engine -> runs -> cli, read from the doc); torch only
where the doc says; only the CLI prints or exits; JSON only through the codec and no mirror
dataclasses; every path and module the docs name exists (test_docs.py checks the nox
sessions, CLI commands and links they show); no oversized module without a reason; no twin
module names.
"""

from __future__ import annotations

import ast
import glob
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from test_docs import PAGES, _code

ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "overlay"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 500
REASONS = ("long because", "longer than", "over 500 lines")  # or a line starting "Size:"

# What only a worker process (or another environment's Python) may import at module level.
WORKER_PACKAGES = frozenset(
    {"torch", "executorch", "torchao", "numpy", "tosa_serializer", "tosa_reference_model", "ethosu"}
)
# The modules that may: the worker side and the corpus's torch side (docs/architecture.md).
TORCH_HOMES = (
    "overlay.equivalence.worker",
    "overlay.equivalence.corpus.models",
    "overlay.equivalence.corpus.zoo",
)
# Prints and exits outside the CLI: (module, function) -> why it is not library output.
PROCESS_ENTRY_POINTS = {
    ("overlay.equivalence.worker.__main__", "main"): "the worker process: replies own its stdout",
    ("overlay.equivalence.worker.envinfo", "main"): "run in a path's Python: prints one line",
    ("overlay.upstream.kernel_probe", "main"): "run by a release env's Python",
    ("overlay._process", "_die_with_us.hook"): "the forked child exits before its exec",
}
# json calls outside overlay/codec.py: (module, function) -> why not the codec.
JSON_OUTSIDE_THE_CODEC = {
    ("overlay.envs.lockfiles", "inputs_key"): "a hash input",
    ("overlay.equivalence.controller.result_cache", "key"): "a hash input",
    ("overlay.equivalence.worker.envinfo", "EnvInfo.digest"): "a hash input",
    ("overlay.equivalence.protocol", "encode"): "the protocol's line envelope",
    ("overlay.equivalence.protocol", "_envelope"): "the envelope, checked before the body",
    ("overlay.equivalence.controller.outcome", "load"): "the schema number, before the body",
    ("overlay.equivalence.render.html", "_value"): "JSON shown to a reader",
    ("overlay.equivalence.render.html", "_differing"): "JSON compared for a reader",
    ("overlay.equivalence.render.layout", "detail_lines"): "JSON shown to a reader",
    ("overlay.equivalence.worker.vgf_run", "_layer_folders"): "Vulkan layer manifests",
    ("overlay.equivalence.worker.vgf_run", "run_vgf"): "a VGF scenario file",
    ("overlay.equivalence.worker.vgf_run", "identity"): "a Vulkan driver manifest",
    ("overlay.upstream.kernel_probe", "main"): "run by a release env's Python",
}
# Named in the docs on purpose although no such file or name exists in the tree.
NOT_IN_THE_TREE = {
    "overlay.runtime:nope": "docs/equivalence.md: a --runtime-patch the run refuses",
    "patches/.promoting-<version>/": "promote's staging folder, there only while it runs",
    "patches/1.6.0/": "docs/release-lines.md: the line promoting a 1.6.0 candidate makes",
}


def module_name(path: Path) -> str:
    """Return the dotted module name of a file under the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Return every overlay module by dotted name."""
    return {module_name(path): path for path in sorted(OVERLAY.rglob("*.py"))}


def walk_scoped(tree: ast.AST) -> Iterator[tuple[ast.AST, str, bool]]:
    """Yield every node with the qualified name of the function or class it is in ("" at
    module level) and whether it runs when the module is imported (not inside a function)."""

    def visit(node: ast.AST, scope: str, at_import: bool) -> Iterator[tuple[ast.AST, str, bool]]:
        for child in ast.iter_child_nodes(node):
            yield child, scope, at_import
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{scope}.{child.name}" if scope else child.name
                yield from visit(child, inner, at_import and isinstance(child, ast.ClassDef))
            else:
                yield from visit(child, scope, at_import and not isinstance(child, ast.Lambda))

    yield from visit(tree, "", True)


def imported(
    name: str, path: Path, known: set[str], *, at_import: bool = False, packages: bool = True
) -> set[str]:
    """Return the overlay modules ``path`` imports anywhere (functions included).

    ``at_import``: only the imports that run when the module is imported (module level);
    ``packages``: with the packages whose ``__init__`` those imports run.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node, _, runs in walk_scoped(ast.parse(path.read_text(encoding="utf-8"))):
        if at_import and not runs:
            continue
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
    return found | _packages_run(name, found, known) if packages else found


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


def import_graph(*, at_import: bool = False, packages: bool = True) -> dict[str, set[str]]:
    """Return module -> the overlay modules it imports (see :func:`imported`)."""
    found = modules()
    known = set(found)
    return {
        name: imported(name, path, known, at_import=at_import, packages=packages)
        for name, path in found.items()
    }


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
    assert "overlay.codec" in graph["overlay.distribution.provenance"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (function-level imports count): " + " -> ".join(cycle or [])


def test_a_back_edge_in_the_real_graph_is_found() -> None:
    graph = import_graph()
    graph["overlay.codec"].add("overlay.distribution.provenance")  # provenance imports codec
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"overlay.codec", "overlay.distribution.provenance"}


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


# --- layers: data -> engine -> runs -> cli (read from docs/architecture.md) ---------------


def only_listed(found: set[str], listed: set[str], problem: str, listing: str) -> None:
    """Fail on what ``found`` holds beyond ``listed``, and on entries of ``listed`` that are no
    longer found (an allow-list only shrinks)."""
    new = sorted(found - listed)
    assert not new, f"{problem}:\n" + "\n".join(new)
    gone = sorted(listed - found)
    assert not gone, f"no longer found, remove from {listing}: {gone}"


def planted(tmp_path: Path, source: str) -> Path:
    """Return a module file holding ``source`` (a planted violation)."""
    module = tmp_path / "m.py"
    module.write_text(source, encoding="utf-8")
    return module


LAYER_ITEM = re.compile(r"^- \*\*(\w+)\*\*: (.+)$", re.MULTILINE)
Layers = list[tuple[str, tuple[str, ...]]]


def read_layers(text: str) -> Layers:
    """Return the layers of the doc's "Layers" section, lowest first, with their modules."""
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    return [
        (match.group(1), tuple(re.findall(r"`([\w.]+)`", match.group(2))))
        for match in LAYER_ITEM.finditer(section)
    ]


def _covers(entry: str, module: str) -> bool:
    """Return True when a layer entry covers ``module`` (``overlay`` covers only itself)."""
    return module == entry or (entry != "overlay" and module.startswith(entry + "."))


def layer_of(module: str, layers: Layers) -> int:
    """Return the index of ``module``'s layer: its longest covering entry's (ValueError when
    no entry covers it, or that entry is listed in more than one layer)."""
    found = [
        (len(entry), index)
        for index, (_, entries) in enumerate(layers)
        for entry in entries
        if _covers(entry, module)
    ]
    if not found:
        raise ValueError(f"{module} is in no layer")
    longest = max(size for size, _ in found)
    where = {index for size, index in found if size == longest}
    if len(where) > 1:
        raise ValueError(f"{module} is in {len(where)} layers")
    return where.pop()


def layer_breaks(graph: dict[str, set[str]], layers: Layers) -> set[tuple[str, str]]:
    """Return the imports (importer, imported) of a module in a higher layer."""
    return {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if layer_of(target, layers) > layer_of(module, layers)
    }


def doc_layers() -> Layers:
    return read_layers(ARCHITECTURE.read_text(encoding="utf-8"))


def test_every_module_is_in_exactly_one_layer() -> None:
    layers = doc_layers()
    assert [name for name, _ in layers] == ["data", "engine", "runs", "cli"]
    known = modules()
    problems = [
        f"{entry}: no such module" for _, es in layers for entry in es if entry not in known
    ]
    for module in known:
        try:
            layer_of(module, layers)
        except ValueError as exc:
            problems.append(str(exc))
    assert not problems, "docs/architecture.md's layers:\n" + "\n".join(problems)


def test_imports_stay_in_their_layer_or_go_lower() -> None:
    found = layer_breaks(import_graph(packages=False), doc_layers())
    assert not found, "imports of a higher layer:\n" + "\n".join(f"{a} -> {b}" for a, b in found)


def test_fixes_import_nothing_from_equivalence() -> None:
    found = {
        (module, target)
        for module, targets in import_graph(packages=False).items()
        if _covers("overlay.fixes", module)
        for target in targets
        if _covers("overlay.equivalence", target)
    }
    assert not found, sorted(found)


def test_a_planted_layer_break_or_unplaced_module_is_found() -> None:
    layers = doc_layers()
    graph = import_graph(packages=False)
    before = layer_breaks(graph, layers)
    graph["overlay.codec"].add("overlay.cli.output")  # data importing the CLI
    graph["overlay.in_place.plan"].add("overlay.equivalence.verdict")  # engine importing runs
    assert layer_breaks(graph, layers) - before == {
        ("overlay.codec", "overlay.cli.output"),
        ("overlay.in_place.plan", "overlay.equivalence.verdict"),
    }
    with pytest.raises(ValueError, match=r"^overlay\.newpackage\.x is in no layer$"):
        layer_of("overlay.newpackage.x", layers)
    with pytest.raises(ValueError, match="in 2 layers"):
        layer_of("overlay.fixes.model", [*layers, ("extra", ("overlay.fixes",))])
    assert (
        layer_of("overlay.fixes.model", layers) == 0 and layer_of("overlay.__main__", layers) == 3
    )


# --- leaf features: only the CLI imports them ----------------------------------------------


def doc_leaves() -> tuple[str, ...]:
    """Return the leaf packages of the doc's "Leaf features" section."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Leaf features\n", 1)[1].split("\n## ", 1)[0]
    return tuple(re.findall(r"^- `([\w.]+)`", section, re.MULTILINE))


def leaf_breaks(graph: dict[str, set[str]], leaves: Sequence[str]) -> set[tuple[str, str]]:
    """Return the imports (importer, imported) of a leaf from outside it and the CLI."""
    return {
        (module, target)
        for module, targets in graph.items()
        if not _covers("overlay.cli", module)
        for target in targets
        for leaf in leaves
        if _covers(leaf, target) and not _covers(leaf, module)
    }


def test_only_the_cli_imports_a_leaf_feature() -> None:
    leaves = doc_leaves()
    assert set(leaves) >= {"overlay.upstream.canary", "overlay.upstream.retarget"}
    assert all(leaf in modules() for leaf in leaves)
    found = leaf_breaks(import_graph(packages=False), leaves)
    assert not found, "leaf features imported outside the CLI:\n" + "\n".join(
        f"{a} -> {b}" for a, b in sorted(found)
    )


def test_a_planted_leaf_import_is_found() -> None:
    leaves = doc_leaves()
    graph = import_graph(packages=False)
    before = leaf_breaks(graph, leaves)
    planted_edges = {
        ("overlay.upstream.prepare", "overlay.upstream.canary.gate"),  # PR preparation -> canary
        ("overlay.upstream.behaviour", "overlay.upstream.retarget.promote"),
        ("overlay.envs.ready_venv", "overlay.in_place.plan"),
        ("overlay.equivalence.render.layout", "overlay.equivalence.render.html"),
    }
    for module, target in planted_edges:
        graph[module].add(target)
    assert leaf_breaks(graph, leaves) - before == planted_edges
    graph["overlay.cli.upstream"].add("overlay.upstream.canary.gate")  # the CLI may
    graph["overlay.upstream.canary.canary_report"].add("overlay.upstream.canary.gate")  # itself
    assert leaf_breaks(graph, leaves) - before == planted_edges


# --- torch only in worker processes -------------------------------------------------------


def worker_imports(path: Path) -> list[str]:
    """Return the worker-only packages ``path`` imports at module level (import time)."""
    found: list[str] = []
    for node, _, at_import in walk_scoped(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        if at_import:
            found += [n for n in names if n.split(".")[0] in WORKER_PACKAGES]
    return found


def torch_at_import(heavy: set[str], graph: dict[str, set[str]]) -> set[str]:
    """Return ``heavy`` and every module importing one of them at import time, transitively."""
    found = set(heavy)
    while more := {m for m, targets in graph.items() if targets & found} - found:
        found |= more
    return found


def test_torch_is_imported_at_module_level_only_where_the_docs_say() -> None:
    heavy = {name for name, path in modules().items() if worker_imports(path)}
    assert "overlay.equivalence.corpus.models" in heavy
    spread = torch_at_import(heavy, import_graph(at_import=True))
    outside = sorted(m for m in spread if not any(_covers(h, m) for h in TORCH_HOMES))
    assert not outside, "load torch (or executorch, ...) at import, outside the worker:\n" + (
        "\n".join(outside)
    )
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for home in TORCH_HOMES:  # the doc's rule names each home
        name = home.rsplit(".", 1)[-1]
        assert f"{name}/`" in text or f"{name}.py`" in text, home


def test_a_planted_torch_import_is_found(tmp_path: Path) -> None:
    module = planted(
        tmp_path,
        "import torch.nn\nfrom executorch.exir import x\nfrom .torch import y\n"
        "class C:\n    import numpy\n"
        "def f():\n    import torchao\n    g = lambda: 0\n",
    )
    assert worker_imports(module) == ["torch.nn", "executorch.exir", "numpy"]
    graph = import_graph(at_import=True)
    graph["overlay.equivalence.controller.scheduler"].add("overlay.equivalence.corpus.models")
    spread = torch_at_import({"overlay.equivalence.corpus.models"}, graph)
    assert {"overlay.equivalence.controller.scheduler", "overlay.cli.equivalence"} <= spread


# --- only the CLI prints or exits ---------------------------------------------------------

OUTPUTS = ("sys.exit", "os._exit", "os.abort", "sys.stdout", "sys.stderr")


def prints_and_exits(path: Path) -> set[tuple[str, str]]:
    """Return (function, what) for every print, exit and stdout/stderr use in ``path``."""
    found: set[tuple[str, str]] = set()
    for node, scope, _ in walk_scoped(ast.parse(path.read_text(encoding="utf-8"))):
        call = node.func if isinstance(node, ast.Call) else None
        if isinstance(call, ast.Name) and call.id in ("print", "exit", "quit"):
            found.add((scope, call.id))
        elif isinstance(node, ast.Attribute) and ast.unparse(node) in OUTPUTS:
            found.add((scope, ast.unparse(node)))
        elif isinstance(node, ast.Raise) and "SystemExit" in ast.unparse(node.exc or node):
            found.add((scope, "SystemExit"))
    return found


def test_only_the_cli_prints_or_exits() -> None:
    layers = doc_layers()
    found = {
        f"{name}:{scope or '<module>'}"
        for name, path in modules().items()
        if layers[layer_of(name, layers)][0] != "cli"
        for scope, _ in prints_and_exits(path)
    }
    only_listed(
        found,
        {f"{name}:{scope}" for name, scope in PROCESS_ENTRY_POINTS},
        "library code prints or exits (raise an OverlayError)",
        "PROCESS_ENTRY_POINTS",
    )


def test_a_planted_print_or_exit_is_found(tmp_path: Path) -> None:
    module = planted(
        tmp_path,
        "import os, sys\nprint('x')\n"
        "def f():\n    sys.stderr.write('x')\n    raise SystemExit(2)\n"
        "class C:\n    def g(self):\n        os._exit(1)\n",
    )
    assert prints_and_exits(module) == {
        ("", "print"),
        ("f", "sys.stderr"),
        ("f", "SystemExit"),
        ("C.g", "os._exit"),
    }


# --- one codec: JSON through overlay/codec.py, no mirror dataclasses -----------------------


def json_calls(path: Path) -> set[str]:
    """Return the functions of ``path`` that call json.dumps/loads/dump/load."""
    found = set()
    for node, scope, _ in walk_scoped(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.ImportFrom) and node.module == "json") or (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "json"
            and node.attr in ("dumps", "loads", "dump", "load")
        ):
            found.add(scope)
    return found


def test_json_is_written_and_read_only_by_the_codec() -> None:
    found = {
        f"{name}:{scope or '<module>'}"
        for name, path in modules().items()
        if name != "overlay.codec"
        for scope in json_calls(path)
    }
    only_listed(
        found,
        {f"{name}:{scope}" for name, scope in JSON_OUTSIDE_THE_CODEC},
        "json outside overlay/codec.py (use codec.dumps/loads)",
        "JSON_OUTSIDE_THE_CODEC",
    )


def dataclass_fields(name: str, path: Path) -> dict[str, frozenset[str]]:
    """Return each dataclass of a module (``module.Class``) with its field names."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and any(
            "dataclass" in ast.unparse(d) for d in node.decorator_list
        ):
            found[f"{name}.{node.name}"] = frozenset(
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign)
                and isinstance(s.target, ast.Name)
                and "ClassVar" not in ast.unparse(s.annotation)
            )
    return found


def mirrors(classes: dict[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """Return the mirror dataclasses: each ``*Json`` class, and each group of two or more
    dataclasses with the same field names (three fields or more: two, such as a render
    vocabulary's ``text`` and ``tone``, agree by coincidence)."""
    groups: dict[frozenset[str], list[str]] = {}
    for name, fields in classes.items():
        groups.setdefault(fields, []).append(name)
    found: list[tuple[str, ...]] = [(name,) for name in classes if name.endswith("Json")]
    found += [tuple(sorted(g)) for f, g in groups.items() if len(f) >= 3 and len(g) > 1]
    return sorted(found)


def overlay_dataclasses() -> dict[str, frozenset[str]]:
    return {
        k: v for name, path in modules().items() for k, v in dataclass_fields(name, path).items()
    }


def test_no_dataclass_mirrors_another() -> None:
    found = mirrors(overlay_dataclasses())
    assert not found, "mirror dataclasses (encode the domain type with the codec):\n" + (
        "\n".join(" = ".join(g) for g in found)
    )


def test_a_planted_json_mirror_is_found(tmp_path: Path) -> None:
    module = planted(
        tmp_path,
        "from dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass InstallReportJson:\n    version: str\n\n"
        "@dataclasses.dataclass\nclass Found:\n"
        "    version: str\n    site: str\n    files: dict[str, str]\n    modules: tuple[str, ...]\n"
        "    lock: str | None\n    locked: int\n    unlocked: tuple[str, ...]\n",
    )
    classes = {**overlay_dataclasses(), **dataclass_fields("planted", module)}
    found = mirrors(classes)
    assert ("planted.InstallReportJson",) in found
    assert ("overlay.envs.verify_install.InstallReport", "planted.Found") in found


def test_the_mirror_finder_reads_fields_not_class_variables(tmp_path: Path) -> None:
    module = planted(
        tmp_path,
        "import dataclasses\nfrom typing import ClassVar\n\n"
        "@dataclasses.dataclass\nclass A:\n    KIND: ClassVar[str] = 'a'\n    x: int\n    y: int\n"
        "    def f(self) -> int:\n        z: int = 1\n        return z\n",
    )
    assert dataclass_fields("m", module) == {"m.A": frozenset({"x", "y"})}
    assert mirrors({"a.A": frozenset({"x"}), "b.B": frozenset({"x"})}) == []  # one field


# --- the docs name only what exists -------------------------------------------------------

PATH_PREFIXES = ("overlay/", "patches/", "tests/", "docs/", "benchmarks/", ".ci/", ".github/")
TOP_FILES = ("noxfile.py", "pyproject.toml", "README.md", ".pre-commit-config.yaml")
DOTTED = re.compile(r"(?<![\w./-])overlay(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


def _pattern(path: str) -> str:
    """Return the glob of a path as the docs write it: ``<name>``, ``NNNN`` and a one-letter
    folder (``patches/L/``) are placeholders; ``:12`` (a line number) is dropped."""
    path = re.sub(r":\d+(-\d+)?$", "", path)
    path = path.replace("NNNN", "[0-9]" * 4)
    return "/".join("*" if re.fullmatch(r"[A-Z]", part) else part for part in path.split("/"))


def stale_references(text: str) -> list[str]:
    """Return the paths and ``overlay.x.y`` modules (and names in them) that ``text`` shows
    in code (inline or fenced) and the tree does not have."""
    known = modules()
    wrong = []
    skip = re.compile("|".join(map(re.escape, NOT_IN_THE_TREE)))
    for shown in _code(text):
        line = re.sub(r"<[^<>\s][^<>]*>", "*", skip.sub("", shown))  # <name>: a placeholder
        for token in line.split():
            path = token.lstrip("([\"'").rstrip(")],;:.'\"")
            named = path.startswith(PATH_PREFIXES) or path in TOP_FILES
            if named and not glob.glob(str(ROOT / _pattern(path))):
                wrong.append(path)
        for match in DOTTED.finditer(line):
            parts = match.group(0).replace(":", ".").split(".")
            size = len(parts)
            while size and ".".join(parts[:size]) not in known:
                size -= 1
            module = ".".join(parts[:size])
            if size == 1 and len(parts) > 1:
                wrong.append(match.group(0))  # overlay.<nothing that exists>
            elif size < len(parts) and parts[size] not in _names(known[module]):
                wrong.append(match.group(0))
    return wrong


def _names(path: Path) -> set[str]:
    """Return the names a module binds at top level (its functions, classes, constants)."""
    from overlay.equivalence.sources import bound_names

    return set(bound_names(ast.parse(path.read_text(encoding="utf-8")).body))


def test_every_path_and_module_the_docs_name_exists() -> None:
    wrong = [
        f"{page.relative_to(ROOT)}: {ref}"
        for page in PAGES
        for ref in stale_references(page.read_text(encoding="utf-8"))
    ]
    assert not wrong, "the docs name what the tree does not have:\n" + "\n".join(wrong)
    text = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert not [s for s in NOT_IN_THE_TREE if s not in text], "remove from NOT_IN_THE_TREE"


def test_a_planted_stale_reference_is_found() -> None:
    text = (
        "The fix lives in `overlay/fixes/f0005_toy.py` (see `overlay.fixes.nope` and\n"
        "`overlay.corpus`); `tests/test_nope.py:12` checks it.\n\n"
        "```sh\nls patches/9.9.9/series  # and overlay.runtime:apply_none\n```\n"
    )
    assert sorted(stale_references(text)) == [
        "overlay.corpus",
        "overlay.fixes.nope",
        "overlay.runtime:apply_none",
        "overlay/fixes/f0005_toy.py",
        "patches/9.9.9/series",
        "tests/test_nope.py:12",
    ]
    fine = (
        "`overlay/fixes/fNNNN_<slug>.py`, `patches/<executorch release>/`, `patches/L/series`,"
        " `overlay.codec.schema`, `overlay.runtime:apply_all`, `tests/test_codec.py:3`"
    )
    assert stale_references(fine) == []
