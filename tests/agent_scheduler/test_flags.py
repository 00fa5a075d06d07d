"""Bad flags of `caldera agent-scheduler`: exit 2 with one line naming the flag, before Ray starts."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "many"], "--workers: 'many' (expected auto or a positive whole number)"),
        (["--batch-size", "-1"], "--batch-size"),
        (["--candidates", "0"], "--candidates"),
        (["--inflight", "0"], "--inflight: '0' (expected auto or a positive whole number)"),
        (["--score", "random"], "invalid choice"),
        (["--score-weights", "cpu=one"], "--score-weights"),
        (["--score-weights", "cpu=0"], "no positive weight"),
        (["--sharding-mode", "strict"], "invalid choice"),
        (["--max-retries", "-2"], "--max-retries"),
        (["--cluster", "a:b"], "cluster"),
        (["--fgd-window", "10"], "--fgd-window: set, but --gpu-policy is '' (expected fgd)"),
        (["--gpu-policy", "fgd", "--fgd-window", "0"], "--fgd-window: 0"),
        (["--gpu-policy", "fgd", "--fgd-popularity", "101"], "--fgd-popularity: 101 (expected a percentage"),
        (["--gpu-policy", "fgd", "--fgd-typical-pods", "cpu=4,gpus=x,share=1"], "--fgd-typical-pods[0].gpus: 'x'"),
    ],
)
def test_malformed_flags_exit_2_with_one_line(flags: list[str], needle: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "agent-scheduler", *flags], capture_output=True, text=True, timeout=60
    )
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2, lines
    assert len(lines) == 1 and needle in lines[0], lines


def test_the_workers_together_keep_to_the_process_pacing() -> None:
    """Each worker binds from its own process: the flags' rate and burst are shared among them."""
    from agent_scheduler.main import worker_share
    from cluster.kube.connect import KubeConnection

    kube = KubeConnection(master="http://127.0.0.1:1", qps=2000.0, burst=2000)
    share = worker_share(kube, 8)
    assert (share.qps * 8, share.burst * 8, share.master) == (2000.0, 2000, kube.master)
    assert worker_share(KubeConnection(qps=5.0, burst=3), 8).burst == 1  # a worker can always make a call


def test_workers_auto_is_one_per_core_beyond_one_up_to_eight() -> None:
    """The loop, the store and the rest need a core: a worker without one of its own only collides."""
    from agent_scheduler.main import AUTO_WORKERS_MAX, auto_workers, build_parser

    assert [auto_workers(cpus) for cpus in (1, 2, 3, 4, 9, 64)] == [1, 1, 2, 3, 8, AUTO_WORKERS_MAX]
    assert build_parser().parse_args([]).workers is None  # auto unless given
    assert build_parser().parse_args(["--workers", "auto"]).workers is None
    assert build_parser().parse_args(["--workers", "3"]).workers == 3


def test_inflight_auto_is_three_binding_in_the_store_and_two_through_kubernetes() -> None:
    """A call holds its slot until its pods are bound: a bind in the store is one round trip, and a
    third slot takes the rest of a burst; through Kubernetes each pod is a POST (loop.INFLIGHT_*)."""
    from agent_scheduler.main import agent_config, build_parser

    def inflight(*flags: str) -> int:
        return agent_config(build_parser().parse_args(list(flags))).loop.inflight

    assert inflight() == 3
    assert inflight("--master", "http://127.0.0.1:1") == 2
    assert inflight("--master", "http://127.0.0.1:1", "--inflight", "3") == 3
    assert inflight("--inflight", "1") == 1
