"""``python -m overlay``: the command-line interface."""

from __future__ import annotations

from overlay.cli import main

raise SystemExit(main())
