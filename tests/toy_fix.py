"""A toy fix (number 99) with its release lines and a fake installed package (no torch).

The toy fix module is ``toy_fixes/f0099_toy_answer_is_42.py``; its lines are 9.9.0 (a
runtime form) and 9.10.0 (diff only), pinned to the fake distribution ``toyexec``. What a
new fix adds to a checkout is :data:`MODULE_FILE` and, per line, :data:`LINE_FILES`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from overlay.lines.pins import PINS_FILE, SERIES_FILE
from overlay.text.applier import transform
from overlay.text.series import CHECKSUMS_FILE, format_checksums, load_series

from scaffold import make_diff, patch_text, pins_toml, sha

MODULE_FILE = Path(__file__).resolve().parent / "toy_fixes" / "f0099_toy_answer_is_42.py"
PACKAGE = "toyexec"
REPO_PATH = "backends/toy/answer.py"
PATCH = "0099-toy-answer-is-42.patch"
PRISTINE = "class Answer:\n    def value(self) -> int:\n        return 41\n"
LINES = ("9.9.0", "9.10.0")
# what a line folder gains with the fix: its diff, its place in the series, the pristine pin
# of each file it touches, and what `refresh` writes (no locks: the toy has no wheel)
LINE_FILES = (PATCH, SERIES_FILE, PINS_FILE, CHECKSUMS_FILE)


def load_module(name: str = "f0099_toy_answer_is_42") -> ModuleType:
    """Import the toy fix module from its file under ``name`` (a fresh module each call)."""
    spec = importlib.util.spec_from_file_location(name, MODULE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_line(root: Path, version: str, patches: tuple[str, ...] = (PATCH,)) -> Path:
    """Write line ``version`` under ``root``: series, the toy patch, pins of ``toyexec``."""
    folder = root / version
    folder.mkdir(parents=True)
    (folder / SERIES_FILE).write_text("".join(f"{p}\n" for p in patches), encoding="utf-8")
    diff = make_diff(REPO_PATH, PRISTINE, PRISTINE.replace("41", "42"))
    for name in patches:
        (folder / name).write_text(patch_text("The answer is 42", diff), encoding="utf-8")
    pins = pins_toml({REPO_PATH: PRISTINE.encode()}, version=version)
    pins = pins.replace('package_dir = "executorch"', f'package_dir = "{PACKAGE}"')
    (folder / PINS_FILE).write_text(pins, encoding="utf-8")
    if patches == (PATCH,):  # other series are for the registry's checks: no checksums
        series = load_series(folder)
        patched = transform(series.patches, REPO_PATH, PRISTINE.encode())
        assert patched is not None
        checksums = format_checksums(series, {REPO_PATH: sha(patched)})
        (folder / CHECKSUMS_FILE).write_text(checksums, encoding="utf-8")
    return folder


def write_lines(root: Path) -> Path:
    """Write both toy lines under ``root`` and return it."""
    for version in LINES:
        write_line(root, version)
    return root


def install_package(site: Path, version: str, source: str = PRISTINE) -> Path:
    """Write an importable ``toyexec`` of ``version`` into ``site`` (package and dist-info)."""
    module = site / PACKAGE / REPO_PATH
    module.parent.mkdir(parents=True, exist_ok=True)
    for folder in (site / PACKAGE, *module.parents):
        if folder == site:
            break
        (folder / "__init__.py").touch()
    module.write_text(source, encoding="utf-8")
    dist = site / f"{PACKAGE}-{version}.dist-info"
    dist.mkdir(exist_ok=True)
    metadata = f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n"
    (dist / "METADATA").write_text(metadata, encoding="utf-8")
    return site


def forget_package() -> None:
    """Drop every imported ``toyexec`` module (the next import reads the files again)."""
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]
