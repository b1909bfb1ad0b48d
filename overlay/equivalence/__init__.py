"""Equivalence: the diff-patched build behaves like stock + the runtime monkey-patch."""
