"""Prepare upstream pull requests: each fix of a line, against the newest release and main.

What is sent is the newest line's patch of each fix (for the newest line, its own patches;
for an older line, the newest line's patch of the same number: a line's patches are the
ports of the older lines' ones). Each goes alone, as its own pull request, against two
bases: upstream ``main`` (``--upstream``: a clone, a mirror or the GitHub URL, through the
canary's scratch repository) and the newest release's sources (its wheel). On each base:

- ``git am`` of the mbox (made against main where the patch applies there);
- the fix's trigger cases (:mod:`overlay.upstream.behaviour`) on stock and with the patch,
  and its bystanders (models outside its triggers): their TOSA operators must not change;
- the tests it adds, its test files and its ``affected_tests``, stock vs patched, with
  upstream's ``pytest.ini``: the new tests must fail before and pass after
  (:func:`overlay.upstream.verdicts.judge_tests`), no other test may go from passing to
  failing.

The patched side is the base's Arm backend with the one patch, in front of a stock env of
the release (the canary's shadow, :mod:`overlay.upstream.canary.host`). On main, upstream's
gate: every linter of its ``.lintrunner.toml`` on the whole touched files, MYPY as the
pre-push hook runs it, the hook's docgen, VGF op-support and public API manifest checks
(:mod:`overlay.upstream.lint`), and the hook's commit rules with its own verb list
(:mod:`overlay.upstream.commit_rules`). What keeps a fix back is decided in
:func:`overlay.upstream.verdicts.submission_problems`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import fixes, lines
from overlay.envs import release_venvs
from overlay.errors import OverlayError
from overlay.text.applier import HunkMismatchError, apply_patch, decode, encode
from overlay.text.series import Patch, load_series
from overlay.upstream import behaviour, commit_rules, export, lint, pr_text, upstream_tests
from overlay.upstream.canary import host
from overlay.upstream.canary.gitrepo import MAIN_REF, Scratch, open_upstream
from overlay.upstream.releases import load_release, release_metadata
from overlay.upstream.results import (
    Counts,
    LintReport,
    OnBase,
    OpCounts,
    Sending,
    Submission,
    TestRun,
    parse_applied_upstream,
)
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import submission_problems, suite_changes

Progress = Callable[[str], None]
GITHUB = "https://github.com/pytorch/executorch.git"
AUTHORS = 5  # recent authors of the touched files named in the cc line


@dataclass(frozen=True)
class Request:
    """What to prepare."""

    patches_dir: Path  # the line whose fixes to send
    out_dir: Path
    signer: commit_rules.Identity
    upstream: str = GITHUB  # a pytorch/executorch clone, mirror or URL
    fixes: frozenset[int] | None = None  # only these fix numbers (default: all)
    lint: bool = True
    scratch_root: Path | None = None  # the scratch repositories (default: the cache)


@dataclass(frozen=True)
class Base:
    """A base to send against: its Arm backend (tests included) hosted on a stock env."""

    name: str  # "main" or the release
    commit: str
    files: dict[str, bytes]  # backends/arm/**
    env: release_venvs.Env
    stock: Path  # the interpreter of the base as it is

    @property
    def tests(self) -> dict[str, bytes]:
        """Return the base's ``backends/arm/test`` files."""
        return {p: d for p, d in self.files.items() if p.startswith("backends/arm/test/")}


@dataclass(frozen=True)
class Prepared:
    """The report, the exports (mbox, PR body, issue, checklist) and each fix's branch."""

    report: Sending
    exports: list[export.Export]
    branches: dict[str, tuple[Path, str]]  # patch -> (repository, branch) on main


def chosen(
    line: Path, newest: Path, only: frozenset[int] | None = None
) -> tuple[list[Patch], dict[str, str]]:
    """Return the patches to send (the newest line's of each fix) and why others are not.

    Example: the 1.2.0 line (fixes 1-6) when the newest line, 1.5.1, carries 1, 3 and 7.
    Becomes: 1.5.1's 0001 and 0003; 0002, 0004-0006: "the 1.5.1 line no longer carries it".
    """
    series, target = load_series(line), load_series(newest)
    own = {p.number: p for p in target.patches}
    send, skipped = [], {}
    for patch in series.patches:
        if only is not None and patch.number not in only:
            continue
        port = own.get(patch.number)
        applied = parse_applied_upstream((port or patch).header.get("Applied-Upstream", ""))
        if port is None:
            skipped[patch.name] = (
                f"the {target.pins.executorch} line no longer carries it (docs/fixes.md says why)"
            )
        elif applied.text:
            skipped[patch.name] = f"upstream has it: Applied-Upstream: {applied.text}"
        else:
            send.append(port)
    return send, skipped


