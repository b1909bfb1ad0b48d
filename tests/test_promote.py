"""Release lines from retargets: a promoted candidate is a new line; a line is retired."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlay import codec, lines
from overlay._git import git
from overlay._hashing import sha256_file
from overlay.cli import main
from overlay.distribution.provenance import local_version
from overlay.envs import lockfiles
from overlay.errors import SeriesError, UpstreamError, UsageError
from overlay.lines import evidence
from overlay.text.series import Series, load_series
from overlay.upstream import upstream_pins
from overlay.upstream.retarget.candidate import write_locks
from overlay.upstream.retarget.promote import promote, retire_line
from overlay.upstream.retarget.retarget_verdict import Retarget

from scaffold import make_diff, patch_text, snapshot, write_series

ROOT = Path(__file__).resolve().parent.parent
PATH = "backends/arm/_passes/demo_pass.py"
OLD = "".join(f"line {i}\n" for i in range(1, 41))
NAME = "0001-fix.patch"
LOCK = "cp311-manylinux_2_28_x86_64.txt"


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1
    return text.replace(old, new)


def _line(root: Path, version: str, base: str, change: tuple[str, str]) -> Series:
    diff = make_diff(PATH, base, _edit(base, *change))
    return write_series(root / version, {NAME: patch_text("Fix the demo pass", diff)},
                        {PATH: base.encode()}, version=version)  # fmt: skip


def _root(tmp_path: Path) -> Path:
    """A lines root with the 1.2.0 line (and its lock) and the shared upstream.toml."""
    root = tmp_path / "patches"
    line = _line(root, "1.2.0", OLD, ("line 10\n", "line 10 fixed\n"))
    (line.directory / "locks").mkdir()
    (line.directory / "locks" / LOCK).write_text("old lock\n")
    shutil.copy(ROOT / "patches" / "upstream.toml", root / "upstream.toml")
    return root


FAKE_UV = """\
import hashlib, pathlib, sys

# A fake `uv pip compile`: every requirement at its pin, executorch by the wheel in links/.
args = sys.argv[1:]
assert args[:2] == ["pip", "compile"], args
lines = []
for requirement in pathlib.Path(args[2]).read_text().split():
    name, _, version = requirement.partition("==")
    digest = "1" * 64
    if name.startswith("executorch"):
        name, (wheel,) = "executorch", pathlib.Path("links").glob("*.whl")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lines.append(f"{name}=={version} --hash=sha256:{digest}")
