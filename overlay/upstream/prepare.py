"""Prepare upstream pull requests: each fix of a line, on upstream main and the newest release."""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from overlay import fixes, lines
from overlay.envs import release_venvs
from overlay.equivalence import corpus
from overlay.errors import OverlayError
from overlay.text.applier import decode, encode
from overlay.text.series import Patch, load_series
from overlay.upstream import (
    behaviour,
    commit_rules,
    export,
    host,
    lint,
    pr_text,
    replay,
    upstream_tests,
)
from overlay.upstream.gitrepo import (
    GITHUB,
    MAIN_REF,
    Scratch,
    open_upstream,
    refresh_command,
)
from overlay.upstream.releases import TESTS_PREFIX, load_release, release_metadata
from overlay.upstream.results import (
    CARRIED,
    Action,
    Applied,
    Counts,
    OnBase,
    OpCounts,
    PatchVerdict,
    Review,
    Sending,
    Status,
    TestRun,
    parse_applied_upstream,
)
from overlay.upstream.upstream_pins import for_series
from overlay.upstream.verdicts import stale_main, submission_problems, suite_changes

Progress = Callable[[str], None]
_BUCK_ENTRY = re.compile(r'^(?P<indent>\s*)"(?P<path>[^"]+)",\s*$')


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
    date: str = ""  # the commit's date (ISO 8601)


@dataclass(frozen=True)
class Prepared:
    """The report, the exports and each fix's branch."""

    report: Sending
    exports: list[export.Export]
    branches: dict[str, tuple[Path, str]]  # patch -> (repository, branch) on main


def chosen(
    line: Path, newest: Path, only: frozenset[int] | None = None
) -> tuple[list[Patch], dict[str, str]]:
    """Return the patches to send (the newest line's of each fix) and why others are not."""
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
    release_commit = release_metadata(release.wheel)[1] or ""
    progress(f"fetching main and the release tags of {request.upstream}")
    scratch = open_upstream(request.upstream, request.scratch_root)
    main = scratch.rev(MAIN_REF)
    main_date = scratch.date(main)
    released = release_date(scratch, release_commit, shared.released.get(newest.name, ""))
    stale = stale_main(main, main_date, newest.name, released, refresh_command(request.upstream))
    hook = scratch.files(main, [commit_rules.HOOK]).get(commit_rules.HOOK, b"")
    verbs = commit_rules.hook_verbs(decode(hook))
    subjects = {p.number: export.upstream_subject(p) for p in load_series(newest.directory).patches}
    out, signer = request.out_dir, request.signer
    exports = [
        export_against(p, scratch, main, (release.files, release_commit), signer, series=subjects)
        for p in send
    ]
    stock = release_venvs.ensure(
        release_venvs.release_spec(newest.pins, "stock", extra=shared.test_requirements),
        progress=progress,
    )
    _, main_env, _ = host.host_env(scratch, main, every, log_dir=out / "logs", progress=progress)
    main_files = {p: d for part in host.arm_sources(scratch, main) for p, d in part.items()}
    bases = (
        Base("main", main, main_files, main_env,
             host.write_shadow(out / "main", main_env.python, main_files), main_date),
        Base(newest.name, release_commit, release.files, stock, stock.python, released),
    )  # fmt: skip
    found = [
        measure(b, send, newest.name, out / b.name, progress, origin=release.files) for b in bases
    ]
    lint_env = lint.lint_env(shared, newest.pins, progress) if request.lint else None
    on_main = lint.main_runs(
        scratch.path, main, out / "hook" / "main", main_env.python,
        sorted({path for item in exports for path in item.after}),
    )  # fmt: skip
    branches: dict[str, tuple[Path, str]] = {}
    judged: list[tuple[PatchVerdict, export.Export]] = []  # each fix's verdict, its texts
    for patch, item in zip(send, exports, strict=True):
        repo, branch = out / "branches" / item.stem, export.branch_name(item)
        on_release = export.export_patch(
            patch, release.files, signer=signer, base_commit=release_commit, series=subjects
        )
        git_am = _git_am(scratch, main, (item, on_release), repo)
        rules = tuple(commit_rules.check_message(item.message, verbs))
        review = Review(item.base_commit, None, rules)
        if lint_env is not None and not git_am[0]:
            touched = sorted(item.after)
            progress(f"{item.name}: upstream's linters on {', '.join(touched)}")
            review = replace(review, lint=lint.run_lint(repo, touched, lint_env))
            progress(
                f"{item.name}: the pre-push hook's docgen, VGF op support, public API manifests"
            )
            hook_python = lint.hook_python(out / "hook" / item.stem, main_env.python, repo)
            review = replace(review, checks=lint.hook_checks(repo, touched, hook_python, on_main))
        on_bases = tuple(
            replace(on, own=Applied(Status.CONFLICT, am)) if am and on.lands else on
            for on, am in zip((f[patch.name] for f in found), git_am, strict=True)
        )
        judged.append(judge(
            item, patch,
            PatchVerdict(patch.name, item.subject, on_bases, Action.SEND, "",
                         source=newest.name, review=review),
            torch=torch, stale=stale, lint_asked=request.lint,
            branch=("", "") if git_am[0] else (str(repo.relative_to(out)), branch),
            named_by=export.named_by(send, patch.number),
            tree=main_files if item.base_commit == main else release.files,
        ))  # fmt: skip
        if not git_am[0]:  # a failed `git am` leaves the change uncommitted: no branch to push
            branches[patch.name] = (repo, branch)
    sending = Sending(
        line, newest.name, torch, main, tuple(s for s, _ in judged), skipped,
        round(time.perf_counter() - started, 1), main_date, released, stale,
    )  # fmt: skip
    return Prepared(sending, [texts for _, texts in judged], branches)


