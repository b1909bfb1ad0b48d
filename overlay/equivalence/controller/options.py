"""What to run and where: the options of one equivalence run, its shard, and the user's
inputs made absolute (workers run in the log folder) and checked before any worker starts;
files are read, never run (torch-free)."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from overlay.equivalence import corpus, sources
from overlay.equivalence.corpus import user_cases
from overlay.equivalence.protocol import PathId
from overlay.errors import EquivalenceInputError
from overlay.items import ItemId

DEFAULT_RUNTIME_PATCH = "overlay.runtime:apply_all"
DEFAULT_TIMEOUT_S = 600.0
CALLER_DIR_ENV = "OVERLAY_CALLER_DIR"  # where relative --models / --runtime-patch are read from
DEFAULT_WORKER = ("-m", "overlay.equivalence.worker")
Group = Literal["core", "zoo", "all"]


@dataclass(frozen=True, order=True)
class Shard:
    """Part ``index`` of ``count`` (1-based): the items whose id hashes to it."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Parse ``K/N`` (1 <= K <= N)."""
        index, sep, count = text.partition("/")
        if sep and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count):
            return cls(int(index), int(count))
        raise EquivalenceInputError(
            f"--shard {text!r} is not K/N",
            expected="K/N with 1 <= K <= N, e.g. 2/4",
            found=text,
            hint="pass --shard 1/2 on one runner and --shard 2/2 on the other",
        )

    def owns(self, item: ItemId) -> bool:
        """Return True when ``item`` belongs to this shard (stable on every machine)."""
        digest = hashlib.sha256(str(item).encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class RunChoices:
    """What ran and how it was selected: recorded in every report."""

    stock_python: str
    patched_python: str
    runtime_patch: str = DEFAULT_RUNTIME_PATCH
    models: str | None = None
    with_corpus: bool = False  # with models: the built-in corpus and probes too
    fast: bool = False
    only: tuple[str, ...] = ()
    group: Group | None = None  # corpus group; None: core (+ with --fast one zoo case)
    probes: bool = True
    parallel: bool = True
    attribute: bool = True
    keep_bytes: bool = False
    shard: Shard | None = None
    require_executed: tuple[str, ...] = ()  # targets that must run ("tosa", "vgf"), or fail

    def recorded(self) -> RunChoices:
        """Return just these fields (an :class:`Options` without how this machine runs it)."""
        return RunChoices(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RunChoices)})


@dataclass(frozen=True)
class Options(RunChoices):
    """What to run and where: the recorded choices, then this machine's settings."""

    out_dir: Path = Path("reports")
    timeout: float = DEFAULT_TIMEOUT_S  # seconds per request; a case may set its own
    patches_dir: Path | None = None  # the series folder workers read pins from
    pythonpath: dict[PathId, str] = field(default_factory=dict)  # extra entries per path
    worker_command: tuple[str, ...] = DEFAULT_WORKER  # after the path's python
    cache_dir: Path | None = None  # None: no result cache
    use_cache: bool = True  # False: ignore cached results (fresh ones still refresh it)
    jobs: int = 0  # worker processes to aim for; 0: one per CPU (never fewer than needed)

    @property
    def log_dir(self) -> Path:
        """Return the folder for the workers' logs (they run there)."""
        return self.out_dir / "equivalence-logs"

    @property
    def builtin_worker(self) -> bool:
        """Return True when the workers are the overlay's own (they run the corpus)."""
        return self.worker_command == DEFAULT_WORKER


GROUPS = (*corpus.GROUPS, "all")


def options_from_env(
    stock_python: str | None, patched_python: str | None, **overrides: object
) -> Options:
    """Build checked Options from $OVERLAY_STOCK_PYTHON / $OVERLAY_PATCHED_PYTHON + overrides
    (the given files are checked first: a models file's syntax error before the Pythons)."""
    stock = stock_python or os.environ.get("OVERLAY_STOCK_PYTHON") or ""
    patched = patched_python or os.environ.get("OVERLAY_PATCHED_PYTHON") or ""
    options = replace(Options(stock_python=stock, patched_python=patched), **overrides)  # type: ignore[arg-type]
    checked = resolve_inputs(options, caller_dir())
    pythons = (("stock", stock), ("patched", patched))
    missing = [f"--{kind}-python" for kind, given in pythons if not given]
    if missing:
        raise EquivalenceInputError(
            "no stock or patched Python to run the paths in",
            expected="--stock-python and --patched-python (or $OVERLAY_STOCK_PYTHON and"
            " $OVERLAY_PATCHED_PYTHON)",
            found=f"no {' and no '.join(missing)}",
            hint="pass the python of a venv with stock executorch and of one with the patched"
            " build; in a checkout `nox -s equivalence` builds both with uv",
        )
    return checked


def caller_dir() -> Path:
    """Return the folder the user ran the command in (nox passes it): inputs are read there."""
    return Path(os.environ.get(CALLER_DIR_ENV) or Path.cwd())