pathlib.Path(args[args.index("-o") + 1]).write_text("\\n".join(lines) + "\\n")
"""


@pytest.fixture
def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a fake uv first on PATH and an empty overlay cache in place."""
    import os
    import sys

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "fake_uv.py").write_text(FAKE_UV)
    (folder / "uv").write_text(f'#!/bin/sh\nexec {sys.executable} {folder / "fake_uv.py"} "$@"\n')
    (folder / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OVERLAY_CACHE_DIR", str(tmp_path / "cache"))


def _release_wheel(folder: Path, files: dict[str, bytes], version: str) -> Path:
    from scaffold import write_files

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"executorch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    dist = f"executorch-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n\n"
    return write_files(
        path,
        {
            **{f"executorch/{repo_path}": data for repo_path, data in files.items()},
            f"{dist}/METADATA": metadata.encode(),
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n",
        },
    )


def _report(*, problems: tuple[str, ...] = ()) -> str:
    """Return a retarget.json as `retarget` writes it (through the codec)."""
    report = Retarget(
        old_version="1.2.0", version="1.6.0", candidate="out/patches", fast=True,
        problems=problems, wheels=(), runtime={"torch": "2.11.0"}, attempts=(), patches=(),
        runtime_form="", moves=(), runs={}, timings={"total": 1.0}, worktree="", resume="",
        locks=(),
    )  # fmt: skip
    return codec.dumps(report, indent=2) + "\n"


def test_promote_refuses_a_report_of_another_shape(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "retarget.json").write_text(json.dumps({"problems": []}))
    with pytest.raises(UpstreamError, match="no retarget report") as refused:
        promote(out, _root(tmp_path))
    assert (refused.value.found or "").startswith("malformed data at retarget.")


def _candidate(tmp_path: Path) -> tuple[Path, Path, str, Series]:
    """Return (lines root, retarget folder, the ported patch's text, the candidate) of 1.6.0."""
    root = _root(tmp_path)
    out = tmp_path / "out"
    new = _edit(OLD, "line 1\n", "line 1 new\n")
    wheel = _release_wheel(tmp_path / "cache" / "wheels", {PATH: new.encode()}, "1.6.0")
    ported = patch_text("Fix the demo pass", make_diff(PATH, new, _edit(new, "line 9\n", "x\n")))
    candidate = write_series(
        out / "patches", {NAME: ported}, {PATH: new.encode()},
        wheel_sha=sha256_file(wheel), version="1.6.0",
    )  # fmt: skip
    shared_text = (root / "upstream.toml").read_text()
    own = upstream_pins.with_release(shared_text, "1.6.0", sha256="ab" * 32, torch="2.14.0")
    (out / "patches" / "upstream.toml").write_text(own)
    (out / "retarget.json").write_text(_report())
    return root, out, ported, candidate


@pytest.mark.usefixtures("fake_uv")
def test_promote_makes_a_new_line_beside_the_others(tmp_path: Path) -> None:
    root, out, _, candidate = _candidate(tmp_path)
    before = {p.name: p.read_bytes() for p in (root / "1.2.0").rglob("*") if p.is_file()}
    with pytest.raises(UpstreamError, match="no current lock") as refused:
        promote(out, root)
    assert "executorch-arm-overlay --patches" in (refused.value.hint or "")
    written = write_locks(candidate, tmp_path / "dist", lambda _: None)
    assert written == [out / "patches" / "locks" / LOCK]
    pin = candidate.pins.wheels[0]
    found = lockfiles.check_current(candidate, pin)  # keyed by the candidate's pins and patches
    assert found.get("executorch").version == local_version(candidate)
    assert found.get("torch").version == "2.11.0"
    (out / "retarget.json").write_text(_report(problems=("p",)))
    with pytest.raises(UpstreamError, match="not ready"):
        promote(out, root)
    (out / "retarget.json").write_text(_report())
    done = promote(out, root)
    assert (done.version, done.line, done.previous_default) == ("1.6.0", root / "1.6.0", "1.2.0")
    assert f"locks/{LOCK}" in done.written and "pins.toml" in done.written
    assert [line.name for line in lines.all_lines(root)] == ["1.2.0", "1.6.0"]
    assert lines.default_line(root).name == "1.6.0"
    after = {p.name: p.read_bytes() for p in (root / "1.2.0").rglob("*") if p.is_file()}
    assert after == before  # the old line is neither replaced nor archived
    promoted = load_series(root / "1.6.0")
    assert str(promoted.pins.executorch) == "1.6.0"
    assert not (root / "1.6.0" / "upstream.toml").exists()  # the shared file stays shared
    assert lockfiles.check_current(promoted, pin).path.read_bytes() == written[0].read_bytes()
    shared = upstream_pins.load(root / "upstream.toml")
    assert (shared.sha256["1.6.0"], shared.torch["1.6.0"]) == ("ab" * 32, "2.14.0")
    assert shared.matrix_versions[-1] == "1.6.0" and done.recorded
    assert "# Upstream's torch pin per release" in (root / "upstream.toml").read_text()
    assert not list(root.glob(".promoting-*"))


@pytest.mark.usefixtures("fake_uv")
def test_promote_of_the_lines_own_patches_writes_its_evidence_only(tmp_path: Path) -> None:
    root, out, ported, candidate = _candidate(tmp_path)
    write_locks(candidate, tmp_path / "dist", lambda _: None)
    promote(out, root)
    # the line's own patches measured again: its evidence, nothing else, is written anew
    (root / "1.6.0" / "evidence.toml").write_text("stale\n")
    unchanged = {p: p.read_bytes() for p in (root / "1.6.0").rglob("*") if p.is_file()}
    again = promote(out, root, today="2026-12-31")
    assert (again.written, again.previous_default, again.recorded) == (
        ("evidence.toml",),
        "",
        False,
    )
    refreshed = evidence.load(root / "1.6.0")
    assert refreshed is not None and refreshed.measured == "2026-12-31"
    now = {p: p.read_bytes() for p in (root / "1.6.0").rglob("*") if p.is_file()}
    assert {p for p in now if now[p] != unchanged[p]} == {root / "1.6.0" / "evidence.toml"}
    # other patches for the same release: refused, nothing written
    (out / "patches" / NAME).write_text(ported.replace("x\n", "y\n"))
    with pytest.raises(UpstreamError, match="exists already") as other:
        promote(out, root)
    assert "retire-line 1.6.0" in (other.value.hint or "")
    assert {p: p.read_bytes() for p in (root / "1.6.0").rglob("*") if p.is_file()} == now
    assert not list(root.glob(".promoting-*"))


def test_retire_line_removes_one_line_and_refuses_the_last(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _line(root, "1.6.0", OLD, ("line 3\n", "line 3 fixed\n"))
    with pytest.raises(UsageError, match=r"no release line 1\.4\.1"):
        retire_line(root, "1.4.1")
    done = retire_line(root, "1.6.0")
    assert (done.removed, done.with_git, done.default) == (root / "1.6.0", False, "1.2.0")
    assert not (root / "1.6.0").exists() and (root / "1.2.0" / "series").is_file()
    with pytest.raises(SeriesError, match="is the only release line"):
        retire_line(root, "1.2.0")


def test_retire_line_in_a_checkout_is_a_git_rm_and_names_what_refers_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = tmp_path / "checkout"
    root = _root(checkout)
    _line(root, "1.6.0", OLD, ("line 3\n", "line 3 fixed\n"))
    (checkout / "pyproject.toml").write_text('[project]\nname = "executorch-arm-overlay"\n')
    (checkout / "overlay").mkdir()
    (checkout / "overlay" / "forms.py").write_text('FORMS = {"1.2.0": "x", "1.6.0": "y"}\n')
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "lines")
    before = snapshot(checkout)
    files = sorted(
        p.relative_to(root).as_posix() for p in (root / "1.2.0").rglob("*") if p.is_file()
    )
    assert main(["--patches", str(root), "retire-line", "1.2.0", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"would retire the executorch 1.2.0 line, {len(files)} files (git rm")
    assert [f"  {name}" for name in files] == printed.splitlines()[1 : len(files) + 1]
    assert "overlay/forms.py:1:" in printed
    assert snapshot(checkout) == before and git(checkout, "diff", "--cached") == ""
    assert main(["--patches", str(root), "retire-line", "1.2.0"]) == UsageError.exit_code == 2
    said = capsys.readouterr()
    assert said.out.startswith("would retire the executorch 1.2.0 line")  # what --yes deletes
    assert said.err.startswith(
        f"error: retire-line deletes {root / '1.2.0'}: nothing was removed without --yes\n"
    )
    assert snapshot(checkout) == before and git(checkout, "diff", "--cached") == ""
    assert main(["--patches", str(root), "retire-line", "1.2.0", "--yes"]) == 0
    printed = capsys.readouterr().out
    assert "retired the executorch 1.2.0 line" in printed and "git rm -r, staged" in printed
    assert "overlay/forms.py:1:" in printed
    staged = git(checkout, "diff", "--cached", "--name-status").splitlines()
    assert f"D\tpatches/1.2.0/{NAME}" in staged and f"D\tpatches/1.2.0/locks/{LOCK}" in staged
    assert not (root / "1.2.0").exists()
    assert [line.name for line in lines.all_lines(root)] == ["1.6.0"]
    assert load_series(lines.series_directory(root)).pins.executorch == "1.6.0"
