"""The canary end to end on a small local upstream shaped like backends/arm (no network).

Upstream ``main`` after the tag ``v1.2.0``: a commit that moves patch 3's context (offset),
an unrelated commit, the very change of patch 1 (redundant; then tag ``v1.3.0``), a rework
of the lines patch 2 changes (conflict), and PR #12345 merging patch 4's fix slightly
differently (merged modified).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from overlay import codec, render, worktree
from overlay._git import git
from overlay.errors import UpstreamError
from overlay.lines import Line
from overlay.text.series import Patch, load_series
from overlay.upstream.canary import canary_report, canary_run, main_behaviour, rebase
from overlay.upstream.canary.canary_report import (
    CanaryReport,
    ForwardState,
    HostState,
    MainBehaviour,
)
from overlay.upstream.canary.rebase import commit_series, fixed_date
from overlay.upstream.gitrepo import open_upstream
from overlay.upstream.results import Action, Status

from scaffold import make_diff, write_series

ARM = "backends/arm/_passes/"
ALPHA, BETA, GAMMA, DELTA = (f"{ARM}{n}_pass.py" for n in ("alpha", "beta", "gamma", "delta"))
PR_URL = "https://github.com/pytorch/executorch/pull/12345"


def _module(name: str, body: str) -> str:
    head = "".join(f"# {name} line {i}\n" for i in range(1, 9))
    tail = "".join(f"def helper_{i}():\n    return {i}\n\n\n" for i in range(4))
    return f"{head}\n\nclass {name.title()}Pass:\n{body}\n\n{tail}"


BASE = {
    ALPHA: _module("alpha", "    def call(self, x):\n        return x + 1\n"),
    BETA: _module(
        "beta", "    def call(self, x):\n        scale = 1.0\n        return x * scale\n"
    ),
    GAMMA: _module("gamma", "    def call(self, x):\n        return x - 1\n"),
    DELTA: _module("delta", "    def call(self, x):\n        zp = 0\n        return x + zp\n"),
}
PATCHED = {
    ALPHA: BASE[ALPHA].replace("return x + 1", "return x + 2"),
    BETA: BASE[BETA].replace("scale = 1.0", "scale = 0.5"),
    GAMMA: BASE[GAMMA].replace("return x - 1", "return x - 2"),
    DELTA: BASE[DELTA].replace("zp = 0", "zp = 128"),
}
HEADERS = {
    ALPHA: ("0001-alpha-plus-two.patch", "Return x + 2 in alpha", "no", ""),
    BETA: ("0002-beta-half-scale.patch", "Halve the beta scale", "not-yet", ""),
    GAMMA: ("0003-gamma-minus-two.patch", "Subtract two in gamma", "no", ""),
    DELTA: ("0004-delta-zero-point.patch", "Use the int8 zero point in delta", PR_URL, ""),
}


@dataclass(frozen=True)
class Upstream:
    """The fixture upstream repository and its commits by role."""

    repo: Path
    offset: str
    redundant: str
    conflict: str
    merged: str


def _commit(repo: Path, files: dict[str, str], message: str, day: int) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    date = f"2026-01-{day:02d}T12:00:00+0000"
    git(repo, "-c", "user.name=Up", "-c", "user.email=up@example.org", "commit", "-q",
        "--date", date, "-m", message)  # fmt: skip
    return git(repo, "rev-parse", "HEAD").strip()


def build_upstream(root: Path) -> Upstream:
    """Build the upstream repository of the module docstring under ``root``."""
    repo = root / "upstream"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    _commit(repo, dict(BASE), "Initial Arm backend", 1)
    git(repo, "tag", "v1.2.0")
    moved = "".join(f"# new import {i}\n" for i in range(7)) + BASE[GAMMA]
    offset = _commit(repo, {GAMMA: moved}, "Arm backend: Add imports to gamma (#100)", 2)
    _commit(repo, {f"{ARM}other.py": "x = 1\n"}, "Arm backend: Add other pass (#101)", 3)
    redundant = _commit(repo, {ALPHA: PATCHED[ALPHA]}, "Arm backend: Bump alpha (#102)", 4)
    git(repo, "tag", "v1.3.0")
    reworked = BASE[BETA].replace("scale = 1.0", "scale = self.scale")
    conflict = _commit(repo, {BETA: reworked}, "Arm backend: Rework beta scale (#103)", 5)
    merged_text = BASE[DELTA].replace("zp = 0", "zp = 128  # int8 zero point")
    merged = _commit(
        repo,
        {DELTA: merged_text},
        "Arm backend: Fix the delta zero point (#12345)\n\nReviewed upstream.",
        6,
    )
    still = reworked + "\n# still conflicting\n"
    _commit(repo, {f"{ARM}other.py": "x = 2\n", BETA: still}, "Arm backend: Touch beta (#104)", 7)
    return Upstream(repo, offset, redundant, conflict, merged)


def build_line(root: Path) -> Path:
    """Write the 1.2.0 line (canonical: as ``overlay regenerate`` writes it); return patches/."""
    patches = {}
    for path, (name, subject, forwarded, _) in HEADERS.items():
        header = f"Description: {subject}\nForwarded: {forwarded}\nLast-Update: 2026-12-02\n---\n"
        patches[name] = header + make_diff(path, BASE[path], PATCHED[path])
    folder = root / "patches" / "1.2.0"
    pristine = {p: t.encode() for p, t in BASE.items()}
    series = write_series(folder, patches, pristine)
    worktree.create(series, pristine, root / "canonical")
    worktree.regenerate(root / "canonical", folder)
    shutil.rmtree(root / "canonical")
    return root / "patches"


def run_canary(root: Path, upstream: Upstream, **options: object) -> CanaryReport:
    """Run the canary on the fixture (text, gate; no behaviour)."""
    request = canary_run.Request(
        upstream=str(upstream.repo),
        root=root / "patches",
        out_dir=root / "out",
        scratch_root=root / "scratch",
        **{"behaviour": False, **options},  # type: ignore[arg-type]
    )
    return canary_run.canary(request)


@pytest.fixture
def fixture(tmp_path: Path) -> tuple[Path, Upstream]:
    upstream = build_upstream(tmp_path)
    build_line(tmp_path)
    return tmp_path, upstream


def test_each_patch_is_reported_as_what_upstream_did_to_it(
    fixture: tuple[Path, Upstream],
) -> None:
    root, up = fixture
    report = run_canary(root, up)
    (line,) = report.lines
    main = {p.patch[:4]: p.own for p in line.targets[0].patches}
    assert main["0001"].status is Status.CONTAINED
    assert {e.kind for e in main["0001"].evidence} >= {"reverse applies", "patch-id"}
    assert main["0002"].status is Status.CONFLICT
    assert main["0002"].conflicts and "scale = self.scale" in main["0002"].conflicts[0].text
    assert "<<<<<<< main" in main["0002"].conflicts[0].text
    assert main["0003"].status is Status.OFFSET and main["0003"].offsets == (7,)
    assert main["0004"].status is Status.CONTAINED  # conflicts, and PR #12345 carries it
    forwarded = {f.patch[:4]: f for f in line.forwarded}
    modified = forwarded["0004"]
    assert (modified.state, modified.commit, modified.number) == (
        ForwardState.MERGED_MODIFIED,
        up.merged,
        12345,
    )
    assert modified.matched_by == "PR number" and modified.release == ""
    assert "-        zp = 128\n+        zp = 128  # int8 zero point\n" in modified.difference
    assert forwarded["0001"].state is ForwardState.MERGED_AS_SENT
    assert (forwarded["0001"].commit, forwarded["0001"].release) == (up.redundant, "v1.3.0")
    assert forwarded["0002"].state is ForwardState.NOT_FORWARDED
    bisects = {b.patch[:4]: (b.kind, b.commit) for b in line.bisects}
    assert {b.patch[:4]: b.tested for b in line.bisects} == {"0001": 1, "0002": 1, "0004": 1}
    assert bisects["0001"] == ("Superseded-by", up.redundant)
    assert bisects["0002"] == ("Broken-by", up.conflict)
    assert bisects["0004"] == ("Broken-by", up.merged)
    assert "0003" not in bisects
    assert line.gate is not None and line.gate.ok, line.gate
    rows = {r.patch[:4]: r for r in line.rows}
    assert rows["0001"].text.startswith("keep on 1.2.0; drop on lines from v1.3.0 on")
    assert rows["0004"].text.startswith("keep until a release carries it")
    assert rows["0002"].text.startswith("port: resolve the conflict, broken by")
    assert [rows[n].action for n in ("0001", "0002", "0004")] == [
        Action.KEEP, Action.CONFLICT, Action.KEEP,
    ]  # fmt: skip
    assert not report.failed  # no previous page: nothing is new


def test_the_range_diff_pairs_each_patch_before_and_after(fixture: tuple[Path, Upstream]) -> None:
    root, up = fixture
    report = run_canary(root, up)
    range_diff = report.lines[0].targets[0].range_diff
    assert range_diff is not None
    pairs = {p.old: (p.relation, p.new) for p in range_diff.pairs}
    assert pairs[1][0] == "<" and pairs[2][0] == "<" and pairs[4][0] == "<"  # dropped
    assert pairs[3] in (("=", 1), ("!", 1))  # carried, at an offset
    assert "Subtract two in gamma" in range_diff.text


def test_tags_are_targets_and_upstream_evidence_respects_ancestry(
    fixture: tuple[Path, Upstream],
) -> None:
    root, up = fixture
    report = run_canary(root, up, tags=True, gate=False)
    line = report.lines[0]
    targets = {t.base: {p.patch[:4]: p.own.status for p in t.patches} for t in line.targets}
    assert list(targets) == ["main", "v1.3.0"]
    v130 = {p.patch[:4]: p.own for p in line.targets[1].patches}
    assert not v130["0004"].evidence  # PR #12345 came after v1.3.0
    assert [e.kind for e in line.targets[0].patches[3].own.evidence] == ["commit names it"]
    assert targets["v1.3.0"] == {
        "0001": Status.CONTAINED,
        "0002": Status.APPLIES,
        "0003": Status.OFFSET,
        "0004": Status.APPLIES,  # PR #12345 is not in v1.3.0
    }


def test_a_patch_newly_conflicting_fails_against_the_previous_page(
    fixture: tuple[Path, Upstream],
) -> None:
    root, up = fixture
    first = run_canary(root, up, gate=False)
    data = json.loads(render.json_text(first))
    for row in data["lines"][0]["rows"]:
        if row["patch"].startswith("0002"):
            row["bases"][0]["own"]["status"] = Status.APPLIES.value
            row["since"] = "2026-01-01"
    previous = root / "previous.json"
    previous.write_text(json.dumps(data), encoding="utf-8")
    report = run_canary(root, up, gate=False, previous=previous)
    assert report.failures == (
        f"1.2.0/{HEADERS[BETA][0]}: newly conflicting on main"
        f" ({canary_report.result_text(report.lines[0].rows[1].on)})",
    )
    again = root / "again.json"
    again.write_text(render.json_text(report), encoding="utf-8")
    settled = run_canary(root, up, gate=False, previous=again)
    assert not settled.failed  # the conflict is known now
    since = {r.patch[:4]: r.since for r in settled.lines[0].rows}
    assert since["0001"] == report.lines[0].rows[0].since


def test_the_status_json_validates_against_the_derived_schema(
    fixture: tuple[Path, Upstream],
) -> None:
    root, up = fixture
    report = run_canary(root, up, gate=False)
    written = canary_report.write_page(report, root / "out")
    data = json.loads((root / "out" / "status.json").read_text(encoding="utf-8"))
    schema = json.loads(canary_report.json_schema())
    jsonschema.validate(data, schema)
    assert codec.loads(CanaryReport, json.dumps(data)) == report
    assert sorted(p.name for p in written) == ["status.html", "status.json", "status.md"]


def _no_wheel(line: Line) -> tuple[dict[str, bytes], str]:
    raise UpstreamError(f"cannot fetch executorch {line.name}", expected="a wheel", found="none")


WHEEL_ONLY = f"{ARM}wheel_only_pass.py"  # in the wheel, touched by no patch


def _wheel(built_from: str = "", drop: str = "") -> Callable[[Line], tuple[dict[str, bytes], str]]:
    """Return a fake release_sources: the base files, gamma's end changed, one file more."""
    files = {p: t.encode() for p, t in BASE.items() if p != drop}
    if GAMMA in files:
        files[GAMMA] += b"# as released\n"
    files[WHEEL_ONLY] = b"x = 1\n"
    return lambda line: (files, built_from)


