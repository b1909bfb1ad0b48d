"""The one stamped venv builder: the stamp says whether to sync, ``uv pip sync`` decides what;
uv found and run as a child that never outlives the overlay."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from overlay import _mutex, _process
from overlay._hashing import sha256_bytes
from overlay._process import Refuse
from overlay.envs.stamp import STAMP_FILE, Origin, Stamp, read_stamp, write_stamp
from overlay.errors import EnvError, OverlayError, TargetError

REQUIREMENTS_FILE = "overlay-requirements.txt"  # in the venv: the text it was synced from
# What a folder may hold and still be taken for a (half-made) venv: what `uv venv` makes.
VENV_PARTS = frozenset(
    {"bin", "lib", "lib64", "include", "share", ".gitignore", ".lock", "CACHEDIR.TAG",
     STAMP_FILE, REQUIREMENTS_FILE}
)  # fmt: skip
LOCK_TIMEOUT_S = 1800.0  # a cold sync downloads torch (~3 GB)
T = TypeVar("T")
Progress = Callable[[str], None]


def find_uv() -> str:
    """Return the uv executable: the ``uv`` package's binary, else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise EnvError(
        "uv is not available",
        expected="the uv package in this Python, or uv on PATH",
        found="neither",
        hint=f"{sys.executable} -m pip install uv",
    )


