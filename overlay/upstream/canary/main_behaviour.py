"""Behaviour on main: each patch's trigger cases and tests on main's ``backends/arm``, hosted on
the newest executorch wheel (:mod:`overlay.upstream.host`); a module that does not import
there is the answer, and the canary stays text-only."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay.envs.verify_install import import_check
from overlay.errors import OverlayError
from overlay.lines import Line
from overlay.text.series import Patch
from overlay.upstream import behaviour, upstream_tests
from overlay.upstream.canary.canary_report import HostState, MainBehaviour
from overlay.upstream.gitrepo import Scratch
from overlay.upstream.host import arm_sources, host_env, newest_release, write_shadow
from overlay.upstream.results import TestRun

Progress = Callable[[str], None]
CORE = frozenset({"executorch", "torch", "torchao"})  # a missing name here: not hostable
IMPORT_TIMEOUT_S = 900.0


def modules_of(files: Mapping[str, bytes]) -> list[str]:
    """Return the module names of ``backends/arm`` Python files, as executorch imports them."""
    names = []
    for path in sorted(p for p in files if p.endswith(".py")):
        dotted = "executorch." + path.removesuffix(".py").replace("/", ".")
        names.append(dotted.removesuffix(".__init__"))
    return names


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
    """Import every module in ``python`` (a wrapper), as verify-install does: isolated from
    the caller's PYTHONPATH and user site, so only what the wrapper sets is seen; return the
    failures, or the interpreter's own as one failure."""
    try:
        found = import_check(python, modules, _interpreter_failed, timeout=IMPORT_TIMEOUT_S)
    except OverlayError as exc:
        return [ImportFailure("(interpreter)", f"{exc.message}: {exc.found}")]
    return [ImportFailure(name, got.error, got.missing) for name, got in found.items() if got.error]


def _interpreter_failed(found: str) -> OverlayError:
    """A timeout names the command first; a failing exit, its error last: keep both ends."""
    kept = found if len(found) <= 500 else f"{found[:200]} ... {found[-300:]}"
    return OverlayError("the import check did not answer", found=kept)


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
