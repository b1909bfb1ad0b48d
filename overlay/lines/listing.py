"""A line's ``series`` file: the patch names, in order (no unidiff: worker envs read it too)."""

from __future__ import annotations

import re
from pathlib import Path

from overlay.errors import SeriesError, UnsafePatchError
from overlay.lines.pins import SERIES_FILE

PATCH_NAME = re.compile(r"^(\d{4})-.+\.patch$")


def patch_number(name: str) -> int | None:
    """Return the fix number of patch file ``name`` (``0007-x.patch`` -> 7; None: unnumbered)."""
    match = PATCH_NAME.match(name)
    return int(match.group(1)) if match else None


def read_text(path: Path) -> str:
    """Read a series file as UTF-8 with its line ends kept; refuse other encodings clearly."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SeriesError(
            f"cannot read {path}: {exc}", hint="check the file's permissions"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SeriesError(
            f"{path} is not UTF-8 text",
            expected="UTF-8 text (patches, series and SHA256SUMS are written as UTF-8)",
            found=f"byte 0x{data[exc.start]:02x} on line {line}",
            hint="regenerate the file (`executorch-arm-overlay regenerate` or `refresh`)",
        ) from exc


def read_series_names(directory: Path) -> list[str]:
    """Read the ``series`` file: one patch name per line, ``#`` comments."""
    series_file = directory / SERIES_FILE
    if not series_file.is_file():
        raise SeriesError(
            f"no series file in {directory}",
            expected=f"{series_file} listing the patches in order",
            found="nothing",
            hint="point --patches at the folder that holds 'series'",
        )
    lines = read_text(series_file).splitlines()
    names: list[str] = []
    for line in lines:
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if "/" in entry or "\\" in entry or entry.startswith("."):
            raise UnsafePatchError(
                f"series entry {entry!r} is not a plain file name",
                expected="a patch file name in the same folder",
                found=entry,
            )
        if entry in names:
            raise SeriesError(f"series lists {entry} twice", hint="remove the duplicate line")
        number = patch_number(entry)
        if number is None or number in map(patch_number, names):
            raise SeriesError(
                f"series entry {entry!r} is not named after a fix of its own",
                expected="NNNN-<slug>.patch, NNNN the number of the one fix it carries",
                found=", ".join(n for n in [*names, entry] if patch_number(n) == number) or entry,
                hint="name the patch after its fix (overlay/fixes/fNNNN_<slug>.py), one per fix",
            )
        names.append(entry)
    return names
