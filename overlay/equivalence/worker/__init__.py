"""The worker side: the processes that lower and run, the only code that runs torch.

``python -m overlay.equivalence.worker`` (:mod:`.__main__`) is one long-lived lowering
process per path; ``python -m overlay.equivalence.worker.envinfo`` describes a path's
environment before any worker starts (stdlib only). Modules: :mod:`.serve` (the protocol
loop, torch-free), :mod:`.runner` (runtime patch, user models, cases, probes),
:mod:`.lowering` (one case through TOSA, VGF and Ethos-U), :mod:`.quantize`,
:mod:`.observe` (graph, payloads, numbers as protocol data), :mod:`.vgf_run` (VGF executed
on the emulation layer), :mod:`.ethosu` (Vela command streams and estimates).

torch is imported at the top of the modules that define or run torch code, and inside
functions where a module must stay importable without it (tests read Vela summaries and
VGF layer manifests torch-free); executorch, torchao and the TOSA tools are imported
where they are used.
"""
