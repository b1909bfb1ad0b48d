"""The worker side: the processes that lower and run, the only code that runs torch.

``python -m overlay.equivalence.worker`` (:mod:`.__main__`) is one long-lived lowering
process per path; ``python -m overlay.equivalence.worker.envinfo`` describes a path's
environment before any worker starts (stdlib only).

torch is imported at the top of the modules that define or run torch code, and inside
functions where a module must stay importable without it (tests read Vela summaries and
VGF layer manifests torch-free); executorch, torchao and the TOSA tools are imported
where they are used.
"""
