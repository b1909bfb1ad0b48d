"""Offline: locks (staleness, parsing, the stock variant), the env-wide install check, the
dist/ index, and the ``lock`` command (its line, its exit code)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from overlay.cli import main
from overlay.distribution import index
from overlay.distribution.distinfo import set_requirements
from overlay.envs import lockfiles
from overlay.envs.venvs import installed_versions
from overlay.envs.verify_install import NEXT_STEP, check_lock
from overlay.errors import InstallCheckError, LockfileError, UsageError
from overlay.text.series import Series, load_series
from overlay.upstream.upstream_pins import for_series

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches" / "1.2.0"
LOCK = """# inputs-key: {key}
torch==2.11.0 \\
    --hash=sha256:aaaa \\
    --hash=sha256:bbbb
    # via -r requirements.in
tosa-tools==2026.2.1 \\
    --hash=sha256:cccc
ruamel-yaml==0.19.1 --hash=sha256:dddd
"""


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series(PATCHES)


def copy_series(tmp_path: Path) -> Path:
    copy = tmp_path / "patches"
    shutil.copytree(PATCHES, copy)
    return copy


def test_every_pinned_wheel_has_a_lock_current_with_pins_and_series(series: Series) -> None:
    """CI's staleness gate: a pin, extra or patch changed without `nox -s lock` fails here."""
    assert len(series.pins.wheels) == 5
    for pin in series.pins.wheels:
        found = lockfiles.check_current(series, pin)
        assert found.path == PATCHES / "locks" / f"{pin.tag}.txt"
        assert found.get("executorch").version == f"1.2.0+armfix.{series.short_digest}"
        assert len(found.get("executorch").hashes) == 1  # the patched wheel, by its sha256
        for name, version in series.pins.runtime.items():
            assert found.get(name).version == version
        assert all(p.hashes for p in found.packages)
        assert "file:" not in found.path.read_text()  # no machine-local path


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text.replace('torch = "2.11.0"', 'torch = "2.11.1"'),
        lambda text: text.replace('arm = ["tosa-tools", ', "arm = ["),
        lambda text: text.replace(
            'macos_deployment_target = "15.0"', 'macos_deployment_target = "14.0"'
        ),
    ],
    ids=["runtime pin", "extra", "macos target"],
)
def test_a_pins_change_makes_the_lock_stale(tmp_path: Path, edit: object) -> None:
    copy = copy_series(tmp_path)
    pins_file = copy / "pins.toml"
    assert callable(edit)
    before = pins_file.read_text()
    pins_file.write_text(edit(before))
    assert pins_file.read_text() != before  # the edit still finds its line
    changed = load_series(copy)
    pin = changed.pins.wheels[-1]  # the macOS one: every edit reaches its key
    with pytest.raises(LockfileError) as info:
        lockfiles.check_current(changed, pin)
    assert info.value.message.endswith(
        "is stale: pins.toml, the patches or the tool changed since it was made"
    )
    assert info.value.hint == "regenerate the locks: `nox -s lock`"


def test_a_patch_change_makes_the_lock_stale(tmp_path: Path, series: Series) -> None:
    copy = copy_series(tmp_path)
    first = copy / series.patches[0].name
    before = first.read_text()
    first.write_text(before.replace("Description: ", "Description: Now ", 1))
    assert first.read_text() != before
    with pytest.raises(LockfileError, match="is stale"):
        lockfiles.check_current(load_series(copy), series.pins.wheels[0])


def test_a_matrix_pin_does_not_make_the_lock_stale(tmp_path: Path, series: Series) -> None:
    copy = copy_series(tmp_path)
    shared = (ROOT / "patches" / "upstream.toml").read_text(encoding="utf-8")
    edited_text = shared.replace('versions = ["1.1.0", ', "versions = [", 1)
    assert edited_text != shared  # the edit took
    (copy / "upstream.toml").write_text(edited_text, encoding="utf-8")  # the copy's own
    assert "1.1.0" in for_series(series.directory).matrix_versions
    assert "1.1.0" not in for_series(copy).matrix_versions
    lockfiles.check_current(load_series(copy), series.pins.wheels[0])


