"""Offline: the patched-wheel repack and the install check on a small synthetic wheel."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from installer.sources import WheelFile

from overlay import _faults
from overlay._hashing import sha256_bytes, sha256_file
from overlay.distribution import index, wheels
from overlay.distribution import provenance as prov
from overlay.envs.verify_install import check_installed
from overlay.errors import (
    ChecksumMismatchError,
    InstallCheckError,
    PristineMismatchError,
    SeriesError,
    TargetError,
    WheelError,
)
from overlay.lines.pins import WheelPin
from overlay.text.series import Series, load_series

from scaffold import (
    created_diff,
    make_diff,
    patch_text,
    run_forked,
    unpack,
    write_files,
    write_series,
)

A = "backends/arm/a.py"
B = "backends/arm/b.py"
A_OLD = b"".join(b"a%d = %d\n" % (i, i) for i in range(20))
B_OLD = b"def b():\n    return 1\n"
A_NEW = A_OLD.replace(b"a4 = 4\n", b"a4 = 'four'\n")
NAME = "executorch-1.2.0-cp311-cp311-manylinux_2_28_x86_64.whl"
METADATA = b"Metadata-Version: 2.1\nName: executorch\nVersion: 1.2.0\n\nLong text.\n"


def make_wheel(folder: Path, files: dict[str, bytes], *, metadata: bytes = METADATA) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_files(
        folder / NAME,
        {
            **{f"executorch/{repo_path}": data for repo_path, data in files.items()},
            "executorch-1.2.0.dist-info/METADATA": metadata,
            "executorch-1.2.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n"
            b"Generator: setuptools (78.1.0)\nRoot-Is-Purelib: false\n",
        },
    )


def installer_members(path: Path) -> dict[str, bytes]:
    """Every member, after installer (an independent reader) checked RECORD and contents."""
    with WheelFile.open(path) as source:
        source.validate_record()
        return {row[0]: stream.read() for row, stream, _ in source.get_contents()}


def setup(tmp_path: Path, files: dict[str, bytes] | None = None) -> tuple[Series, Path, WheelPin]:
    source = make_wheel(tmp_path / "cache", files or {A: A_OLD, B: B_OLD})
    patches = {"0001-a.patch": patch_text("Change a", make_diff(A, A_OLD.decode(), A_NEW.decode()))}
    series = write_series(tmp_path / "patches", patches, {A: A_OLD}, wheel_sha=sha256_file(source))
    return series, source, series.pins.wheels[0]


def test_repack_patches_renames_and_records(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    built = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    version = f"1.2.0+armfix.{series.short_digest}"
    assert (built.built, built.version) == (True, version)
    assert built.path.name == f"executorch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    dist = f"executorch-{version}.dist-info"
    members = installer_members(built.path)  # every member checked against the new RECORD
    assert members[f"executorch/{A}"] == A_NEW
    assert members[f"executorch/{B}"] == B_OLD
    # the version, and torch (pinned 2.11.0 in the scaffold's pins.toml) narrowed to 2.11.*
    assert members[f"{dist}/METADATA"] == METADATA.replace(b"1.2.0", version.encode(), 1).replace(
        b"\n\n", b"\nRequires-Dist: torch==2.11.*\n\n", 1
    )
    assert members[f"{dist}/WHEEL"].startswith(b"Wheel-Version: 1.0\nGenerator: ")
    assert members[f"{dist}/WHEEL"].split(b"\n")[1] == f"Generator: {prov.TOOL}".encode()
    assert built.provenance.requires == ("torch==2.11.*",)
    assert not any(n.startswith("executorch-1.2.0.dist-info/") for n in members)
    provenance = json.loads(members[f"{dist}/{prov.PROVENANCE_FILE}"])
    assert provenance["files"] == {
        f"executorch/{A}": {"pristine": sha256_bytes(A_OLD), "patched": sha256_bytes(A_NEW)}
    }
    assert wheels.read_provenance(built.path) == built.provenance
    again = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    assert not again.built and again.provenance == built.provenance
    before = built.path.read_bytes()
    forced = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist", force=True)
    assert forced.built and forced.path.read_bytes() == before


def test_a_series_file_without_a_pin_is_a_series_error_not_a_bad_wheel(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    unpinned = write_series(
        tmp_path / "unpinned",
        {"0001-a.patch": (series.directory / "0001-a.patch").read_text()},
        {A: A_OLD},
        pinned={B: B_OLD},  # pins.toml pins another file
        wheel_sha=pin.sha256,
    )
    with pytest.raises(SeriesError) as info:
        wheels.build_patched_wheel(unpinned, source, pin, tmp_path / "dist")
    assert info.value.message.startswith(f"the series touches {A}, which has no pinned")
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())


def test_a_wheel_with_another_file_is_refused_by_its_pin(tmp_path: Path) -> None:
    drifted = A_OLD.replace(b"a1 = 1", b"a1 = 10")
    source = make_wheel(tmp_path / "cache", {A: drifted})
    patches = {"0001-a.patch": patch_text("Change a", make_diff(A, A_OLD.decode(), A_NEW.decode()))}
    series = write_series(tmp_path / "patches", patches, {A: A_OLD}, wheel_sha=sha256_file(source))
    with pytest.raises(PristineMismatchError) as info:
        wheels.build_patched_wheel(series, source, series.pins.wheels[0], tmp_path / "dist")
    assert A in info.value.message
    assert info.value.found == f"sha256 {sha256_bytes(drifted)}"


def test_a_tampered_member_is_a_wheel_error(tmp_path: Path) -> None:
    series, source, _ = setup(tmp_path)
    tampered = tmp_path / "tampered" / NAME
    tampered.parent.mkdir()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(tampered, "w") as new:
        for member in old.infolist():
            data = old.read(member.filename)
            if member.filename.endswith("b.py"):
                data = b"def b():\n    return 2\n"
            new.writestr(member, data)
    pin = WheelPin(NAME, sha256_file(tampered), "3.11", "manylinux_2_28_x86_64")
    with pytest.raises(WheelError) as info:
        wheels.build_patched_wheel(series, tampered, pin, tmp_path / "dist")
    assert info.value.message.startswith(f"{NAME} is not a readable wheel")


def test_a_wheel_of_another_release_is_refused(tmp_path: Path) -> None:
    series, _, _ = setup(tmp_path)
    other = make_wheel(
        tmp_path / "other", {A: A_OLD}, metadata=METADATA.replace(b"1.2.0", b"1.3.1")
    )
    pin = WheelPin(NAME, sha256_file(other), "3.11", "manylinux_2_28_x86_64")
    with pytest.raises(TargetError) as info:
        wheels.build_patched_wheel(series, other, pin, tmp_path / "dist")
    assert info.value.found == "executorch 1.3.1"


def test_wrong_sha256_is_refused_before_reading(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    wrong = WheelPin(pin.file, "f" * 64, pin.python, pin.platform)
    with pytest.raises(WheelError) as info:
        wheels.build_patched_wheel(series, source, wrong, tmp_path / "dist")
    assert (info.value.expected, info.value.found) == ("f" * 64, pin.sha256)


def _installed(tmp_path: Path, series: Series, source: Path) -> Path:
    built = wheels.build_patched_wheel(series, source, series.pins.wheels[0], tmp_path / "dist")
    site = tmp_path / "site"
    unpack(built.path, site)
    return site


def test_install_check_accepts_the_patched_install_and_names_each_fault(tmp_path: Path) -> None:
    series, source, _ = setup(tmp_path)
    site = _installed(tmp_path, series, source)
    found = check_installed(series, import_modules=False, search_path=site)
    assert found.version == f"1.2.0+armfix.{series.short_digest}"
    assert found.files == {f"executorch/{A}": sha256_bytes(A_NEW)}
    (site / "executorch" / A).write_bytes(A_OLD)
    with pytest.raises(InstallCheckError) as info:
        check_installed(series, import_modules=False, search_path=site)
    assert (info.value.expected, info.value.found) == (sha256_bytes(A_NEW), sha256_bytes(A_OLD))
    diff = make_diff(A, A_OLD.decode(), A_NEW.decode())
    other = write_series(  # the same change under another subject: another series digest
        tmp_path / "other", {"0001-a.patch": patch_text("Change A", diff)}, {A: A_OLD}
    )
    with pytest.raises(InstallCheckError) as info:
        check_installed(other, search_path=site)
    assert info.value.message == "this environment does not carry this patch series"
    assert info.value.found == f"executorch 1.2.0+armfix.{series.short_digest}"


def test_install_check_without_executorch(tmp_path: Path) -> None:
    series, _, _ = setup(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InstallCheckError) as info:
        check_installed(series, search_path=tmp_path / "empty")
    assert info.value.found == "no executorch distribution"


def test_a_stale_checksum_entry_stops_the_repack(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    sums = series.directory / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    lines[-1] = "e" * 64 + lines[-1][64:]
    sums.write_text("\n".join(lines) + "\n")
    with pytest.raises(ChecksumMismatchError) as info:
        wheels.build_patched_wheel(load_series(series.directory), source, pin, tmp_path / "dist")
    assert info.value.message.startswith(f"{A}: ")
    assert info.value.expected == f"sha256 {'e' * 64}"
    assert list((tmp_path / "dist").iterdir()) == []  # nothing half-written


def test_a_wheel_built_by_another_tool_version_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    series, source, pin = setup(tmp_path)
    first = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    again = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    assert (first.built, again.built) == (True, False)
    monkeypatch.setattr(prov, "TOOL", "executorch-arm-overlay 0.0.1")
    rebuilt = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    assert rebuilt.built is True
    assert rebuilt.provenance.tool == "executorch-arm-overlay 0.0.1"


def test_a_malformed_record_row_is_a_target_error() -> None:
    from overlay.distribution.distinfo import parse_record

    with pytest.raises(TargetError) as info:
        parse_record("executorch/a.py,sha256=abc,three\n", where="x/RECORD")
    assert info.value.message == "x/RECORD is not a valid RECORD"


def test_a_changed_wheel_in_dist_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    dist = tmp_path / "dist"
    first = wheels.build_patched_wheel(series, source, pin, dist)
    good = first.path.read_bytes()
    assert first.sha256 == sha256_bytes(good) == wheels.build_record_sha(first.path)
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0xFF  # what `zipfile -t` would fail on
    first.path.write_bytes(bytes(flipped))
    again = wheels.build_patched_wheel(series, source, pin, dist)
    assert again.built and again.path.read_bytes() == good
    assert again.note is not None and again.note.startswith(f"{first.path.name} changed since")
    reused = wheels.build_patched_wheel(series, source, pin, dist)
    assert (reused.built, reused.note) == (False, None)


def test_a_wheel_without_a_build_record_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    first = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    wheels.build_record(first.path).unlink()  # e.g. copied into dist/ by hand
    again = wheels.build_patched_wheel(series, source, pin, tmp_path / "dist")
    assert again.built
    assert again.note == f"{first.path.name} has no recorded sha256 (not built here); replaced"


def test_a_wheel_taken_from_the_cache_is_said_once_as_what_happened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`build-wheel` never says "rebuilt" and then "up to date, reused" for one file."""
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "overlay-cache"))
    series, source, pin = setup(tmp_path)
    said: list[str] = []
    first = index.build_into(series, source, pin, tmp_path / "dist", progress=said.append)
    assert said[0].startswith(f"{first.path.name}: built in ")
    wheels.build_record(first.path).unlink()  # copied into dist/ by hand: not reused
    said.clear()
    again = index.build_into(series, source, pin, tmp_path / "dist", progress=said.append)
    assert (again.built, again.linked) == (False, True)
    assert said == [
        f"note: {first.path.name} has no recorded sha256 (not built here); replaced",
        f"{first.path.name}: linked from the cache (built before)",
    ]
    said.clear()
    index.build_into(series, source, pin, tmp_path / "dist", progress=said.append)
    assert said == [f"{first.path.name}: up to date, reused"]


