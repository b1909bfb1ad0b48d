"""Behaviour on main: host main's ``backends/arm`` on the newest published executorch wheel.

A ``sitecustomize`` puts a shadow folder first on ``executorch.backends.__path__``, so
nothing in the release env changes. Every module of main's ``backends/arm`` must import
there; where one does not, the import error is the answer and the canary stays text-only.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from overlay import codec
from overlay.codec import CodecError
from overlay.envs import release_venvs
from overlay.errors import OverlayError
from overlay.lines import Line
from overlay.text.series import Patch
from overlay.upstream import behaviour, upstream_tests
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.pin_check import PinCandidate, confirm_runtime, upstream_torch_pin
from overlay.upstream.results import HostState, MainBehaviour, TestRun
from overlay.upstream.upstream_pins import for_series

Progress = Callable[[str], None]
SKIPPED_PARTS = frozenset({"test", "tests", "scripts"})  # not imported by a user's lowering
CORE = frozenset({"executorch", "torch", "torchao"})  # a missing name here: not hostable
IMPORT_TIMEOUT_S = 900.0
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
IMPORT_CHECK = """\
import importlib, json, sys

errors = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        errors[name] = [missing or "", text]
print(json.dumps(errors))
"""


def newest_release(lines: Sequence[Line]) -> tuple[str, Line]:
    """Return the newest executorch release any line's pins know, and the line to build with."""
    known = {str(line.version): line for line in lines}
    upstream = for_series(lines[-1].directory)
    for version in (*upstream.sha256, *upstream.matrix_versions):
        known.setdefault(version, lines[-1])
    newest = max(known, key=Version)
    return newest, known[newest]


def main_tool_pins(scratch: Scratch, commit: str) -> dict[str, dict[str, str]]:
    """Return ``{requirements file: {name: version}}`` of the ``==`` pins of main's Arm tools."""
    found: dict[str, dict[str, str]] = {}
    for path, data in scratch.files(commit, ARM_REQUIREMENTS).items():
        pins = found.setdefault(path, {})
        for raw in data.decode("utf-8", errors="replace").splitlines():
            text = raw.split("#", 1)[0].strip()
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            exact = [s.version for s in requirement.specifier if s.operator == "=="]
            if exact:
                pins[canonicalize_name(requirement.name)] = exact[0]
    return found


def pin_candidates(by_file: Mapping[str, Mapping[str, str]]) -> list[tuple[str, dict[str, str]]]:
    """Return tool pin sets to try, most of main's first: every file, then fewer, then none.

    A pin of main may have no wheel for the line's interpreter (ai-ml-sdk-vgf-library 0.10.0
    ships cp310 and cp312 only): the next candidate keeps the line's pin for that tool.
    """
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
    """Return the runtime pins of the env that hosts main on executorch ``version``.

    The line's runtime packages, each at the version main's backends/arm pins where it
    pins one (main's code meets its own tools); torch and torchao from the line when it is
    pinned to ``version``, else ``torch`` (upstream's torch_pin.py) and torchao as
    executorch's metadata resolves it.

    Example: the 1.2.0 line (torch 2.11.0, tosa-tools 2026.2.1) hosting main on 1.5.1,
    main pinning tosa-tools 2026.5.0 and torch_pin.py saying 2.13.0.
    Becomes: ``{"torch": "2.13.0", "tosa-tools": "2026.5.0", ...}``.
    """
    own = line.name == version
    found = {"torch": torch} if torch and not own else {}
    for name, pinned in line.pins.runtime.items():
        if canonicalize_name(name) not in TORCH_PACKAGES:
            found[name] = tool_pins.get(canonicalize_name(name), pinned)
        elif own:
            found[name] = pinned
    return found


