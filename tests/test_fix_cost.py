"""The cost of a fix: editing one patch's description changes one file by hand, and the tools
write the rest (the series digest keys SHA256SUMS and every lock): SHA256SUMS its series line,
each lock its inputs-key line and its executorch entry, every other locked package kept.

The fast tests run the maintainer's commands (``refresh``, ``lock``) on a copy of each line
with the pinned wheel and uv stood in for: the wheel's post-series hashes are the recorded
ones (a description edit changes no diff), the patched wheel is a file of its name, and uv
is ``tests/fake_uv.py``, whose ``pip compile`` keeps what the output file pins as uv does.
The integration test runs them as they are (the pinned wheel, the real uv), and the other
route, ``regenerate`` from an ``edit`` work tree, to the same bytes.
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from overlay import lines
from overlay._git import git
from overlay.cli import main
from overlay.distribution import index, wheels
from overlay.envs import lockfiles
from overlay.lines.pins import LOCKS_DIR, WheelPin
from overlay.text.series import CHECKSUMS_FILE, HEADER_END, Series, load_series

from scaffold import snapshot

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / lines.LINES_DIR
LINES = [line.name for line in lines.all_lines(PATCHES)]
HAND = "by hand"
BY_HAND_AT_MOST = 3  # the patch, its fix module, one line-data file (docs/fixes.md)


@dataclass
class Ledger:
    """Who changed which file of a series folder: the hand, or the command that wrote it."""

    root: Path
    seen: dict[str, bytes | str]
    by: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, root: Path) -> Ledger:
        return cls(root, snapshot(root))

    def step(self, who: str) -> None:
        """Attribute the files changed since the last step to ``who`` (first writer wins)."""
        now = snapshot(self.root)
        for path in {*self.seen, *now}:
            if self.seen.get(path) != now.get(path):
                self.by.setdefault(path, who)
        self.seen = now


def reword(text: str, series: Series) -> str:
    """Return ``text`` (the last patch, or its commit message) with the first line of that
    patch's DEP-3 description reworded."""
    first = series.patches[-1].text.splitlines()[0]
    assert first.startswith("Description: ") and first in text
    return text.replace(first, f"{first}, reworded", 1)


def edit_by_hand(copy: Path, series: Series, ledger: Ledger) -> str:
    """Reword the description of the line's last patch; return its file name."""
    patch = series.patches[-1]
    edited = reword(patch.text, series)
    assert edited.split(HEADER_END, 1)[1] == patch.text.split(HEADER_END, 1)[1]  # diff as it was
    (copy / patch.name).write_text(edited, encoding="utf-8")
    ledger.step(HAND)
    return patch.name


def changed_lines(before: str, after: str) -> list[str]:
    """Return the lines a diff of ``before`` -> ``after`` removes (-) and adds (+)."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def executorch_lines_only(before: Path, after: Path) -> list[str]:
    """Return the changed lines of a lock that are not its key line or executorch entry."""
    old, new = lockfiles.read(before), lockfiles.read(after)
    hashes = {*old.get("executorch").hashes, *new.get("executorch").hashes}
    changed = changed_lines(before.read_text(), after.read_text())
    return [
        line
        for line in changed
        if not line[1:].startswith((lockfiles.KEY_PREFIX, "executorch=="))
        and not any(line[1:].strip().rstrip(" \\") == f"--hash=sha256:{h}" for h in hashes)
    ]


def assert_one_file_by_hand(
    copy: Path, line: str, ledger: Ledger, patch: str, tags: list[str]
) -> None:
    """The count: the patch by hand; SHA256SUMS and the locks of ``tags`` by the tools, each
    lock in its key line and executorch entry only."""
    original = load_series(PATCHES / line)
    locks = {f"{LOCKS_DIR}/{tag}.txt": "lock" for tag in tags}
    assert ledger.by == {patch: HAND, CHECKSUMS_FILE: "refresh", **locks}
    by_hand = [path for path, who in ledger.by.items() if who == HAND]
    assert by_hand == [patch] and len(by_hand) <= BY_HAND_AT_MOST
    edited = load_series(copy)
    assert changed_lines(
        (PATCHES / line / CHECKSUMS_FILE).read_text(), (copy / CHECKSUMS_FILE).read_text()
    ) == [f"-# series {original.digest}", f"+# series {edited.digest}"]
    for lock in locks:
        assert executorch_lines_only(PATCHES / line / lock, copy / lock) == [], lock
        written = lockfiles.check_current(edited, edited.pins.wheel_for(Path(lock).stem))
        assert written.key != lockfiles.read(PATCHES / line / lock).key
        assert written.get("executorch").version.endswith(edited.short_digest)
    assert edited.expected_patched_sha256() == original.expected_patched_sha256()
    check = [f"--tag={tag}" for tag in tags]
    assert main(["--patches", str(copy), "lock", "--check", *check]) == 0  # nothing left stale


@pytest.fixture
def fake_wheel_and_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for the pinned wheels (fetch, post-series hashes, patched build) and uv."""
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / "fake_uv.py"} "$@"\n')
    uv.chmod(0o755)
    monkeypatch.setattr(lockfiles, "find_uv", lambda: str(uv))
    monkeypatch.setattr(wheels, "fetch_pinned", lambda pin, progress=None: tmp_path / pin.file)
    # a description edit changes no diff: the files after the series are those recorded
    recorded = {line: load_series(PATCHES / line).expected_patched_sha256() for line in LINES}
    monkeypatch.setattr(wheels, "patched_checksums", lambda s, _: recorded[s.directory.name])

    def build_into(series: Series, source: Path, pin: WheelPin, dist: Path, **_: object) -> object:
        path = dist / wheels.patched_wheel_name(pin, series)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{series.digest} {pin.tag}".encode())
        return SimpleNamespace(path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest())

    monkeypatch.setattr(index, "build_into", build_into)


