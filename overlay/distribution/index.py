"""``dist/<line>/``: this series' wheels, a PEP 503 ``simple/`` index, older ones in ``old/``."""

from __future__ import annotations

import html
import os
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overlay._files import write_text_atomic
from overlay._hashing import sha256_file
from overlay.distribution import wheels
from overlay.lines.pins import WheelPin
from overlay.text.series import Series

SIMPLE = "simple"
OLD = "old"
PROJECT = "executorch"


@dataclass(frozen=True)
class IndexedWheel:
    """One wheel the index serves."""

    filename: str
    sha256: str


@dataclass(frozen=True)
class Index:
    """What :func:`publish` left in the folder."""

    wheels: tuple[IndexedWheel, ...]
    moved: tuple[str, ...]  # earlier series' wheels moved to old/


def publish(dist: Path, local_version: str, known: dict[str, str] | None = None) -> Index:
    """Keep only ``local_version``'s executorch wheels in ``dist`` and write its simple index
    (``known``: sha256s of file names already computed, a fresh build's)."""
    old = dist / OLD
    moved = []
    current: list[IndexedWheel] = []
    for path in sorted(dist.glob(f"{PROJECT}-*.whl")):
        if path.name.split("-")[1] != local_version:
            old.mkdir(exist_ok=True)
            os.replace(path, old / path.name)
            record = wheels.build_record(path)  # the sha256 its build recorded travels with it
            if record.is_file():
                os.replace(record, wheels.build_record(old / path.name))
            moved.append(path.name)
            continue
        digest = (known or {}).get(path.name) or sha256_file(path)
        current.append(IndexedWheel(path.name, digest))
    simple = dist / SIMPLE
    links = "".join(
        f'    <a href="../../{urllib.parse.quote(w.filename)}#sha256={w.sha256}">'
        f"{html.escape(w.filename)}</a><br>\n"
        for w in current
    )
    _write_page(simple / PROJECT / "index.html", f"Links for {PROJECT}", links)
    _write_page(simple / "index.html", "Simple index", f'    <a href="{PROJECT}/">{PROJECT}</a>\n')
    return Index(tuple(current), tuple(moved))


def default_folder(series: Series) -> Path:
    """Return the default wheel folder of a line, ``dist/<line>``: each beside the others."""
    return Path("dist") / str(series.pins.executorch)


def build_into(
    series: Series,
    source: Path,
    pin: WheelPin,
    dist: Path,
    *,
    force: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> wheels.BuildResult:
    """Build (or reuse) the patched wheel into ``dist``, then publish ``dist`` as the index."""
    started = time.perf_counter()
    result = wheels.build_patched_wheel(
        series, source, pin, dist, force=force, cache=wheels.patched_cache()
    )
    seconds = time.perf_counter() - started
    for path in result.removed:
        progress(f"removed {path} (left by a killed build)")
    if result.note:
        progress(f"note: {result.note}")
    if result.built:
        state = f"built in {seconds:.1f} s"
    else:
        state = "linked from the cache (built before)" if result.linked else "up to date, reused"
    progress(f"{result.path.name}: {state}")
    published = publish(dist, result.version, {result.path.name: result.sha256})
    for name in published.moved:
        progress(f"moved {name} (an earlier series) to {dist / OLD}/")
    return result


def _write_page(path: Path, title: str, body: str) -> None:
    """Write an HTML page unless the file already holds it (atomic rename otherwise)."""
    text = f"<!DOCTYPE html>\n<html>\n  <head><title>{title}</title></head>\n  <body>\n{body}"
    text += "  </body>\n</html>\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