def prepare(request: Request, progress: Progress = lambda _: None) -> Prepared:
    """Export every fix of the line, measure it on both bases, run upstream's gate."""
    started = time.perf_counter()
    commit_rules.check_signer(request.signer)  # before minutes of work, not at the mbox
    every = lines.all_lines(request.patches_dir.parent)
    newest = every[-1]
    send, skipped = chosen(request.patches_dir, newest.directory, request.fixes)
    line = str(load_series(request.patches_dir).pins.executorch)
    torch = newest.pins.runtime.get("torch", "")
    if not send:
        return Prepared(Sending(line, newest.name, torch, "", (), skipped, 0.0), [], {})
    shared = for_series(newest.directory)
    release = load_release(newest.pins, shared, newest.name)
    _, release_commit = release_metadata(release.wheel)
    progress(f"fetching main and the release tags of {request.upstream}")
    scratch = open_upstream(request.upstream, request.scratch_root)
    main = scratch.rev(MAIN_REF)
    hook = scratch.files(main, [commit_rules.HOOK]).get(commit_rules.HOOK, b"")
    verbs = commit_rules.hook_verbs(decode(hook))
    exports = [
        export_against(patch, scratch, main, (release.files, release_commit or ""), request.signer)
        for patch in send
    ]
    out = request.out_dir
    stock = release_venvs.ensure(
        release_venvs.release_spec(newest.pins, "stock", extra=shared.test_requirements),
        progress=progress,
    )
    _, main_env, _ = host.host_env(scratch, main, every, log_dir=out / "logs", progress=progress)
    main_files = {**host.arm_sources(scratch, main), **host.test_sources(scratch, main)}
    main_stock = host.wrapper(
        out / "main", main_env.python, host.write_shadow(out / "main", main_files)
    )
    bases = (
        Base("main", main, main_files, main_env, main_stock),
        Base(newest.name, release_commit or "", release.files, stock, stock.python),
    )
    found = {b.name: measure(b, send, newest.name, out / b.name, progress) for b in bases}
    branches: dict[str, tuple[Path, str]] = {}
    submissions, done = [], []
    lint_env = lint.lint_env(shared, newest.pins, progress) if request.lint else None
    touched = sorted({path for item in exports for path in item.after})
    on_main = lint.main_runs(scratch.path, main, out / "hook" / "main", main_env.python, touched)
    for patch, item in zip(send, exports, strict=True):
        repo = out / "branches" / item.stem
        branch = export.branch_name(item)
        lint.checkout(scratch.path, main, _fresh(repo), branch)
        am_main = export.apply_mbox(repo, item)
        sources = {p: release.files[p] for p in patch.targets if p in release.files}
        on_release = export.apply_mbox(
            export.release_repo(out / "release" / item.stem, sources, release_commit or ""), item
        )
        report: LintReport | None = None
        checks: tuple[LintReport, ...] = ()
        if lint_env is not None and not am_main:
            report, checks = _upstream_checks(
                repo, item, (lint_env, main_env), on_main, hook=out / "hook", progress=progress
            )
        on_bases = (found["main"][patch.name], found[newest.name][patch.name])
        bases_found = tuple(
            replace(b, applies=b.applies or am)
            for b, am in zip(on_bases, (am_main, on_release), strict=True)
        )
        rules = commit_rules.check_message(item.message, verbs)
        sub = Submission(
            patch.name, newest.name, item.subject, item.base_commit, bases_found, report,
            tuple(rules), recent_authors(scratch, main, sorted(item.after), request.signer),
            submission_problems(bases_found, report, rules, lint_asked=request.lint, checks=checks),
            checks,
        )  # fmt: skip
        submissions.append(sub)
        branches[patch.name] = (repo, branch)
        done.append(
            pr_text.with_texts(
                item, patch, sub, release=newest.name, torch=torch, branch=(str(repo), branch)
            )
        )
    sending = Sending(
        line, newest.name, torch, main, tuple(submissions), skipped,
        round(time.perf_counter() - started, 1),
    )  # fmt: skip
    return Prepared(sending, done, branches)


def _upstream_checks(
    repo: Path,
    item: export.Export,
    envs: tuple[release_venvs.Env, release_venvs.Env],
    on_main: Callable[[str], lint.HookRun],
    *,
    hook: Path,
    progress: Progress,
) -> tuple[LintReport, tuple[LintReport, ...]]:
    """Run upstream's linters and the pre-push hook's other checks on the commit in ``repo``.

    ``envs``: the linters' env and the env that hosts main (the hook's scripts import it);
    ``hook``: where the hook's ``python`` for each commit is written.
    """
    touched = sorted(item.after)
    progress(f"{item.name}: upstream's linters on {', '.join(touched)}")
    report = lint.run_lint(repo, touched, envs[0])
    progress(f"{item.name}: the pre-push hook's docgen, VGF op support, public API manifests")
    bindir = lint.hook_python(hook / item.stem, envs[1].python, repo)
    return report, lint.hook_checks(repo, touched, bindir, on_main)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def export_against(
    patch: Patch,
    scratch: Scratch,
    main: str,
    release: tuple[Mapping[str, bytes], str],
    signer: commit_rules.Identity,
) -> export.Export:
    """Export one patch against main where it applies there (offsets allowed), else against
    the release (``release``: its files and its commit)."""
    on_main = scratch.files(main, patch.targets)
    try:
        apply_patch(patch, {p: decode(d) for p, d in on_main.items()}, allow_offset=True)
    except (HunkMismatchError, KeyError):
        return export.export_patch(patch, release[0], signer=signer, base_commit=release[1])
    return export.export_patch(patch, on_main, signer=signer, base_commit=main)


