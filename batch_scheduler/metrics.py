"""The batch scheduler's metrics, under Volcano's names, so existing dashboards work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from batch_scheduler.conf import SchedulerConf

SESSION_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
ACTION_BUCKETS_US = (100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000)
TASK_BUCKETS_MS = (10, 50, 100, 500, 1000, 2000, 5000, 10000, 30000, 60000, 300000)


class BatchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.session = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "One scheduling session, snapshot to status write-back, in milliseconds.",
            buckets=SESSION_BUCKETS_MS,
            registry=registry,
        )
        self.action = Histogram(
            "volcano_action_scheduling_latency_microseconds",
            "Time in each action, in microseconds.",
            ["action"],
            buckets=ACTION_BUCKETS_US,
            registry=registry,
        )
        self.task_latency = Histogram(
            "volcano_task_scheduling_latency_milliseconds",
            "From a pod first seen pending to its commit, in milliseconds.",
            buckets=TASK_BUCKETS_MS,
            registry=registry,
        )
        self.attempts = Counter(
            "volcano_schedule_attempts_total",
            "Job placement attempts by result (scheduled, unschedulable, error).",
            ["result"],
            registry=registry,
        )
        self.victims = Gauge(
            "volcano_pod_preemption_victims", "Pods evicted by the last session (preempt, reclaim).", registry=registry
        )
        self.preemption_attempts = Counter(
            "volcano_total_preemption_attempts", "Pods evicted by preempt or reclaim.", registry=registry
        )
        self.unschedulable_tasks = Gauge(
            "volcano_unschedule_task_count", "Pods left pending by the last session.", registry=registry
        )
        self.unschedulable_jobs = Gauge(
            "volcano_unschedule_job_count", "Jobs left pending by the last session.", registry=registry
        )
        self.queue_cpu = Gauge(
            "volcano_queue_allocated_milli_cpu",
            "CPU the queue's pods hold, in millicores.",
            ["queue_name"],
            registry=registry,
        )
        self.queue_memory = Gauge(
            "volcano_queue_allocated_memory_bytes",
            "Memory the queue's pods hold, in bytes.",
            ["queue_name"],
            registry=registry,
        )
        self.queue_scalar = Gauge(
            "volcano_queue_allocated_scalar_resources",
            "Other resources the queue's pods hold.",
            ["queue_name", "resource"],
            registry=registry,
        )
        self.queue_groups = {
            phase: Gauge(
                f"volcano_queue_pod_group_{phase}_count",
                f"PodGroups of the queue in phase {phase}.",
                ["queue_name"],
                registry=registry,
            )
            for phase in ("pending", "inqueue", "running", "unknown", "completed")
        }
        self.conf_reloads = Counter(
            "caldera_batch_conf_reloads_total",
            "Scheduler conf reloads by result (ok, error).",
            ["result"],
            registry=registry,
        )
        self.conf_unimplemented = Gauge(
            "caldera_conf_plugins_unimplemented",
            "1 for each plugin (kind plugin) and action (kind action) the loaded conf names "
            "that caldera does not implement yet; they have no effect.",
            ["name", "kind"],
            registry=registry,
        )

    def conf_loaded(self, conf: SchedulerConf) -> None:
        """Show what the conf now in use names that caldera does not implement (and no longer what it dropped)."""
        self.conf_unimplemented.clear()
        for u in conf.unimplemented:
            self.conf_unimplemented.labels(u.name, u.kind).set(1)
