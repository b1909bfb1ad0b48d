"""Check that an environment runs this series' patched executorch, and nothing drifted.

In order: every package the lock pins is installed at its locked version, executorch
carries this series (version, provenance, the patched files' sha256), then the patched
modules and the Arm backend import in the environment's own interpreter (a separate
process: the overlay need not be installed there). ``stock=True`` checks a stock env the
same way: the pinned release, its pristine files. Every error's next step is the
``repair`` command the caller gives (one that works where the user is).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from overlay._hashing import sha256_file
from overlay.dist.wheels import PROVENANCE_FILE, local_version, parse_provenance
from overlay.envs.lockfiles import Lock
from overlay.envs.venvs import installed_versions
from overlay.errors import InstallCheckError
from overlay.target.journal import journal_file, read_journal
from overlay.text.series import Series

# Importing these proves the Arm backend loads with the patched sources.
ARM_MODULES = (
    "executorch.backends.arm.tosa.partitioner",
    "executorch.backends.arm.quantizer",
)
NEXT_STEP = "sync the environment with its lock again (docs/environments.md)"
_IMPORT = (
    "import importlib, json, sys\n"
    "print(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))\n"
)


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
    lock: Lock, installed: dict[str, str], *, repair: str = NEXT_STEP
) -> tuple[str, ...]:
    """Refuse an env whose packages differ from the lock; return the unlocked ones."""
    expected, found = [], []
    for package in lock.packages:
        have = installed.get(package.name)
        if have != package.version:
            expected.append(f"{package.name} {package.version}")
            found.append(f"{package.name} {have or 'missing'}")
    if expected:
        raise InstallCheckError(
            f"the environment drifted from its lock {lock.path.name}",
            expected=", ".join(expected),
            found=", ".join(found),
            hint=repair,
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
    installed = installed_versions(search_path)
    unlocked = check_lock(lock, installed, repair=repair) if lock is not None else ()
    wanted_version = str(series.pins.executorch) if stock else local_version(series)
    if search_path is None:
        dists = list(importlib.metadata.distributions(name="executorch"))
    else:
        dists = list(importlib.metadata.distributions(name="executorch", path=[str(search_path)]))
    if not dists:
        raise InstallCheckError(
            "executorch is not installed in this environment",
            expected=f"executorch {wanted_version}",
            found="no executorch distribution",
            hint=repair,
        )
    dist = dists[0]
    site = Path(str(dist.locate_file("")))
    unfinished = read_journal(site)
    if unfinished is not None:
        raise InstallCheckError(
            f"an interrupted {unfinished.operation.value} left {site} half-written",
            expected="a tree that is pristine or patched",
            found=f"the journal {journal_file(site)} (pid {unfinished.pid})",
            hint=f"run `python -m overlay apply --target {site}` (or `revert`)",
        )
    try:
        version, provenance_text = dist.version, dist.read_text(PROVENANCE_FILE)
    except UnicodeDecodeError as exc:
        raise InstallCheckError(
            f"the executorch dist-info in {site} is not UTF-8 text",
            expected="UTF-8 METADATA and provenance, as installers write them",
            found=f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}",
            hint="reinstall executorch",
        ) from exc
    if version != wanted_version:
        raise InstallCheckError(
            "this environment does not hold the stock release"
            if stock
            else "this environment does not carry this patch series",
            expected=f"executorch {wanted_version}",
            found=f"executorch {version}",
            hint=repair,
        )
    provenance = parse_provenance(provenance_text)
    if not stock and (provenance is None or provenance.series_digest != series.digest):
        raise InstallCheckError(
            f"{PROVENANCE_FILE} does not name this series",
            expected=series.digest,
            found=provenance.series_digest if provenance else "no readable provenance file",
            hint=repair,
        )
    expected = (
        {p: series.pins.pristine_sha256(p) for p in series.targets()}
        if stock
        else series.expected_patched_sha256()
    )
    files: dict[str, str] = {}
    for repo_path, wanted in expected.items():
        path = site / series.pins.wheel_path(repo_path)
        found = sha256_file(path) if path.is_file() else "missing"
        if found != wanted:
            raise InstallCheckError(
                f"{path} is not the {'pristine' if stock else 'patched'} file",
                expected=wanted,
                found=found,
                hint=f"something rewrote the install; reinstall: `{repair}`",
            )
        files[series.pins.wheel_path(repo_path)] = found
    modules: tuple[str, ...] = ()
    if import_modules:
        patched = {series.pins.module_name(p): site / series.pins.wheel_path(p) for p in expected}
        what = "stock" if stock else "patched"
        loaded = _import(python or Path(sys.executable), [*patched, *ARM_MODULES], what, repair)
        for name, path in patched.items():
            if Path(loaded[name]).resolve() != path.resolve():
                raise InstallCheckError(
                    f"{name} is imported from another place",
                    expected=str(path),
                    found=loaded[name],
                    hint="remove the shadowing copy from sys.path",
                )
        modules = tuple(loaded)
    return InstallReport(
        dist.version,
        site,
        files,
        modules,
        lock.path if lock else None,
        len(lock.packages) if lock else 0,
        unlocked,
    )


def _import(python: Path, names: list[str], what: str, repair: str) -> dict[str, str]:
    """Import ``names`` in ``python``; return each module's file."""
    # -s -P: no user site, no script folder on sys.path; PYTHONPATH is dropped, but not
    # PYTHONDONTWRITEBYTECODE: the import costs what it costs the user's own first import.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [str(python), "-s", "-P", "-c", _IMPORT, *names],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise InstallCheckError(
            f"the {what} executorch does not import",
            expected=f"{', '.join(names)} importable with {python}",
            found=proc.stderr.strip()[-2000:] or f"exit code {proc.returncode}",
            hint=repair,
        )
    loaded: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return loaded


def current_site() -> Path:
    """Return this interpreter's site-packages."""
    return Path(sysconfig.get_paths()["purelib"])
