"""The one stamped venv builder: the ready venv, the proof and test envs, release envs.

A venv is made to hold its :class:`Contents` with uv: a hashed lock synced exactly
(``uv pip sync --require-hashes``, then optional packages on top, constrained to the
lock's versions) or plain requirements (``uv pip install``). Its stamp
(:mod:`overlay.envs.stamp`) keys the contents and the installed set (every distribution's
name and version, read with importlib.metadata), so anything changed by hand is re-synced,
never skipped. :func:`plan_venv` is the one place that decides what a venv needs:

- ``--force``, a stamp still saying ``syncing`` (the last sync was interrupted: files may
  be half-written under a complete dist-info), a file check that fails, or another Python:
  recreate (everything but the stamp removed, ``uv venv``, a full sync);
- no venv, or one with nothing installed: install;
- versions that differ from the stamp's (or no stamp of a finished sync): re-sync;
- otherwise: up to date.

The stamp says ``syncing`` before uv touches the venv, and ``ready`` only after the venv
was verified, so a sync stopped at any point (Ctrl-C, SIGTERM, SIGKILL) is repaired by
running it again. A sync that verifies badly without having recreated the venv recreates
it once. uv runs as a child that dies with this process (:mod:`overlay.envs.uv_process`),
so no orphan keeps writing into the venv.
"""

from __future__ import annotations

import enum
import importlib.metadata
import json
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from packaging.utils import canonicalize_name

from overlay import _mutex
from overlay._hashing import sha256_bytes
from overlay.envs.stamp import STAMP_FILE, Origin, Stamp, SyncState, read_stamp, write_stamp
from overlay.envs.uv_process import find_uv, run_uv
from overlay.errors import EnvError, InstallCheckError, TargetError

REQUIREMENTS_FILE = "overlay-requirements.txt"  # in the venv: the text it was synced from
LOCK_TIMEOUT_S = 1800.0  # a cold sync downloads torch (~3 GB)
T = TypeVar("T")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Venv:
    """A virtual environment on disk."""

    root: Path
    python: Path
    site: Path
    version: str  # "3.11"
    home: str = ""  # pyvenv.cfg's home: the folder of the interpreter it was made from


Broken = Callable[[Venv], str | None]  # names drifted files under right versions, or None


def pyvenv_config(root: Path) -> dict[str, str]:
    """Return the ``key = value`` lines of a venv's pyvenv.cfg ({} when it has none)."""
    values: dict[str, str] = {}
    cfg = root / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip()
    return values


def python_version(root: Path) -> str:
    """Return the ``X.Y`` Python version a venv's pyvenv.cfg names ("" when none)."""
    values = pyvenv_config(root)
    full = values.get("version_info") or values.get("version") or ""
    return ".".join(full.split(".")[:2])


def find_venv(root: Path) -> Venv:
    """Read a venv's interpreter version and site-packages from its ``pyvenv.cfg``."""
    values = pyvenv_config(root)
    version = python_version(root)
    site = root / "lib" / f"python{version}" / "site-packages"
    if not version or not site.is_dir():
        raise TargetError(
            f"{root} is not a virtual environment",
            expected="a folder with pyvenv.cfg and lib/pythonX.Y/site-packages",
            found=f"pyvenv.cfg version {version!r}" if values else "no pyvenv.cfg",
            hint="pass the venv's root folder (the one holding bin/ and pyvenv.cfg)",
        )
    return Venv(root, root / "bin" / "python", site, version, values.get("home", ""))


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


def installed_key(installed: Mapping[str, str]) -> str:
    """Return the sha256 of an installed set (names and versions, order-free)."""
    return sha256_bytes(json.dumps(sorted(installed.items())).encode())


@dataclass(frozen=True)
class Contents:
    """What a venv must hold.

    ``locked`` non-empty: ``requirements`` is a hashed lock, synced exactly; ``on_top`` is
    then installed with the lock as constraints (a test env's tools). ``locked`` empty:
    ``requirements`` are installed as they are (release envs: pins, local wheels).
    """

    label: str  # for messages, e.g. "cp311-manylinux_2_28_x86_64.txt (stock)"
    python: str  # "3.11"
    requirements: str  # the requirements text uv reads
    locked: Mapping[str, str] = field(default_factory=dict)  # canonical name -> version
    find_links: tuple[Path, ...] = ()
    on_top: tuple[str, ...] = ()
    origin: Origin | None = None
    salt: str = ""  # a digest of what the text does not say: local files by content
    quiet: bool = False  # capture uv's output (shown only on failure)

    @property
    def key(self) -> str:
        """Return the sha256 of everything that decides what the venv holds."""
        parts = [self.python, self.requirements, *self.on_top, self.salt]
        return sha256_bytes("\0".join(parts).encode())

    @property
    def count(self) -> int:
        """Return how many packages the contents name (the lock's, else requirement lines)."""
        if self.locked:
            return len(self.locked)
        return sum(1 for line in self.requirements.splitlines() if line.strip())


