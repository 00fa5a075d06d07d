"""The agent scheduler's metrics, under Volcano's names where Volcano has one."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agent_scheduler.stages import Stages

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000)


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.e2e_latency = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "From a pod first seen pending to its binding, in milliseconds.",
            buckets=LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.attempts = Counter(
            "volcano_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error).",
            ["result"],
            registry=registry,
        )
        self.handovers = Counter(
            "caldera_agent_handovers_total",
            "Pods a worker handed over to the worker whose partition of the nodes has room for them.",
            registry=registry,
        )
        self.queue_depth = Gauge(
            "caldera_agent_queue_depth", "Pods in each part of the scheduling queue.", ["queue"], registry=registry
        )
        # caldera_agent_stage_seconds{stage}: the loop's own per-pod bucket counts, read at each scrape.
        self.stages = Stages()
        registry.register(self.stages)
        self.batch_seconds = Histogram(
            "caldera_agent_batch_duration_seconds",
            "One worker call: decide, commit, retry conflicts, bind.",
            ["worker"],
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0),
            registry=registry,
        )
