"""A venv's stamp, written last: the sha256 of what its finished sync was synced from."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from overlay import codec
from overlay._files import write_text_atomic

STAMP_FILE = "overlay-venv.json"


class Flavour(enum.Enum):
    """Which executorch a venv synced from a committed lock holds."""

    PATCHED = "patched"  # the lock as committed: the patched wheel, by its sha256
    STOCK = "stock"  # the lock with its executorch entry replaced by the pinned stock wheel


@dataclass(frozen=True)
class Origin:
    """The committed lock a venv was synced from."""

    line: str  # the release line, e.g. "1.2.0"
    tag: str  # the wheel tag, e.g. "cp311-manylinux_2_28_x86_64"
    lock_sha256: str  # of the committed lock file
    flavour: Flavour

    def describe(self) -> str:
        """Return the one-line form reports show."""
        return f"{self.line}/locks/{self.tag}.txt ({self.flavour.value}) sha256 {self.lock_sha256}"


@dataclass(frozen=True)
class Stamp:
    """A finished sync: what the venv was synced from."""

    sha256: str  # of the lock (or requirements) uv synced, its Python, packages on top
    origin: Origin | None = None  # None: not synced from a committed lock


def read_stamp(root: Path) -> Stamp | None:
    """Return the stamp of the venv at ``root``; None when it is absent or not one we wrote
    (an older overlay's stamp too: that venv is then re-synced once)."""
    try:
        return codec.loads(Stamp, (root / STAMP_FILE).read_text(encoding="utf-8"), "stamp")
    except (OSError, UnicodeDecodeError, codec.CodecError):
        return None


def write_stamp(root: Path, stamp: Stamp) -> None:
    """Replace the stamp of the venv at ``root`` (atomically: a reader sees old or new)."""
    write_text_atomic(root / STAMP_FILE, codec.dumps(stamp, indent=2) + "\n")