def resolve_inputs(options: Options, base: Path) -> Options:
    """Make the user's paths absolute (from ``base``) and check every input (see above)."""
    runtime_patch = _runtime_patch(options.runtime_patch, base)
    if options.timeout <= 0 or options.jobs < 0:
        raise EquivalenceInputError(
            "--timeout must be positive and --jobs not negative",
            expected="--timeout SECONDS > 0, --jobs N >= 0 (0: one per CPU)",
            found=f"--timeout {options.timeout}, --jobs {options.jobs}",
            hint="drop the option to use the default",
        )
    if options.shard is not None:
        Shard.parse(str(options.shard))  # a Shard made in code is checked as --shard is
    if options.group not in (None, *GROUPS):
        raise EquivalenceInputError(
            f"unknown group {options.group!r}",
            expected=", ".join(GROUPS),
            found=str(options.group),
            hint="pass --group core, --group zoo or --group all",
        )
    models, names = None, [c.name for c in corpus.ALL_CASES]
    if options.models is not None:
        path = _existing(base, options.models, "--models")
        found = _models(path)
        models = str(path)
        names = names + list(found) if found is not None else []
    if options.builtin_worker and names:
        check_cases(options.only, names, models)
    return replace(
        options,
        runtime_patch=runtime_patch,
        models=models,
        out_dir=(base / options.out_dir).resolve(),
        cache_dir=(base / options.cache_dir).resolve() if options.cache_dir else None,
    )


def _runtime_patch(spec: str, base: Path) -> str:
    """Return the runtime patch with its file made absolute; refuse one that cannot load."""
    target, sep, function = spec.partition(":")
    if function and not function.isidentifier():
        raise EquivalenceInputError(
            f"--runtime-patch {spec!r}: {function!r} is not a function name",
            expected="FILE.py:FUNCTION or package.module:FUNCTION",
            found=function,
            hint=f"name the function that applies the patch: --runtime-patch {target}:FUNCTION",
        )
    if target.endswith(".py"):
        path = _existing(base, target, "--runtime-patch")
        tree = _parse(path, "--runtime-patch")
        wanted = function or "apply_all"
        if not _defines(tree, wanted):
            some = ", ".join(sources.functions(tree.body)) or "none"
            raise EquivalenceInputError(
                f"--runtime-patch {path}: defines no {wanted}",
                expected=f"a top-level function {wanted} in {path.name}",
                found=f"its functions: {some}",
                hint=f"name the function that applies the patch: --runtime-patch {target}:FUNCTION",
            )
        return f"{path}{sep}{function}"
    if not target or not all(part.isidentifier() for part in target.split(".")):
        raise EquivalenceInputError(
            f"--runtime-patch {spec!r} names neither a .py file nor a module",
            expected="FILE.py:FUNCTION or package.module:FUNCTION",
            found=spec,
            hint="pass --runtime-patch PATH/TO/patch.py:FUNCTION or a module:FUNCTION",
        )
    return spec


def _models(path: Path) -> tuple[str, ...] | None:
    """Check a models file as written; return its case names (None: known only when run)."""
    tree = _parse(path, "--models")
    if not _defines(tree, "CASES"):
        names = sorted(set(sources.bound_names(tree.body))) or ["no top-level names"]
        raise EquivalenceInputError(
            f"--models {path}: defines no CASES",
            expected=f"a top-level CASES in {path.name}",
            found=", ".join(names),
            hint=f"define the cases, e.g. {user_cases.EXAMPLE}",
        )
    found = user_cases.read_statically(tree, path.name)
    if found.problems:
        raise EquivalenceInputError(
            f"--models {path}: CASES cannot run",
            expected="a non-empty CASES of valid entries, e.g. " + user_cases.EXAMPLE,
            found="; ".join(found.problems),
            hint=f"fix CASES in {path.name}",
        )
    return found.names


def check_cases(only: Sequence[str], names: Collection[str], models: str | None) -> None:
    """Refuse a ``--case`` that is neither a corpus case nor one of the models file's."""
    unknown = [n for n in only if n not in names]
    if unknown:
        listing = "executorch-arm-overlay equivalence --list" + (
            f" --models {models}" if models else ""
        )
        near = [m for n in unknown for m in difflib.get_close_matches(n, names, n=1)]
        raise EquivalenceInputError(
            f"unknown case(s): {', '.join(unknown)}",
            expected=", ".join(sorted(names)),
            found=", ".join(unknown) + (f" (nearest: {', '.join(near)})" if near else ""),
            hint=f"list them with `{listing}`",
        )


def _existing(base: Path, name: str, option: str) -> Path:
    path = (base / name).resolve()
    if not path.is_file():
        raise EquivalenceInputError(
            f"{option} {name}: no such file",
            expected=f"a Python file (relative paths are read from {base})",
            found=f"{path} does not exist",
            hint=f"check the path given to {option}",
        )
    return path


def _parse(path: Path, option: str) -> ast.Module:
    """Return the file's syntax tree; refuse a file that does not parse (read, not run)."""
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise EquivalenceInputError(
            f"{option} {path}: not valid Python",
            expected="a Python file",
            found=f"line {exc.lineno}: {exc.msg}",
            hint=f"fix the syntax error in {path.name}",
        ) from exc
    except (OSError, ValueError) as exc:
        raise EquivalenceInputError(
            f"{option} {path}: cannot read it",
            expected="a readable Python file",
            found=str(exc),
            hint=f"check the file given to {option}",
        ) from exc


def _defines(tree: ast.Module, name: str) -> bool:
    names = set(sources.bound_names(tree.body))
    return name in names or "*" in names