class VenvAction(enum.Enum):
    """What a venv needs, in rising cost."""

    CURRENT = "up to date"
    SYNC = "re-syncing"
    INSTALL = "installing"
    RECREATE = "recreating"


@dataclass(frozen=True)
class VenvPlan:
    """What :func:`ensure` does to a venv, and why (one line, for the progress output)."""

    action: VenvAction
    reason: str


@dataclass(frozen=True)
class Synced(Generic[T]):
    """A venv that holds its contents, and what the sync did."""

    venv: Venv
    plans: tuple[VenvPlan, ...]  # the first one; a second when a sync had to recreate
    verified: T | None  # what ``verify`` returned; None when the venv was up to date


def describe_drift(contents: Contents, installed: Mapping[str, str], *, limit: int = 6) -> str:
    """Name what differs between the lock and the installed set (at most ``limit`` entries).

    Example: lock ``torch 2.11.0, six 1.17.0``; installed ``torch 2.15.0, tabulate 0.9.0``.
    Becomes: ``torch 2.15.0 (locked 2.11.0), six missing, tabulate 0.9.0 (not in the lock)``.
    """
    found = []
    for name, version in sorted(contents.locked.items()):
        have = installed.get(name)
        if have is None:
            found.append(f"{name} missing")
        elif have != version:
            found.append(f"{name} {have} (locked {version})")
    if not contents.on_top:  # packages on top are expected beside the lock
        extra = sorted(set(installed) - set(contents.locked)) if contents.locked else []
        found += [f"{name} {installed[name]} (not in the lock)" for name in extra]
    if not found:
        return "the same versions, installed since the last sync"
    more = f", and {len(found) - limit} more" if len(found) > limit else ""
    return ", ".join(found[:limit]) + more


def plan_venv(
    contents: Contents,
    root: Path,
    *,
    broken: Broken | None = None,
    force: bool = False,
) -> VenvPlan:
    """Decide what the venv at ``root`` needs to hold ``contents`` (reads, never writes).

    ``broken`` names what is wrong with installed files whose versions look right (a
    patched file rewritten in place), or returns None.
    """
    stamp = read_stamp(root)
    if force:
        return VenvPlan(VenvAction.RECREATE, "--force")
    if stamp is not None and stamp.state is SyncState.SYNCING:
        return VenvPlan(
            VenvAction.RECREATE, "its last sync was interrupted (files may be half-written)"
        )
    if not (root / "pyvenv.cfg").is_file():
        if stamp is None and root.exists() and any(root.iterdir()):
            raise EnvError(
                f"{root} is not a virtual environment and not empty",
                expected="a new folder, or a venv (pyvenv.cfg, lib/pythonX.Y/site-packages)",
                found=", ".join(sorted(p.name for p in root.iterdir())[:6]),
                hint="pass another folder, or remove this one if nothing in it is needed",
            )
        return VenvPlan(VenvAction.INSTALL, f"installing {contents.count} packages into a new venv")
    try:
        venv = find_venv(root)
    except TargetError:
        return VenvPlan(VenvAction.RECREATE, "pyvenv.cfg names no complete venv")
    if venv.version != contents.python:
        return VenvPlan(
            VenvAction.RECREATE, f"it runs Python {venv.version}, not {contents.python}"
        )
    installed = installed_versions(venv.site)
    if not installed:
        return VenvPlan(VenvAction.INSTALL, f"installing {contents.count} packages")
    problem = broken(venv) if broken else None
    if problem:
        return VenvPlan(VenvAction.RECREATE, problem)
    if stamp is None:
        return VenvPlan(
            VenvAction.SYNC, f"no stamp of a finished sync; {describe_drift(contents, installed)}"
        )
    if stamp.contents != contents.key:
        return VenvPlan(
            VenvAction.SYNC, f"{contents.label} changed; {describe_drift(contents, installed)}"
        )
    if stamp.installed != installed_key(installed):
        return VenvPlan(
            VenvAction.SYNC, f"packages changed by hand: {describe_drift(contents, installed)}"
        )
    return VenvPlan(VenvAction.CURRENT, f"{root} holds {contents.label} (stamp and files checked)")


