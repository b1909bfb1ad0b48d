"""Integration: the real pinned executorch wheel, patched, repacked, applied and reverted."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from installer.sources import WheelFile
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from overlay import _faults, codec, fixes, worktree
from overlay._git import git
from overlay._hashing import record_digest, sha256_bytes
from overlay.cli import main
from overlay.distribution import provenance as prov
from overlay.distribution import wheels
from overlay.envs import lockfiles
from overlay.envs.verify_install import check_installed
from overlay.errors import WheelError
from overlay.lines import pins
from overlay.text.series import Series, load_series
from overlay.tree import locate

from scaffold import run_forked, snapshot, unpack

pytestmark = pytest.mark.integration
PATCHES = Path(__file__).resolve().parent.parent / "patches" / "1.2.0"


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


@pytest.fixture(scope="module")
def pin(series: Series) -> pins.WheelPin:
    return series.pins.wheel_for("cp311-manylinux_2_28_x86_64")


@pytest.fixture(scope="module")
def source(pin: pins.WheelPin) -> Path:
    return wheels.fetch_wheel(pin)  # the shared cache: downloaded once per machine


@pytest.fixture(scope="module")
def built(
    series: Series, source: Path, pin: pins.WheelPin, tmp_path_factory: pytest.TempPathFactory
) -> wheels.BuildResult:
    return wheels.build_patched_wheel(series, source, pin, tmp_path_factory.mktemp("dist"))


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_pristine_pins_match_the_wheel_record_and_upstream_blobs(
    series: Series, source: Path
) -> None:
    with zipfile.ZipFile(source) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        record = {row[0]: row[1] for row in csv.reader(io.TextIOWrapper(archive.open(record_name)))}
        for repo_path, sha in series.pins.pristine.items():
            data = archive.read(series.pins.wheel_path(repo_path))
            assert sha256_bytes(data) == sha
            digest = hashlib.sha256(data).digest()
            assert record[
                series.pins.wheel_path(repo_path)
            ] == "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")
    # the diffs' index lines name the git blobs of tag v1.2.0: same bytes as the wheel
    sources = wheels.read_wheel_sources(source, series)
    for patch in series.patches:
        for patched_file in patch.files:
            info: list[str] = list(patched_file.patch_info or [])
            index = next(line for line in info if line.startswith("index "))
            old_blob = index.split()[1].split("..")[0]
            assert git_blob(sources[patched_file.path]) == old_blob


def test_patched_wheel_record_version_provenance(
    series: Series, built: wheels.BuildResult, pin: pins.WheelPin
) -> None:
    version = f"1.2.0+armfix.{series.short_digest}"
    assert built.built and built.version == version
    assert built.path.name == pin.file.replace("-1.2.0-", f"-{version}-")
    assert Version(version) in SpecifierSet("==1.2.0")  # satisfies executorch==1.2.0
    dist = f"executorch-{version}.dist-info"
    with WheelFile.open(built.path) as checked:
        checked.validate_record()  # installer: every member against the new RECORD
    with zipfile.ZipFile(built.path) as archive:
        names = archive.namelist()
        assert f"{dist}/RECORD" in names
        assert not any(n.startswith("executorch-1.2.0.dist-info/") for n in names)
        metadata = archive.read(f"{dist}/METADATA").decode()
        assert f"\nVersion: {version}\n" in metadata
        provenance = json.loads(archive.read(f"{dist}/{prov.PROVENANCE_FILE}"))
        record = archive.read(f"{dist}/RECORD").decode()
        assert f"{dist}/{prov.PROVENANCE_FILE},sha256=" in record
        expected = series.expected_patched_sha256()
        for repo_path, sha in expected.items():
            assert sha256_bytes(archive.read(series.pins.wheel_path(repo_path))) == sha
    assert provenance == json.loads(built.provenance.to_json())
    assert built.provenance.series_digest == series.digest
    assert built.provenance.base_sha256 == pin.sha256
    assert [p.name for p in built.provenance.patches] == [p.name for p in series.patches]
    assert built.provenance.files == {
        series.pins.wheel_path(p): prov.FileRecord(series.pins.pristine[p], expected[p])
        for p in series.targets()
    }


def test_every_other_file_is_unchanged(
    series: Series, built: wheels.BuildResult, source: Path
) -> None:
    patched = {series.pins.wheel_path(p) for p in series.targets()}
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(built.path) as new:
        old_names = {n for n in old.namelist() if ".dist-info/" not in n and not n.endswith("/")}
        new_names = {n for n in new.namelist() if ".dist-info/" not in n}
        assert old_names == new_names
        for name in old_names - patched:
            before, after = old.getinfo(name), new.getinfo(name)
            assert (before.CRC, before.file_size) == (after.CRC, after.file_size), name


def test_rebuild_is_reused_and_forced_rebuild_is_identical(
    series: Series, built: wheels.BuildResult, source: Path, pin: pins.WheelPin
) -> None:
    first = built.path.read_bytes()
    again = wheels.build_patched_wheel(series, source, pin, built.path.parent)
    assert not again.built
    forced = wheels.build_patched_wheel(series, source, pin, built.path.parent, force=True)
    assert forced.built and forced.path.read_bytes() == first  # reproducible bytes


def test_tampered_wheel_is_refused(tmp_path: Path, source: Path, pin: pins.WheelPin) -> None:
    bad = tmp_path / pin.file
    data = bytearray(source.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="does not match its pinned sha256"):
        wheels.verify_wheel(bad, pin)


def test_cli_apply_then_revert_restores_pristine_bytes(
    tmp_path: Path, source: Path, series: Series, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unpack(source, tmp_path / "unpacked")
    before = snapshot(root / "executorch" / "backends" / "arm")
    patches = ["--patches", str(PATCHES)]
    assert main([*patches, "check", "--target", str(root)]) == 21  # changes are due
    assert main([*patches, "apply", "--target", str(root)]) == 0
    assert main([*patches, "apply", "--target", str(root)]) == 0
    assert "already patched" in capsys.readouterr().out
    assert main([*patches, "status", "--target", str(root)]) == 0
    patched = capsys.readouterr().out.count("patched   backends/arm/")
    assert patched == len(series.targets()) == 8
    assert main([*patches, "revert", "--target", str(root)]) == 0
    assert snapshot(root / "executorch" / "backends" / "arm") == before


def test_cli_refuses_a_drifted_install(
    tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unpack(source, tmp_path / "unpacked")
    target = locate.find_target(root)
    path = target.file("backends/arm/_passes/rewrite_conv_pass.py")
    path.write_bytes(path.read_bytes().replace(b"itertools", b"it"))
    before = snapshot(root / "executorch" / "backends" / "arm")
    assert main(["--patches", str(PATCHES), "apply", "--target", str(root)]) == 4
    err = capsys.readouterr().err
    assert "drifted" in err and "rewrite_conv_pass.py" in err and "next step" in err
    assert snapshot(root / "executorch" / "backends" / "arm") == before


def test_edit_then_regenerate_round_trips(tmp_path: Path, series: Series, source: Path) -> None:
    copy = tmp_path / "patches"
    copy.mkdir()
    for name in ("series", "SHA256SUMS", "pins.toml", *(p.name for p in series.patches)):
        (copy / name).write_bytes((PATCHES / name).read_bytes())
    work = tmp_path / "work"
    worktree.create(series, wheels.read_wheel_sources(source, series), work)
    result = worktree.regenerate(work, copy, today="2026-12-02")
    assert result.written == () and result.removed == ()  # nothing changed: byte-identical
    # amend patch 3 and add a new commit; regenerate must pick up both
    conv = work / "backends/arm/_passes/rewrite_conv_pass.py"
    conv.write_text(conv.read_text().replace("# Copyright 2025-2026", "# Copyright 2025-2027"))
    git(work, "commit", "-q", "-am", "Arm backend: Bump the copyright year\n\nA test edit.")
    result = worktree.regenerate(work, copy, today="2030-01-01")
    new = load_series(copy)
    number = f"{max(f.number for f in fixes.FIXES) + 1:04d}"  # a new fix: after every fix
    assert [p.name for p in new.patches][-1].startswith(f"{number}-arm-backend-bump-the-copyright")
    assert new.patches[-1].header["Last-Update"] == "2030-01-01"
    assert new.patches[0].text == series.patches[0].text
    assert set(result.written) == {"series", "SHA256SUMS", new.patches[-1].name}


def test_pip_accepts_the_wheel_for_an_executorch_pin(
    series: Series, built: wheels.BuildResult
) -> None:
    command = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
        "--disable-pip-version-check", "--report", "-", "--quiet",
        str(built.path), series.pins.executorch_requirement(),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [item["metadata"]["version"] for item in report["install"]] == [built.version]


def test_git_apply_of_the_series_gives_the_recorded_bytes(
    tmp_path: Path, series: Series, source: Path
) -> None:
    """An independent applier (git apply) agrees with ours on every patched file."""
    for repo_path, data in wheels.read_wheel_sources(source, series).items():
        (tmp_path / repo_path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / repo_path).write_bytes(data)
    for patch in series.patches:
        git(tmp_path, "apply", "--check", str(PATCHES / patch.name))
        git(tmp_path, "apply", str(PATCHES / patch.name))
    for repo_path, sha in series.expected_patched_sha256().items():
        assert sha256_bytes((tmp_path / repo_path).read_bytes()) == sha


def test_in_place_apply_of_a_uv_installed_venv_is_honest_and_uninstalls_clean(
    tmp_path: Path, series: Series, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = next((venv / "lib").glob("python3*/site-packages"))
    empty = {p for p in site.rglob("*") if p.is_file()}
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", python, "--no-deps"]
    subprocess.run([*uv, "--offline", "--link-mode", "hardlink", str(source)], check=True)
    installed = snapshot(next(site.glob("executorch-*.dist-info")))
    conv = site / series.pins.wheel_path("backends/arm/_passes/rewrite_conv_pass.py")
    held = conv.open("rb")  # the installed inode, shared with uv's cache
    pristine = held.read()
    assert os.fstat(held.fileno()).st_nlink >= 2  # really a hardlink of the cache
    args = ["--patches", str(PATCHES)]
    child = run_forked(
        lambda: main([*args, "apply", "--no-deps-check", "--target", str(venv)]),
        {_faults.FAULT_ENV: "step 3/*:kill"},
    )
    assert child.code == -9
    assert main([*args, "status", "--target", str(venv)]) == 0
    assert "  state: interrupted apply (pid " in capsys.readouterr().out
    assert main([*args, "apply", "--target", str(venv)]) == 0  # no torch here: a warning only
    captured = capsys.readouterr()
    assert "[overlay] warning: the environment differs from the pins line 1.2.0" in captured.err
    assert captured.out.startswith("recovered: an interrupted apply (pid ")
    held.seek(0)
    assert held.read() == pristine  # the cache's file was never written through
    assert os.fstat(held.fileno()).st_nlink >= 1  # and is still the cache's
    held.close()
    version = f"1.2.0+armfix.{series.short_digest}"
    dist = next(iter(importlib.metadata.distributions(name="executorch", path=[str(site)])))
    assert dist.version == version
    provenance = codec.loads(prov.Provenance, dist.read_text(prov.PROVENANCE_FILE) or "")
    assert provenance.series_digest == series.digest
    for entry in dist.files or []:
        if entry.hash is not None:
            data = (site / str(entry)).read_bytes()
            assert entry.hash.value == record_digest(data), entry
    assert check_installed(series, import_modules=False, search_path=site).version == version
    show = [sys.executable, "-m", "pip", "--python", python, "show", "executorch"]
    assert (
        f"\nVersion: {version}\n"
        in subprocess.run(show, capture_output=True, text=True, check=True).stdout
    )
    assert main([*args, "revert", "--target", str(venv)]) == 0
    reverted = next(site.glob("executorch-*.dist-info"))
    assert reverted.name == "executorch-1.2.0.dist-info"
    assert snapshot(reverted) == installed  # byte for byte
    uninstall = [sys.executable, "-m", "pip", "--python", python, "uninstall", "--yes"]
    subprocess.run([*uninstall, "executorch"], capture_output=True, check=True)
    assert {p for p in site.rglob("*") if p.is_file()} == empty  # only empty folders stay


def test_the_repack_gives_the_bytes_every_lock_pins(
    series: Series, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The writer that replaced pypa/wheel's: same inputs, the bytes the committed locks pin."""
    checked = 0
    for pin in series.pins.wheels:
        cached = wheels.wheel_cache() / pin.file
        lock = lockfiles.lock_path(series, pin)
        if not cached.is_file() or not lock.is_file():
            continue  # only wheels this machine has: the check needs no network
        built = wheels.build_patched_wheel(series, cached, pin, tmp_path_factory.mktemp("lock"))
        lockfiles.check_wheel(lockfiles.read(lock), built.path, built.sha256)
        checked += 1
    if not checked:
        pytest.skip("no pinned wheel with a lock in the cache")
