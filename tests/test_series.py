"""The committed patch series: headers, paths, round trips, checksums (no network, no torch)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest
from unidiff.patch import PatchSet

from overlay import fixes, lines
from overlay.errors import SeriesError, UnsafePatchError
from overlay.lines import pins
from overlay.lines.listing import read_series_names, read_text
from overlay.text.file_diffs import check_repo_path
from overlay.text.series import (
    HEADER_END,
    Series,
    format_checksums,
    load_series,
    normalize_counts,
    parse_checksums,
    parse_dep3,
    parse_patch,
    split_header,
)
from overlay.upstream.upstream_pins import for_series

from scaffold import created_diff, make_diff, patch_text, write_series

PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


@pytest.mark.parametrize("line", lines.all_lines(PATCHES.parent), ids=lambda line: line.name)
def test_every_line_lists_its_fixes_by_ascending_number(line: lines.Line) -> None:
    series = load_series(line.directory)
    numbers = [p.number for p in series.patches]
    assert numbers == sorted(numbers) and numbers == [f.number for f in fixes.carried_by(line)]
    for patch in series.patches:
        assert patch.targets and all(t.startswith("backends/arm/") for t in patch.targets)
        assert patch.header["Forwarded"] and patch.header["Last-Update"]


def test_a_series_names_its_fixes_by_patch_number(tmp_path: Path) -> None:
    old = {p: "".join(f"{p[-4]}{i} = {i}\n" for i in range(9)) for p in ("x/a.py", "x/b.py")}
    patches = {
        "0002-a.patch": patch_text("A", make_diff("x/a.py", old["x/a.py"], "a\n")),
        "0010-b.patch": patch_text("B", make_diff("x/b.py", old["x/b.py"], "b\n")),
        "0003-ab.patch": patch_text(
            "AB", make_diff("x/a.py", "a\n", "A\n") + make_diff("x/b.py", "b\n", "B\n")
        ),
    }
    series = write_series(tmp_path, patches, {p: t.encode() for p, t in old.items()})
    assert [p.number for p in series.patches] == [2, 10, 3]  # series order, not sorted
    assert series.numbers == {2, 3, 10}
    assert [p.name for p in series.of({3, 2})] == ["0002-a.patch", "0003-ab.patch"]
    assert series.of(set()) == ()
    assert series.touching("x/a.py") == {2, 3} and series.touching("x/c.py") == set()
    assert series.numbers_of(["0010-b.patch", "0004-gone.patch", "0003-ab.patch"]) == {3, 10}


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
        assert patch.subject and "\n " in patch.header["Description"]  # a long description
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
    (tmp_path / "series").write_text("0001-a.patch\n0001-a.patch\n")
    with pytest.raises(SeriesError, match="twice") as info:
        load_series(tmp_path)
    assert type(info.value) is SeriesError


@pytest.mark.parametrize(
    ("names", "found"),
    [
        ("a.patch", "a.patch"),
        ("1-a.patch", "1-a.patch"),
        ("0001.patch", "0001.patch"),
        ("0001-a.diff", "0001-a.diff"),
        ("0001-a.patch\n0002-b.patch\n0001-b.patch", "0001-a.patch, 0001-b.patch"),
    ],
)
def test_a_patch_is_named_after_a_fix_of_its_own(tmp_path: Path, names: str, found: str) -> None:
    (tmp_path / "series").write_text(names + "\n")
    with pytest.raises(SeriesError) as info:
        read_series_names(tmp_path)
    entry = names.rsplit("\n", 1)[-1]
    assert info.value.message == f"series entry {entry!r} is not named after a fix of its own"
    assert info.value.found == found


def test_registry_and_series_name_the_same_fixes(series: Series) -> None:
    for patch in series.patches:
        entry = fixes.by_patch(patch.name)  # the patch's number; its name may differ per line
        assert entry is not None and entry.number == patch.number
        assert set(patch.targets) <= set(entry.repo_paths)  # other lines may touch more
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
        ('executorch = "1.2.0"\n', "a value for Pins.upstream_repo"),
        ("executorch = 3\n", "pins.toml.executorch: a str"),
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


def test_default_directory_prefers_env_then_the_tools_own_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(lines.PATCHES_ENV, str(tmp_path / "mine"))
    assert lines.default_root() == tmp_path / "mine"
    monkeypatch.delenv(lines.PATCHES_ENV)
    own = lines.packaged_root() or PATCHES.parent  # installed: its lines; editable: its checkout
    for where in (PATCHES / "locks", tmp_path):  # inside the checkout or not: the same lines
        monkeypatch.chdir(where)
        assert lines.default_root() == own


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


# --- every line's patches and edge samples (tests/data): parse -> str gives the same bytes --

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = sorted(PATCHES.parent.glob("*/*.patch")) + [
    DATA / "edge" / name
    for name in (
        "crlf-file.patch",
        "no-newline-at-eof.patch",
        "add-newline-at-eof.patch",
        "start-and-end.patch",
        "multiple-files.patch",
        "dep3-continuation.patch",
    )
]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_saved_samples_round_trip_byte_for_byte(path: Path) -> None:
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    patch = parse_patch(path.name, text)
    # git writes a one-line hunk as "@@ -0,0 +1 @@" (a new one-line .spirv.b64): unidiff
    # spells the count out, as the loader compares
    diff = normalize_counts(split_header(text, name=path.name)[1])
    assert str(patch.patch_set).encode() == diff.encode()
    assert (patch.header_text + HEADER_END + patch.diff).encode() == raw
    assert patch.text.encode() == raw
    assert str(PatchSet(patch.diff)) == diff  # twice: parsing is stable


def test_a_crlf_file_diff_keeps_its_crlf_content_lines() -> None:
    raw = (DATA / "edge" / "crlf-file.patch").read_bytes()  # read_text would translate CRLF
    patch = parse_patch("c.patch", raw.decode("utf-8"))
    lines = [str(line) for hunk in patch.files[0] for line in hunk]
    assert lines and all(line.endswith("\r\n") for line in lines)
    assert patch.targets == ("backends/arm/crlf.py",)


def test_a_patch_saved_with_crlf_ends_is_refused() -> None:
    raw = (DATA / "edge" / "crlf-whole.patch").read_bytes()
    assert b"\r\n---\r\n" in raw  # the header separator itself has CRLF
    with pytest.raises(SeriesError) as info:
        parse_patch("w.patch", raw.decode("utf-8"))
    assert info.value.message == "patch w.patch has no DEP-3 header"


def test_no_newline_markers_survive_parsing() -> None:
    text = (DATA / "edge" / "no-newline-at-eof.patch").read_text(encoding="utf-8")
    patch = parse_patch("n.patch", text)
    assert str(patch.patch_set).count("\\ No newline at end of file\n") == 2
    added = parse_patch(
        "a.patch", (DATA / "edge" / "add-newline-at-eof.patch").read_text(encoding="utf-8")
    )
    assert str(added.patch_set).count("\\ No newline at end of file\n") == 1


def test_several_files_and_hunks_keep_their_order() -> None:
    text = (DATA / "edge" / "multiple-files.patch").read_text(encoding="utf-8")
    patch = parse_patch("m.patch", text)
    assert patch.targets == ("backends/arm/m0/a.py", "backends/arm/m1/b.py", "backends/arm/m2/c.py")
    assert [len(f) for f in patch.files] == [2, 2, 2]
    assert [(h.source_start, h.target_start) for h in patch.files[1]] == [(1, 1), (17, 17)]
    edge = parse_patch(
        "e.patch", (DATA / "edge" / "start-and-end.patch").read_text(encoding="utf-8")
    )
    hunks = list(edge.files[0])
    assert (hunks[0].source_start, hunks[-1].source_start + hunks[-1].source_length) == (1, 31)


def test_dep3_continuation_lines_in_any_field() -> None:
    text = (DATA / "edge" / "dep3-continuation.patch").read_text(encoding="utf-8")
    patch = parse_patch("d.patch", text)
    assert patch.subject == "Keep the quantize node of a terminal int16 output"
    assert patch.header["Description"] == (
        "Keep the quantize node of a terminal int16 output\n"
        " The folding pass removed the last quantize node of a graph whose output\n"
        " is int16, so the delegate returned float data.\n"
        " .\n"
        " Keep the node when it feeds the graph output."
    )
    assert patch.issues == (18322, 18491)  # the Bug field continues on the next line
    assert patch.header["Reviewed-by"] == ""
    assert patch.header["Origin"] == "vendor, https://example.org/fix"
    assert list(patch.header) == [
        "Description",
        "Author",
        "Origin",
        "Bug",
        "Reviewed-by",
        "Forwarded",
        "Last-Update",
    ]


def test_short_hunk_counts_round_trip_as_spelled_out_counts() -> None:
    text = (DATA / "edge" / "short-counts.patch").read_text(encoding="utf-8")
    patch = parse_patch("s.patch", text)
    assert "@@ -2 +2 @@\n" in patch.diff  # kept as written
    assert str(patch.patch_set) == normalize_counts(patch.diff)
    assert "@@ -2,1 +2,1 @@\n" in str(patch.patch_set)


# --- every refusal says what was expected, what was found, and the next step --------------

GIT_LINE = "diff --git a/backends/x.py b/backends/x.py\n"
Refusal = tuple[type[SeriesError], str, str | None, str | None, str | None]
HINT_EDIT = "regenerate the patch from a clean work tree (`executorch-arm-overlay edit`)"
HINT_P1 = "regenerate the patch with `git diff` or `executorch-arm-overlay edit`"
HINT_GIT = (
    "the overlay edits files and creates text files; it does not delete, rename, copy,"
    " change modes or carry binary content: drop that part of the diff"
)
HINT_EXT = "regenerate the patch with `git diff` of a content-only change"
EXPECT_PATH = "a relative path inside the executorch tree, like backends/arm/..."
EXPECT_GIT = (
    "text hunks that edit files the pinned wheel ships or create text files"
    " ('new file mode 100644' with '--- /dev/null')"
)
EXPECT_MOD = "edits of files the pinned wheel ships, or new text files"
EXPECT_EXT = "'diff --git' and 'index <a>..<b> 100644' (or 100755) only"
PATH_PROBLEMS = {
    "nul": "an empty path or one with NUL or backslash characters",
    "abs": "an absolute path",
    "parts": "a path with '..', '.' or empty components",
}

PATCH_REFUSALS: dict[str, tuple[str, Refusal]] = {
    "no header": (
        DIFF,
        (
            SeriesError,
            "patch p.patch has no DEP-3 header",
            "'Description:' and other fields, then a line '---', then the diff",
            "the diff starts without a header separator",
            "add a DEP-3 header (see patches/*.patch for the form)",
        ),
    ),
    "not a field": (
        "Description: d\nnot a field\n---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch: header line 2 is not a DEP-3 field",
            "'Field: value' or a continuation line starting with a space",
            "'not a field'",
            "fix the header of the patch",
        ),
    ),
    "field twice": (
        "Description: d\nDescription: e\n---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch: header field Description appears twice",
            None,
            "Description: e",
            None,
        ),
    ),
    "fields missing": (
        "Description: d\nForwarded:  \nOrigin: x\n---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch: DEP-3 header lacks Forwarded, Last-Update",
            "Description, Forwarded, Last-Update",
            "Description, Forwarded, Origin",
            "add the missing fields",
        ),
    ),
    "no fields": (
        "---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch: DEP-3 header lacks Description, Forwarded, Last-Update",
            "Description, Forwarded, Last-Update",
            "no fields",
            "add the missing fields",
        ),
    ),
    "malformed hunk": (
        HEADER + "--- a/backends/x.py\n+++ b/backends/x.py\n@@ -1,3 +1,3 @@\n-x\n+X\n y\n",
        (
            SeriesError,
            "patch p.patch is not a well-formed unified diff: Hunk is shorter than expected",
            "hunks whose line counts match their @@ headers",
            "a truncated or malformed diff",
            "regenerate the patch (`executorch-arm-overlay edit`, then `refresh`)",
        ),
    ),
    "no file": (
        HEADER + "just text\n",
        (SeriesError, "patch p.patch changes no file", None, None, "remove it from the series"),
    ),
    "no hunk": (
        HEADER + GIT_LINE + "--- a/backends/x.py\n+++ b/backends/x.py\n",
        (
            SeriesError,
            "patch p.patch has no hunk for backends/x.py",
            "one or more @@ hunks per file",
            "a file header with nothing to apply",
            "drop the empty file diff",
        ),
    ),
    "round trip": (
        HEADER + DIFF + "stray\n",
        (
            SeriesError,
            "patch p.patch does not survive a unidiff round trip",
            "a plain unified diff (unidiff parse -> str gives the same bytes)",
            "text unidiff drops or rewrites (stray lines between hunks, CR line ends)",
            "regenerate the patch with `git diff`",
        ),
    ),
    "new file without a git line": (
        HEADER + "new file mode 100644\n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch creates backends/x.py",
            EXPECT_GIT,
            "'new file mode 100644'",
            HINT_GIT,
        ),
    ),
    "rename lines after the hunks": (
        HEADER + DIFF + GIT_LINE + "rename from backends/x.py\nrename to backends/y.py\n",
        (
            UnsafePatchError,
            "patch p.patch renames backends/x.py",
            EXPECT_GIT,
            "'rename from backends/x.py'",
            HINT_GIT,
        ),
    ),
    "similarity": (
        HEADER + "similarity index 90%\n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch renames or copies backends/x.py",
            EXPECT_GIT,
            "'similarity index 90%'",
            HINT_GIT,
        ),
    ),
    "git binary": (
        HEADER + GIT_LINE + "index 1111111..2222222\nGIT binary patch\nliteral 1\nIcmZ?d00001\n",
        (
            UnsafePatchError,
            "patch p.patch contains a binary diff for backends/x.py",
            EXPECT_GIT,
            "'GIT binary patch'",
            HINT_GIT,
        ),
    ),
    "creates an executable": (
        HEADER + GIT_LINE + "new file mode 100755\n--- /dev/null\n+++ b/backends/x.py\n"
        "@@ -0,0 +1,1 @@\n+x\n",
        (
            UnsafePatchError,
            "patch p.patch creates backends/x.py",
            EXPECT_GIT,
            "'new file mode 100755'",
            HINT_GIT,
        ),
    ),
    "creates from more than nothing": (
        HEADER + "--- /dev/null\n+++ b/backends/x.py\n@@ -1,1 +1,1 @@\n-x\n+y\n",
        (
            SeriesError,
            "patch p.patch creates backends/x.py from more than nothing",
            "one hunk '@@ -0,0 +1,N @@' after '--- /dev/null'",
            "1 hunk(s), the first from line 1",
            "regenerate the patch with `git diff`",
        ),
    ),
    "binary content in a text hunk": (
        HEADER + "--- /dev/null\n+++ b/backends/x.spv\n@@ -0,0 +1,1 @@\n+\x03\x02#\x07\x00\n",
        (
            UnsafePatchError,
            "patch p.patch carries binary content for backends/x.spv",
            "text lines (no NUL bytes)",
            "a NUL byte in a hunk line",
            HINT_GIT,
        ),
    ),
    "deletes": (
        HEADER + "--- a/backends/x.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n",
        (
            UnsafePatchError,
            "patch p.patch deletes backends/x.py",
            EXPECT_MOD,
            "a diff that deletes a file",
            HINT_GIT,
        ),
    ),
    "renames": (
        HEADER + "--- a/backends/x.py\n+++ b/backends/y.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            UnsafePatchError,
            "patch p.patch renames or links backends/y.py",
            EXPECT_MOD,
            "a diff that renames or links a file",
            HINT_GIT,
        ),
    ),
    "index of another mode": (
        HEADER + GIT_LINE + "index 1111111..2222222 100600\n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch has an extended header line the applier would ignore",
            EXPECT_EXT,
            "'index 1111111..2222222 100600'",
            HINT_EXT,
        ),
    ),
    "unknown extended line": (
        HEADER + GIT_LINE + "index 1111111..2222222\nsome other line\n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch has an extended header line the applier would ignore",
            EXPECT_EXT,
            "'some other line'",
            HINT_EXT,
        ),
    ),
    "source not -p1": (
        HEADER + "--- c/backends/x.py\n+++ b/backends/x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            SeriesError,
            "patch p.patch is not a -p1 diff",
            "paths starting with 'a/' (git diff style)",
            "'c/backends/x.py'",
            HINT_P1,
        ),
    ),
    "target not -p1": (
        HEADER + "--- a/backends/x.py\n+++ c/backends/x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            SeriesError,
            "patch p.patch is not a -p1 diff",
            "paths starting with 'b/' (git diff style)",
            "'c/backends/x.py'",
            HINT_P1,
        ),
    ),
    "dot-dot path": (
        HEADER + "--- a/../x.py\n+++ b/../x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            UnsafePatchError,
            "patch p.patch names an unsafe path",
            EXPECT_PATH,
            f"'a/../x.py' ({PATH_PROBLEMS['parts']})",
            HINT_EDIT,
        ),
    ),
    "header starts with a blank line": (
        "\n" + HEADER + DIFF,
        (
            SeriesError,
            "patch p.patch: header line 1 is not a DEP-3 field",
            "'Field: value' or a continuation line starting with a space",
            "''",
            "fix the header of the patch",
        ),
    ),
    "header starts with a continuation line": (
        " stray\n" + HEADER + DIFF,
        (
            SeriesError,
            "patch p.patch: header line 1 is not a DEP-3 field",
            "'Field: value' or a continuation line starting with a space",
            "' stray'",
            "fix the header of the patch",
        ),
    ),
    "only a header, no separator": (
        "Description: d\nForwarded: no",
        (
            SeriesError,
            "patch p.patch has no DEP-3 header",
            "'Description:' and other fields, then a line '---', then the diff",
            "the diff starts without a header separator",
            "add a DEP-3 header (see patches/*.patch for the form)",
        ),
    ),
    "diff --git before the separator": (
        GIT_LINE + "---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch has no DEP-3 header",
            "'Description:' and other fields, then a line '---', then the diff",
            "the diff starts without a header separator",
            "add a DEP-3 header (see patches/*.patch for the form)",
        ),
    ),
    "file header before the separator": (
        "--- a/x\n+++ b/x\n---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch has no DEP-3 header",
            "'Description:' and other fields, then a line '---', then the diff",
            "the diff starts without a header separator",
            "add a DEP-3 header (see patches/*.patch for the form)",
        ),
    ),
    "hunk before the separator": (
        "@@ -1 +1 @@\n---\n" + DIFF,
        (
            SeriesError,
            "patch p.patch has no DEP-3 header",
            "'Description:' and other fields, then a line '---', then the diff",
            "the diff starts without a header separator",
            "add a DEP-3 header (see patches/*.patch for the form)",
        ),
    ),
    "mode change and nothing else": (
        HEADER + "old mode 100644\n",
        (
            UnsafePatchError,
            "patch p.patch changes the file mode of ?",
            EXPECT_GIT,
            "'old mode 100644'",
            HINT_GIT,
        ),
    ),
    "new executable from /dev/null without a git line": (
        HEADER
        + "new file mode 100755\n--- /dev/null\n+++ b/backends/my file.py\n@@ -0,0 +1 @@\n+x\n",
        (
            UnsafePatchError,
            "patch p.patch creates backends/my file.py",
            EXPECT_GIT,
            "'new file mode 100755'",
            HINT_GIT,
        ),
    ),
    "deleted file without a git line": (
        HEADER
        + "deleted file mode 100644\n--- a/backends/x.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
        (
            UnsafePatchError,
            "patch p.patch deletes backends/x.py",
            EXPECT_GIT,
            "'deleted file mode 100644'",
            HINT_GIT,
        ),
    ),
    "extended line with trailing blanks": (
        HEADER + GIT_LINE + "index 1111111..2222222\nsome other line  \n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch has an extended header line the applier would ignore",
            EXPECT_EXT,
            "'some other line  '",
            HINT_EXT,
        ),
    ),
    "extended line ending in X": (
        HEADER + GIT_LINE + "index 1111111..2222222\nsome other lineX\n" + DIFF,
        (
            UnsafePatchError,
            "patch p.patch has an extended header line the applier would ignore",
            EXPECT_EXT,
            "'some other lineX'",
            HINT_EXT,
        ),
    ),
    "a drive letter after the prefix": (
        HEADER + "--- a/c:x.py\n+++ b/c:x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            UnsafePatchError,
            "patch p.patch names an unsafe path",
            EXPECT_PATH,
            f"'c:x.py' ({PATH_PROBLEMS['abs']})",
            HINT_EDIT,
        ),
    ),
    "absolute path": (
        HEADER + "--- /etc/x.py\n+++ /etc/x.py\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n",
        (
            UnsafePatchError,
            "patch p.patch names an unsafe path",
            EXPECT_PATH,
            f"'/etc/x.py' ({PATH_PROBLEMS['abs']})",
            HINT_EDIT,
        ),
    ),
}


def assert_refusal(exc: SeriesError, refusal: Refusal) -> None:
    kind, message, expected, found, hint = refusal
    assert type(exc) is kind
    assert (exc.message, exc.expected, exc.found, exc.hint) == (message, expected, found, hint)


@pytest.mark.parametrize("case", PATCH_REFUSALS, ids=str)
def test_every_malformed_patch_is_one_exact_refusal(case: str) -> None:
    text, refusal = PATCH_REFUSALS[case]
    with pytest.raises(SeriesError) as info:
        parse_patch("p.patch", text)
    assert_refusal(info.value, refusal)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("", "nul"),
        ("a\0b", "nul"),
        ("a\\b", "nul"),
        ("/x", "abs"),
        ("c:/x", "abs"),
        ("Z:x", "abs"),
        ("a/./b", "parts"),
        ("a//b", "parts"),
        ("a/..", "parts"),
        ("./a", "parts"),
        ("a/", "parts"),
    ],
)
def test_unsafe_repository_paths(raw: str, problem: str) -> None:
    with pytest.raises(UnsafePatchError) as info:
        check_repo_path(raw, patch="p")
    refusal = (
        UnsafePatchError,
        "patch p names an unsafe path",
        EXPECT_PATH,
        f"{raw!r} ({PATH_PROBLEMS[problem]})",
        HINT_EDIT,
    )
    assert_refusal(info.value, refusal)


@pytest.mark.parametrize("raw", ["a", "backends/arm/x.py", "a.b/c..d/.e", "9:x", "ab:c"])
def test_safe_repository_paths_are_kept(raw: str) -> None:
    assert check_repo_path(raw, patch="p") == raw


def _good_line(folder: Path) -> Series:
    old = "".join(f"v{i}\n" for i in range(10))
    patches = {
        "0001-a.patch": patch_text("A", make_diff("backends/a.py", old, old.replace("v3", "V3")))
    }
    return write_series(folder, patches, {"backends/a.py": old.encode()})


def test_series_folder_refusals(tmp_path: Path) -> None:
    def refused(folder: Path) -> SeriesError:
        with pytest.raises(SeriesError) as info:
            load_series(folder)
        return info.value

    missing = tmp_path / "nothing"
    assert_refusal(
        refused(missing),
        (
            SeriesError,
            f"no series file in {missing}",
            f"{missing}/series listing the patches in order",
            "nothing",
            "point --patches at the folder that holds 'series'",
        ),
    )
    unknown = tmp_path / "unknown"
    _good_line(unknown)
    (unknown / "series").write_text("0001-a.patch\n0002-b.patch # comment\n", encoding="utf-8")
    assert_refusal(
        refused(unknown),
        (
            SeriesError,
            "series lists patches that do not exist: 0002-b.patch",
            f"files in {unknown}",
            "0001-a.patch",
            "fix the series file or add the patches",
        ),
    )
    (unknown / "0003-c.patch").write_text("c", encoding="utf-8")
    (unknown / "series").write_text("0001-a.patch\n0002-b.patch\n0003-c.patch\n", encoding="utf-8")
    assert refused(unknown).found == "0001-a.patch, 0003-c.patch"
    (unknown / "0001-a.patch").unlink()
    (unknown / "0003-c.patch").unlink()
    assert refused(unknown).found == "no patch files"
    assert refused(unknown).message.endswith(": 0001-a.patch, 0002-b.patch, 0003-c.patch")
    unlisted = tmp_path / "unlisted"
    _good_line(unlisted)
    (unlisted / "0009-x.patch").write_text("x", encoding="utf-8")
    (unlisted / "0008-y.patch").write_text("y", encoding="utf-8")
    assert_refusal(
        refused(unlisted),
        (
            SeriesError,
            "patch files not in the series: 0008-y.patch, 0009-x.patch",
            "every *.patch listed in 'series'",
            "0008-y.patch, 0009-x.patch",
            "add them to 'series' or delete them",
        ),
    )
    twice = tmp_path / "twice"
    _good_line(twice)
    (twice / "series").write_text("0001-a.patch\n 0001-a.patch  # again\n", encoding="utf-8")
    assert_refusal(
        refused(twice),
        (SeriesError, "series lists 0001-a.patch twice", None, None, "remove the duplicate line"),
    )
    link = tmp_path / "link"
    _good_line(link)
    (link / "0001-a.patch").rename(link / "real")
    (link / "0001-a.patch").symlink_to(link / "real")
    assert_refusal(
        refused(link),
        (UnsafePatchError, "patch 0001-a.patch is a symlink", None, None, "commit the file itself"),
    )


@pytest.mark.parametrize("entry", [".hidden.patch", "a\\b.patch", "sub/a.patch"])
def test_series_entries_must_be_plain_names(tmp_path: Path, entry: str) -> None:
    (tmp_path / "series").write_text(f"# comment only\n\n{entry}  # why\n", encoding="utf-8")
    with pytest.raises(UnsafePatchError) as info:
        read_series_names(tmp_path)
    assert_refusal(
        info.value,
        (
            UnsafePatchError,
            f"series entry {entry!r} is not a plain file name",
            "a patch file name in the same folder",
            entry,
            None,
        ),
    )


def test_series_names_skip_comments_and_blank_lines(tmp_path: Path) -> None:
    (tmp_path / "series").write_text(
        "# the series\n\n  0001-a.patch   # first # really\n#0002-b.patch\n0003-c.patch\n",
        encoding="utf-8",
    )
    assert read_series_names(tmp_path) == ["0001-a.patch", "0003-c.patch"]


def test_checksum_refusals(tmp_path: Path) -> None:
    series = _good_line(tmp_path / "s")
    hint = "regenerate it: `executorch-arm-overlay refresh`"
    bare = dataclasses.replace(series, checksums_for=None)
    with pytest.raises(SeriesError) as info:
        bare.expected_patched_sha256()
    assert_refusal(
        info.value,
        (
            SeriesError,
            f"no SHA256SUMS in {tmp_path / 's'}",
            "the recorded sha256 of every file after the series",
            "no checksum file",
            hint,
        ),
    )
    digest = series.digest
    for stale, found in (
        (
            dataclasses.replace(series, checksums_for="f" * 64),
            f"series {'f' * 12} covering backends/a.py",
        ),
        (
            dataclasses.replace(series, patched_sha256={"other.py": "0" * 64, "x.py": "1" * 64}),
            f"series {digest[:12]} covering other.py, x.py",
        ),
        (dataclasses.replace(series, checksums_for=""), "series  covering backends/a.py"),
    ):
        with pytest.raises(SeriesError) as info:
            stale.expected_patched_sha256()
        assert_refusal(
            info.value,
            (
                SeriesError,
                "SHA256SUMS is stale: the patches changed since it was written",
                f"series {digest[:12]} covering backends/a.py",
                found,
                hint,
            ),
        )


def test_checksums_are_the_recorded_hashes(tmp_path: Path) -> None:
    series = _good_line(tmp_path / "s")
    recorded = series.expected_patched_sha256()
    assert list(recorded) == ["backends/a.py"]
    text = (tmp_path / "s" / "SHA256SUMS").read_text(encoding="utf-8")
    assert text == (
        "# sha256 of each file after the whole series; written by `python -m overlay refresh`\n"
        f"# series {series.digest}\n"
        f"{recorded['backends/a.py']}  backends/a.py\n"
    )
    assert format_checksums(series, recorded) == text
    assert parse_checksums(text, where=Path("x")) == (series.digest, recorded)
    assert parse_checksums("\n# other comment\n", where=Path("x")) == (None, {})
    recorded["backends/a.py"] = "0" * 64
    assert series.expected_patched_sha256()["backends/a.py"] != "0" * 64  # a copy


@pytest.mark.parametrize(
    "line",
    ["abc  a.py", "0" * 64 + "  ", "0" * 63 + "  a.py", "0" * 65 + "  a.py", "0" * 64 + " a.py"],
)
def test_malformed_checksum_lines(line: str) -> None:
    with pytest.raises(SeriesError) as info:
        parse_checksums(f"# series x\n{line}\n", where=Path("/s/SHA256SUMS"))
    assert_refusal(
        info.value,
        (
            SeriesError,
            "/s/SHA256SUMS: malformed line",
            "'<64 hex sha256>  <path>'",
            repr(line),
            "regenerate it: `executorch-arm-overlay refresh`",
        ),
    )


def test_checksum_paths_are_checked_like_diff_paths() -> None:
    with pytest.raises(UnsafePatchError) as info:
        parse_checksums("0" * 64 + "  ../a.py\n", where=Path("/s/SHA256SUMS"))
    assert info.value.message == "patch SHA256SUMS names an unsafe path"


def test_getting_a_patch_by_name(tmp_path: Path) -> None:
    series = _good_line(tmp_path / "s")
    assert series.get("0001-a.patch") is series.get("0001-a") is series.patches[0]
    with pytest.raises(SeriesError) as info:
        series.get("0002-b")
    assert_refusal(
        info.value,
        (
            SeriesError,
            "no patch '0002-b' in the series",
            "0001-a.patch",
            "0002-b",
            "list the series with `executorch-arm-overlay status`",
        ),
    )


def test_a_series_with_other_patches_has_no_checksums(tmp_path: Path) -> None:
    series = _good_line(tmp_path / "s")
    other = series.with_patches(())
    assert (other.directory, other.patches, other.pins) == (series.directory, (), series.pins)
    assert (other.checksums_for, other.patched_sha256) == (None, {})


def test_series_targets_are_in_first_touch_order(tmp_path: Path) -> None:
    old = {p: "".join(f"{p[0]}{i}\n" for i in range(8)) for p in ("b.py", "a.py", "c.py")}

    def diff(path: str) -> str:
        return make_diff(path, old[path], old[path].replace("3\n", "three\n"))

    patches = {
        "0001-x.patch": patch_text("X", diff("b.py") + diff("a.py")),
        "0002-y.patch": patch_text("Y", diff("c.py") + diff("b.py").replace("three", "3!")),
    }
    patches["0002-y.patch"] = patch_text("Y", diff("c.py"))
    series = write_series(tmp_path / "s", patches, {p: t.encode() for p, t in old.items()})
    assert series.targets() == ["b.py", "a.py", "c.py"]
    assert series.patches[0].targets == ("b.py", "a.py")


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(SeriesError) as info:
        read_text(tmp_path)  # a folder: an OSError
    assert info.value.message.startswith(f"cannot read {tmp_path}: [Errno 21] Is a directory")
    assert info.value.hint == "check the file's permissions"
    path = tmp_path / "f"
    path.write_bytes(b"ok\nline two\nthird \xfe line\n")
    with pytest.raises(SeriesError) as info:
        read_text(path)
    assert_refusal(
        info.value,
        (
            SeriesError,
            f"{path} is not UTF-8 text",
            "UTF-8 text (patches, series and SHA256SUMS are written as UTF-8)",
            "byte 0xfe on line 3",
            "regenerate the file (`executorch-arm-overlay regenerate` or `refresh`)",
        ),
    )
    path.write_bytes(b"crlf\r\nkept\r\n")
    assert read_text(path) == "crlf\r\nkept\r\n"


def _two_patch_line(folder: Path) -> Series:
    old = {p: "".join(f"{p[0]}{i}\n" for i in range(8)) for p in ("a.py", "b.py")}
    patches = {
        name: patch_text(name, make_diff(path, old[path], old[path].replace("3\n", "three\n")))
        for name, path in (("0001-a.patch", "a.py"), ("0002-b.patch", "b.py"))
    }
    return write_series(folder, patches, {p: t.encode() for p, t in old.items()})


def test_lists_in_messages_are_comma_separated(tmp_path: Path) -> None:
    series = _two_patch_line(tmp_path / "s")
    with pytest.raises(SeriesError) as info:
        series.get("0003")
    assert info.value.expected == "0001-a.patch, 0002-b.patch"
    stale = dataclasses.replace(series, checksums_for="0" * 64)
    with pytest.raises(SeriesError) as info:
        stale.expected_patched_sha256()
    assert info.value.expected == f"series {series.digest[:12]} covering a.py, b.py"


def test_a_series_without_checksums_still_loads(tmp_path: Path) -> None:
    series = _two_patch_line(tmp_path / "s")
    (tmp_path / "s" / "SHA256SUMS").unlink()
    bare = load_series(tmp_path / "s")
    assert bare.directory == tmp_path / "s"
    assert [p.name for p in bare.patches] == ["0001-a.patch", "0002-b.patch"]
    assert type(bare.patches) is tuple
    assert bare.pins.source == tmp_path / "s" / "pins.toml"
    assert (bare.checksums_for, bare.patched_sha256) == (None, {})
    assert bare.digest == series.digest


def test_checksum_paths_may_hold_double_blanks() -> None:
    digest, hashes = parse_checksums("0" * 64 + "  dir/a  b.py\n", where=Path("x"))
    assert (digest, hashes) == (None, {"dir/a  b.py": "0" * 64})


def test_an_odd_diff_git_line_still_gives_the_refusal() -> None:
    text = HEADER + "diff --git a/backends/x.py c/backends/x.py\nold mode 100644\n" + DIFF
    with pytest.raises(UnsafePatchError) as info:
        parse_patch("p.patch", text)  # no " b/" to split on: the whole line names the file
    assert info.value.message == (
        "patch p.patch changes the file mode of diff --git a/backends/x.py c/backends/x.py"
    )


GLSL = "#version 450\nvoid main() {}\n"


def test_a_patch_may_create_a_text_file_the_release_lacks(tmp_path: Path) -> None:
    diff = created_diff("backends/arm/new.glsl", GLSL) + make_diff("backends/a.py", "a\n", "b\n")
    series = write_series(
        tmp_path / "s", {"0001-c.patch": patch_text("C", diff)}, {"backends/a.py": b"a\n"}
    )
    patch = series.patches[0]
    assert patch.targets == ("backends/arm/new.glsl", "backends/a.py")
    assert patch.creates == ("backends/arm/new.glsl",)
    assert series.created == frozenset({"backends/arm/new.glsl"})
    assert series.pristine_sha256("backends/arm/new.glsl") is None
    assert series.pristine_sha256("backends/a.py") == hashlib.sha256(b"a\n").hexdigest()
    assert set(series.expected_patched_sha256()) == {"backends/arm/new.glsl", "backends/a.py"}


def test_a_created_file_has_one_creator_which_comes_first(tmp_path: Path) -> None:
    create = patch_text("C", created_diff("backends/new.glsl", GLSL))
    edit = patch_text("E", make_diff("backends/new.glsl", GLSL, GLSL + "// more\n"))
    with pytest.raises(SeriesError) as info:
        write_series(tmp_path / "twice", {"0001-c.patch": create, "0002-c.patch": create}, {})
    exc = info.value
    assert exc.message == (
        "patch 0002-c.patch creates backends/new.glsl, which 0001-c.patch touches before it"
    )
    assert exc.expected == "a new file created by the first patch that touches it"
    assert exc.found == "0001-c.patch, then 0002-c.patch"
    assert exc.hint == "merge the creations into one patch, or reorder the series"
    with pytest.raises(SeriesError, match=r"which 0001-e\.patch touches before it"):
        write_series(
            tmp_path / "late",
            {"0001-e.patch": edit, "0002-c.patch": create},
            {"backends/new.glsl": GLSL.encode()},
        )
    ordered = write_series(tmp_path / "ok", {"0001-c.patch": create, "0002-e.patch": edit}, {})
    assert ordered.created == frozenset({"backends/new.glsl"})
    assert ordered.touching("backends/new.glsl") == frozenset({1, 2})


def test_a_created_file_pinned_as_shipped_is_refused(tmp_path: Path) -> None:
    diff = created_diff("backends/new.glsl", GLSL) + created_diff("backends/b.glsl", GLSL)
    create = patch_text("C", diff)
    pinned = {"backends/new.glsl": b"x", "backends/b.glsl": b"y"}
    with pytest.raises(SeriesError) as info:
        write_series(tmp_path / "s", {"0001-c.patch": create}, {}, pinned=pinned)
    exc = info.value
    assert exc.message.startswith("the series creates backends/b.glsl, backends/new.glsl, which ")
    assert exc.message.endswith("pins.toml pins as shipped")
    assert exc.expected == "files the series creates absent from [pristine]"
    assert exc.found == "[pristine] entries for backends/b.glsl, backends/new.glsl"
    assert exc.hint == "drop the entries (the release lacks the file) or make the patch edit it"
