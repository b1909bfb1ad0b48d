"""The executorch tree a command works on (default: the active venv), and its safe files."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay.distribution.distinfo import RECORD, DistInfo, read_dist_info
from overlay.errors import TargetError, UnsafePatchError
from overlay.text.series import Series

DIST_NAME = "executorch"
DIST_INFO_RE = re.compile(rf"^{DIST_NAME}-[A-Za-z0-9.+!_-]+\.dist-info$")
ENVIRONMENT_FOLDERS = ("site-packages", "dist-packages")  # what an interpreter imports from
VENV_ENV = "VIRTUAL_ENV"  # the activated venv, as pip and uv read it
VENV_DIR = ".venv"
TARGET_FORMS = "a venv, its python, a site-packages folder, or an unpacked wheel holding executorch"


@dataclass(frozen=True)
class Target:
    """An executorch tree on disk."""

    root: Path  # folder that holds ``executorch/`` and the dist-info
    dist_info: Path
    version: Version
    record: frozenset[str]
    info: DistInfo = dataclasses.field(compare=False, repr=False)
    stamp: tuple[int, int, int] = (0, 0, 0)  # RECORD's inode, size, mtime when read

    def file(self, repo_path: str, package_dir: str = DIST_NAME) -> Path:
        """Return the on-disk path of a repository path."""
        return self.root / package_dir / repo_path

    def is_current(self) -> bool:
        """Return True when the dist-info on disk is still the one this was read from."""
        try:
            return _stamp(self.dist_info / RECORD) == self.stamp
        except OSError:
            return False

    @property
    def is_environment(self) -> bool:
        """Return True when the tree is an interpreter's site-packages (not an unpacked wheel)."""
        return self.root.name in ENVIRONMENT_FOLDERS


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _site_packages_of(path: Path) -> list[Path]:
    found: dict[Path, Path] = {}  # one per real folder, the first spelling kept
    for pattern in ("lib/python3*/site-packages", "Lib/site-packages"):
        for candidate in sorted(path.glob(pattern)):
            if _holds_executorch(candidate):
                found.setdefault(candidate.resolve(), candidate)
    return list(found.values())


@dataclass(frozen=True)
class Environment:
    """The environment a command works on when no ``--target`` names one."""

    path: Path  # a venv, or this interpreter's site-packages
    how: str  # how it was found, as messages say it


def _holds_executorch(site: Path) -> bool:
    return any(site.glob(f"{DIST_NAME}-*.dist-info"))


def default_environment(cwd: Path | None = None) -> Environment:
    """Return the environment to work on without ``--target``: $VIRTUAL_ENV, else a .venv at
    or above ``cwd``, else this tool's own environment only when it holds executorch (a tool
    venv of `uv tool` or pipx is named among the places looked at, never patched)."""
    here = (cwd or Path.cwd()).absolute()
    own, own_site = Path(sys.prefix), current_site()
    looked = []
    candidates = []
    active = os.environ.get(VENV_ENV)
    if active:
        candidates.append(Environment(Path(active), f"${VENV_ENV}"))
    else:
        looked.append(f"${VENV_ENV} is not set")
    found = next((f / VENV_DIR for f in (here, *here.parents) if (f / VENV_DIR).is_dir()), None)
    if found is not None:
        candidates.append(Environment(found, f"the {VENV_DIR} in {found.parent}"))
    else:
        looked.append(f"no {VENV_DIR} in {here} or above")
    candidates.append(Environment(own_site, "the environment this tool runs in"))
    for candidate in candidates:
        if _same_place(candidate.path, own) or _same_place(candidate.path, own_site):
            if not _holds_executorch(own_site):
                looked.append(f"{own} is this tool's own environment, without executorch")
                continue
            if candidate.path == own_site:
                return candidate
            return Environment(own_site, f"{candidate.how}: the environment this tool runs in")
        return candidate
    raise TargetError(
        "no environment to patch: no venv is active here",
        expected=f"an activated venv (${VENV_ENV}), a {VENV_DIR} at or above {here}, or --target",
        found="; ".join(dict.fromkeys(looked)),
        hint="activate the venv that holds executorch (`source VENV/bin/activate`), or pass"
        " --target VENV",
    )


def current_site() -> Path:
    """Return this interpreter's site-packages."""
    return Path(sysconfig.get_paths()["purelib"])


