"""Check, from inside an environment, that it runs the patched executorch of this series."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

from overlay import pins
from overlay.cache import sha256_file
from overlay.errors import InstallCheckError
from overlay.series import Series
from overlay.wheels import PROVENANCE_FILE, local_version

# Importing these proves the Arm backend loads with the patched sources.
ARM_MODULES = (
    "executorch.backends.arm.tosa.partitioner",
    "executorch.backends.arm.quantizer",
)


@dataclass(frozen=True)
class InstallReport:
    """What the check found."""

    version: str
    site: Path
    files: dict[str, str]  # wheel path -> sha256
    modules: tuple[str, ...]


def check_installed(series: Series, *, import_modules: bool = True) -> InstallReport:
    """Verify version, provenance, file hashes and (optionally) imports of the patched install."""
    try:
        dist = importlib.metadata.distribution("executorch")
    except importlib.metadata.PackageNotFoundError as exc:
        raise InstallCheckError(
            "executorch is not installed in this environment",
            expected=f"executorch {local_version(series)}",
            found="no executorch distribution",
            hint="run `nox -s build_patched_executorch`",
        ) from exc
    if dist.version != local_version(series):
        raise InstallCheckError(
            "this environment does not carry this patch series",
            expected=f"executorch {local_version(series)}",
            found=f"executorch {dist.version}",
            hint="rebuild and reinstall: `nox -s build_patched_executorch`",
        )
    raw = dist.read_text(PROVENANCE_FILE)
    provenance = json.loads(raw) if raw else {}
    if provenance.get("series_digest") != series.digest:
        raise InstallCheckError(
            f"{PROVENANCE_FILE} does not name this series",
            expected=series.digest,
            found=str(provenance.get("series_digest", "no provenance file")),
            hint="rebuild and reinstall: `nox -s build_patched_executorch`",
        )
    expected = series.expected_patched_sha256()
    files: dict[str, str] = {}
    site = Path(str(dist.locate_file("")))
    for repo_path, wanted in expected.items():
        path = site / pins.wheel_path(repo_path)
        found = sha256_file(path) if path.is_file() else "missing"
        if found != wanted:
            raise InstallCheckError(
                f"{path} is not the patched file",
                expected=wanted,
                found=found,
                hint="something rewrote the install; reinstall the patched wheel",
            )
        files[pins.wheel_path(repo_path)] = found
    modules: list[str] = []
    if import_modules:
        for repo_path in expected:
            name = pins.module_name(repo_path)
            module = importlib.import_module(name)
            loaded = Path(str(module.__file__)).resolve()
            if loaded != (site / pins.wheel_path(repo_path)).resolve():
                raise InstallCheckError(
                    f"{name} is imported from another place",
                    expected=str(site / pins.wheel_path(repo_path)),
                    found=str(loaded),
                    hint="remove the shadowing copy from sys.path",
                )
            modules.append(name)
        for name in ARM_MODULES:
            importlib.import_module(name)
            modules.append(name)
    return InstallReport(dist.version, site, files, tuple(modules))
