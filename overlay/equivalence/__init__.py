"""Equivalence: the diff-patched build behaves like stock + the runtime monkey-patch.

Layout: ``protocol`` (the typed messages to and from workers), ``worker`` (the only code
that runs torch, in the stock and patched envs), ``corpus``, ``zoo`` and ``probes`` (what
the workers run), ``vgf_run`` and ``ethosu`` (worker-side: VGF executed on the emulation
layer, Ethos-U lowering with Vela's estimates), ``envinfo`` (what a path's env is made
of, no torch), ``cache`` (the content-addressed result cache), ``workers`` and ``pool``
(worker processes; what runs where), ``orchestrator`` (inputs, selection, shards: one
run), ``verdict`` (pure: where every verdict is decided), ``report`` and ``htmlreport``
(render, read back, merge).
"""
