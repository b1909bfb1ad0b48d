"""The ready venv and the proof and test envs: a committed lock (patched or stock), synced."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from overlay import lines
from overlay._hashing import sha256_file
from overlay.distribution import index
from overlay.distribution.provenance import local_version
from overlay.distribution.wheels import cached_wheel, fetch_pinned, patched_cache, wheel_cache
from overlay.envs import lockfiles, venvs
from overlay.envs.lockfiles import Lock
from overlay.envs.stamp import Flavour, Origin
from overlay.envs.verify_install import InstallReport, check_installed
from overlay.lines.pins import WheelPin
from overlay.text.series import Series

BUILD_SESSION = "build_patched_executorch"


def ready_name(line: str, python: str) -> str:
    """Return the folder name of a line's ready venv for one Python, e.g. ``ready-1.2.0-py3.11``."""
    return f"ready-{line}-py{python}"


@dataclass(frozen=True)
class EnvRequest:
    """One env to sync from a committed lock."""

    series: Series
    pin: WheelPin
    lock: Lock  # the committed lock of ``pin``
    flavour: Flavour
    find_links: tuple[Path, ...] = ()  # where the patched (or stock) wheel is
    on_top: tuple[str, ...] = ()  # more packages, constrained to the lock's versions

    @property
    def line(self) -> str:
        """Return the release line (the pinned executorch release)."""
        return str(self.series.pins.executorch)

    def contents(self) -> venvs.Contents:
        """Return what the builder syncs (the lock, or its stock text), with the origin its
        stamp records."""
        label, patched = self.lock.path.name, self.flavour is Flavour.PATCHED
        return venvs.Contents(
            label=label if patched else f"{label} (stock)",
            python=self.pin.python,
            requirements=self.lock.path.read_text(encoding="utf-8")
            if patched
            else lockfiles.stock_text(self.lock, self.pin.sha256, self.line),
            locked=True,
            find_links=self.find_links,
            on_top=self.on_top,
            origin=Origin(self.line, self.pin.tag, sha256_file(self.lock.path), self.flavour),
        )


def place(target: Path | None, ready_in: Path, line: str, python: str | None) -> tuple[Path, str]:
    """Return the venv a sync makes (``target``, else the line's ready venv in ``ready_in``)
    and its Python version (the one given, else the existing venv's, else this one's)."""
    version = (
        python or (target and venvs.python_version(target)) or "{}.{}".format(*sys.version_info[:2])
    )
    return target or ready_in / ready_name(line, version), version


@dataclass(frozen=True)
class SyncPreview:
    """What a sync would do, read without writing anything (``sync --dry-run``)."""

    request: EnvRequest
    reason: str  # why the venv would be synced; "" when it is up to date
    builds: bool  # the patched wheel is not in the overlay's cache: the sync builds it


def preview(
    series: Series,
    pin: WheelPin,
    root: Path,
    *,
    stock: bool,
    on_top: tuple[str, ...] = (),
    force: bool = False,
) -> SyncPreview:
    """Return what syncing ``root`` to ``pin``'s lock would do: every check (a current lock, a
    venv or empty folder), no build, no write."""
    flavour = Flavour.STOCK if stock else Flavour.PATCHED
    request = EnvRequest(series, pin, lockfiles.check_current(series, pin), flavour, (), on_top)
    builds = not stock and (force or not cached_wheel(series, pin, patched_cache()).is_file())
    reason = venvs.stale(request.contents(), root.absolute(), force=force)
    return SyncPreview(request, reason, builds)


def with_wheel(
    request: EnvRequest,
    *,
    dist: Path,
    force: bool = False,
    progress: venvs.Progress = lambda _: None,
) -> EnvRequest:
    """Return ``request`` with where uv finds its executorch: the stock wheel in the cache, or
    the patched one, built into ``dist`` and checked to be the wheel the lock pins."""
    series, pin = request.series, request.pin
    if request.flavour is Flavour.STOCK:  # the wheel cache, where it is: uv reuses it
        links = (wheel_cache(),) if (wheel_cache() / pin.file).is_file() else ()
    else:
        source = fetch_pinned(pin, progress)
        built = index.build_into(series, source, pin, dist, force=force, progress=progress)
        lockfiles.check_wheel(request.lock, built.path, built.sha256)
        # the cache's copy (the same bytes) at a stable path: uv reuses its unpacked wheel
        cached = cached_wheel(series, pin, patched_cache())
        links = (cached.parent if cached.is_file() else dist,)
    return dataclasses.replace(request, find_links=links)


def sync(
    request: EnvRequest,
    root: Path,
    *,
    force: bool = False,
    progress: venvs.Progress = lambda _: None,
) -> InstallReport | None:
    """Make ``root`` exactly the request's lock, verified for what uv does not check (files,
    provenance, imports: docs/environments.md) and stamped; None: it already was."""
    stock = request.flavour is Flavour.STOCK

    def verify(venv: venvs.Venv) -> InstallReport:
        # the next step is named once the venv exists: before, a new folder read as no venv
        repair = repair_command(request.series, request.lock, root, stock=stock)
        return check_installed(
            request.series, search_path=venv.site, python=venv.python, stock=stock, repair=repair
        )

    return venvs.ensure_venv(
        request.contents(), root, verify=verify, force=force, progress=progress
    )


def repair_command(
    series: Series,
    lock: Lock | None,
    root: Path,
    python: Path | None = None,
    *,
    stock: bool = False,
) -> str:
    """Return the command that makes the env at ``root`` its lock again, where the user is: in
    a checkout, the nox build of a ready venv, else ``sync``; elsewhere ``uv pip sync`` (a
    uv-made venv) or pip, executorch reinstalled (its files may drift under a right version).
    """
    line = str(series.pins.executorch)
    checkout = lines.find_checkout(Path.cwd().resolve())
    version = venvs.python_version(root)
    config = venvs.pyvenv_config(root)
    if checkout is not None and config:
        nox_dir = (checkout / ".nox").resolve()
        if root.resolve().parent == nox_dir and root.name == ready_name(line, version):
            return f"nox -s {BUILD_SESSION}-{version} -- --line {line}"
        stock_flag = " --stock" if stock else ""
        return f"executorch-arm-overlay sync --target {root} --line {line}{stock_flag}"
    where = lock.path if lock is not None else f"the lock of line {line} (locks/<wheel tag>.txt)"
    interpreter = python or root / "bin" / "python"
    pinned = set(lock.get("executorch").hashes) if lock is not None else set()
    cached = sorted(patched_cache().glob(f"*/executorch-{local_version(series)}-*.whl"))
    found = (str(wheel.parent) for wheel in cached if pinned and sha256_file(wheel) in pinned)
    folder = next(found, "DIR_WITH_THE_PATCHED_WHEEL")  # the cache's, when it has the wheel
    if "uv" in config:
        return (
            f"uv pip sync --python {interpreter} --require-hashes --reinstall-package executorch"
            f" --find-links {folder} {where}"
        )
    return (
        f"{interpreter} -m pip uninstall --yes executorch && {interpreter} -m pip install"
        f" --require-hashes --find-links {folder} -r {where}"
    )
