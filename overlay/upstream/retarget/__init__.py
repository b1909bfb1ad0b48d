"""Move a release line to a new executorch release: a checked candidate, promoted on request.

``retarget`` never touches ``patches/``. It writes a candidate series folder
(``<out>/patches``) and a report; ``--promote`` makes the candidate a new line beside the
existing ones. One module per job, :func:`retarget` only orchestrates them:

- :mod:`.text_plan`: each patch's text on the new release (carried, ported, conflict, drop);
- :mod:`.pin_check`: runtime pin candidates from what the release requires, each checked
  in a fresh stock env (its quantized out-variant kernels register, a conv lowers);
- :mod:`.conflicts`: the git work tree, conflict markers, ``--resume``;
- :mod:`.measure`: trigger cases on stock, the kept series patched, the tests it adds;
- :mod:`.moves`: what moving changes per case, and the runtime form;
- :mod:`.candidate`: the candidate folder (pins.toml and upstream.toml with tomlkit, locks);
- :mod:`.promote`: promote a candidate to a new line, retire a line;
- :mod:`.result`: what a retarget is asked and what it found (its report, via the codec);
- :mod:`.run`: the run itself and its report files.

Release fetching is :mod:`overlay.upstream.releases`; every verdict is decided in
:mod:`overlay.upstream.verdicts`.
"""

from __future__ import annotations

from overlay.upstream.retarget.pin_check import upstream_torch_pin
from overlay.upstream.retarget.promote import Promotion, Retirement, promote, retire_line
from overlay.upstream.retarget.result import Request, Retarget
from overlay.upstream.retarget.run import retarget, write_report

__all__ = [
    "Promotion",
    "Request",
    "Retarget",
    "Retirement",
    "promote",
    "retarget",
    "retire_line",
    "upstream_torch_pin",
    "write_report",
]
