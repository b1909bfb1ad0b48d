"""Find the executorch tree a command works on, and the files in it a series may touch.

A target is a folder holding the ``executorch`` package and its ``.dist-info``: a
site-packages folder, a venv (its one site-packages holding executorch), or an unpacked
wheel. Nothing here writes.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from overlay.dist.distinfo import RECORD, DistInfo, read_dist_info
from overlay.errors import TargetError, UnsafePatchError
from overlay.text.series import Series

DIST_NAME = "executorch"
DIST_INFO_RE = re.compile(rf"^{DIST_NAME}-[A-Za-z0-9.+!_-]+\.dist-info$")
ENVIRONMENT_FOLDERS = ("site-packages", "dist-packages")  # what an interpreter imports from


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
    candidates = sorted(path.glob("lib/python3*/site-packages")) + sorted(
        path.glob("Lib/site-packages")
    )
    found: dict[Path, Path] = {}
    for candidate in candidates:
        if any(candidate.glob(f"{DIST_NAME}-*.dist-info")):
            found.setdefault(candidate.resolve(), candidate)
    return list(found.values())


def find_target(path: Path, wanted: str = "") -> Target:
    """Locate the executorch tree at ``path`` (site-packages, venv, unpacked wheel).

    Refuses a path that does not exist, a venv whose two site-packages hold executorch, a
    folder without executorch (the next step installs executorch ``wanted``, a supported
    release) and a folder with two executorch dist-infos (naming both: patching one of them
    silently would leave the other).
    """
    if not path.exists():
        raise TargetError(
            f"{path} does not exist",
            expected="a venv, a site-packages folder or an unpacked wheel holding executorch",
            found=f"no file or folder at {path.absolute()}",
            hint="check the --target path (a relative one is read from the current folder)",
        )
    root = path.resolve()  # one spelling of the target for its lock, journal and paths
    if root.name == DIST_NAME and any(root.parent.glob(f"{DIST_NAME}-*.dist-info")):
        root = root.parent
    if not any(root.glob(f"{DIST_NAME}-*.dist-info")):
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
        raise UnsafePatchError(f"{wheel_path} resolves outside {root}")
    return current


def refuse_symlink(path: Path, what: str) -> None:
    """Refuse ``path`` when it is a symlink (a patch never writes through one)."""
    if path.is_symlink():
        raise UnsafePatchError(
            f"{what} goes through a symlink at {path}",
            expected="real files and folders inside the target",
            found=f"{path} -> {os.readlink(path)}",
            hint="patch a real installation, not a link farm",
        )
