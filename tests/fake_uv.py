"""A fake uv for the venv builder's tests: ``venv``, ``pip sync``, ``pip install``.

As fast or as slow as asked (``FAKE_UV_DELAY`` seconds per file written) and as careless
as an interrupted installer can be: each package's dist-info is written before its files,
so a kill in between leaves a package that looks installed but does not import (what a
Ctrl-C during ``uv pip sync`` did to ``sympy.core``). Like uv it skips a package whose
dist-info already has the wanted version, so only a re-sync with a fresh venv repairs that.
Every call is appended to ``FAKE_UV_LOG`` (when set) as one line; ``FAKE_UV_PIDS`` (when
set) gets this process's pid.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

FILES = ("__init__.py", "util.py", "core.py")  # core.py last: a package is whole with it


def module(name: str) -> str:
    """Return the import name of a distribution."""
    return name.replace("-", "_").replace(".", "_")


def canonical(name: str) -> str:
    """Return the PEP 503 form of a distribution name."""
    return name.strip().lower().replace("_", "-").replace(".", "-")


def parse(path: Path) -> dict[str, str]:
    """Return ``{name: version}`` of a requirements file (``name==version`` lines)."""
    wanted = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        spec = line.split("#", 1)[0].strip().split(" ", 1)[0]
        if "==" in spec:
            name, version = spec.split("==", 1)
            wanted[canonical(name)] = version.strip()
    return wanted


def installed(site: Path) -> dict[str, str]:
    """Return ``{name: version}`` of the dist-info folders in ``site``."""
    found = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found[canonical(name)] = version
    return found


def remove(site: Path, name: str, version: str) -> None:
    shutil.rmtree(site / f"{module(name)}-{version}.dist-info", ignore_errors=True)
    shutil.rmtree(site / module(name), ignore_errors=True)


def install(site: Path, name: str, version: str, delay: float) -> None:
    info = site / f"{module(name)}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    package = site / module(name)
    package.mkdir(exist_ok=True)
    for file in FILES:
        time.sleep(delay)
        (package / file).write_text(f"VERSION = {version!r}\n")


def site_of(python: str) -> Path:
    root = Path(python).parent.parent
    return next((root / "lib").glob("python*/site-packages"))


def main(args: list[str]) -> int:
    if os.environ.get("FAKE_UV_LOG"):
        with open(os.environ["FAKE_UV_LOG"], "a") as log:
            log.write(" ".join(args) + "\n")
    if os.environ.get("FAKE_UV_PIDS"):
        with open(os.environ["FAKE_UV_PIDS"], "a") as pids:
            pids.write(f"{os.getpid()}\n")
    delay = float(os.environ.get("FAKE_UV_DELAY", "0"))
    if args[0] == "venv":
        root = Path(args[-1])
        version = args[args.index("--python") + 1]
        if not version[:1].isdigit():  # an interpreter path: .../python3.11
            version = Path(version).name.removeprefix("python")
        site = root / "lib" / f"python{version}" / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        (root / "bin").mkdir(exist_ok=True)
        if not (root / "bin" / "python").exists():
            (root / "bin" / "python").symlink_to(sys.executable)
        time.sleep(delay)
        (root / "pyvenv.cfg").write_text(
            f"home = {Path(sys.executable).parent}\nversion_info = {version}.0\nuv = fake\n"
        )
        return 0
    if os.environ.get("FAKE_UV_FAIL"):
        print(os.environ["FAKE_UV_FAIL"], file=sys.stderr)
        return 2
    site = site_of(args[args.index("--python") + 1])
    have = installed(site)
    if args[:2] == ["pip", "sync"]:
        wanted = parse(Path(args[-1]))
        for name, version in have.items():
            if wanted.get(name) != version:
                remove(site, name, version)
        have = installed(site)
    elif args[:2] == ["pip", "install"] and "-r" in args:
        wanted = parse(Path(args[args.index("-r") + 1]))
    else:  # pip install -c CONSTRAINTS REQ...: the named ones, at the constrained version
        constraints = parse(Path(args[args.index("-c") + 1]))
        names = args[args.index("-c") + 2 :]
        wanted = {canonical(n): constraints.get(canonical(n), "1.0") for n in names}
    for name, version in sorted(wanted.items()):
        if have.get(name) == version:
            continue
        if name in have:
            remove(site, name, have[name])
        install(site, name, version, delay)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
