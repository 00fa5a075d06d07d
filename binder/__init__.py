"""The conflict-aware binder: commits placements through one atomic compare-and-set script in Redis, then binds."""
