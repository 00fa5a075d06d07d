"""Stage figures: per-pod bucket counts and the quantiles read from them."""

from __future__ import annotations

from agent_scheduler.stages import BUCKETS, Stages


def test_quantiles_come_from_the_buckets_as_prometheus_reads_them() -> None:
    stages = Stages()
    stages.observe_each("queue", [0.004] * 90 + [0.08] * 10)  # 90 pods in (3, 5] ms, 10 in (75, 100] ms
    stages.observe("bind", 0.012, pods=50)
    stages.observe("handoff", -0.001)  # a clock's jitter: counted as 0
    figures = stages.figures()
    queue = figures["queue"]
    assert queue.pods == 100 and abs(queue.seconds - (0.36 + 0.8)) < 1e-9
    assert 0.003 < queue.quantile(0.5) <= 0.005  # type: ignore[operator]
    assert 0.075 < queue.quantile(0.99) <= 0.1  # type: ignore[operator]
    assert figures["bind"].pods == 50 and 0.01 < figures["bind"].quantile(0.5) <= 0.015  # type: ignore[operator]
    assert figures["handoff"].counts[0] == 1 and figures["handoff"].seconds == 0.0
    assert figures["feed"].quantile(0.5) is None
    stages.observe("observed", 60.0)  # above the last bound: answered with the last bound
    assert stages.figures()["observed"].quantile(0.5) == BUCKETS[-1]
