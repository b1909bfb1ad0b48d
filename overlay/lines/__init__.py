"""Release lines: the folders of a lines root (``patches/``), the default, the line of a version."""

from __future__ import annotations

import functools
import importlib.resources
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from overlay import __version__
from overlay._hashing import tree_digest
from overlay.errors import SeriesError, UnsupportedReleaseError, UsageError
from overlay.lines.pins import PINS_FILE, SERIES_FILE, Pins, load

PROJECT_NAME = "executorch-arm-overlay"
PATCHES_ENV = "OVERLAY_PATCHES"  # a series folder (one line) or a lines root
LINES_DIR = "patches"


@dataclass(frozen=True)
class Line:
    """One release line: a series folder named after its executorch release."""

    name: str
    directory: Path

    @property
    def version(self) -> Version:
        """Return the executorch release the line is pinned to."""
        return Version(self.name)

    @property
    def pins(self) -> Pins:
        """Return the line's pins (read once per process)."""
        return _load_cached(str(self.directory.resolve()))


def is_series_folder(path: Path) -> bool:
    """Return True when ``path`` holds one series (``series`` and ``pins.toml``)."""
    return (path / SERIES_FILE).is_file() and (path / PINS_FILE).is_file()


def all_lines(root: Path) -> tuple[Line, ...]:
    """Return the lines under ``root``, oldest first."""
    found = []
    if root.is_dir():
        for folder in root.iterdir():
            try:
                Version(folder.name)
            except InvalidVersion:
                continue
            if is_series_folder(folder):
                found.append(Line(folder.name, folder))
    return tuple(sorted(found, key=lambda line: line.version))


def _supported(root: Path) -> str:
    return ", ".join(line.name for line in all_lines(root)) or "none"


def default_line(root: Path) -> Line:
    """Return the newest line under ``root``."""
    lines = all_lines(root)
    if not lines:
        raise SeriesError(
            f"no release line in {root}",
            expected="folders named after executorch releases (e.g. 1.5.1/) holding a series",
            found="none",
            hint="restore patches/ from git, or pass --patches DIR",
        )
    return lines[-1]


def line_named(root: Path, name: str) -> Line:
    """Return the line called ``name`` (an executorch release such as ``1.5.1``)."""
    for line in all_lines(root):
        if line.name == name:
            return line
    raise UsageError(
        f"there is no release line {name}",
        expected=f"one of the supported lines: {_supported(root)}",
        found=name,
        hint=f"pick one of {_supported(root)} (`{PROJECT_NAME} lines` lists them)",
    )


def line_for_version(root: Path, version: str) -> Line:
    """Return the line pinned to executorch ``version`` (its local label ignored)."""
    try:
        public = Version(Version(version).public)
    except InvalidVersion:
        public = None
    for line in all_lines(root):
        if line.version == public:
            return line
    known = all_lines(root)
    other = f"use a version of {PROJECT_NAME} whose lines include {public or version}"
    raise UnsupportedReleaseError(
        f"executorch {version} has no release line here",
        expected=f"executorch at one of the supported lines: {_supported(root)}",
        found=f"executorch {version}",
        hint=f"install executorch at a supported release (`uv pip install executorch=="
        f"{known[-1].name}`), or {other} (`{PROJECT_NAME} lines` lists this one's)"
        if known
        else other,
    )


def line_before(root: Path, version: str) -> Line:
    """Return the newest line older than executorch ``version`` (where a retarget starts)."""
    try:
        wanted = Version(version)
    except InvalidVersion as exc:
        raise UnsupportedReleaseError(
            f"{version!r} is not an executorch release",
            expected="a version such as 1.5.1",
            found=version,
            hint="name a release published on PyPI",
        ) from exc
    older = [line for line in all_lines(root) if line.version < wanted]
    if not older:
        raise UnsupportedReleaseError(
            f"no release line older than executorch {version}",
            expected=f"a line before {version} among: {_supported(root)}",
            found=version,
            hint="retarget to a release newer than the oldest line",
        )
    return older[-1]