def ensure_venv(
    contents: Contents,
    root: Path,
    *,
    verify: Callable[[Venv], T],
    broken: Broken | None = None,
    force: bool = False,
    uv: str | None = None,
    progress: Progress = lambda _: None,
) -> Synced[T]:
    """Make ``root`` a venv holding ``contents``, verified and stamped; skip when current.

    ``verify`` raises InstallCheckError when the synced venv is not right; a sync that did
    not recreate the venv then recreates it once.
    """
    root = root.absolute()
    root.parent.mkdir(parents=True, exist_ok=True)
    busy = f"another overlay run is syncing {root}"
    hint = "wait for the other run to finish, then run this again"
    with _mutex.held(
        root.parent / f".{root.name}.sync-lock", timeout=LOCK_TIMEOUT_S, busy=busy, hint=hint
    ):
        first = plan_venv(contents, root, broken=broken, force=force)
        if first.action is VenvAction.CURRENT:
            venv = find_venv(root)
            return Synced(venv, (first,), None)
        progress(_say(first, root, contents))
        executable = uv or find_uv()
        plans = [first]
        venv = _execute(first.action, contents, root, executable)
        try:
            verified = verify(venv)
        except InstallCheckError as exc:
            if first.action is VenvAction.RECREATE:
                raise _fresh_fails(contents, exc) from exc
            again = VenvPlan(VenvAction.RECREATE, f"the synced venv fails its check: {exc.message}")
            progress(_say(again, root, contents))
            plans.append(again)
            venv = _execute(again.action, contents, root, executable)
            try:
                verified = verify(venv)
            except InstallCheckError as second:
                raise _fresh_fails(contents, second) from second
        installed = installed_key(installed_versions(venv.site))
        write_stamp(root, Stamp(SyncState.READY, contents.key, installed, contents.origin))
    return Synced(venv, tuple(plans), verified)


def _say(step: VenvPlan, root: Path, contents: Contents) -> str:
    if step.action is VenvAction.INSTALL:
        return f"{step.reason}: {root} from {contents.label}"
    return f"{step.action.value} {root}: {step.reason}"


def _fresh_fails(contents: Contents, exc: InstallCheckError) -> InstallCheckError:
    return InstallCheckError(
        f"a venv freshly synced from {contents.label} fails its check: {exc.message}",
        expected=exc.expected,
        found=exc.found,
        hint="the lock does not give a working venv here: report it with this output",
    )


def _execute(action: VenvAction, contents: Contents, root: Path, uv: str) -> Venv:
    """Mark the venv ``syncing``, then (re)create it if needed and sync it."""
    # read before the entries go: a recreated venv keeps the interpreter it was made from
    kept = _same_interpreter(root, contents.python) if action is VenvAction.RECREATE else None
    root.mkdir(parents=True, exist_ok=True)
    write_stamp(root, Stamp(SyncState.SYNCING, contents.key, "", contents.origin))
    if action is VenvAction.RECREATE:
        for entry in root.iterdir():
            if entry.name != STAMP_FILE:
                _remove(entry)
    if not (root / "pyvenv.cfg").is_file():
        interpreter = kept or _running_interpreter(contents.python)
        _uv(uv, ["venv", "--quiet", "--allow-existing", "--python", interpreter, str(root)], None)
    venv = find_venv(root)
    requirements = root / REQUIREMENTS_FILE
    requirements.write_text(contents.requirements, encoding="utf-8")
    links = [arg for folder in contents.find_links for arg in ("--find-links", str(folder))]
    target = ["--python", str(venv.python)]
    if contents.locked:
        sync = ["pip", "sync", *target, "--require-hashes", *links, str(requirements)]
        _uv(uv, sync, contents)
        if contents.on_top:
            top = ["pip", "install", *target, *links, "-c", str(requirements), *contents.on_top]
            _uv(uv, top, contents)
    else:
        _uv(uv, ["pip", "install", *target, *links, "-r", str(requirements)], contents)
    return venv


def _same_interpreter(root: Path, version: str) -> str:
    """Return the interpreter the venv was made from when it runs ``version``, else ``version``."""
    return _python_in(Path(pyvenv_config(root).get("home", "")), python_version(root), version)


def _running_interpreter(version: str) -> str:
    """Return the base Python running the overlay when it is ``version``, else ``version``.

    Example: the overlay runs on CPython 3.11 from ``/usr``; ``version`` is ``3.11``.
    Becomes: ``/usr/bin/python3.11``, so uv skips its interpreter search (0.1 s of a cold
    build); for ``3.12`` it stays ``3.12``, and uv finds one.
    """
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return _python_in(Path(sys.base_prefix) / "bin", running, version)


def _python_in(folder: Path, runs: str, version: str) -> str:
    """Return ``folder``'s ``python<version>`` when ``folder`` runs ``version`` and has it.

    Otherwise ``version`` itself, which uv resolves by searching for an interpreter.
    """
    candidate = folder / f"python{version}"
    return str(candidate) if runs == version and candidate.is_file() else version


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _uv(uv: str, args: list[str], contents: Contents | None) -> None:
    """Run uv (its output shown unless the contents are quiet); refuse a failure.

    ``contents`` None: a ``uv venv``, always quiet.
    """
    if contents is None:
        hint = "check that uv can find (or download) this Python"
    elif contents.locked:
        hint = (
            "check network access to the index; a hash mismatch means a stale lock"
            " (in a checkout: `nox -s lock`)"
        )
    else:
        hint = "check the pins (a version may not exist for this interpreter), then retry"
    what = f"installs {contents.label}" if contents else "creates the venv"

    def refuse(found: str) -> EnvError:
        return EnvError(
            f"`uv {' '.join(args[:2])}` failed", expected=f"uv {what}", found=found, hint=hint
        )

    run_uv(uv, args, refuse, quiet=contents is None or contents.quiet)
