"""verify-install: locked versions, provenance, patched files, imports in the env's Python."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay import _frame_stack, _process
from overlay._process import Refuse
from overlay.distribution.distinfo import ORIGINAL_FILE
from overlay.distribution.provenance import local_version
from overlay.envs.lockfiles import Lock
from overlay.envs.venvs import Venv, find_venv, installed_versions
from overlay.errors import InstallCheckError
from overlay.lines import PROJECT_NAME as NAME
from overlay.text.series import Series
from overlay.tree.locate import current_site
from overlay.tree.state import TreeState, read_installed, verified

# Importing these proves the Arm backend loads with the patched sources.
ARM_MODULES = (
    "executorch.backends.arm.tosa.partitioner",
    "executorch.backends.arm.quantizer",
)
NEXT_STEP = "sync the environment with its lock again (docs/environments.md)"
# Run by another environment's Python (the overlay need not be installed there); its first
# argument is overlay/_frame_stack.py, whose in_own_chunk runs the imports.
IMPORT_CHECK = """\
import importlib, json, sys

helper = {}
with open(sys.argv[1], encoding="utf-8") as source:
    exec(compile(source.read(), sys.argv[1], "exec"), helper)


def imported(names):
    found = {}
    for name in names:
        try:
            found[name] = {"file": importlib.import_module(name).__file__ or ""}
        except BaseException as exc:
            missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            found[name] = {"error": error, "missing": missing or ""}
    return found


