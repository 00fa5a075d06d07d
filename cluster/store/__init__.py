"""The store: the Redis key layout (every key), the Lua scripts, the store, its records, the change feed, the audit. With binder/, the only place that imports redis."""
