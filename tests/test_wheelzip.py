"""The wheel reader and writer: every member checked against RECORD; the same bytes each time."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest
from installer.sources import WheelFile

from overlay.distribution import wheelzip
from overlay.errors import WheelError

from scaffold import write_files

NAME = "demo-1.0-py3-none-any.whl"
FILES = {
    "demo/__init__.py": b"X = 1\n",
    "demo/data/blob.bin": bytes(range(256)) * 40,
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def wheel_in(folder: Path, files: dict[str, bytes] = FILES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_files(folder / NAME, files)


def test_installer_accepts_what_the_writer_writes(tmp_path: Path) -> None:
    path = write_files(tmp_path / NAME, FILES)
    with WheelFile.open(path) as source:
        source.validate_record()  # an independent reader: names, hashes, sizes
        assert {row[0] for row, _, _ in source.get_contents()} == {
            *FILES,
            "demo-1.0.dist-info/RECORD",
        }
    assert wheelzip.read_members(path) == {
        **FILES,
        "demo-1.0.dist-info/RECORD": wheelzip.read_members(path)["demo-1.0.dist-info/RECORD"],
    }
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist()[-1] == "demo-1.0.dist-info/RECORD"
        record = archive.read("demo-1.0.dist-info/RECORD").decode()
    assert record.endswith("\ndemo-1.0.dist-info/RECORD,,\n")
    assert record.splitlines()[0].startswith("demo/__init__.py,sha256=")


def test_the_same_members_give_the_same_bytes_whatever_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = wheel_in(tmp_path / "one")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    umask = os.umask(0o077)
    try:
        second = wheel_in(tmp_path / "two")
    finally:
        os.umask(umask)
        monkeypatch.delenv("TZ")
        time.tzset()
    assert first.read_bytes() == second.read_bytes()


def test_a_member_keeps_the_date_and_mode_it_is_given(tmp_path: Path) -> None:
    like = zipfile.ZipInfo("x", (2026, 3, 4, 5, 6, 8))
    like.external_attr = 0o100755 << 16
    path = tmp_path / NAME
    with wheelzip.WheelWriter(path, record_like=like) as archive:
        archive.add("demo/run.py", b"print()\n", like=like)
        archive.add("demo-1.0.dist-info/METADATA", FILES["demo-1.0.dist-info/METADATA"])
        archive.add("demo-1.0.dist-info/RECORD", b"ignored")  # RECORD is always written anew
    with zipfile.ZipFile(path) as zipped:
        run, meta, record = zipped.infolist()
    assert (run.date_time, run.external_attr >> 16) == ((2026, 3, 4, 5, 6, 8), 0o100755)
    assert (meta.date_time, meta.external_attr >> 16) == (wheelzip.DEFAULT_DATE, 0o100664)
    assert (record.date_time, record.external_attr >> 16) == ((2026, 3, 4, 5, 6, 8), 0o100664)
    assert all(
        i.create_system == 3 and i.compress_type == zipfile.ZIP_DEFLATED for i in (run, meta)
    )


def rewrite(source: Path, dest: Path, change: dict[str, bytes | None]) -> Path:
    """Copy a wheel member by member, replacing (bytes) or dropping (None) some."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(dest, "w") as new:
        for info in old.infolist():
            data = change.get(info.filename, old.read(info.filename))
            if data is not None:
                new.writestr(info, data)
        for name, data in change.items():
            if name not in old.namelist() and data is not None:
                new.writestr(name, data)
    return dest


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"demo/__init__.py": b"X = 2\n"}, "demo/__init__.py does not match its RECORD row"),
        ({"demo/extra.py": b""}, "demo/extra.py has no hash in RECORD"),
        ({"demo-1.0.dist-info/RECORD": None}, "no demo-1.0.dist-info/RECORD"),
        ({"demo-1.0.dist-info/RECORD": b"demo/__init__.py,sha256=x,one\n"}, "not a valid RECORD"),
        (
            {"demo-1.0.dist-info/RECORD": b"demo/__init__.py,md5=x,6\n"},
            "demo/__init__.py has a md5 hash",
        ),
        ({"../evil.py": b""}, "../evil.py has no hash in RECORD"),
    ],
)
def test_a_damaged_wheel_is_a_wheel_error(
    tmp_path: Path, change: dict[str, bytes | None], detail: str
) -> None:
    good = wheel_in(tmp_path / "good")
    bad = rewrite(good, tmp_path / NAME, change)
    with pytest.raises(WheelError) as info:
        wheelzip.read_members(bad)
    assert info.value.message.startswith(f"{NAME} is not a readable wheel: ")
    assert detail in info.value.message


def test_two_dist_info_folders_are_refused(tmp_path: Path) -> None:
    files = {**FILES, "other-1.0.dist-info/METADATA": b"x"}
    with pytest.raises(WheelError, match=r"2 \.dist-info folders"):
        write_files(tmp_path / NAME, files)
