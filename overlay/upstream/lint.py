"""Upstream's linters and its pre-push hook's other checks, on the files a commit touches."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from overlay._git import git
from overlay.envs import release_venvs
from overlay.errors import UpstreamError
from overlay.lines.pins import Pins
from overlay.upstream import host
from overlay.upstream.commit_rules import HOOK
from overlay.upstream.results import LintReport
from overlay.upstream.upstream_pins import UpstreamPins
from overlay.upstream.upstream_tests import tool_env, tool_shell_line
from overlay.upstream.verdicts import hook_findings

Progress = Callable[[str], None]
TORCH = ("torch", "torchao")  # what MYPY needs from the line's runtime pins
# Not needed to lint backends/arm, and not always whole in a mirror (large files); the
# hook's docgen reads the Arm notebooks and regenerates the backends' docs.
SPARSE = ("/*", "!/docs/", "!/examples/", "/docs/source/backends/", "/examples/arm/*.ipynb")
HOOK_CHECKS = ("run_docgen_check", "run_vgf_op_support_checks", "run_public_api_validator")
HOOK_TIMEOUT_S = 1800.0
# One check of the hook, run as the hook runs it: its own definitions (all it says before it
# reads the commits to check), then the function; docgen only when a touched file is one of
# its inputs. What the check regenerates is put back, so the branch stays as committed.
DRIVER = r"""
check="$1"; files=("${@:2}"); set --
grep -q '^REMOTE=' "$HOOK" || { echo "$HOOK no longer reads its commits at REMOTE="; exit 3; }
eval "$(sed '/^REMOTE=/,$d' "$HOOK")"
declare -F "$check" >/dev/null || { echo "$HOOK defines no $check"; exit 3; }
if [[ $check == run_docgen_check ]]; then
    triggered=0
    for file in "${files[@]}"; do is_docgen_trigger_file "$file" && triggered=1; done
    [[ $triggered == 1 ]] || exit 4
fi
"$check"
status=1; [[ -z $FAILED ]] && status=0
for made in "${DOCGEN_OUTPUTS[@]}" "$VGF_OP_SUPPORT_OUTPUT"; do
    [[ -n $made ]] && git checkout -q HEAD -- "$made" 2>/dev/null
done
exit $status
"""
NOT_DEFINED, NOT_TRIGGERED = 3, 4  # the driver's own exit codes
SKIPPED = "not triggered (no docgen input file changed)"  # the hook skips docgen too


def lint_env(shared: UpstreamPins, pins: Pins, progress: Progress) -> release_venvs.Env:
    """Return the tool venv: lintrunner, upstream's linter pins and what MYPY imports."""
    if not shared.lint_requirements:
        raise UpstreamError(
            "no linter pins",
            expected=f"lint_requirements in {shared.source}",
            found="none",
            hint="copy them from upstream's requirements-lintrunner.txt",
        )
    torch = tuple(r for r in pins.runtime_requirements() if r.split("==")[0] in TORCH)
    requirements = (*shared.lint_requirements, *shared.mypy_requirements, *torch)
    contents = release_venvs.env_contents("upstream-lint", shared.python, requirements)
    return release_venvs.ensure(contents, progress=progress)


