"""Move a release line to a new executorch release: a checked candidate, promoted on request."""