def test_a_line_without_its_tag_upstream_is_based_on_its_wheels_sources(
    fixture: tuple[Path, Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1.2.1 is 1.2.0's series with no tag upstream: its wheel's sources stand in for the tag
    root, up = fixture
    shutil.copytree(root / "patches" / "1.2.0", root / "patches" / "1.2.1")
    monkeypatch.setattr(canary_run, "release_sources", _wheel())
    tagged, untagged = run_canary(root, up, gate=False).lines
    fork = git(up.repo, "rev-parse", "v1.2.0").strip()
    assert untagged.error == "" and tagged.base_note == ""
    assert untagged.base_note == (
        f"no tag v1.2.1 upstream: the base is the 1.2.1 wheel's 4 files on {fork[:12]}"
        " (main's fork point from v1.2.0)"
    )
    scratch = open_upstream(str(up.repo), root / "scratch")
    assert scratch.rev(f"{untagged.base}^") == fork
    wheel, _ = _wheel()(Line("1.2.1", root))
    assert scratch.files(untagged.base, [*BASE, WHEEL_ONLY]) == {p: wheel[p] for p in BASE}
    # as with the tag: each patch on main, what upstream did to it, the commit that did it
    assert [(r.patch, r.on.own.status, r.upstream, r.flags) for r in untagged.rows] == [
        (r.patch, r.on.own.status, r.upstream, r.flags) for r in tagged.rows
    ]
    assert untagged.forwarded == tagged.forwarded


def test_the_fork_point_is_the_wheels_commit_else_the_newest_older_tag(
    fixture: tuple[Path, Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, up = fixture
    shutil.copytree(root / "patches" / "1.2.0", root / "patches" / "1.3.1")
    newest = git(up.repo, "rev-parse", "v1.3.0").strip()
    monkeypatch.setattr(canary_run, "release_sources", _wheel(drop=GAMMA))
    line = run_canary(root, up, gate=False, lines=("1.3.1",)).lines[0]
    assert line.base_note == (
        f"no tag v1.3.1 upstream: the base is the 1.3.1 wheel's 3 files on {newest[:12]}"
        f" (main's fork point from v1.3.0); not in the wheel: {GAMMA}"
    )
    monkeypatch.setattr(canary_run, "release_sources", _wheel(built_from=up.offset))
    line = run_canary(root, up, gate=False, lines=("1.3.1",)).lines[0]
    assert line.base_note.endswith(f"on {up.offset[:12]} (main's fork point from {up.offset[:12]})")


def test_a_commit_breaks_a_patch_only_after_the_patch_applied(tmp_path: Path) -> None:
    # a wheel's base sits on a fork point older than the release: patch 1 does not apply
    # there, nor after a commit that only touches the file; it applies once main has the
    # release's text, and the commit after that breaks it
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    old = BASE[ALPHA].replace("return x + 1", "return x + 0")
    fork = _commit(repo, {**BASE, ALPHA: old}, "Older alpha", 1)
    _commit(repo, {ALPHA: old + "# touched\n"}, "Touch alpha", 2)
    _commit(repo, {ALPHA: BASE[ALPHA]}, "Alpha as released", 3)
    broke = _commit(repo, {ALPHA: BASE[ALPHA].replace("x + 1", "x + 3")}, "Rework alpha", 4)
    series = load_series(build_line(tmp_path) / "1.2.0")
    scratch = open_upstream(str(repo), tmp_path / "scratch")
    base = scratch.commit(fork, {ALPHA: BASE[ALPHA].encode()}, "the wheel", date=fixed_date(""))
    committed = commit_series(scratch, series, base)
    (found,) = rebase.bisect(scratch, committed, {series.patches[0].name: rebase.BROKEN_BY}, broke)
    assert (found.commit, found.tested) == (broke, 3)


def test_a_line_without_its_tag_or_its_wheel_is_an_error_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = build_upstream(tmp_path)
    build_line(tmp_path)
    git(up.repo, "tag", "-d", "v1.2.0")
    monkeypatch.setattr(canary_run, "release_sources", _no_wheel)
    report = run_canary(tmp_path, up, gate=False)
    assert report.lines[0].error == (
        "upstream has no tag v1.2.0, and its wheel cannot stand in: cannot fetch executorch 1.2.0"
    )
    assert report.failures == (f"1.2.0: {report.lines[0].error}",)


def test_behaviour_on_main_measures_only_the_patches_main_carries(
    fixture: tuple[Path, Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0001 and 0004 are upstream already, 0002 conflicts: only 0003 is on patched main
    root, up = fixture
    measured: list[list[str]] = []

    def measure(*args: object, patches: list[Patch], **kwargs: object) -> MainBehaviour:
        measured.append([p.name[:4] for p in patches])
        return MainBehaviour(HostState.NOT_HOSTED, detail="fake")

    monkeypatch.setattr(main_behaviour, "measure", measure)
    run_canary(root, up, gate=False, behaviour=True)
    assert measured == [["0003"]]  # 0004 is merged upstream (modified): not carried either


def test_behaviour_on_main_is_not_run_when_the_newest_line_did_not_replay(
    fixture: tuple[Path, Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the newest line's patches are never measured against an older line's files on main
    root, up = fixture
    shutil.copytree(root / "patches" / "1.2.0", root / "patches" / "1.4.0")  # no v1.4.0 upstream
    monkeypatch.setattr(canary_run, "release_sources", _no_wheel)

    def measure(*args: object, **kwargs: object) -> None:
        raise AssertionError("behaviour measured without the newest line's series on main")

    monkeypatch.setattr(main_behaviour, "measure", measure)
    report = run_canary(root, up, gate=False, behaviour=True)
    why = "upstream has no tag v1.4.0, and its wheel cannot stand in: cannot fetch executorch 1.4.0"
    assert [line.error for line in report.lines] == ["", why]
    assert report.behaviour.state is HostState.NOT_RUN
    assert report.behaviour.detail == f"1.4.0: {report.lines[1].error}"


def test_nothing_is_written_into_patches(fixture: tuple[Path, Upstream]) -> None:
    root, up = fixture
    before = {p: p.read_bytes() for p in (root / "patches").rglob("*") if p.is_file()}
    run_canary(root, up)
    after = {p: p.read_bytes() for p in (root / "patches").rglob("*") if p.is_file()}
    assert before == after
    assert load_series(root / "patches" / "1.2.0").patches