def checkout(source: Path, commit: str, dest: Path, branch: str) -> Path:
    """Check ``commit`` of ``source`` out in ``dest`` on a new ``branch`` (docs, examples aside);
    an earlier run's checkout there (of another main, another fix) is replaced."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", "--shared", "--no-checkout", str(source), dest.name)
    git(dest, "sparse-checkout", "set", "--no-cone", *SPARSE)
    git(dest, "checkout", "-q", "-b", branch, commit)
    return dest


def run_lint(repo: Path, paths: Sequence[str], env: release_venvs.Env) -> LintReport:
    """Run every linter of ``repo``'s ``.lintrunner.toml`` on the whole of ``paths``."""
    started = time.perf_counter()
    mypy = {"MYPYPATH": "./src/"}  # as the pre-push hook runs it
    environment = tool_env(env.python.parent, **mypy)
    command = [str(env.python.parent / "lintrunner"), "--output", "oneline", *paths]
    proc = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, env=environment, check=False
    )
    broken = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode not in (0, 1) or broken:
        raise UpstreamError(
            "lintrunner failed to run",
            expected="findings or a clean run",
            found=(proc.stderr or proc.stdout).strip()[-1500:],
            hint=f"run it by hand: cd {shlex.quote(str(repo))} && "
            + tool_shell_line(env.python.parent, command, **mypy),
        )
    found = [line.strip() for line in proc.stdout.splitlines() if line.startswith(tuple(paths))]
    ran = f"lintrunner {', '.join(paths)} (every linter of .lintrunner.toml, whole files)"
    return LintReport(ran, tuple(found), time.perf_counter() - started)


@dataclass(frozen=True)
class HookRun:
    """One check of the pre-push hook in one checkout: its exit status and what it printed."""

    status: int
    output: tuple[str, ...]
    seconds: float


def hook_python(dest: Path, python: Path, repo: Path) -> Path:
    """Return a folder whose ``python`` runs ``python`` with ``repo``'s ``backends/arm``
    first (the hook calls ``python``: the folder goes first on its ``PATH``)."""
    host.wrapper(dest, python, repo / "backends")
    return dest


def run_hook_check(repo: Path, check: str, touched: Sequence[str], bindir: Path) -> HookRun:
    """Run one check function of ``repo``'s pre-push hook (see :data:`DRIVER`)."""
    started = time.perf_counter()
    # PYTHONDONTWRITEBYTECODE: nothing written into the branch
    environment = tool_env(bindir, PYTHONDONTWRITEBYTECODE="1", HOOK=HOOK)
    command = ["bash", "-c", DRIVER, "pre-push", check, *touched]
    try:
        proc = subprocess.run(
            command, cwd=repo, env=environment, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=HOOK_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return HookRun(-1, (f"did not finish in {HOOK_TIMEOUT_S:.0f} s",), HOOK_TIMEOUT_S)
    lines = tuple(proc.stdout.splitlines())
    return HookRun(proc.returncode, lines, time.perf_counter() - started)


def hook_checks(
    repo: Path, touched: Sequence[str], bindir: Path, main: Callable[[str], HookRun]
) -> tuple[LintReport, ...]:
    """Run each of :data:`HOOK_CHECKS` on the commit in ``repo``, judged against ``main``
    (the same check on main, run once); docgen is skipped as the hook skips it."""
    reports = []
    for check in HOOK_CHECKS:
        run = run_hook_check(repo, check, touched, bindir)
        ran = f"{HOOK}: {check}"
        if run.status == NOT_TRIGGERED:
            reports.append(LintReport(ran, (), run.seconds, SKIPPED))
            continue
        if run.status == NOT_DEFINED:
            reports.append(LintReport(ran, tuple(run.output[-1:]), run.seconds, "not run"))
            continue
        before = main(check)
        findings, note = hook_findings(run.status, run.output, before.status, before.output)
        reports.append(LintReport(ran, findings, run.seconds, note))
    return tuple(reports)


def main_runs(
    source: Path, commit: str, dest: Path, python: Path, touched: Sequence[str]
) -> Callable[[str], HookRun]:
    """Return a runner of each hook check on ``commit`` itself (checked out on first use,
    each check run once); ``touched``: every file the commits to judge touch."""
    runs: dict[str, HookRun] = {}
    repo = dest / "repo"

    def run(check: str) -> HookRun:
        if check not in runs:
            if not runs:
                checkout(source, commit, repo, "unpatched")
            bindir = hook_python(dest / "bin", python, repo)
            runs[check] = run_hook_check(repo, check, touched, bindir)
        return runs[check]

    return run
