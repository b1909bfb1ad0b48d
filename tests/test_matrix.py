"""The version matrix: synthetic releases (no network) and the real executorch wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from unidiff.patch import PatchedFile

from overlay.errors import TargetError, UpstreamError
from overlay.lines import pins
from overlay.text.series import Patch, Series, load_series, parse_patch
from overlay.upstream.facts import Status, parse_applied_upstream
from overlay.upstream.matrix import Release, build_matrix, check_file, port_for
from overlay.upstream.releases import load_ports, run_matrix
from overlay.upstream.render import render_json, render_markdown, render_table
from overlay.upstream.upstream_pins import for_series

from scaffold import make_diff

ROOT = Path(__file__).resolve().parent.parent
PATH = "backends/arm/_passes/demo_pass.py"
BASE = "".join(f"line {i}\n" for i in range(1, 41))


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


FIXED = _edit(_edit(BASE, "line 10\n", "line 10 fixed\n"), "line 30\n", "line 30 fixed\n")


def _patch(name: str, old: str, new: str, *, extra: str = "", path: str = PATH) -> Patch:
    header = f"Description: Fix the demo pass\n{extra}Forwarded: no\nLast-Update: 2026-12-02\n---\n"
    return parse_patch(name, header + make_diff(path, old, new))


def _release(version: str, text: str | None, *, path: str = PATH) -> Release:
    files = {} if text is None else {path: text.encode()}
    return Release(version, Path(f"executorch-{version}.whl"), "0" * 64, True, files)


def _file(patch: Patch) -> PatchedFile:
    return patch.files[0]


def test_check_file_classifies_every_outcome() -> None:
    diff = _file(_patch("0001-x.patch", BASE, FIXED))
    assert check_file(BASE, diff, {PATH}).status is Status.APPLIES
    shifted = "new\n" * 5 + BASE
    offset = check_file(shifted, diff, {PATH})
    assert (offset.status, offset.detail) == (Status.OFFSET, "+5,+5 lines")
    assert offset.short == "offset +5,+5"
    assert check_file(FIXED, diff, {PATH}).status is Status.CONTAINED
    assert check_file("new\n" * 5 + FIXED, diff, {PATH}).status is Status.CONTAINED
    drifted = _edit(BASE, "line 31\n", "line 31 changed upstream\n")
    conflict = check_file(drifted, diff, {PATH})
    assert conflict.status is Status.CONFLICT
    assert conflict.detail.startswith("hunk 2/2 fails")
    assert "(1 applies, 2 conflicts)" in conflict.detail
    assert conflict.short == "conflict h2"
    missing = check_file(None, diff, {"backends/arm/other.py"})
    assert missing.status is Status.MISSING
    moved = check_file(None, diff, {"backends/arm/new_home/demo_pass.py"})
    assert moved.status is Status.MOVED
    assert "backends/arm/new_home/demo_pass.py" in moved.detail


def test_parse_applied_upstream() -> None:
    info = parse_applied_upstream("1.3.0, commit:22867a914826e4edb0fd98614e0306076ec6f79f (PR #1)")
    assert (info.version, info.ref) == ("1.3.0", "22867a9148")
    other = parse_applied_upstream("1.3.0, fixed differently by SomePass (PR #2)")
    assert (other.version, other.commit, other.note) == (
        "1.3.0",
        None,
        "fixed differently by SomePass (PR #2)",
    )
    free = parse_applied_upstream("not triggered with torchao >= 0.16")
    assert free.version is None
    assert free.note == "not triggered with torchao >= 0.16"


PINS = pins.load(ROOT / "patches" / "1.2.0")
SHARED = for_series(ROOT / "patches" / "1.2.0")  # patches/upstream.toml


def _series(*patches: Patch) -> Series:
    return Series(Path("."), patches, PINS)


def test_matrix_verdicts_combine_header_and_newest_release() -> None:
    fixed_upstream = _patch(
        "0001-fixed.patch",
        BASE,
        FIXED,
        extra="Applied-Upstream: 1.3.0, commit:abcdef0123456789\n",
    )
    releases = [_release("1.2.0", BASE), _release("1.3.0", FIXED)]
    matrix = build_matrix(_series(fixed_upstream), {}, releases)
    row = matrix.row("0001-fixed")
    assert row.cells["1.2.0"].check.status is Status.APPLIES
    assert row.cells["1.3.0"].check.status is Status.CONTAINED
    assert row.verdict.action == "drop"
    assert row.verdict.text == "drop: fixed upstream in 1.3.0 (abcdef0123)"
    assert not row.verdict.needs_upstream

    # The header claims a fix the matrix contradicts: say so.
    stale = build_matrix(_series(fixed_upstream), {}, [_release("1.3.0", BASE)])
    assert "still applies on 1.3.0: check the header" in stale.row("0001-fixed").verdict.text

    # No header, not contained upstream: send it upstream.
    plain = _patch("0002-plain.patch", BASE, FIXED)
    sent = build_matrix(_series(plain), {}, [_release("1.2.0", BASE)])
    assert sent.row("0002-plain").verdict.action == "upstream"
    assert sent.row("0002-plain").verdict.needs_upstream

    # No header and already in the newest release: drop, and ask for the header.
    done = build_matrix(_series(plain), {}, releases)
    assert done.row("0002-plain").verdict.text.startswith("drop: contained upstream since 1.3.0")


def test_port_takes_over_where_the_pinned_patch_conflicts(tmp_path: Path) -> None:
    newer = "header\n" + _edit(BASE, "line 11\n", "line 11 upstream\n")
    pinned = _patch("0001-fix.patch", BASE, FIXED)
    releases = [_release("1.2.0", BASE), _release("1.5.1", newer)]
    without = build_matrix(_series(pinned), {}, releases)
    cell = without.row("0001-fix").cells["1.5.1"]
    assert cell.check.status is Status.CONFLICT
    assert cell.port is None
    assert without.row("0001-fix").verdict.action == "port"
    assert "patches/<line>/ports/1.5.1/0001-fix.patch" in without.row("0001-fix").verdict.text

    ported_new = _edit(_edit(newer, "line 10\n", "line 10 fixed\n"), "line 30\n", "line 30 fixed\n")
    folder = tmp_path / "patches"
    (folder / "ports" / "1.5.1").mkdir(parents=True)
    port_text = _patch("0001-fix.patch", newer, ported_new).text
    (folder / "ports" / "1.5.1" / "0001-fix.patch").write_text(port_text, encoding="utf-8")
    ports = load_ports(folder, _series(pinned))
    assert port_for(ports, "0001-fix.patch", "1.5.1") is not None
    assert port_for(ports, "0001-fix.patch", "1.4.1") is None
    matrix = build_matrix(_series(pinned), ports, releases)
    cell = matrix.row("0001-fix").cells["1.5.1"]
    assert cell.port is not None
    assert cell.port.status is Status.APPLIES
    assert cell.short == "conflict h1 / port applies"
    assert matrix.row("0001-fix").cells["1.2.0"].port is None
    assert matrix.row("0001-fix").verdict.text.endswith("(port 1.5.1)")

    data = json.loads(render_json(matrix))
    assert data["patches"][0]["cells"]["1.5.1"]["port"]["status"] == "applies"
    assert "| `0001-fix.patch` | applies | conflict h1 / port applies |" in render_markdown(matrix)
    table = render_table(matrix)
    assert table.splitlines()[0].split() == ["patch", "1.2.0", "1.5.1"]


def test_ports_must_be_named_after_series_patches(tmp_path: Path) -> None:
    folder = tmp_path / "patches"
    (folder / "ports" / "1.5.1").mkdir(parents=True)
    stray = _patch("0009-stray.patch", BASE, FIXED).text
    (folder / "ports" / "1.5.1" / "0009-stray.patch").write_text(stray, encoding="utf-8")
    with pytest.raises(UpstreamError, match="does not belong to a patch of the series"):
        load_ports(folder, _series(_patch("0001-fix.patch", BASE, FIXED)))
    (folder / "ports" / "1.5.1" / "0009-stray.patch").unlink()
    (folder / "ports" / "latest").mkdir()
    with pytest.raises(UpstreamError, match="not named after an executorch release"):
        load_ports(folder, _series(_patch("0001-fix.patch", BASE, FIXED)))


def test_cumulative_patches_on_one_file() -> None:
    first = _patch("0001-a.patch", BASE, _edit(BASE, "line 5\n", "line 5 a\n"))
    after_first = _edit(BASE, "line 5\n", "line 5 a\n")
    second = _patch("0002-b.patch", after_first, _edit(after_first, "line 6\n", "line 6 b\n"))
    matrix = build_matrix(_series(first, second), {}, [_release("1.2.0", BASE)])
    assert [r.cells["1.2.0"].check.status for r in matrix.rows] == [Status.APPLIES] * 2


def test_matrix_pin_knows_recorded_and_new_releases() -> None:
    assert SHARED.matrix_pin("1.5.1").sha256 == (
        "274c28c2fe2b76acb03f9fa381537425c40e0098dcf886baf6d97a1a55ffe300"
    )
    new = SHARED.matrix_pin("9.9.9")
    assert new.sha256 == ""
    assert new.filename == "executorch-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    with pytest.raises(TargetError, match="not a release version"):
        SHARED.matrix_pin("latest")
    matrix_120 = SHARED.matrix_pin("1.2.0")
    pinned_120 = next(p for p in PINS.wheels if p.filename == matrix_120.filename)
    assert pinned_120.sha256 == matrix_120.sha256


def test_unrecorded_release_says_which_line_to_add() -> None:
    plain = _patch("0001-plain.patch", BASE, FIXED)
    release = Release(
        "9.9.9", Path("executorch-9.9.9.whl"), "ab" * 32, False, {PATH: BASE.encode()}
    )
    table = render_table(build_matrix(_series(plain), {}, [release]))
    assert f'"9.9.9" = "{"ab" * 32}"' in table
    assert "[matrix.sha256]" in table


@pytest.mark.integration
def test_matrix_on_real_releases() -> None:
    series = load_series(ROOT / "patches" / "1.2.0")
    matrix = run_matrix(series, ROOT / "patches" / "1.2.0", SHARED.matrix_versions)
    assert matrix.versions == SHARED.matrix_versions
    assert all(r.pinned for r in matrix.releases.values())  # sha256 checked on fetch
    for row in matrix.rows:
        assert row.cells["1.2.0"].check.status is Status.APPLIES, row.name

    int16 = matrix.row("0001-keep-terminal-int16-quantize")
    newest = int16.cells["1.5.1"]
    assert newest.check.status is Status.CONFLICT
    assert newest.port is not None
    assert newest.port.status is Status.APPLIES
    assert int16.verdict.needs_upstream

    conv = matrix.row("0003-conv-rescale-qparams-from-source")
    assert conv.verdict.text.startswith("drop: fixed upstream in 1.3.0 (22867a9148)")
    for version in ("1.3.1", "1.4.1", "1.5.1"):
        assert conv.cells[version].check.status not in (Status.APPLIES, Status.OFFSET)
    # Upstream's fix (22867a9148) is in 1.3.1 but not 1.2.0.
    rewrite = "backends/arm/_passes/rewrite_conv_pass.py"
    assert b"_get_effective_output_qparams" in matrix.releases["1.3.1"].files[rewrite]
    assert b"_get_effective_output_qparams" not in matrix.releases["1.2.0"].files[rewrite]

    slots = matrix.row("0004-distinct-output-transpose-slots")
    assert slots.cells["1.5.1"].check.status is Status.MISSING
    assert "backends/arm/_passes/ensure_unique_output_nodes_pass.py" in (
        matrix.releases["1.3.1"].files
    )
    assert not matrix.row("0002-skip-factory-op-annotation").verdict.needs_upstream
    assert [r.name for r in matrix.rows if r.verdict.needs_upstream] == [int16.name]


def test_behaviour_decides_the_verdict_where_it_was_measured() -> None:
    from overlay.equivalence.verdict import Quality
    from overlay.upstream.behaviour import CaseOutcome, decide_patch
    from overlay.upstream.prepare import attribute, with_behaviour

    plain = _patch("0001-plain.patch", BASE, FIXED)
    matrix = build_matrix(_series(plain), {}, [_release("1.2.0", BASE), _release("1.5.1", BASE)])
    assert matrix.row("0001-plain").verdict.action == "upstream"  # text alone: send
    text_only = with_behaviour(matrix, {})
    assert text_only.row("0001-plain").verdict.text.endswith("(text only: no behaviour measured)")

    def case(stock: Quality, patched: Quality) -> CaseOutcome:
        return CaseOutcome("grid", stock, patched, None, "RuntimeError: refused")

    fixed = decide_patch("0001-plain.patch", "1.5.1", [case(Quality.RIGHT, Quality.RIGHT)], [],
                         kept=True)  # fmt: skip
    dropped = with_behaviour(matrix, {"0001-plain.patch": {"1.5.1": fixed}})
    assert dropped.row("0001-plain").verdict.action == "drop"
    assert "trigger cases now pass on stock" in dropped.row("0001-plain").verdict.text
    works = decide_patch("0001-plain.patch", "1.5.1", [case(Quality.FAILED, Quality.RIGHT)], [],
                         kept=True)  # fmt: skip
    sent = with_behaviour(matrix, {"0001-plain.patch": {"1.2.0": fixed, "1.5.1": works}})
    assert sent.row("0001-plain").verdict.action == "upstream"
    assert sent.row("0001-plain").verdict.text.startswith("send upstream (the patch): fails")
    table = render_table(sent)
    assert "applies; fails->passes" in table and "applies; fixed on stock" in table
    assert json.loads(render_json(sent))["behaviour"]["0001-plain.patch"]["1.5.1"]["outcome"] == (
        "fails before, passes after"
    )
    regress = decide_patch("0001-plain.patch", "1.5.1", [case(Quality.FAILED, Quality.RIGHT)], [],
                           kept=True, regressions=["conv"])  # fmt: skip
    ported = with_behaviour(matrix, {"0001-plain.patch": {"1.5.1": regress}})
    assert ported.row("0001-plain").verdict.action == "port"
    assert attribute(["a", "int16_quantize_output"], "0001-keep-terminal-int16-quantize", 4) == [
        "int16_quantize_output"
    ]
    assert attribute(["a"], "0009-unknown.patch", 1) == ["a"]