def _git_am(
    scratch: Scratch, main: str, items: tuple[export.Export, export.Export], repo: Path
) -> tuple[str, str]:
    """Apply the PR's mbox with ``git am`` on a checkout of main (its branch, in ``repo``),
    and the release form (the line's own diff: main's context may differ) on a repository
    of the release's files; return why not ("": it applied)."""
    item, on_release = items
    lint.checkout(scratch.path, main, repo, export.branch_name(item))
    where = repo.parent.parent / "release" / item.stem
    release = export.release_repo(where, on_release.before, on_release.base_commit)
    return export.apply_mbox(repo, item), export.apply_mbox(release, on_release)


def judge(
    item: export.Export,
    patch: Patch,
    sub: PatchVerdict,
    *,
    torch: str,
    stale: str = "",
    lint_asked: bool = True,
    branch: tuple[str, str] = ("", ""),
    named_by: Sequence[int] = (),
    tree: Mapping[str, bytes] | None = None,
) -> tuple[PatchVerdict, export.Export]:
    """Return the fix's verdict with what holds it back, and the export with every text a
    reviewer reads: PR body, first comment, the issue draft where no issue names the bug,
    the checklist (``branch``: the commit's repository and branch; ``tree``: its files)."""
    issue = "" if patch.issues else pr_text.drafted_issue(patch, sub, sub.source, torch)
    comment = pr_text.measurements(sub, sub.source, torch)
    body = pr_text.pr_body(patch, sub, comment)
    texts = replace(item, pr_body=body, comment=comment, issue=issue)
    fix = fixes.by_patch(patch.name)
    review = sub.review or Review("", None, ())
    problems = submission_problems(
        sub.bases, review.lint, review.rules, lint_asked=lint_asked, stale=stale, texts=texts,
        note=fix.upstream if fix else None, internal=[c.name for c in corpus.ALL_CASES],
        checks=review.checks, tree=tree,
    )  # fmt: skip
    held = f"held back: {len(problems)} problem(s)" if problems else "ready to send"
    judged = replace(
        sub, action=Action.HOLD if problems else Action.SEND, text=held, flags=problems
    )
    listed = pr_text.checklist(texts, judged, *branch, stale, named_by=named_by)
    return judged, replace(texts, checklist=listed)


def landed(
    patch: Patch, files: Mapping[str, bytes], origin: Mapping[str, bytes]
) -> tuple[Applied, dict[str, bytes]]:
    """Return how ``patch`` lands on ``files`` (:func:`replay.land`, merged from ``origin``,
    its release's files) and the files it changes there (none where it does not land)."""
    texts = {p: decode(d) for p, d in files.items()}
    found, after = replay.land(patch, texts, {p: decode(d) for p, d in origin.items()})
    if found.status not in CARRIED:
        return found, {}
    return found, {p: encode(after[p]) for p in patch.targets}


def export_against(
    patch: Patch,
    scratch: Scratch,
    main: str,
    release: tuple[Mapping[str, bytes], str],
    signer: commit_rules.Identity,
    *,
    series: Mapping[int, str] | None = None,
) -> export.Export:
    """Export one patch against main where it lands there, its created files in upstream's
    BUCK lists (no wheel holds a BUCK file), else against the release (its files, commit)."""
    on_main = scratch.files(main, patch.targets)
    after = landed(patch, on_main, release[0])[1]
    if not after:
        return export.export_patch(
            patch, release[0], signer=signer, base_commit=release[1], series=series
        )
    bucks = scratch.files(main, buck_files(patch.creates))
    listed = buck_listed(patch.creates, bucks)
    return export.export_patch(
        patch, {**on_main, **bucks}, signer=signer, base_commit=main, after={**after, **listed},
        series=series,
    )  # fmt: skip


def buck_files(created: Iterable[str]) -> list[str]:
    """Return the BUCK files that may list ``created`` files: every ancestor folder's."""
    found: dict[str, None] = {}
    for path in created:
        folders = path.split("/")[:-1]
        for depth in range(len(folders), -1, -1):
            found["/".join([*folders[:depth], "BUCK"])] = None
    return list(found)


