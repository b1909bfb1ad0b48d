"""The atomic text write the lock, the series regeneration, the result cache and VGF use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlay._files import write_text_atomic


def test_the_new_text_replaces_the_old_and_nothing_else_is_left(tmp_path: Path) -> None:
    target = tmp_path / "series"
    target.write_text("old\n", encoding="utf-8")
    write_text_atomic(target, "new\r\nline\n")
    assert target.read_bytes() == b"new\r\nline\n"  # written as given, no newline translation
    assert os.listdir(tmp_path) == ["series"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "series"
    target.write_text("old\n", encoding="utf-8")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(tmp_path) == ["series"]
