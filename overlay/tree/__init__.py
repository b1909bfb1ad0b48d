"""An installed executorch tree: where it is, the state it is in, the journal of a run on it."""