def buck_listed(created: Iterable[str], bucks: Mapping[str, bytes]) -> dict[str, bytes]:
    """Return each BUCK of ``bucks`` that lists a sibling of a created file, with it added
    in sorted order to the nearest block of its folder's entries of its extension (a BUCK
    lists sources and resources apart; a file already listed, or whose folder no BUCK
    lists, is left out)."""
    texts = {path: data.decode("utf-8").splitlines(keepends=True) for path, data in bucks.items()}
    changed: set[str] = set()
    for path in sorted(created):
        for buck in (b for b in buck_files([path]) if b in texts):
            lines = texts[buck]
            entry = posixpath.relpath(path, posixpath.dirname(buck) or ".")
            folder, suffix = posixpath.dirname(entry), posixpath.splitext(entry)[1]
            runs: list[list[tuple[int, re.Match[str]]]] = []
            for i, line in enumerate(lines):
                match = _BUCK_ENTRY.match(line)
                if match is None or posixpath.dirname(match["path"]) != folder:
                    continue
                if runs and runs[-1][-1][0] == i - 1:
                    runs[-1].append((i, match))
                else:
                    runs.append([(i, match)])
            run = next((r for r in runs if any(m["path"].endswith(suffix) for _, m in r)), [])
            if not run:
                continue
            if all(match["path"] != entry for _, match in run):
                smaller = [i for i, match in run if match["path"] < entry]
                at = smaller[-1] + 1 if smaller else run[0][0]
                lines.insert(at, f'{run[0][1]["indent"]}"{entry}",\n')
                changed.add(buck)
            break
    return {buck: "".join(texts[buck]).encode("utf-8") for buck in sorted(changed)}


def measure(
    base: Base,
    patches: Sequence[Patch],
    release: str,
    out_dir: Path,
    progress: Progress,
    *,
    origin: Mapping[str, bytes],
) -> dict[str, OnBase]:
    """Measure each patch alone on ``base``: trigger cases and tests, stock vs with it
    (``origin``: the release's files, which a patch whose context changed is merged from)."""
    after: dict[str, dict[str, bytes]] = {}
    found: dict[str, OnBase] = {}
    for patch in patches:
        how, files = landed(patch, base.files, origin)
        if not files:  # why not, in a sentence
            text = f"{how.status.value}: {how.detail}".rstrip(": ")
            how = replace(how, detail=f"does not apply to {base.name}: {text}")
        found[patch.name] = OnBase(patch.name, how, base=base.name, commit=base.commit,
                                   date=base.date)  # fmt: skip
        if files:
            after[patch.name] = files
    pythons = {
        name: host.write_shadow(out_dir / name, base.env.python, {**base.files, **files})
        for name, files in after.items()
    }
    wanted = [p for p in patches if p.name in after]
    cases = behaviour.trigger_cases([release], [p.name for p in wanted], target=release)
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
    release_tests = {p: d for p, d in base.files.items() if p.startswith(TESTS_PREFIX)}
    for patch in wanted:
        progress(f"{base.name}: {patch.name}: its tests on stock and with it")
        fix = fixes.by_patch(patch.name)  # its test files and the fix's affected_tests
        listed = [p for p in (fix.upstream.affected_tests if fix else ()) if p in base.files]
        own = [p for p in patch.targets if p.startswith(TESTS_PREFIX) and p.endswith(".py")]
        run = upstream_tests.run_tests_both_ways(
            str(base.stock), str(pythons[patch.name]), release_tests=release_tests,
            patched_files=after[patch.name], pytest_ini=upstream_tests.pytest_ini(None),
            selection=sorted({*own, *listed}),
            log_dir=out_dir / "logs" / "pytest" / patch.name, extra_env=extra_env,
        )  # fmt: skip
        new = upstream_tests.new_tests(patch.diff)  # the run cut to them (parametrized: by name)
        stock, patched = (
            Counts(tuple(t for t in c.tests if t.node.split("[")[0] in new), c.problem)
            for c in (run.stock, run.patched)
        )
        added = TestRun(upstream_tests.pytest_command(new), tuple(new), stock, patched, run.seconds)
        measured = None
        counts: tuple[OpCounts, ...] = ()
        if sides:
            pair = behaviour.assemble(base.name, sides["stock"], sides[patch.name])
            tests = {patch.name: added} if added.selection else {}
            measured = behaviour.measure([patch.name], pair, [release], target=release, tests=tests)
            counts = behaviour.op_counts(others[patch.name], sides["stock"], sides[patch.name])
        found[patch.name] = replace(
            found[patch.name], behaviour=(measured or {}).get(patch.name), affected=run,
            broken=suite_changes(run.stock, run.patched)[0], bystanders=counts,
        )  # fmt: skip
    return found


def release_date(scratch: Scratch, commit: str, recorded: str) -> str:
    """Return the release's date: its commit's where the upstream clone has it, else the
    upload day recorded in ``patches/upstream.toml`` ("" when neither)."""
    if commit and scratch.has(commit):
        return scratch.date(commit)
    return recorded