def measure(
    base: Base, patches: Sequence[Patch], release: str, out_dir: Path, progress: Progress
) -> dict[str, OnBase]:
    """Measure each patch alone on ``base``: trigger cases and tests, stock vs with it."""
    texts = {p: decode(d) for p, d in base.files.items()}
    after: dict[str, dict[str, bytes]] = {}
    found: dict[str, OnBase] = {}
    for patch in patches:
        try:
            result = apply_patch(patch, texts, allow_offset=True)
        except (HunkMismatchError, KeyError) as exc:
            why = f"does not apply to {base.name}: {getattr(exc, 'message', exc)}"
            found[patch.name] = OnBase(base.name, base.commit, why, None, None)
            continue
        after[patch.name] = {p: encode(t) for p, t in result.items()}
    pythons = {
        name: host.wrapper(
            out_dir / name,
            base.env.python,
            host.write_shadow(out_dir / name, {**base.files, **files}),
        )
        for name, files in after.items()
    }
    wanted = [p for p in patches if p.name in after]
    cases = [c for p in wanted for c in _triggers(p.name, release)]
    others = {p.name: behaviour.bystanders(fixes.by_patch(p.name)) for p in wanted}
    cases += [c for names in others.values() for c in names]
    progress(f"{base.name}: trigger cases and bystanders on stock and with each patch")
    try:
        sides = behaviour.run_envs(
            {"stock": str(base.stock), **{n: str(p) for n, p in pythons.items()}},
            list(dict.fromkeys(cases)), out_dir=out_dir / "logs", progress=progress,
        )  # fmt: skip
    except OverlayError as exc:
        sides = {}
        progress(f"{base.name}: the trigger cases did not run: {exc.message}")
    extra_env = upstream_tests.vulkan_env(base.env.folder, out_dir / "vulkan")
    for patch in wanted:
        progress(f"{base.name}: {patch.name}: its tests on stock and with it")
        run = upstream_tests.run_tests_both_ways(
            str(base.stock), str(pythons[patch.name]),
            release_tests=base.tests, patched_files=after[patch.name],
            pytest_ini=upstream_tests.pytest_ini(None), selection=_selection(patch, base),
            log_dir=out_dir / "logs" / "pytest" / patch.name, extra_env=extra_env,
        )  # fmt: skip
        added = _only(run, upstream_tests.new_tests(patch.diff))
        measured = None
        counts: tuple[OpCounts, ...] = ()
        if sides:
            pair = behaviour.assemble(base.name, sides["stock"], sides[patch.name])
            tests = {patch.name: added} if added.selection else {}
            measured = behaviour.measure([patch.name], pair, [release], target=release, tests=tests)
            counts = behaviour.op_counts(others[patch.name], sides["stock"], sides[patch.name])
        found[patch.name] = OnBase(
            base.name, base.commit, "", (measured or {}).get(patch.name), run,
            suite_changes(run.stock, run.patched)[0], counts,
        )  # fmt: skip
    return found


def _triggers(name: str, release: str) -> list[str]:
    fix = fixes.by_patch(name)
    if fix is None:
        return []
    bug, other = behaviour.triggers(fix, [release], target=release)
    return [*bug, *other]


def _selection(patch: Patch, base: Base) -> list[str]:
    """Return the test files to run: the patch's test files and the fix's affected_tests."""
    fix = fixes.by_patch(patch.name)
    listed = fix.upstream.affected_tests if fix is not None else ()
    own = [p for p in patch.targets if p.startswith("backends/arm/test/") and p.endswith(".py")]
    return sorted({*own, *(p for p in listed if p in base.files)})


def _only(run: TestRun, nodes: Sequence[str]) -> TestRun:
    """Return ``run`` cut to the tests ``nodes`` name (a parametrized test by its name)."""

    def keep(counts: Counts) -> Counts:
        tests = tuple(t for t in counts.tests if t.node.split("[")[0] in nodes)
        return Counts(tests, counts.problem)

    command = upstream_tests.pytest_command(nodes)
    return TestRun(command, tuple(nodes), keep(run.stock), keep(run.patched), run.seconds)


def recent_authors(
    scratch: Scratch, commit: str, paths: Sequence[str], signer: commit_rules.Identity
) -> tuple[str, ...]:
    """Return the recent authors of ``paths`` (GitHub handles where their e-mail says it).

    Example: ``87121123+oscarandersson8218@users.noreply.github.com`` gives
    ``@oscarandersson8218``; ``Zingo Andersen <zingo.andersen@arm.com>`` stays a name.
    """
    text = scratch.run("log", "-40", "--no-merges", "--format=%an%x1f%ae", commit, "--", *paths)
    found: list[str] = []
    for line in text.splitlines():
        name, _, address = line.partition("\x1f")
        if "bot" in name.lower() or address == signer.email:
            continue
        local, _, domain = address.partition("@")
        who = "@" + local.split("+")[-1] if domain == "users.noreply.github.com" else name
        if who not in found:
            found.append(who)
    return tuple(found[:AUTHORS])
