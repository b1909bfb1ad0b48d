"""Upstream's own Arm tests on a line's stock and patched builds: the fixes break none of them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from overlay import codec, fixes
from overlay._files import write_text_atomic
from overlay._hashing import sha256_bytes, sha256_file
from overlay.codec import CodecError
from overlay.distribution.wheels import build_patched_wheel, fetch_wheel
from overlay.envs import release_venvs
from overlay.fixes import Fix
from overlay.lines import Line
from overlay.text.applier import apply_patch, encode
from overlay.text.series import load_series
from overlay.upstream import releases, upstream_tests
from overlay.upstream.results import Counts, SuiteRun, TestRun
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import suite_changes

Progress = Callable[[str], None]
WHOLE = ("passes",)  # run every file
BY_OPERATOR = ("ops", "quantizer", "misc")  # run the files of the touched operators
PART_FILES = 8  # test files per part: a part's result is kept, an interrupted run resumes
_SIZE = re.compile(r"\d+d$")  # conv2d, max_pool1d: the operator without its rank


def selection(chosen: Sequence[Fix], tests: Collection[str]) -> list[str]:
    """Return the test files to run: every ``passes/`` file, and the touched operators'
    (docs/upstream.md, "Upstream's own suite")."""
    words = {  # of the files it changes: rewrite_conv_pass.py gives rewrite, conv (pass aside)
        _SIZE.sub("", w) or w
        for fix in chosen
        for p in fix.repo_paths
        if "/test/" not in p
        for w in PurePosixPath(p).stem.split("_")
    }
    words.discard("pass")
    listed = {t for fix in chosen for t in (*fix.repo_paths, *fix.upstream.affected_tests)}
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
    texts = release.texts
    for patch in series.patches:  # the files the series changes, after it
        texts = apply_patch(patch, texts, allow_offset=True)
    after = {p: encode(t) for p, t in texts.items() if t != release.texts.get(p)}
    chosen = selection(fixes.carried_by(line), release.tests)
    ini = upstream_tests.pytest_ini(None)
    log_dir = out_dir / line.name
    extra_env = upstream_tests.vulkan_env(envs[0].folder, out_dir / "vulkan")

    def key(part: Sequence[str]) -> str:
        files = {**{p: release.files[p] for p in part}, **after}
        return part_key([e.folder.name for e in envs], files, ini, extra_env)

    def run_part(number: int, part: Sequence[str]) -> TestRun:
        return upstream_tests.run_tests_both_ways(
            str(envs[0].python), str(envs[1].python),
            release_tests=release.tests, patched_files=after, pytest_ini=ini,
            selection=part, log_dir=log_dir / f"part-{number}",
            extra_env=extra_env,
        )  # fmt: skip

    progress(f"{line.name}: {len(chosen)} test files of backends/arm/test, stock then patched")
    run = run_in_parts(chosen, key, run_part, log_dir / "runs", progress)
    broken, fixed = suite_changes(run.stock, run.patched)
    return SuiteRun(line.name, str(pins.executorch), run, broken, fixed)


def run_in_parts(
    chosen: Sequence[str],
    key: Callable[[Sequence[str]], str],
    run_part: Callable[[int, Sequence[str]], TestRun],
    kept: Path,
    progress: Progress,
) -> TestRun:
    """Run ``chosen`` PART_FILES files at a time; keep each part's run where pytest
    ran, reuse a kept one."""
    parts = [chosen[i : i + PART_FILES] for i in range(0, len(chosen), PART_FILES)]
    runs = []
    for number, part in enumerate(parts, start=1):
        path = kept / f"{key(part)[:16]}.json"
        with contextlib.suppress(OSError, CodecError):  # none, or unreadable: run it again
            runs.append(codec.loads(TestRun, path.read_text(encoding="utf-8"), where=str(path)))
            progress(f"part {number}/{len(parts)}: done earlier ({path})")
            continue
        progress(f"part {number}/{len(parts)}: {', '.join(part)}")
        run = run_part(number, part)
        if not run.stock.problem and not run.patched.problem:  # pytest ran: keep it
            kept.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, codec.dumps(run))
        where = f"part {number} ({', '.join(part)}): "
        stock, patched = (
            replace(c, problem=where + c.problem) if c.problem else c
            for c in (run.stock, run.patched)
        )
        runs.append(replace(run, stock=stock, patched=patched))
    selection = tuple(dict.fromkeys(s for r in runs for s in r.selection))
    command = upstream_tests.pytest_command([upstream_tests.WORKERS, *selection])
    stock, patched = (
        Counts(
            tuple(t for c in side for t in c.tests), "; ".join(c.problem for c in side if c.problem)
        )
        for side in ([r.stock for r in runs], [r.patched for r in runs])
    )  # every test of each side, each part's problem
    return TestRun(command, selection, stock, patched, sum(r.seconds for r in runs))


def part_key(
    envs: Sequence[str], files: Mapping[str, bytes], ini: bytes, extra_env: Mapping[str, str]
) -> str:
    """Return the key of one part's result: the envs (named by their contents), the test
    files' bytes, the ini, the extra environment (the Vulkan emulation layer or none) and
    the code that runs pytest and reads its report."""
    runner = sha256_file(Path(upstream_tests.__file__))
    parts = [*envs, upstream_tests.WORKERS, runner, sha256_bytes(ini)]
    parts += [f"{name}={value}" for name, value in sorted(extra_env.items())]
    parts += [f"{path} {sha256_bytes(data)}" for path, data in sorted(files.items())]
    return sha256_bytes("\n".join(parts).encode())
