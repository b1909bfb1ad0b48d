"""The forward canary: every release line rebased onto upstream ``main`` (and newer tags)."""
