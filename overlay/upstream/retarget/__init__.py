"""Move a release line to a new executorch release: a checked candidate, promoted on request.

A leaf feature (only the CLI imports it); :func:`.run.retarget` orchestrates one module per
job. docs/upstream.md ("Moving to a new executorch release") describes each step.
"""