def find_checkout(start: Path) -> Path | None:
    """Return the overlay checkout holding ``start`` (its pyproject names this project); a
    folder this user may not look into is not one."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        try:
            if not (folder / LINES_DIR).is_dir() or not pyproject.is_file():
                continue
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, OSError):
            continue
        if isinstance(project, Mapping) and project.get("name") == PROJECT_NAME:
            return folder
    return None


def packaged_root() -> Path | None:
    """Return the lines shipped inside the installed package, if it has them."""
    root = importlib.resources.files("overlay") / LINES_DIR
    if isinstance(root, Path) and all_lines(root):
        return root
    return None


@dataclass(frozen=True)
class Root:
    """A lines root (or one series folder) and where it comes from, as messages say it."""

    path: Path
    source: str


def default_source() -> Root:
    """Return the lines root (or one series folder) a command uses by default:
    ``$OVERLAY_PATCHES``, else the running code's own lines (the installed package's, else its
    checkout's), else the current folder's checkout's: an installed tool reads no other."""
    explicit = os.environ.get(PATCHES_ENV)
    if explicit:
        return Root(Path(explicit), f"${PATCHES_ENV} ({explicit})")
    packaged = packaged_root()
    if packaged is not None:
        return Root(packaged, f"this tool's own lines (version {__version__})")
    running = find_checkout(Path(__file__).resolve().parent)
    if running is not None:
        return Root(running / LINES_DIR, f"the checkout {running} this tool runs from")
    here = find_checkout(Path.cwd())
    if here is not None:
        return Root(here / LINES_DIR, f"the checkout {here}")
    raise SeriesError(
        "no patch series found",
        expected=f"${PATCHES_ENV}, a checkout of {PROJECT_NAME}, or the lines in the package",
        found="none of them",
        hint="pass --patches DIR (a line folder holding 'series' and 'pins.toml')",
    )


def default_root() -> Path:
    """Return the path of :func:`default_source`."""
    return default_source().path


def other_checkout(root: Path) -> Path | None:
    """Return the checkout at or above the current folder when its lines differ from ``root``."""
    here = find_checkout(Path.cwd())
    if here is None:
        return None
    theirs = here / LINES_DIR

    def digest(folder: Path) -> str:
        return tree_digest(folder, (p for p in folder.rglob("*") if p.is_file()))

    try:
        if theirs.resolve() == root.resolve() or digest(theirs) == digest(root):
            return None
    except OSError:
        return None
    return here


def root_to_change(given: Path | None, command: str) -> Path:
    """Return the lines (a root or one series folder) ``command`` changes: ``given``
    (``--patches``), else ``$OVERLAY_PATCHES``, else the current folder's checkout's; never
    the lines inside the installed package (read-only)."""
    env = os.environ.get(PATCHES_ENV)
    explicit = given or (Path(env) if env else None)
    package = Path(__file__).resolve().parent.parent
    if explicit is not None and not explicit.resolve().is_relative_to(package):
        return explicit
    checkout = find_checkout(Path.cwd().resolve()) if explicit is None else None
    if checkout is not None:
        return checkout / LINES_DIR
    raise UsageError(
        f"{command} works on the release lines of a checkout, and there is none here",
        expected=f"a checkout of {PROJECT_NAME} (pyproject.toml and patches/) at or above"
        " the current folder, or --patches DIR",
        found=f"{explicit} is inside the installed package"
        if explicit is not None
        else f"no checkout at or above {Path.cwd()}",
        hint=f"cd into your clone of {PROJECT_NAME}, or pass --patches CLONE/patches, and run"
        " it again (the lines inside the installed tool are read-only)",
    )


def series_directory(path: Path | None = None) -> Path:
    """Return the series folder ``path`` names: itself, or the default line of a lines root."""
    folder = default_root() if path is None else path
    lines = () if (folder / SERIES_FILE).exists() else all_lines(folder)
    return lines[-1].directory if lines else folder  # a series folder reports its own errors


@functools.cache
def _load_cached(directory: str) -> Pins:
    return load(Path(directory))