@pytest.mark.parametrize("line", LINES)
@pytest.mark.usefixtures("fake_wheel_and_uv")
def test_a_description_edit_costs_one_file_by_hand_and_executorch_lines(
    tmp_path: Path, line: str
) -> None:
    copy = tmp_path / "patches" / line
    shutil.copytree(PATCHES / line, copy)
    ledger = Ledger.of(copy)
    series = load_series(PATCHES / line)
    patch = edit_by_hand(copy, series, ledger)
    assert main(["--patches", str(copy), "refresh", "--tag", series.pins.wheels[0].tag]) == 0
    ledger.step("refresh")
    assert main(["--patches", str(copy), "lock", "--dist", str(tmp_path / "dist")]) == 0
    ledger.step("lock")
    assert_one_file_by_hand(copy, line, ledger, patch, [p.tag for p in series.pins.wheels])


@pytest.mark.usefixtures("fake_wheel_and_uv")
def test_lock_upgrade_resolves_anew(tmp_path: Path) -> None:
    line = LINES[-1]
    copy = tmp_path / "patches" / line
    shutil.copytree(PATCHES / line, copy)
    pin = load_series(copy).pins.wheels[0]
    lock = f"{LOCKS_DIR}/{pin.tag}.txt"
    argv = ["--patches", str(copy), "lock", "--tag", pin.tag, "--dist", str(tmp_path / "dist")]
    assert main(argv) == 0  # nothing edited: the lock keeps every package
    assert executorch_lines_only(PATCHES / line / lock, copy / lock) == []
    assert main([*argv, "--upgrade"]) == 0
    assert executorch_lines_only(PATCHES / line / lock, copy / lock) != []  # the others went


@pytest.mark.integration
def test_the_maintainers_commands_as_they_are(tmp_path: Path) -> None:
    """The pinned wheel and the real uv: both routes write the same bytes, one file by hand.

    One lock: uv keeps the locked versions whatever the target, and the fast test counts
    every lock.
    """
    line = lines.default_line(PATCHES).name
    series = load_series(PATCHES / line)
    tag = series.pins.wheels[0].tag
    copy = tmp_path / "edited" / line
    shutil.copytree(PATCHES / line, copy)
    ledger = Ledger.of(copy)
    patch = edit_by_hand(copy, series, ledger)
    assert main(["--patches", str(copy), "refresh", "--tag", tag]) == 0
    ledger.step("refresh")
    # the other route: reword the patch's commit in an edit work tree, then regenerate
    regenerated = tmp_path / "regenerated" / line
    shutil.copytree(PATCHES / line, regenerated)
    work = tmp_path / "work"
    assert main(["--patches", str(regenerated), "edit", "--dir", str(work), "--tag", tag]) == 0
    message = reword(git(work, "log", "-1", "--format=%B"), series)
    git(work, "commit", "--amend", "-q", "-F", "-", stdin=message)
    assert main(["--patches", str(regenerated), "regenerate", "--dir", str(work)]) == 0
    assert snapshot(regenerated) == snapshot(copy)
    locking = ["--patches", str(copy), "lock", "--tag", tag, "--dist", str(tmp_path / "dist")]
    assert main(locking) == 0
    ledger.step("lock")
    assert_one_file_by_hand(copy, line, ledger, patch, [tag])