def arm_sources(scratch: Scratch, commit: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Return main's ``backends/arm`` code (and its resources: shaders, schemas) and its
    ``backends/arm/test`` files (the exported tests import their helpers).

    The code leaves tests and scripts out: they are not imported by a user's lowering.
    """
    listing = scratch.run("ls-tree", "-r", "-z", "--name-only", commit, "--", "backends/arm")
    names = list(filter(None, listing.split("\0")))
    code = [n for n in names if not SKIPPED_PARTS & set(n.split("/")[:-1])]
    tests = [n for n in names if n.startswith("backends/arm/test/")]
    return scratch.files(commit, code), scratch.files(commit, tests)


def modules_of(files: Mapping[str, bytes]) -> list[str]:
    """Return the module names of ``backends/arm`` Python files, as executorch imports them."""
    names = []
    for path in sorted(p for p in files if p.endswith(".py")):
        dotted = "executorch." + path.removesuffix(".py").replace("/", ".")
        names.append(dotted.removesuffix(".__init__"))
    return names


def write_shadow(dest: Path, python: Path, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` under ``dest/tree``; return a :func:`wrapper` of ``python`` whose
    ``sitecustomize`` puts their ``backends`` first."""
    shutil.rmtree(dest / "tree", ignore_errors=True)  # nothing left from an earlier run
    for path, data in files.items():
        target = dest / "tree" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return wrapper(dest, python, shadow_site(dest, dest / "tree" / "backends"))


def shadow_site(dest: Path, backends: Path) -> Path:
    """Write ``dest/site/sitecustomize.py`` that puts ``backends`` first; return the site."""
    site = dest / "site"
    site.mkdir(parents=True, exist_ok=True)
    shadow = str(backends.resolve())
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(shadow=shadow), encoding="utf-8")
    return site


def wrapper(dest: Path, python: Path, site: Path) -> Path:
    """Write an executable that runs ``python`` with the shadow's ``sitecustomize``.

    The env's ``bin`` goes first on ``PATH``: upstream's tests look for its tools there
    (``model-converter``).
    """
    script = dest / "python"
    path = f'"{site}${{PYTHONPATH:+:$PYTHONPATH}}"'  # the worker's own PYTHONPATH kept
    tools = f'PATH="{python.parent}:$PATH"'
    script.write_text(
        f'#!/bin/sh\n{tools} PYTHONPATH={path} exec "{python}" "$@"\n', encoding="utf-8"
    )
    script.chmod(0o755)
    return script


@dataclass(frozen=True)
class ImportFailure:
    """A module that did not import: the error, and the missing module when one is named."""

    module: str
    error: str
    missing: str = ""

    @property
    def optional(self) -> bool:
        """Return True for a third-party package main uses but no lowering needs."""
        top = self.missing.split(".")[0]
        return bool(top) and top not in CORE


