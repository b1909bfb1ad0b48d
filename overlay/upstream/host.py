"""Host main's ``backends/arm`` on the newest published executorch wheel (the export's and
the canary's shadow: a ``sitecustomize`` puts it first on ``executorch.backends.__path__``)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from overlay._files import write_files
from overlay.envs import release_venvs
from overlay.lines import Line
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.pin_check import PinCandidate, confirm_runtime, upstream_torch_pin
from overlay.upstream.upstream_pins import for_series

Progress = Callable[[str], None]
SKIPPED_PARTS = frozenset({"test", "tests", "scripts"})  # not imported by a user's lowering
# What main's backends/arm pins for the tools a lowering uses (TOSA, VGF, Ethos-U).
ARM_REQUIREMENTS = tuple(
    f"backends/arm/requirements-arm-{kind}.txt"
    for kind in ("tosa", "vgf", "vgf-runtime", "ethos-u")
)
TORCH_PACKAGES = frozenset({"torch", "torchao"})  # bound to the wheel's compiled core
SITECUSTOMIZE = """\
import sys

try:
    import executorch.backends as _backends

    _backends.__path__.insert(0, {shadow!r})
except Exception as _exc:  # the worker reports the import error itself
    sys.stderr.write(f"canary shadow not installed: {{_exc}}\\n")
"""


def newest_release(lines: Sequence[Line]) -> tuple[str, Line]:
    """Return the newest executorch release any line's pins know, and the line to build with."""
    known = {str(line.version): line for line in lines}
    upstream = for_series(lines[-1].directory)
    for version in (*upstream.sha256, *upstream.matrix_versions):
        known.setdefault(version, lines[-1])
    newest = max(known, key=Version)
    return newest, known[newest]


def pin_candidates(by_file: Mapping[str, Mapping[str, str]]) -> list[tuple[str, dict[str, str]]]:
    """Return tool pin sets to try, most of main's first: every file, then fewer, then none
    (a pin of main may have no wheel for the line's interpreter)."""
    files = [f for f in ARM_REQUIREMENTS if f in by_file]
    found = []
    for size in range(len(files), -1, -1):
        chosen = files[:size]
        pins = {k: v for f in chosen for k, v in by_file[f].items()}
        label = ", ".join(Path(f).name for f in chosen) or "the line's own pins"
        found.append((label, pins))
    return found


def host_runtime(
    line: Line, version: str, tool_pins: Mapping[str, str], torch: str
) -> dict[str, str]:
    """Return the runtime pins of the env that hosts main on executorch ``version``: the
    line's packages at main's pins where main pins them; torch and torchao the line's when
    it is on ``version``, else ``torch`` (upstream's torch_pin.py) and what resolves."""
    own = line.name == version
    found = {"torch": torch} if torch and not own else {}
    for name, pinned in line.pins.runtime.items():
        if canonicalize_name(name) not in TORCH_PACKAGES:
            found[name] = tool_pins.get(canonicalize_name(name), pinned)
        elif own:
            found[name] = pinned
    return found


def arm_sources(scratch: Scratch, commit: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Return main's ``backends/arm`` code (tests and scripts left out) and its
    ``backends/arm/test`` files."""
    listing = scratch.run("ls-tree", "-r", "-z", "--name-only", commit, "--", "backends/arm")
    names = list(filter(None, listing.split("\0")))
    code = [n for n in names if not SKIPPED_PARTS & set(n.split("/")[:-1])]
    tests = [n for n in names if n.startswith("backends/arm/test/")]
    return scratch.files(commit, code), scratch.files(commit, tests)


def write_shadow(dest: Path, python: Path, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` under ``dest/tree``; return a :func:`wrapper` of ``python`` that puts
    their ``backends`` first."""
    shutil.rmtree(dest / "tree", ignore_errors=True)  # nothing left from an earlier run
    write_files(dest / "tree", files)
    return wrapper(dest, python, dest / "tree" / "backends")


def wrapper(dest: Path, python: Path, backends: Path) -> Path:
    """Write ``dest/python``: it runs ``python`` with a ``sitecustomize`` (``dest/site``) that
    puts ``backends`` first, the env's ``bin`` first on ``PATH`` (upstream's tests look for
    ``model-converter`` there)."""
    site = dest / "site"
    site.mkdir(parents=True, exist_ok=True)
    shadow = str(backends.resolve())
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(shadow=shadow), encoding="utf-8")
    script = dest / "python"
    path = f'"{site}${{PYTHONPATH:+:$PYTHONPATH}}"'  # the worker's own PYTHONPATH kept
    tools = f'PATH="{python.parent}:$PATH"'
    script.write_text(
        f'#!/bin/sh\n{tools} PYTHONPATH={path} exec "{python}" "$@"\n', encoding="utf-8"
    )
    script.chmod(0o755)
    return script


def host_env(
    scratch: Scratch, main: str, lines: Sequence[Line], *, log_dir: Path, progress: Progress
) -> tuple[str, release_venvs.Env, str]:
    """Return the newest release, its stock env that hosts main and whose tool pins it holds
    (the first candidate that passes :func:`~overlay.upstream.pin_check.confirm_runtime`)."""
    version, line = newest_release(lines)
    torch = ""
    if line.name != version:
        tag = f"refs/tags/v{version}"
        ref = scratch.rev(tag) if scratch.has(tag) else main
        torch, _ = upstream_torch_pin(scratch.path, ref, version)
    tool_pins: dict[str, dict[str, str]] = {}  # requirements file -> main's == pins
    for path, data in scratch.files(main, ARM_REQUIREMENTS).items():
        pins = tool_pins.setdefault(path, {})
        for raw in data.decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(InvalidRequirement):
                requirement = Requirement(raw.split("#", 1)[0].strip())
                exact = [s.version for s in requirement.specifier if s.operator == "=="]
                if exact:
                    pins[canonicalize_name(requirement.name)] = exact[0]
    candidates = [
        PinCandidate(host_runtime(line, version, pins, torch), f"tools pinned by {label}")
        for label, pins in pin_candidates(tool_pins)
    ]
    _, attempts, env = confirm_runtime(
        for_series(line.directory), version, candidates, envs_root=None,
        log_dir=log_dir / "pin-check", progress=progress,
    )  # fmt: skip
    return version, env, attempts[-1].origin
