"""Equivalence: the diff-patched build behaves like stock + the runtime monkey-patch.

Layout, one job per module (torch runs only in worker processes):

- :mod:`.protocol`: the typed messages between the controller and its workers;
- :mod:`.verdict`: every equivalence verdict, decided in one pure module;
- :mod:`.sources`: Python sources read, never run (the one tree digest, a worker's
  imports, a module's names);
- :mod:`.corpus`: what workers run; torch-free case tables for the controller (with the
  cases and probes each fix module brings), torch builders (:mod:`.corpus.models`,
  :mod:`.corpus.zoo`) for workers, checks of a user's ``--models`` file
  (:mod:`.corpus.user_cases`);
- :mod:`.worker`: the worker processes (lowering, VGF run, Ethos-U, environment info);
- :mod:`.controller`: inputs, orchestration, scheduling, worker processes, result cache,
  shard merging;
- :mod:`.render`: the report as text, Markdown, HTML and the typed JSON document.
"""