def import_errors(python: Path, modules: Sequence[str]) -> list[ImportFailure]:
    """Import every module in ``python`` (a wrapper); return the failures."""
    try:
        proc = subprocess.run(
            [str(python), "-c", IMPORT_CHECK, *modules],
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [ImportFailure("(interpreter)", str(exc))]
    try:
        line = proc.stdout.strip().splitlines()[-1]
        found = codec.loads(dict[str, tuple[str, ...]], line, "import check")
    except (CodecError, IndexError):
        return [ImportFailure("(interpreter)", (proc.stderr or proc.stdout).strip()[-500:])]
    return [ImportFailure(str(k), str(v[1]), str(v[0])) for k, v in found.items()]


def host_env(
    scratch: Scratch, main: str, lines: Sequence[Line], *, log_dir: Path, progress: Progress
) -> tuple[str, release_venvs.Env, str]:
    """Return the newest release, its stock env (pytest added) and whose tool pins it holds.

    The first pin set whose env passes :func:`overlay.upstream.pin_check.check_env`
    (the quantized kernels register, a conv lowers for TOSA and VGF; cached in the env)
    wins, as for a retarget (:func:`~overlay.upstream.pin_check.confirm_runtime`).
    """
    version, line = newest_release(lines)
    torch = ""
    if line.name != version:
        tag = f"refs/tags/v{version}"
        ref = scratch.rev(tag) if scratch.has(tag) else main
        torch, _ = upstream_torch_pin(scratch.path, ref, version)
    candidates = [
        PinCandidate(host_runtime(line, version, pins, torch), f"tools pinned by {label}")
        for label, pins in pin_candidates(main_tool_pins(scratch, main))
    ]
    _, attempts, env = confirm_runtime(
        for_series(line.directory), version, candidates, envs_root=None,
        log_dir=log_dir / "pin-check", progress=progress,
    )  # fmt: skip
    return version, env, attempts[-1].origin


def measure(
    scratch: Scratch,
    main: str,
    *,
    lines: Sequence[Line],
    patched: Mapping[str, bytes],
    patches: Sequence[Patch],
    tests: Mapping[str, Sequence[str]],
    out_dir: Path,
    progress: Progress = lambda _: None,
) -> MainBehaviour:
    """Host main's ``backends/arm`` on the newest wheel; where it imports, run the patches.

    ``patched`` holds main's files after the newest line's replayed series (and the ports
    that carry the rest); ``patches`` are the patches whose trigger cases run; ``tests``
    the tests each patch (or its port) adds, as pytest node ids.
    """
    version = newest_release(lines)[0]
    wheel = f"executorch {version}"
    try:
        version, env, pinned = host_env(
            scratch, main, lines, log_dir=out_dir / "logs", progress=progress
        )
    except OverlayError as exc:
        detail = f"no env of {wheel}: {exc.message}: {exc.found or ''}".strip(": ")
        return MainBehaviour(HostState.NOT_HOSTED, wheel, detail)
    sources, main_tests = arm_sources(scratch, main)
    stock = write_shadow(out_dir / "stock", env.python, {**sources, **main_tests})
    modules = modules_of(sources)
    failures = import_errors(stock, modules)
    blocking = [f for f in failures if not f.optional]
    if blocking:
        shown = "; ".join(f"{f.module}: {f.error}" for f in blocking[:5])
        detail = (
            f"{len(blocking)} of main's {len(modules)} backends/arm modules do not import on"
            f" {wheel} (stays text-only): {shown}"
        )
        return MainBehaviour(HostState.NOT_HOSTED, wheel, detail)
    optional = sorted({f.missing for f in failures})
    note = (
        f"{len(modules)} modules import ({pinned}); optional packages not installed:"
        f" {', '.join(optional) or 'none'}"
    )
    patched_python = write_shadow(
        out_dir / "patched", env.python, {**sources, **main_tests, **patched}
    )
    test_env = upstream_tests.vulkan_env(env.folder, out_dir / "vulkan")
    pytest_ini = upstream_tests.pytest_ini(scratch.path, (main,))
    names = [p.name for p in patches]
    runs: dict[str, TestRun] = {}
    try:  # each patch's trigger cases, and the tests it adds, on stock and patched main
        sides = behaviour.run_envs(
            {"stock": str(stock), "patched": str(patched_python)},
            behaviour.trigger_cases([version], names),
            out_dir=out_dir / "logs", progress=progress,
        )  # fmt: skip
        for name in (n for n in names if tests.get(n)):
            progress(f"behaviour: {name}: its tests on stock and patched main")
            runs[name] = upstream_tests.run_tests_both_ways(
                str(stock),
                str(patched_python),
                release_tests=main_tests,
                patched_files=patched,
                pytest_ini=pytest_ini,
                selection=list(tests[name]),
                log_dir=out_dir / "logs" / "pytest" / name,
                extra_env=test_env,
            )
    except OverlayError as exc:
        detail = f"{note}; the trigger cases did not run: {exc.message}: {exc.found or ''}"
        return MainBehaviour(HostState.HOSTED, wheel, detail.rstrip(": "))
    run = behaviour.assemble("main", sides["stock"], sides["patched"])
    found = behaviour.measure(names, run, [version], tests=runs)
    return MainBehaviour(HostState.HOSTED, wheel, note, tuple(found.values()))
