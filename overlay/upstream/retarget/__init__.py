"""Move a release line to a new executorch release: a checked candidate, promoted on request.

``retarget`` never touches ``patches/``. It writes a candidate series folder
(``<out>/patches``) and a report; ``--promote`` makes the candidate a new line beside the
existing ones. One module per job, :func:`.run.retarget` only orchestrates them:

- :mod:`.text_plan`: each patch's text on the new release (the one replay engine);
- :mod:`.pin_check`: runtime pin candidates from what the release requires, each checked
  in a fresh stock env (its quantized out-variant kernels register, a conv lowers);
- :mod:`.conflicts`: the git work tree, conflict markers, ``--resume``;
- :mod:`.moves`: what moving changes per case, and the runtime form;
- :mod:`.candidate`: the candidate folder (pins.toml and upstream.toml with tomlkit, locks);
- :mod:`.promote`: promote a candidate to a new line, retire a line (``retire_line``);
- :mod:`.run`: what a retarget is asked, and the run: behaviour, verdicts, its report.

Release fetching is :mod:`overlay.upstream.releases`; every verdict is decided in
:mod:`overlay.upstream.verdicts`; the report is :class:`overlay.upstream.results.Retarget`.
"""
