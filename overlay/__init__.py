"""Arm-backend fixes for a pinned ExecuTorch release, kept as a patch series."""

from __future__ import annotations

__version__ = "0.1.0"
