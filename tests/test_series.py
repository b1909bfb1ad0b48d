"""The committed patch series: headers, paths, round trips, checksums (no network, no torch)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from unidiff.patch import PatchSet

from overlay import fixes, lines
from overlay.errors import SeriesError, UnsafePatchError
from overlay.lines import pins
from overlay.text.series import (
    HEADER_END,
    Series,
    load_series,
    normalize_counts,
    parse_dep3,
    parse_patch,
    split_header,
)
from overlay.upstream.upstream_pins import for_series

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


def test_series_lists_the_six_fixes_in_order(series: Series) -> None:
    assert [p.name for p in series.patches] == [
        "0001-keep-terminal-int16-quantize.patch",
        "0002-skip-factory-op-annotation.patch",
        "0003-conv-rescale-qparams-from-source.patch",
        "0004-distinct-output-transpose-slots.patch",
        "0005-int16-table-negative-rshift.patch",
        "0006-pool-default-stride.patch",
    ]
    assert [p.issues for p in series.patches] == [(), (18322,), (18491,), (18320,), (), ()]


def test_every_diff_round_trips_byte_for_byte(series: Series) -> None:
    for patch in series.patches:
        raw = (PATCHES / patch.name).read_text(encoding="utf-8")
        header, diff = split_header(raw, name=patch.name)
        assert str(PatchSet(diff)) == diff, patch.name  # no count normalisation needed
        assert header + HEADER_END + diff == raw


def test_headers_are_dep3(series: Series) -> None:
    for patch in series.patches:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", patch.header["Last-Update"])
        forwarded = patch.header["Forwarded"]
        assert forwarded in ("no", "not-needed") or forwarded.startswith("https://")
        assert patch.subject and patch.description_body
        if "Bug" in patch.header:
            assert patch.header["Bug"].startswith("https://github.com/pytorch/executorch/issues/")
    assert (
        "22867a9148"
        in series.get("0003-conv-rescale-qparams-from-source").header["Applied-Upstream"]
    )
    backport = series.get("0005-int16-table-negative-rshift").header
    assert backport["Origin"].startswith("upstream, https://github.com/pytorch/executorch/commit/")
    assert backport["Applied-Upstream"].startswith("1.4.0, ")


def test_paths_are_upstream_repo_paths_and_pinned(series: Series) -> None:
    for patch in series.patches:
        for patched_file in patch.files:
            assert patched_file.source_file.startswith("a/backends/arm/")
            assert patched_file.target_file.startswith("b/backends/arm/")
    assert set(series.targets()) == set(series.pins.pristine)


def test_checksums_are_current(series: Series) -> None:
    assert series.checksums_for == series.digest
    assert set(series.expected_patched_sha256()) == set(series.targets())


def test_the_seed_grouped_transpose_check_is_not_carried(series: Series) -> None:
    text = "".join(p.diff for p in series.patches)
    assert "Grouped transpose convolutions are not supported" not in text


def test_normalize_counts() -> None:
    assert normalize_counts("@@ -3 +3 @@\n") == "@@ -3,1 +3,1 @@\n"
    assert normalize_counts("@@ -0,0 +1 @@ f\n") == "@@ -0,0 +1,1 @@ f\n"
    assert normalize_counts("@@ -1,2 +1,3 @@\n") == "@@ -1,2 +1,3 @@\n"


def test_dep3_continuation_and_errors() -> None:
    fields = parse_dep3(
        "Description: Short\n Long line\n .\n More\nForwarded: no\nLast-Update: 2026-01-01\n",
        name="x",
    )
    assert fields["Description"] == "Short\n Long line\n .\n More"
    with pytest.raises(SeriesError, match="lacks Forwarded, Last-Update"):
        parse_dep3("Description: x\n", name="x")
    with pytest.raises(SeriesError, match="appears twice"):
        parse_dep3("Description: x\nDescription: y\n", name="x")


def test_series_file_rejects_paths(tmp_path: Path) -> None:
    (tmp_path / "series").write_text("../outside.patch\n")
    with pytest.raises(UnsafePatchError, match="not a plain file name"):
        load_series(tmp_path)
    (tmp_path / "series").write_text("a.patch\na.patch\n")
    with pytest.raises(SeriesError, match="twice") as info:
        load_series(tmp_path)
    assert type(info.value) is SeriesError


def test_registry_and_series_name_the_same_fixes(series: Series) -> None:
    assert [f.patch for f in fixes.FIXES] == [p.name for p in series.patches]
    for entry, patch in zip(fixes.FIXES, series.patches, strict=True):
        assert set(patch.targets) <= set(entry.repo_paths)  # other lines may touch more
        assert entry.number == int(patch.name[:4])
    owners: dict[tuple[str, str], set[int]] = {}
    for fix in fixes.FIXES:
        for trigger in fix.triggers:
            owners.setdefault((trigger.case, trigger.release), set()).add(fix.number)
    assert all(len(numbers) == 1 for numbers in owners.values())  # one fix per case and release
    for version in for_series(series.directory).matrix_versions:  # one claim per case, release
        claims = [t.case for f in fixes.FIXES for t in f.triggers if t.applies_to(version)]
        assert len(claims) == len(set(claims)), version


def test_pins_file_is_read_into_types(series: Series) -> None:
    pinned = series.pins
    assert str(pinned.executorch) == "1.2.0"
    assert pinned.pythons == ("3.11", "3.12")
    assert pinned.runtime_requirements()[0] == "torch==2.11.0"
    assert pinned.wheel_for("cp312-manylinux_2_28_x86_64").python == "3.12"
    shared = for_series(series.directory)  # the matrix moved to patches/upstream.toml
    assert shared.matrix_pin("1.5.1").sha256.startswith("274c28c2")
    assert shared.matrix_pin("9.9.9").sha256 == ""
    assert pinned.module_name("backends/arm/x/y.py") == "executorch.backends.arm.x.y"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("not toml = = =", "TOMLDecodeError"),
        ("[executorch]\nversion = 3\n", "a [runtime] table"),
    ],
)
def test_bad_pins_file_is_a_series_error(tmp_path: Path, text: str, found: str) -> None:
    (tmp_path / pins.PINS_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        pins.load(tmp_path)
    assert found in str(info.value)


def test_non_utf8_series_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "series").write_bytes(b"0001-a.patch # caf\xe9\n")
    with pytest.raises(SeriesError) as info:
        load_series(tmp_path)
    assert info.value.found == "byte 0xe9 on line 1"


def test_default_directory_prefers_env_then_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lines.PATCHES_ENV, str(tmp_path / "mine"))
    assert lines.default_root() == tmp_path / "mine"
    monkeypatch.delenv(lines.PATCHES_ENV)
    monkeypatch.chdir(PATCHES / "ports")
    assert lines.default_root() == PATCHES.parent
    monkeypatch.chdir(tmp_path)
    assert lines.default_root() == (lines.packaged_root() or PATCHES.parent)


def test_missing_series_file(tmp_path: Path) -> None:
    with pytest.raises(SeriesError, match="no series file"):
        load_series(tmp_path)


HEADER = "Description: d\nForwarded: no\nLast-Update: 2026-12-02\n---\n"
DIFF = "--- a/backends/x.py\n+++ b/backends/x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n"


def test_text_unidiff_would_drop_is_refused() -> None:
    parse_patch("ok.patch", HEADER + DIFF)
    with pytest.raises(SeriesError) as info:
        parse_patch("t.patch", HEADER + DIFF + "trailing text unidiff drops\n")
    assert info.value.message == "patch t.patch does not survive a unidiff round trip"


def test_a_mode_change_next_to_hunks_is_refused() -> None:
    mode = "diff --git a/backends/x.py b/backends/x.py\nold mode 100644\nnew mode 100755\n"
    with pytest.raises(UnsafePatchError) as info:
        parse_patch("m.patch", HEADER + mode + DIFF)
    assert info.value.message == "patch m.patch changes the file mode of backends/x.py"
