"""The binder's Prometheus metrics, registered on a registry the process hands in."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class BinderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.commits = Counter(
            "caldera_binder_commits_total",
            "Placements submitted to the binder, by result (committed, conflict, rejected).",
            ["result"],
            registry=registry,
        )
        self.conflicts_resolved = Counter(
            "caldera_binder_conflicts_resolved_total",
            "Placements whose node had moved since the scheduler looked but still fit, and were committed.",
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "caldera_binder_commit_duration_seconds",
            "Time of one commit round trip (one script call or one pipelined batch of them).",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry,
        )
        self.releases = Counter(
            "caldera_binder_releases_total",
            "Reservations the binder gave back because the bind in the cluster failed.",
            registry=registry,
        )
