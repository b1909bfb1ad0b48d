"""A path's environment as the cache keys it, and a module runtime patch found without import."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from overlay import codec
from overlay.equivalence.worker import envinfo


def test_the_env_key_covers_the_vulkan_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    icd = tmp_path / "lvp_icd.x86_64.json"
    monkeypatch.setattr(envinfo, "ICD_GLOBS", (str(tmp_path / "lvp_icd*.json"),))

    def described() -> envinfo.EnvInfo:
        return envinfo.collect("no_such_package", "backends", None)

    without = described()
    assert without.vulkan_drivers == ()  # no lavapipe: VGF is not executed
    icd.write_text('{"ICD": {"api_version": "1.3.255"}}', encoding="utf-8")
    first = described()
    assert [line.split()[0] for line in first.vulkan_drivers] == [icd.name]
    icd.write_text('{"ICD": {"api_version": "1.4.305"}}', encoding="utf-8")
    digests = {without.digest, first.digest, described().digest}
    assert len(digests) == 3  # installing or updating the driver changes the cache key


def test_the_watched_sources_are_digested_as_this_interpreter_finds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arm = tmp_path / "pkg_on_path" / "backends" / "arm"
    arm.mkdir(parents=True)
    (tmp_path / "pkg_on_path" / "__init__.py").write_text("", encoding="utf-8")
    (arm / "a.py").write_text("A = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = envinfo.sources_digest("pkg_on_path", "backends")
    assert first and envinfo.sources_digest("no_such_package", "backends") == ""
    (arm / "a.py").write_text("A = 2\n", encoding="utf-8")
    assert envinfo.sources_digest("pkg_on_path", "backends") != first


def test_a_module_runtime_patch_is_read_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "user_patch.py").write_text(
        "raise SystemExit('imported!')\n\ndef apply():\n    pass\n\ndef undo():\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = envinfo.collect("no_such_package", "backends", "user_patch:apply")
    assert (found.module_error, found.module_functions) == ("", ("apply", "undo"))
    assert found.module_sha256 and "user_patch" not in sys.modules  # never run
    missing = envinfo.collect("no_such_package", "backends", "user_patch:nope")
    assert missing.module_error == "user_patch (user_patch.py) defines no nope"
    assert missing.module_sha256 == found.module_sha256  # found, but not the function
    absent = envinfo.collect("no_such_package", "backends", "no_such_module:apply")
    assert absent.module_sha256 == "" and absent.module_error.startswith(
        "no module named 'no_such_module'"
    )
    default = envinfo.collect("no_such_package", "backends", "user_patch")
    assert default.module_error == "user_patch (user_patch.py) defines no apply_all"


def test_the_line_it_prints_decodes_back(capsys: pytest.CaptureFixture[str]) -> None:
    envinfo.main(["no_such_package", "backends"])
    line = capsys.readouterr().out
    assert line.endswith("\n") and line.count("\n") == 1
    decoded = codec.loads(envinfo.EnvInfo, line)
    assert decoded.python == sys.version and decoded.module_sha256 is None