def test_parse_reads_versions_and_hashes(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text(LOCK.format(key="k1"))
    parsed = lockfiles.read(path)
    assert parsed.key == "k1"
    assert parsed.packages == (
        lockfiles.LockedPackage("torch", "2.11.0", ("aaaa", "bbbb")),
        lockfiles.LockedPackage("tosa-tools", "2026.2.1", ("cccc",)),
        lockfiles.LockedPackage("ruamel-yaml", "0.19.1", ("dddd",)),
    )
    assert parsed.get("Ruamel.YAML").version == "0.19.1"


@pytest.mark.parametrize(
    "text",
    [
        "# inputs-key: k\ntorch>=2.11 --hash=sha256:aa\n",
        "# inputs-key: k\ntorch==2.11.0\n",
        "torch==1 --hash=sha256:a\n",
    ],
    ids=["not exact", "no hash", "no key"],
)
def test_an_unlocked_line_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(LockfileError) as info:
        lockfiles.read(path)
    assert info.value.message == f"{path} is not a lock this overlay wrote"


def test_a_missing_lock_names_the_refresh_command(tmp_path: Path) -> None:
    with pytest.raises(LockfileError) as info:
        lockfiles.read(tmp_path / "none.txt")
    assert info.value.hint == "generate it: `nox -s lock`"


def test_uv_targets_of_the_pinned_wheels(series: Series) -> None:
    targets = {pin.tag: lockfiles.uv_target(series, pin) for pin in series.pins.wheels}
    assert targets == {
        "cp311-manylinux_2_28_x86_64": ("3.11", "x86_64-manylinux_2_28", ""),
        "cp312-manylinux_2_28_x86_64": ("3.12", "x86_64-manylinux_2_28", ""),
        "cp311-manylinux_2_28_aarch64": ("3.11", "aarch64-manylinux_2_28", ""),
        "cp312-manylinux_2_28_aarch64": ("3.12", "aarch64-manylinux_2_28", ""),
        "cp311-macosx_12_0_arm64": ("3.11", "aarch64-apple-darwin", "15.0"),
    }


def test_wheel_requirements_narrow_each_pin_to_its_series(series: Series) -> None:
    assert series.pins.wheel_requirements() == (
        "torch==2.11.*",
        "torchao==0.18.*",
        'tosa-tools==2026.2.*; extra == "arm"',
        'ai-ml-sdk-model-converter==0.11.*; extra == "arm"',
        'ai-ml-sdk-scenario-runner==0.11.*; extra == "vgf"',
        'ai-ml-sdk-vgf-library==0.11.*; extra == "vgf"',
        'ai-ml-emulation-layer-for-vulkan==0.11.*; extra == "vgf"',
        'ethos-u-vela==5.1.*; extra == "ethos-u"',
    )


def test_set_requirements_replaces_stock_lines_and_declares_the_extra() -> None:
    stock = (
        "Metadata-Version: 2.4\nName: executorch\nVersion: 1.2.0\n"
        "Requires-Dist: numpy>=2.0.0\nRequires-Dist: torch>=2.11.0\n"
        "Requires-Dist: torchao>=0.17.0\nDynamic: license-file\n\nBody: not a header\n"
    )
    new = set_requirements(
        stock, ["torch==2.11.*", "torchao==0.18.*", 'tosa-tools==2026.2.*; extra == "arm"'], ["arm"]
    )
    assert new == (
        "Metadata-Version: 2.4\nName: executorch\nVersion: 1.2.0\n"
        "Requires-Dist: numpy>=2.0.0\nProvides-Extra: arm\nRequires-Dist: torch==2.11.*\n"
        "Requires-Dist: torchao==0.18.*\n"
        'Requires-Dist: tosa-tools==2026.2.*; extra == "arm"\n'
        "Dynamic: license-file\n\nBody: not a header\n"
    )


def fake_site(folder: Path, dists: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, version in dists.items():
        info = folder / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


def test_a_drifted_torch_is_named_with_the_next_step(tmp_path: Path) -> None:
    path = tmp_path / "lockfiles.txt"
    path.write_text(LOCK.format(key="k"))
    site = fake_site(
        tmp_path / "site", {"torch": "2.15.0", "ruamel_yaml": "0.19.1", "six": "1.17.0"}
    )
    with pytest.raises(InstallCheckError) as info:
        check_lock(lockfiles.read(path), installed_versions(site), repair="the repair command")
    assert info.value.message == (
        "the environment differs from the lock lockfiles.txt in 2 of its 3 packages"
    )
    assert info.value.expected == f"every package of {path} at its locked version"
    assert info.value.found == "2 differ (installed, then locked):"
    assert info.value.details == (  # one line each, not a wall (issue 36, item 12)
        "    torch: 2.15.0 (locked 2.11.0)\n    tosa-tools: missing (locked 2026.2.1)"
    )
    assert info.value.hint == "the repair command"
    with pytest.raises(InstallCheckError) as patched:  # an in-place venv: --no-lock first
        check_lock(lockfiles.read(path), installed_versions(site), repair="R", in_place=True)
    assert patched.value.hint == (
        "this environment was patched in place, not made from the lock: run"
        " `executorch-arm-overlay verify-install` again with --no-lock to check the patched"
        " executorch alone; to make it the lock exactly: R"
    )
    with pytest.raises(InstallCheckError) as default:
        check_lock(lockfiles.read(path), installed_versions(site))
    assert default.value.hint == NEXT_STEP
    fake_site(
        tmp_path / "site2",
        {"torch": "2.11.0", "tosa_tools": "2026.2.1", "ruamel.yaml": "0.19.1", "six": "1"},
    )
    assert check_lock(lockfiles.read(path), installed_versions(tmp_path / "site2")) == ("six==1",)


def test_the_stock_variant_swaps_only_the_executorch_entry(series: Series, tmp_path: Path) -> None:
    pin = series.pins.wheels[0]
    committed = lockfiles.check_current(series, pin)
    text = lockfiles.stock_text(committed, pin.sha256, "1.2.0")
    (tmp_path / "stock.txt").write_text(text, encoding="utf-8")
    stock = lockfiles.read(tmp_path / "stock.txt")
    assert stock.get("executorch") == lockfiles.LockedPackage("executorch", "1.2.0", (pin.sha256,))
    others = [p for p in stock.packages if p.name != "executorch"]
    assert others == [p for p in committed.packages if p.name != "executorch"]
    assert stock.key == committed.key
    changed = [
        (a, b)
        for a, b in zip(committed.path.read_text().splitlines(), text.splitlines(), strict=True)
        if a != b
    ]
    assert changed == [
        (f"executorch==1.2.0+armfix.{series.short_digest} \\", "executorch==1.2.0 \\"),
        (
            f"    --hash=sha256:{committed.get('executorch').hashes[0]}",
            f"    --hash=sha256:{pin.sha256}",
        ),
    ]


def test_the_stock_variant_refuses_a_lock_without_one_executorch(tmp_path: Path) -> None:
    path = tmp_path / "lock.txt"
    path.write_text(LOCK.format(key="k"))
    with pytest.raises(LockfileError) as info:
        lockfiles.stock_text(lockfiles.read(path), "ab" * 32, "1.2.0")
    assert info.value.found == "0 executorch entries (one expected)"


def test_publish_keeps_the_current_series_and_writes_pep503_pages(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    tag = "cp311-cp311-manylinux_2_28_x86_64.whl"
    current = dist / f"executorch-1.2.0+armfix.0123456789-{tag}"
    older = dist / f"executorch-1.2.0+armfix.ffffffffff-{tag}"  # sorts after the current one
    current.write_bytes(b"current")
    older.write_bytes(b"older")
    (dist / "other-1.0-py3-none-any.whl").write_bytes(b"not executorch")
    published = index.publish(dist, "1.2.0+armfix.0123456789")
    assert published.moved == (older.name,)
    assert sorted(p.name for p in dist.glob("*.whl")) == [
        current.name,
        "other-1.0-py3-none-any.whl",
    ]
    assert (dist / "old" / older.name).read_bytes() == b"older"
    page = (dist / "simple" / "executorch" / "index.html").read_text()
    digest = hashlib.sha256(b"current").hexdigest()
    assert f'<a href="../../executorch-1.2.0%2Barmfix.0123456789-{tag}#sha256={digest}">' in page
    assert page.count("<a ") == 1
    assert '<a href="executorch/">executorch</a>' in (dist / "simple" / "index.html").read_text()
    assert published.wheels == (index.IndexedWheel(current.name, digest),)


def test_a_stale_lock_fails_lock_check_with_exit_20_and_the_refresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = copy_series(tmp_path)
    assert main(["--patches", str(copy), "lock", "--check"]) == 0
    assert capsys.readouterr().out.count("current: ") == 5
    assert main(["--patches", str(copy), "lock", "--dry-run", "--json"]) == 0  # the same check
    report = json.loads(capsys.readouterr().out)
    assert report["line"] == "1.2.0" and len(report["locks"]) == 5
    assert not any(entry["written"] for entry in report["locks"])
    pins_file = copy / "pins.toml"
    before = pins_file.read_text()
    pins_file.write_text(before.replace('torch = "2.11.0"', 'torch = "2.11.1"', 1))
    assert pins_file.read_text() != before
    code = main(["--patches", str(copy), "lock", "--check"])
    assert code == LockfileError.exit_code == 20
    err = capsys.readouterr().err
    assert "cp311-manylinux_2_28_x86_64.txt is stale" in err
    assert "next step: regenerate the locks: `nox -s lock`" in err


def test_lock_takes_a_line_and_refuses_an_unknown_one_listing_the_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "patches"
    shutil.copytree(PATCHES, root / "1.2.0")
    assert main(["--patches", str(root), "lock", "--check", "--line", "1.2.0"]) == 0
    assert f"current: {root / '1.2.0' / 'locks'}" in capsys.readouterr().out
    code = main(["--patches", str(root), "lock", "--check", "--line", "1.4.1"])
    assert code == UsageError.exit_code == 2
    err = capsys.readouterr().err
    assert "there is no release line 1.4.1\n" in err
    assert "expected: one of the supported lines: 1.2.0" in err
    assert main(["--patches", str(root / "1.2.0"), "lock", "--check", "--line", "1.4.1"]) == 2
    assert "expected: the line of that series folder: 1.2.0" in capsys.readouterr().err
