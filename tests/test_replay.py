"""The one replay engine and the matrix on it: synthetic releases (no network) and real ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlay import render
from overlay.errors import TargetError
from overlay.lines import pins
from overlay.text.series import Patch, Series, load_series, parse_patch
from overlay.upstream import replay, reports
from overlay.upstream.releases import Release, build_matrix, matrix_of
from overlay.upstream.replay import check_file, line_steps, try_patch
from overlay.upstream.results import Action, Status, parse_applied_upstream
from overlay.upstream.upstream_pins import for_series

from scaffold import created_diff, make_diff

ROOT = Path(__file__).resolve().parent.parent
PATH = "backends/arm/_passes/demo_pass.py"
BASE = "".join(f"line {i}\n" for i in range(1, 41))
PINS = pins.load(ROOT / "patches" / "1.2.0")
SHARED = for_series(ROOT / "patches" / "1.2.0")  # patches/upstream.toml


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


FIXED = _edit(_edit(BASE, "line 10\n", "line 10 fixed\n"), "line 30\n", "line 30 fixed\n")


def _patch(name: str, old: str, new: str, *, extra: str = "") -> Patch:
    header = f"Description: Fix the demo pass\n{extra}Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    return parse_patch(name, header + make_diff(PATH, old, new))


def _release(version: str, text: str | None, *, pinned: bool = True) -> Release:
    files = {} if text is None else {PATH: text.encode()}
    return Release(version, Path(f"executorch-{version}.whl"), "ab" * 32, pinned, files)


def _series(*patches: Patch) -> Series:
    return Series(Path("."), patches, PINS)


def test_check_file_classifies_every_outcome() -> None:
    diff = _patch("0001-x.patch", BASE, FIXED).files[0]
    assert check_file(BASE, diff, {PATH}).status is Status.APPLIES
    offset = check_file("new\n" * 5 + BASE, diff, {PATH})
    assert (offset.status, offset.detail, offset.offsets) == (Status.OFFSET, "+5,+5 lines", (5, 5))
    assert offset.short == "offset +5,+5"
    contained = check_file("new\n" * 5 + FIXED, diff, {PATH})
    assert contained.status is Status.CONTAINED
    assert [e.kind for e in contained.evidence] == ["reverse applies"]
    conflict = check_file(_edit(BASE, "line 31\n", "line 31 changed upstream\n"), diff, {PATH})
    assert conflict.status is Status.CONFLICT and conflict.short == "conflict h2"
    assert conflict.detail.startswith("hunk 2/2 fails") and "(1 applies, 2 conflicts)" in (
        conflict.detail
    )
    assert check_file(None, diff, {"backends/arm/other.py"}).status is Status.MISSING
    moved = check_file(None, diff, {"backends/arm/new_home/demo_pass.py"})
    assert moved.status is Status.MOVED and "backends/arm/new_home/demo_pass.py" in moved.detail


def test_a_conflict_is_merged_from_the_lines_own_base() -> None:
    patch = _patch("0001-fix.patch", BASE, FIXED)
    (step,) = line_steps([patch], {PATH: BASE})
    labels = ("main", "1.2.0 before 0001-fix.patch", "0001-fix.patch")
    # a context line of the hunk changed upstream: the strict applier fails, git merges
    context = _edit(BASE, "line 8\n", "line 8 upstream\n")
    merged, after = try_patch(patch, {PATH: context}, {PATH}, step, labels)
    assert merged.status is Status.MERGED
    assert after[PATH] == _edit(_edit(context, "line 10\n", "line 10 fixed\n"), "line 30\n",
                                "line 30 fixed\n")  # fmt: skip
    # upstream changed the very line: a conflict, its region with markers and context
    clash = _edit(BASE, "line 10\n", "line 10 upstream\n")
    found, marked = try_patch(patch, {PATH: clash}, {PATH}, step, labels)
    assert found.status is Status.CONFLICT
    (region,) = found.conflicts
    assert (region.path, region.line) == (PATH, 10)
    assert region.text.startswith("line 7\n") and "<<<<<<< main\nline 10 upstream\n" in region.text
    assert "<<<<<<< main" in marked[PATH]  # the retarget's work tree shows them
    # upstream made the same change elsewhere in the hunk: the merge adds nothing
    same = _edit(FIXED, "line 7\n", "line 7 upstream\n")
    contained, _ = try_patch(patch, {PATH: same}, {PATH}, step, labels)
    assert contained.status is Status.CONTAINED
    # without its line's base a conflict stays a conflict
    assert try_patch(patch, {PATH: context}, {PATH}, None, labels)[0].status is Status.CONFLICT


def test_a_patch_lands_on_main_by_the_strict_applier_a_merge_or_fuzz() -> None:
    """0007's case: the last line of main's file is where the release has one line more."""
    release = BASE + "line 41\n"
    patch = _patch("0001-fix.patch", release, _edit(release, "line 40\n", "line 40 fixed\n"))
    strict, _ = replay.land(patch, {PATH: release}, {PATH: release})
    assert strict.status is Status.APPLIES
    # git's merge calls the change next to the missing line a conflict; fuzz drops that line
    merged, after = replay.land(patch, {PATH: BASE}, {PATH: release})
    assert (merged.status, merged.detail.split(" (")[0]) == (Status.MERGED, "applied with fuzz")
    assert after[PATH] == _edit(BASE, "line 40\n", "line 40 fixed\n")
    assert replay.land(patch, {PATH: BASE}, {})[1] == after  # fuzz needs no release
    # a context line changed: git's merge lands it from the release
    context = _edit(release, "line 38\n", "line 38 upstream\n")
    found, after = replay.land(patch, {PATH: context}, {PATH: release})
    assert found.status is Status.MERGED and "fuzz" not in found.detail
    assert after[PATH] == _edit(context, "line 40\n", "line 40 fixed\n")
    # the changed line itself changed: nothing lands it
    clash = _edit(BASE, "line 40\n", "line 40 upstream\n")
    assert replay.land(patch, {PATH: clash}, {PATH: release})[0].status is Status.CONFLICT


def test_replay_carries_each_result_and_prefers_a_port_that_applies() -> None:
    first = _patch("0001-a.patch", BASE, _edit(BASE, "line 5\n", "line 5 a\n"))
    after_first = _edit(BASE, "line 5\n", "line 5 a\n")
    second = _patch("0002-b.patch", after_first, _edit(after_first, "line 6\n", "line 6 b\n"))
    carries = replay.replay([first, second], {PATH: BASE}, {PATH})
    assert [c.replayed.own.status for c in carries] == [Status.APPLIES, Status.APPLIES]
    assert carries[1].after[PATH] == _edit(after_first, "line 6\n", "line 6 b\n")
    newer = _edit(BASE, "line 6\n", "line 6 upstream\n")
    port = _patch("0001-renamed.patch", newer, _edit(newer, "line 20\n", "line 20 port\n"))
    found = replay.replay([first], {PATH: newer}, {PATH}, ports={1: ("1.5.1", port)})
    (carry,) = found
    assert carry.carrier is port and carry.replayed.carried_by_port
    assert carry.replayed.short == "conflict h1 / port applies"
    # a carried patch the caller does not keep is not the next one's base
    dropped = replay.replay([first, second], {PATH: BASE}, {PATH}, keep=lambda r: False)
    assert dropped[1].replayed.own.status is Status.CONFLICT


def test_the_newer_lines_patches_are_the_ports(tmp_path: Path) -> None:
    series = load_series(ROOT / "patches" / "1.2.0")
    ports = replay.ports_of(series)
    newer = load_series(ROOT / "patches" / "1.5.1")
    shared = newer.numbers & series.numbers
    assert set(ports) == {"1.5.1"} and set(ports["1.5.1"]) == shared
    for number, port in ports["1.5.1"].items():
        assert port.text == newer.get(port.name).text and port.number == number
    assert replay.ports_for(ports, "1.4.1") == {}
    assert {n: v for n, (v, _) in replay.ports_for(ports, None).items()} == dict.fromkeys(
        shared, "1.5.1"
    )
    assert replay.ports_of(newer) == {}  # the newest line has no newer line


def test_parse_applied_upstream() -> None:
    info = parse_applied_upstream("1.3.0, commit:22867a914826e4edb0fd98614e0306076ec6f79f (PR #1)")
    assert (info.version, info.commit) == ("1.3.0", "22867a914826e4edb0fd98614e0306076ec6f79f")
    other = parse_applied_upstream("1.3.0, fixed differently by SomePass (PR #2)")
    assert (other.version, other.commit, other.note) == (
        "1.3.0",
        None,
        "fixed differently by SomePass (PR #2)",
    )
    free = parse_applied_upstream("not triggered with torchao >= 0.16")
    assert free.version is None and free.note == "not triggered with torchao >= 0.16"


def _verdict(series: Series, releases: list[Release], ports: replay.Ports | None = None) -> str:
    return build_matrix(series, ports or {}, releases, "upstream.toml").rows[0].text


def test_matrix_verdicts_combine_header_and_newest_release() -> None:
    header = "Applied-Upstream: 1.3.0, commit:abcdef0123456789\n"
    fixed_upstream = _patch("0001-fixed.patch", BASE, FIXED, extra=header)
    releases = [_release("1.2.0", BASE), _release("1.3.0", FIXED)]
    matrix = build_matrix(_series(fixed_upstream), {}, releases, "upstream.toml")
    assert [cell.own.status for cell in matrix.rows[0].bases] == [
        Status.APPLIES,
        Status.CONTAINED,
    ]
    assert matrix.rows[0].action is Action.DROP
    assert matrix.rows[0].text == "drop: fixed upstream in 1.3.0 (abcdef0123)"
    # The header claims a fix the matrix contradicts: say so.
    stale = _verdict(_series(fixed_upstream), [_release("1.3.0", BASE)])
    assert "still applies on 1.3.0: check the header" in stale
    plain = _patch("0002-plain.patch", BASE, FIXED)
    assert _verdict(_series(plain), [_release("1.2.0", BASE)]).startswith("send upstream")
    assert _verdict(_series(plain), releases).startswith("drop: contained upstream since 1.3.0")
    newer = "header\n" + _edit(BASE, "line 11\n", "line 11 upstream\n")
    assert "port needed: conflict h1 on 1.5.1; `retarget 1.5.1`" in _verdict(
        _series(plain), [_release("1.5.1", newer)]
    )
    port = _patch("0002-port.patch", newer, _edit(newer, "line 10\n", "line 10 fixed\n"))
    ports = {"1.5.1": {2: port}}
    sent = build_matrix(_series(plain), ports, [_release("1.2.0", BASE), _release("1.5.1", newer)],
                        "upstream.toml")  # fmt: skip
    assert sent.rows[0].text.endswith("(port 1.5.1)")
    assert sent.rows[0].action is Action.SEND
    assert sent.rows[0].bases[0].port is None  # a port only for its release and newer
    blocks = reports.matrix_blocks(sent)
    assert render.markdown(blocks).splitlines()[2] == "| patch | 1.2.0 | 1.5.1 |"
    assert "| 0002-plain | applies | conflict h1 / port applies |" in render.markdown(blocks)
    data = json.loads(render.json_text(sent))
    assert data["rows"][0]["bases"][1]["port"]["status"] == "applies"


def test_matrix_pin_knows_recorded_and_new_releases() -> None:
    assert SHARED.matrix_pin("1.5.1").sha256 == (
        "274c28c2fe2b76acb03f9fa381537425c40e0098dcf886baf6d97a1a55ffe300"
    )
    new = SHARED.matrix_pin("9.9.9")
    assert new.sha256 == ""
    assert new.file == "executorch-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    with pytest.raises(TargetError, match="not a release version"):
        SHARED.matrix_pin("latest")
    matrix_120 = SHARED.matrix_pin("1.2.0")
    pinned_120 = next(p for p in PINS.wheels if p.file == matrix_120.file)
    assert pinned_120.sha256 == matrix_120.sha256


def test_unrecorded_release_says_which_line_to_add() -> None:
    plain = _patch("0001-plain.patch", BASE, FIXED)
    matrix = build_matrix(_series(plain), {}, [_release("9.9.9", BASE, pinned=False)], "u.toml")
    shown = render.markdown(reports.matrix_blocks(matrix))
    assert f'"9.9.9" = "{"ab" * 32}"' in shown and "[sha256] in u.toml" in shown


@pytest.mark.integration
def test_matrix_on_real_releases() -> None:
    series = load_series(ROOT / "patches" / "1.2.0")
    matrix = matrix_of(series, SHARED.matrix_versions)
    assert matrix.versions == SHARED.matrix_versions
    assert all(w.pinned for w in matrix.wheels.values())  # sha256 checked on fetch
    rows = {row.patch: row for row in matrix.rows}
    on = {(row.patch, cell.base): cell for row in matrix.rows for cell in row.bases}
    assert all(on[row.patch, "1.2.0"].own.status is Status.APPLIES for row in matrix.rows)
    int16 = rows["0001-keep-terminal-int16-quantize.patch"].on
    assert int16.own.status is Status.CONFLICT
    assert int16.port is not None and int16.port.status is Status.APPLIES
    conv = rows["0003-conv-rescale-qparams-from-source.patch"]
    assert conv.text.startswith("drop: fixed upstream in 1.3.0 (22867a9148)")
    for version in ("1.3.1", "1.4.1", "1.5.1"):  # upstream's fix (22867a9148) is in 1.3.1
        assert on[conv.patch, version].own.status not in (Status.APPLIES, Status.OFFSET)
    slots = rows["0004-distinct-output-transpose-slots.patch"].on
    assert slots.own.status is Status.MISSING
    needed = [r.patch for r in matrix.rows if r.action in (Action.SEND, Action.CONFLICT)]
    assert needed == [int16.patch]


def test_conflict_regions_keep_context_and_each_region() -> None:
    merged = (
        "a\nb\nc\nd\n<<<<<<< x\n1\n=======\n2\n>>>>>>> y\n"
        "e\nf\ng\nh\n<<<<<<< x\n3\n=======\n>>>>>>> y\n"
    )
    first, second = replay.conflicts_in(PATH, merged, context=2)
    assert (first.line, second.line) == (5, 14)
    assert first.text == "c\nd\n<<<<<<< x\n1\n=======\n2\n>>>>>>> y\ne\nf\n"
    assert second.text.startswith("g\nh\n<<<<<<< x\n3\n") and second.text.endswith(">>>>>>> y\n")


def test_a_created_file_applies_where_absent_and_is_contained_where_upstream_added_it() -> None:
    shader = "backends/arm/vgf/shaders/new.glsl"
    created = "void main() {}\n"
    header = "Description: Add a shader\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
    patch = parse_patch(
        "0008-s.patch", header + make_diff(PATH, BASE, FIXED) + created_diff(shader, created)
    )
    diff = patch.files[1]
    assert check_file(None, diff, {PATH}).status is Status.APPLIES
    here = check_file(created, diff, {PATH, shader})
    assert (here.status, here.detail) == (Status.CONTAINED, f"{shader} exists on the base")
    other = check_file("void other() {}\n", diff, {PATH, shader})
    assert (other.status, other.detail) == (
        Status.CONFLICT,
        f"{shader} exists on the base, with other text",
    )
    carried = replay.replay([patch], {PATH: BASE}, {PATH})
    assert carried[0].replayed.own.status is Status.APPLIES
    assert carried[0].after == {PATH: FIXED, shader: created}
    merged = replay.replay([patch], {PATH: FIXED, shader: created}, {PATH, shader})
    assert merged[0].replayed.own.status is Status.CONTAINED
