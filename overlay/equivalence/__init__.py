"""Equivalence: the diff-patched build behaves like stock + the runtime monkey-patch.

Layout: ``protocol`` (the typed messages to and from workers), ``worker`` (the only code
that runs torch, in the stock and patched envs), ``corpus`` and ``probes`` (what the
workers run), ``orchestrator`` (starts the workers, collects results), ``verdict`` (pure:
where every verdict is decided), ``report`` (renders a run).
"""
