"""Equivalence: the diff-patched build behaves like stock + the runtime monkey-patch.

Torch runs only in worker processes; docs/architecture.md maps the subpackages and
docs/equivalence.md the paths, verdicts and report.
"""