def run_uv(
    uv: str,
    args: list[str],
    refuse: Refuse,
    *,
    quiet: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``uv ARGS`` as a child that dies with us, without VIRTUAL_ENV (uv acts on what it is
    given), ``env`` added; a failure is ``refuse(what uv said)`` less its ``Using Python`` lines."""
    kept = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def said(found: str) -> OverlayError:
        return refuse(re.sub(r"Using Python [^\n]*environment at[^\n]*\n?", "", found))

    _process.run([uv, *args], said, env={**kept, **(env or {})}, cwd=cwd, quiet=quiet)


@dataclass(frozen=True)
class Venv:
    """A virtual environment on disk."""

    root: Path
    python: Path
    site: Path
    version: str  # "3.11"


def pyvenv_config(root: Path) -> dict[str, str]:
    """Return the ``key = value`` lines of a venv's pyvenv.cfg ({} when it has none)."""
    cfg = root / "pyvenv.cfg"
    text = cfg.read_text(encoding="utf-8", errors="replace") if cfg.is_file() else ""
    pairs = (line.partition("=") for line in text.splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


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
    return Venv(root, root / "bin" / "python", site, version)


def installed_versions(site: Path | None = None) -> dict[str, str]:
    """Return ``{canonical name: version}`` of the distributions in ``site`` (or on sys.path),
    from the dist-info folder's name (fast), else its METADATA. Two copies of one give both
    versions (``2.11.0 + 2.15.0``), which matches no lock."""
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


@dataclass(frozen=True)
class Contents:
    """What a venv must hold: ``locked``, a hashed lock synced exactly, ``on_top`` then held
    to it; else requirements installed as they are (release envs: pins, local wheels)."""

    label: str  # for messages, e.g. "cp311-manylinux_2_28_x86_64.txt (stock)"
    python: str  # "3.11"
    requirements: str  # the requirements text uv reads
    locked: bool = False
    find_links: tuple[Path, ...] = ()
    on_top: tuple[str, ...] = ()
    origin: Origin | None = None
    salt: str = ""  # a digest of what the text does not say: local files by content
    quiet: bool = False  # capture uv's output (shown only on failure)

    @property
    def key(self) -> str:
        """Return the sha256 of everything that decides what the venv holds (its stamp)."""
        parts = [self.python, self.requirements, *self.on_top, self.salt]
        return sha256_bytes("\0".join(parts).encode())


def stale(contents: Contents, root: Path, *, force: bool = False) -> str:
    """Return why the venv at ``root`` must be synced to hold ``contents``; "" when its stamp
    says a sync of exactly these contents finished. A folder holding anything but a venv's
    parts is refused, not removed."""
    names = {p.name for p in root.iterdir()} if root.is_dir() else set()
    foreign = sorted(names - VENV_PARTS)
    if foreign and "pyvenv.cfg" not in names:
        raise EnvError(
            f"{root} is not a virtual environment and not empty",
            expected="a new folder, or a venv (pyvenv.cfg, lib/pythonX.Y/site-packages)",
            found=", ".join(foreign[:6]),
            hint="pass another folder, or remove this one if nothing in it is needed",
        )
    stamp = read_stamp(root)
    if force:
        return "--force: a new venv"
    if not _is_venv(root, contents.python):
        return f"a new Python {contents.python} venv"
    if stamp is None:
        return "no stamp of a finished sync: a new venv"
    return f"{contents.label} changed since its last sync" if stamp.sha256 != contents.key else ""


def ensure_venv(
    contents: Contents,
    root: Path,
    *,
    verify: Callable[[Venv], T],
    force: bool = False,
    uv: str | None = None,
    progress: Progress = lambda _: None,
) -> T | None:
    """Make ``root`` a venv holding ``contents`` (uv decides what to install, remove, replace),
    verified, then stamped; return what ``verify`` returned, or None when its stamp says it
    holds them (uv is not run). A venv ``verify`` refuses gets no stamp."""
    root = root.absolute()
    root.parent.mkdir(parents=True, exist_ok=True)
    busy = f"another overlay run is syncing {root}"
    hint = "wait for the other run to finish, then run this again"
    with _mutex.held(
        root.parent / f".{root.name}.sync-lock", timeout=LOCK_TIMEOUT_S, busy=busy, hint=hint
    ):
        reason = stale(contents, root, force=force)
        if not reason:
            return None
        progress(f"syncing {root} to {contents.label}: {reason}")
        uv = uv or find_uv()
        remake = force or read_stamp(root) is None or not _is_venv(root, contents.python)
        (root / STAMP_FILE).unlink(missing_ok=True)
        if remake:
            python = _interpreter(root, contents.python)
            remove_unfinished_venv(root)
            _uv(uv, ["venv", "--quiet", "--clear", "--python", python, str(root)], None)
        venv = find_venv(root)
        requirements = root / REQUIREMENTS_FILE
        requirements.write_text(contents.requirements, encoding="utf-8")
        links = [arg for folder in contents.find_links for arg in ("--find-links", str(folder))]
        target = ["--python", str(venv.python)]
        if contents.locked:
            sync = ["pip", "sync", *target, "--require-hashes", *links, str(requirements)]
            _uv(uv, sync, contents)
            if contents.on_top:
                top = ["pip", "install", *target, *links, "-c", str(requirements)]
                _uv(uv, [*top, *contents.on_top], contents)
        else:
            _uv(uv, ["pip", "install", *target, *links, "-r", str(requirements)], contents)
        verified = verify(venv)
        write_stamp(root, Stamp(contents.key, contents.origin))
    return verified


def remove_unfinished_venv(root: Path) -> bool:
    """Remove a venv ``uv venv`` was stopped making (nothing but a venv's parts, no
    pyvenv.cfg: uv 0.13.9 will not clear it); return True if it did."""
    if not root.is_dir() or (root / "pyvenv.cfg").exists():
        return False
    if not {entry.name for entry in root.iterdir()} <= VENV_PARTS:
        return False
    shutil.rmtree(root)
    return True


def _is_venv(root: Path, python: str) -> bool:
    """Return True when ``root`` is a complete venv running ``python``."""
    try:
        return find_venv(root).version == python
    except TargetError:
        return False


def _interpreter(root: Path, version: str) -> str:
    """Return the Python a new venv at ``root`` is made from: the one the venv there was made
    from, else the overlay's base Python, if it runs ``version``; else ``version`` (uv searches
    for one: 0.1 s of a cold build)."""
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    home = pyvenv_config(root).get("home")
    made_from = [(Path(home), python_version(root))] if home else []
    for folder, runs in [*made_from, (Path(sys.base_prefix) / "bin", running)]:
        if runs == version and (folder / f"python{version}").is_file():
            return str(folder / f"python{version}")
    return version


def _uv(uv: str, args: list[str], contents: Contents | None) -> None:
    """Run uv (quiet for a ``uv venv``, ``contents`` None); refuse a failure."""
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
