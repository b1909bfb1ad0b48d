"""Python sources read, never run: a worker's imports, a module's names.
Stdlib only: the worker side runs it in the stock and patched environments."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

# What a worker process runs: the lowering process and the environment description.
WORKER_ENTRY_POINTS = ("overlay.equivalence.worker.__main__", "overlay.equivalence.worker.envinfo")


def worker_sources(root: Path) -> list[Path]:
    """Return the package's files a worker can import: every module its entry points reach by
    any import statement (function-level ones too; all of a package that imports ``pkgutil``)."""
    found: dict[str, Path] = {}
    todo = list(WORKER_ENTRY_POINTS)
    while todo:
        name = todo.pop()
        parts = name.split(".")  # a module of package folder ``root``, named like it
        base = root.joinpath(*parts[1:])
        files = [f for f in (base / "__init__.py", base.with_suffix(".py")) if f.is_file()]
        if name in found or parts[0] != root.name or not files:
            continue
        path = found[name] = files[0]
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parents run first
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.Import):
                todo.extend(alias.name for alias in node.names)
                if path.name == "__init__.py" and any(a.name == "pkgutil" for a in node.names):
                    found_here = path.parent.glob("*.py")
                    todo.extend(f"{name}.{p.stem}" for p in found_here if p.stem != "__init__")
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo.append(node.module)
                todo.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return sorted(found.values())


def bound_names(body: Sequence[ast.stmt]) -> Iterator[str]:
    """Yield the names a module body binds at top level (into if/try/with blocks too;
    ``from x import *`` yields ``"*"``: anything may be bound then)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield "*" if alias.name == "*" else (alias.asname or alias.name.split(".")[0])
        else:
            for block in ("body", "orelse", "finalbody"):
                inner = getattr(node, block, None)
                if isinstance(inner, list):
                    yield from bound_names([s for s in inner if isinstance(s, ast.stmt)])
            for handler in getattr(node, "handlers", []):
                yield from bound_names(handler.body)


def functions(body: Sequence[ast.stmt]) -> list[str]:
    """Return the public functions a module body defines at top level, in order."""
    return [
        node.name
        for node in body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]