def test_a_killed_build_leaves_nothing_after_the_next_one(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    dist = tmp_path / "dist"

    def build() -> int:
        wheels.build_patched_wheel(series, source, pin, dist)
        return 0

    child = run_forked(build, {_faults.FAULT_ENV: "build: wheel written:kill"})
    assert child.code == -9
    left = sorted(p.name for p in dist.iterdir())
    assert [n for n in left if n.startswith(".build-")] and ".overlay-build.lock" in left
    result = wheels.build_patched_wheel(series, source, pin, dist)
    assert result.built and [Path(p).name for p in result.removed] == [
        n for n in left if n.startswith(".build-")
    ]
    assert sorted(p.name for p in dist.iterdir()) == [
        f".{result.path.name}.sha256",
        result.path.name,
    ]


def test_a_damaged_wheel_in_the_cross_clone_cache_is_rebuilt(tmp_path: Path) -> None:
    series, source, pin = setup(tmp_path)
    cache = tmp_path / "patched"
    first = wheels.build_patched_wheel(series, source, pin, tmp_path / "one", cache=cache)
    good = first.path.read_bytes()
    cached = wheels.cached_wheel(series, pin, cache)
    linked = wheels.build_patched_wheel(series, source, pin, tmp_path / "two", cache=cache)
    assert (first.built, linked.built) == (True, False)
    assert linked.sha256 == first.sha256 == wheels.build_record_sha(linked.path)
    cached.unlink()  # replace, not write through: the clones' hardlinks keep their bytes
    cached.write_bytes(good[: len(good) // 2])
    again = wheels.build_patched_wheel(series, source, pin, tmp_path / "three", cache=cache)
    assert again.built and again.path.read_bytes() == good == cached.read_bytes()


@pytest.mark.parametrize(
    ("repo_path", "skipped"),
    [
        ("backends/arm/test/passes/test_rewrite_conv_pass.py", True),
        ("backends/arm/tests/x.py", True),
        ("backends/arm/_passes/rewrite_conv_pass.py", False),
        ("backends/arm/test_helpers.py", False),
    ],
)
def test_verify_install_does_not_import_upstream_tests(repo_path: str, skipped: bool) -> None:
    from overlay.envs import verify_install

    assert verify_install._upstream_test(repo_path) is skipped


NEW = "backends/arm/shaders/new.glsl"
NEW_TEXT = "#version 450\nvoid main() {}\n"


def test_a_created_file_is_packed_recorded_and_checked(tmp_path: Path) -> None:
    source = make_wheel(tmp_path / "cache", {A: A_OLD, B: B_OLD})
    diff = make_diff(A, A_OLD.decode(), A_NEW.decode()) + created_diff(NEW, NEW_TEXT)
    series = write_series(
        tmp_path / "patches",
        {"0001-a.patch": patch_text("Change a, add a shader", diff)},
        {A: A_OLD},
        wheel_sha=sha256_file(source),
    )
    assert wheels.patched_checksums(series, source) == {
        A: sha256_bytes(A_NEW),
        NEW: sha256_bytes(NEW_TEXT.encode()),
    }
    built = wheels.build_patched_wheel(series, source, series.pins.wheels[0], tmp_path / "dist")
    members = installer_members(built.path)  # RECORD lists it with its hash
    assert members[f"executorch/{NEW}"] == NEW_TEXT.encode()
    assert built.provenance.files[f"executorch/{NEW}"] == prov.FileRecord(
        None, sha256_bytes(NEW_TEXT.encode())
    )
    site = unpack(built.path, tmp_path / "site")
    report = check_installed(series, import_modules=False, search_path=site)
    assert report.files[f"executorch/{NEW}"] == sha256_bytes(NEW_TEXT.encode())
    (site / "executorch" / NEW).unlink()
    with pytest.raises(InstallCheckError) as info:
        check_installed(series, import_modules=False, search_path=site)
    assert info.value.found == "missing"


def test_a_wheel_that_ships_a_file_the_series_creates_is_refused(tmp_path: Path) -> None:
    source = make_wheel(tmp_path / "cache", {A: A_OLD, NEW: b"shipped\n"})
    series = write_series(
        tmp_path / "patches",
        {"0001-n.patch": patch_text("Add a shader", created_diff(NEW, NEW_TEXT))},
        {},
        wheel_sha=sha256_file(source),
    )
    with pytest.raises(TargetError) as info:
        wheels.build_patched_wheel(series, source, series.pins.wheels[0], tmp_path / "dist")
    exc = info.value
    assert exc.message == f"{NAME} ships files the series creates"
    assert exc.found == f"executorch/{NEW} in the wheel"
    assert exc.hint == "the series and the wheel are for different releases: port the patch"
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").glob("*.whl"))
