"""Upstream's own Arm tests on a line's stock and patched builds: the fixes break none of them.

The tests are the ones the executorch wheel ships (``backends/arm/test``): all of
``passes/``, and of ``ops/``, ``quantizer/`` and ``misc/`` the files for the operators the
line's fixes touch (:func:`selection`). They run in one session on the stock release env
and on the env of the line's patched wheel, the patched test files laid out for both
(:func:`overlay.upstream.upstream_tests.run_tests_both_ways`), with upstream's
``pytest.ini`` (from the upstream tree at the release, else written). A test that passes
on stock and does not pass patched fails the run (:func:`overlay.upstream.verdicts.suite_changes`).

Example: the 1.5.1 line, whose fixes change ``rewrite_conv_pass.py`` and
``insert_grid_sampler_grid_dequant_pass.py`` and list ``ops/test_grid_sampler.py``.
Becomes: ``passes/*``, ``ops/test_conv1d.py`` .. ``ops/test_conv_combos.py``,
``ops/test_grid_sampler.py``, ``quantizer/test_conv_relu_fusing.py``,
``misc/test_conv_relu_residual_add.py`` and the other listed files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath

from overlay import fixes
from overlay.dist.wheels import build_patched_wheel, fetch_wheel
from overlay.envs import release_venvs
from overlay.fixes import Fix
from overlay.lines import Line
from overlay.text.applier import apply_patch, encode
from overlay.text.series import Patch, load_series
from overlay.upstream import releases, upstream_tests
from overlay.upstream.results import SuiteRun
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import suite_changes

Progress = Callable[[str], None]
WHOLE = ("passes",)  # run every file
BY_OPERATOR = ("ops", "quantizer", "misc")  # run the files of the touched operators
SUITE_TIMEOUT_S = 6 * 3600.0
_SIZE = re.compile(r"\d+d$")  # conv2d, max_pool1d: the operator without its rank


def _words(path: str) -> set[str]:
    """Return the words of a file name: ``rewrite_conv_pass.py`` gives rewrite, conv, pass."""
    return {_SIZE.sub("", w) or w for w in PurePosixPath(path).stem.split("_")}


def selection(chosen: Sequence[Fix], tests: Collection[str]) -> list[str]:
    """Return the test files to run: every ``passes/`` file, and the touched operators'.

    An ``ops/``, ``quantizer/`` or ``misc/`` file is taken when a fix lists it in its
    ``affected_tests``, or when the first word of its name (``test_`` and a rank such as
    ``2d`` dropped) is a word of a file a fix changes (``pass`` aside: every pass has it).
    """
    words = {w for fix in chosen for p in fix.repo_paths if "/test/" not in p for w in _words(p)}
    words.discard("pass")
    listed = {t for fix in chosen for t in fix.upstream.affected_tests}
    found = []
    for path in sorted(tests):
        folder, _, name = path.removeprefix(releases.TESTS_PREFIX).partition("/")
        if "/" in name or not (name.startswith("test_") and name.endswith(".py")):
            continue
        first = _SIZE.sub("", name.removeprefix("test_").split("_")[0].removesuffix(".py"))
        if folder in WHOLE or (folder in BY_OPERATOR and (path in listed or first in words)):
            found.append(path)
    return found


def run_suite(line: Line, *, out_dir: Path, progress: Progress = lambda _: None) -> SuiteRun:
    """Run the selection on the line's stock and patched envs; compare test by test."""
    series = load_series(line.directory)
    pins, shared = series.pins, for_series(line.directory)
    release = releases.load_release(pins, shared, str(pins.executorch))
    pin = shared.matrix_pin(str(pins.executorch))
    wheel = build_patched_wheel(series, fetch_wheel(pin), pin, out_dir / "dist").path
    envs = [
        release_venvs.ensure(
            release_venvs.release_spec(pins, kind, executorch=whl, extra=shared.test_requirements),
            progress=progress,
        )
        for kind, whl in (("stock", None), ("patched", wheel))
    ]
    after = series_result(series.patches, release.texts)
    chosen = selection(fixes.carried_by(line), release.tests)
    progress(f"{line.name}: {len(chosen)} test files of backends/arm/test, stock then patched")
    run = upstream_tests.run_tests_both_ways(
        str(envs[0].python), str(envs[1].python),
        release_tests=release.tests, patched_files=after,
        pytest_ini=upstream_tests.pytest_ini(None),
        selection=chosen, log_dir=out_dir / line.name, timeout=SUITE_TIMEOUT_S,
        extra_env=upstream_tests.vulkan_env(envs[0].folder, out_dir / "vulkan"),
    )  # fmt: skip
    broken, fixed = suite_changes(run.stock, run.patched)
    return SuiteRun(line.name, str(pins.executorch), run, broken, fixed)


def series_result(patches: Sequence[Patch], texts: Mapping[str, str]) -> dict[str, bytes]:
    """Return the files the series changes, after it (in order, offsets allowed)."""
    current = dict(texts)
    for patch in patches:
        current = apply_patch(patch, current, allow_offset=True)
    return {p: encode(t) for p, t in current.items() if t != texts.get(p)}
