"""The shared cluster model and state: quantities, API objects, the Redis store, the change feed, node snapshots, the simulator."""
