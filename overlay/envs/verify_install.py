"""Check that an environment runs this series' patched executorch, and nothing drifted.

In order: every package the lock pins is installed at its locked version, executorch
carries this series (version, provenance, the patched files' sha256), then the patched
modules and the Arm backend import in the environment's own interpreter (a separate
process: the overlay need not be installed there).
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

from packaging.utils import canonicalize_name

from overlay.dist.wheels import local_version
from overlay.envs.lockfiles import Lock
from overlay.errors import InstallCheckError
from overlay.target.state import verified
from overlay.text.series import Series

# Importing these proves the Arm backend loads with the patched sources.
ARM_MODULES = (
    "executorch.backends.arm.tosa.partitioner",
    "executorch.backends.arm.quantizer",
)
NEXT_STEP = "nox -s build_patched_executorch"
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


def installed_versions(site: Path | None = None) -> dict[str, str]:
    """Return ``{canonical name: version}`` of the distributions in ``site`` (or on sys.path).

    A ``name-version.dist-info`` folder (as installers name it) is read by its name, which
    is fast; a folder name that does not split that way by its METADATA. Two copies of one
    distribution give both versions (``2.11.0 + 2.15.0``), which matches no lock.
    """
    folders = [site] if site else [Path(p) for p in sys.path if p and Path(p).is_dir()]
    found: dict[str, str] = {}
    for folder in folders:
        for info in sorted(folder.glob("*.dist-info")):
            name, sep, version = info.name.removesuffix(".dist-info").partition("-")
            if not sep or "-" in version:
                dist = importlib.metadata.PathDistribution(info)
                name, version = dist.metadata["Name"] or "", dist.version
            key = canonicalize_name(name)
            if name and key in found:
                found[key] += f" + {version}"
            elif name:
                found[key] = version
    return found


def check_lock(lock: Lock, installed: dict[str, str]) -> tuple[str, ...]:
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
            hint=NEXT_STEP,
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
) -> InstallReport:
    """Verify locked versions, provenance, file hashes and (optionally) imports of an env.

    ``search_path``: the env's site-packages (default: this interpreter's); ``python``: the
    env's interpreter for the import check (default: this one).
    """
    installed = installed_versions(search_path)
    unlocked = check_lock(lock, installed) if lock is not None else ()
    if search_path is None:
        dists = list(importlib.metadata.distributions(name="executorch"))
    else:
        dists = list(importlib.metadata.distributions(name="executorch", path=[str(search_path)]))
    if not dists:
        raise InstallCheckError(
            "executorch is not installed in this environment",
            expected=f"executorch {local_version(series)}",
            found="no executorch distribution",
            hint=NEXT_STEP,
        )
    dist = dists[0]
    site = Path(str(dist.locate_file("")))
    status = verified(series, site, rebuild=f"rebuild and reinstall: `{NEXT_STEP}`")
    expected = series.expected_patched_sha256()
    files = {series.pins.wheel_path(p): status.digests[p] for p in expected}
    modules: tuple[str, ...] = ()
    if import_modules:
        patched = {series.pins.module_name(p): site / series.pins.wheel_path(p) for p in expected}
        loaded = _import(python or Path(sys.executable), [*patched, *ARM_MODULES])
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


def _import(python: Path, names: list[str]) -> dict[str, str]:
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
            "the patched executorch does not import",
            expected=f"{', '.join(names)} importable with {python}",
            found=proc.stderr.strip()[-2000:] or f"exit code {proc.returncode}",
            hint=NEXT_STEP,
        )
    loaded: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return loaded


def current_site() -> Path:
    """Return this interpreter's site-packages."""
    return Path(sysconfig.get_paths()["purelib"])