print(json.dumps(helper["in_own_chunk"](imported, sys.argv[2:])))
"""


@dataclass(frozen=True)
class Imported:
    """One module the import check imported: its file, or its error and the missing module."""

    file: str = ""
    error: str = ""
    missing: str = ""  # the module a ModuleNotFoundError names


@dataclass(frozen=True)
class InstallReport:
    """What the check found."""

    version: str
    site: Path
    files: dict[str, str]  # wheel path -> sha256
    modules: tuple[str, ...]
    lock: Path | None  # the lock every package was checked against
    locked: int  # packages checked against the lock
    unlocked: tuple[str, ...]  # installed, not in the lock (``name==version``)


def check_lock(
    lock: Lock, installed: dict[str, str], *, repair: str = NEXT_STEP, in_place: bool = False
) -> tuple[str, ...]:
    """Refuse an env whose packages differ from the lock, one line per difference; return the
    unlocked ones. ``in_place`` (executorch patched in place): the hint leads with --no-lock."""
    differ = []
    for package in lock.packages:
        have = installed.get(package.name)
        if have != package.version:
            differ.append(f"    {package.name}: {have or 'missing'} (locked {package.version})")
    if differ:
        hint = repair
        if in_place:
            hint = (
                "this environment was patched in place, not made from the lock: run"
                f" `{NAME} verify-install` again with --no-lock to check the patched executorch"
                f" alone; to make it the lock exactly: {repair}"
            )
        raise InstallCheckError(
            f"the environment differs from the lock {lock.path.name} in {len(differ)} of its"
            f" {len(lock.packages)} packages",
            expected=f"every package of {lock.path} at its locked version",
            found=f"{len(differ)} differ (installed, then locked):",
            details="\n".join(differ),
            hint=hint,
        )
    names = {p.name for p in lock.packages}
    return tuple(f"{n}=={v}" for n, v in sorted(installed.items()) if n not in names)


def check_installed(
    series: Series,
    *,
    import_modules: bool = True,
    search_path: Path | None = None,
    lock: Lock | None = None,
    python: Path | None = None,
    stock: bool = False,
    repair: str = NEXT_STEP,
) -> InstallReport:
    """Verify locked versions, provenance, file hashes and (optionally) imports of an env.

    ``search_path``: the env's site-packages (default: this interpreter's); ``python``: the
    env's interpreter for the import check (default: this one); ``stock``: the env holds
    the pinned stock release (pristine files, no provenance); ``repair``: the next step.
    """
    wanted_version = str(series.pins.executorch) if stock else local_version(series)
    where = [str(search_path)] if search_path else sys.path
    dists = list(importlib.metadata.distributions(name="executorch", path=where))
    if not dists:  # said first: without it, every other difference follows from this one
        raise InstallCheckError(
            f"executorch is missing: not installed in {search_path or current_site()}",
            expected=f"executorch {wanted_version}",
            found="no executorch distribution",
            hint=repair,
        )
    installed = installed_versions(search_path)
    dist = dists[0]
    site = Path(str(dist.locate_file("")))
    unlocked: tuple[str, ...] = ()
    if lock is not None:
        in_place = dist.read_text(ORIGINAL_FILE) is not None
        unlocked = check_lock(lock, installed, repair=repair, in_place=in_place)
    if stock:
        status = read_installed(series, site)
        if status.state is not TreeState.PRISTINE:  # its version: uv installed it by hash
            raise InstallCheckError(
                "this environment does not hold the stock release",
                expected=f"executorch {series.pins.executorch}, its files pristine",
                found=f"executorch {status.target.version}: {status.summary}",
                hint=repair,
            )
        expected = {p: series.pristine_sha256(p) or "missing" for p in series.targets()}
    else:
        status = verified(series, site, rebuild=repair)
        expected = series.expected_patched_sha256()
    files = {series.pins.wheel_path(p): status.digests[p] for p in expected}
    modules: tuple[str, ...] = ()
    if import_modules:
        patched = {
            series.pins.module_name(p): site / series.pins.wheel_path(p)
            for p in expected
            if p.endswith(".py") and not _upstream_test(p) and expected[p] != "missing"
        }
        names, python = [*patched, *ARM_MODULES], python or Path(sys.executable)

        def refuse(found: str) -> InstallCheckError:
            return InstallCheckError(
                f"the {'stock' if stock else 'patched'} executorch does not import",
                expected=f"{', '.join(names)} importable with {python}",
                found=found,
                hint=repair,
            )

        loaded = import_check(python, names, refuse)
        failed = [f"{name}: {result.error}" for name, result in loaded.items() if result.error]
        if failed:
            raise refuse("; ".join(failed))
        for name, path in patched.items():
            if Path(loaded[name].file).resolve() != path.resolve():
                raise InstallCheckError(
                    f"{name} is imported from another place",
                    expected=str(path),
                    found=loaded[name].file,
                    hint="remove the shadowing copy from sys.path",
                )
        modules = tuple(loaded)
    locked: tuple[Path | None, int] = (lock.path, len(lock.packages)) if lock else (None, 0)
    return InstallReport(dist.version, site, files, modules, *locked, unlocked)


def _upstream_test(repo_path: str) -> bool:
    """Return True for an upstream test file (its imports need pytest, which no lock holds)."""
    return any(part in {"test", "tests"} for part in repo_path.split("/")[:-1])


def import_check(
    python: Path, names: Sequence[str], refuse: Refuse, *, timeout: float | None = None
) -> dict[str, Imported]:
    """Import each of ``names`` in ``python``, isolated (-s -P, no PYTHONPATH or PYTHONHOME:
    its own environment); return what each gave (its file or its error). A Python that does
    not run or answer (within ``timeout`` seconds) is ``refuse(what was found)``."""
    # PYTHONDONTWRITEBYTECODE is kept: the import costs what it costs the user's own first.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    command = [str(python), "-s", "-P", "-c", IMPORT_CHECK, _frame_stack.__file__, *names]
    return _process.json_line(dict[str, Imported], command, refuse, timeout=timeout, env=env)


def environment(target: Path) -> Venv:
    """Return the env to check at ``target``: a venv, or this interpreter's site-packages
    (what :func:`overlay.tree.locate.default_environment` gives for it)."""
    if target == current_site():
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return Venv(Path(sys.prefix), Path(sys.executable), current_site(), version)
    return find_venv(target)