def _same_place(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _given_root(path: Path) -> Path:
    """Return the folder ``path`` names: a venv for its interpreter, the parent of a dist-info
    or of the executorch package; refuse a wheel file or any other file, naming it."""
    if path.is_file():
        venv = path.parent.parent
        if path.parent.name == "bin" and (venv / "pyvenv.cfg").is_file():
            return venv.resolve()  # not the python resolved: it links to the base interpreter
        wheel = path.suffix == ".whl"
        raise TargetError(
            f"--target {path} is {'a wheel file' if wheel else 'a file'}",
            expected=TARGET_FORMS,
            found=f"the {'wheel' if wheel else 'file'} {path.absolute()}",
            hint="install the wheel into a venv and pass the venv, or unpack it (`python -m"
            f" zipfile -e {path} DIR`) and pass DIR"
            if wheel
            else "pass the venv folder (the one holding bin/ and pyvenv.cfg) or its bin/python",
        )
    root = path.resolve()  # one spelling of the target for its lock, journal and paths
    if DIST_INFO_RE.match(root.name) or (
        root.name == DIST_NAME and any(root.parent.glob(f"{DIST_NAME}-*.dist-info"))
    ):
        return root.parent
    return root


def find_target(path: Path, wanted: str = "") -> Target:
    """Locate the executorch tree at ``path`` (a venv or its python, site-packages, a
    dist-info folder, an unpacked wheel); the next step of a folder without executorch
    installs ``wanted``. Two site-packages or two dist-infos holding executorch are refused.
    """
    if not path.exists():
        raise TargetError(
            f"{path} does not exist",
            expected=TARGET_FORMS,
            found=f"no file or folder at {path.absolute()}",
            hint="check the --target path (a relative one is read from the current folder)",
        )
    root = _given_root(path)
    if not _holds_executorch(root):
        sites = _site_packages_of(root)
        if len(sites) > 1:
            raise TargetError(
                f"{path} holds executorch in {len(sites)} site-packages folders",
                expected="one executorch installation",
                found=", ".join(str(s) for s in sites),
                hint="pass the site-packages folder to patch with --target",
            )
        root = sites[0] if sites else root
    dist_infos = sorted(root.glob(f"{DIST_NAME}-*.dist-info"))
    if not dist_infos:
        pythons = [root / "bin" / "python", *(p / "bin" / "python" for p in root.parents[2:3])]
        python = next((p for p in pythons if p.is_file()), None)  # a venv or its site-packages
        wanted = f"{DIST_NAME}=={wanted}" if wanted else DIST_NAME
        raise TargetError(
            f"executorch is not installed in {path}",
            expected=f"{wanted} (a release line of this tool)",
            found=f"no {DIST_NAME}-*.dist-info in {root}",
            hint=f"install it (`{python} -m pip install {wanted}`, or `uv pip install --python"
            f" {python} {wanted}`), then run this command again"
            if python
            else "pass --target the venv (or site-packages folder) that holds executorch",
        )
    if len(dist_infos) != 1:
        raise TargetError(
            f"no single executorch installation at {path}",
            expected="a folder with executorch/ and one executorch-*.dist-info "
            "(site-packages, a venv, or an unpacked wheel)",
            found=", ".join(str(d) for d in dist_infos),
            hint="remove the stale dist-info by reinstalling executorch",
        )
    stamp = _stamp(dist_infos[0] / RECORD) if (dist_infos[0] / RECORD).is_file() else (0, 0, 0)
    info = read_dist_info(dist_infos[0])
    return Target(root, info.path, info.version, info.record_paths, info, stamp)


def safe_file(series: Series, target: Target, repo_path: str) -> Path:
    """Return the file for ``repo_path`` after refusing unlisted files and symlinked paths.

    A file the series creates is listed only once a run created it.
    """
    wheel_path = series.pins.wheel_path(repo_path)
    if wheel_path not in target.record and repo_path not in series.created:
        raise UnsafePatchError(
            f"{wheel_path} is not listed in {target.dist_info.name}/RECORD",
            expected="a file the executorch distribution installed",
            found="a path the distribution does not own",
            hint="check the patch's paths (they are repository paths, backends/arm/...)",
        )
    root = target.root.resolve()
    current = root
    for part in wheel_path.split("/"):
        current = current / part
        refuse_symlink(current, wheel_path)
    if not current.resolve().is_relative_to(root):
        raise TargetError(f"{wheel_path} resolves outside {root}", hint="reinstall executorch")
    return current


def refuse_symlink(path: Path, what: str) -> None:
    """Refuse ``path`` when it is a symlink (a patch never writes through one): the tree's fault,
    not the series'."""
    if path.is_symlink():
        raise TargetError(
            f"{what} goes through a symlink at {path}",
            expected="real files and folders inside the target",
            found=f"{path} -> {os.readlink(path)}",
            hint="patch a real installation, not a link farm",
        )
