"""The sharding controller's Prometheus metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ShardMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.nodes = Gauge(
            "caldera_shard_nodes",
            "Nodes in each scheduler's shard ('none' for unowned).",
            ["scheduler"],
            registry=registry,
        )
        self.moves = Counter(
            "caldera_shard_moves_total",
            "Nodes moved between shards ('none' for unowned).",
            ["from", "to"],
            registry=registry,
        )
        self.sync_seconds = Histogram(
            "caldera_shard_sync_duration_seconds",
            "Duration of one shard sync (policy and write).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
            registry=registry,
        )
        self.syncs = Counter(
            "caldera_shard_syncs_total",
            "Shard syncs, by what started them (period, event).",
            ["trigger"],
            registry=registry,
        )
