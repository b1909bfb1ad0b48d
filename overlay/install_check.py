"""Check, from inside an environment, that it runs the patched executorch of this series."""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

from overlay._hashing import sha256_file
from overlay.errors import InstallCheckError
from overlay.journal import journal_file, read_journal
from overlay.series import Series
from overlay.wheels import PROVENANCE_FILE, local_version, parse_provenance

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


def check_installed(
    series: Series, *, import_modules: bool = True, search_path: Path | None = None
) -> InstallReport:
    """Verify version, provenance, file hashes and (optionally) imports of the patched install.

    ``search_path``: look in that folder, not on this interpreter's path (imports use the latter).
    """
    if search_path is None:
        dists = list(importlib.metadata.distributions(name="executorch"))
    else:
        dists = list(importlib.metadata.distributions(name="executorch", path=[str(search_path)]))
    if not dists:
        raise InstallCheckError(
            "executorch is not installed in this environment",
            expected=f"executorch {local_version(series)}",
            found="no executorch distribution",
            hint="run `nox -s build_patched_executorch`",
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
    if version != local_version(series):
        raise InstallCheckError(
            "this environment does not carry this patch series",
            expected=f"executorch {local_version(series)}",
            found=f"executorch {version}",
            hint="rebuild and reinstall: `nox -s build_patched_executorch`",
        )
    provenance = parse_provenance(provenance_text)
    if provenance is None or provenance.series_digest != series.digest:
        raise InstallCheckError(
            f"{PROVENANCE_FILE} does not name this series",
            expected=series.digest,
            found=provenance.series_digest if provenance else "no readable provenance file",
            hint="rebuild and reinstall: `nox -s build_patched_executorch`",
        )
    expected = series.expected_patched_sha256()
    files: dict[str, str] = {}
    for repo_path, wanted in expected.items():
        path = site / series.pins.wheel_path(repo_path)
        found = sha256_file(path) if path.is_file() else "missing"
        if found != wanted:
            raise InstallCheckError(
                f"{path} is not the patched file",
                expected=wanted,
                found=found,
                hint="something rewrote the install; reinstall the patched wheel",
            )
        files[series.pins.wheel_path(repo_path)] = found
    modules: list[str] = []
    if import_modules:
        for repo_path in expected:
            name = series.pins.module_name(repo_path)
            module = importlib.import_module(name)
            loaded = Path(str(module.__file__)).resolve()
            if loaded != (site / series.pins.wheel_path(repo_path)).resolve():
                raise InstallCheckError(
                    f"{name} is imported from another place",
                    expected=str(site / series.pins.wheel_path(repo_path)),
                    found=str(loaded),
                    hint="remove the shadowing copy from sys.path",
                )
            modules.append(name)
        for name in ARM_MODULES:
            importlib.import_module(name)
            modules.append(name)
    return InstallReport(version, site, files, tuple(modules))
