"""``caldera bench peer``: Volcano's published agent-scheduler measurement, reproduced in shape.

Volcano published, for its agent scheduler: 1,000 nodes of 16 cpu / 64Gi / 110 pods;
10,000 pods as 20 jobs of 500 bare pods; 4 workers — 936 pods/s and a create → schedule
p99 of 1.64 s, on a 32-vCPU host. Here the same shape: the same nodes, 20 submissions
of 500 pods (100m cpu, 128Mi each) back to back, 4 Ray workers, on this machine —
the figures to hold beside theirs (different hosts: compare with care).
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from caldera.bench.agent import AGENT, Run, place
from caldera.bench.runner import run_bench
from caldera.flag_config import checked, from_flags, redis_url
from cluster.sim.pods import make_pod
from cluster.sim.pools import NodePool, pool_nodes

PUBLISHED_PODS_PER_S, PUBLISHED_P99_MS, PUBLISHED_HOST = 936.0, 1640.0, "32 vCPU"
NODES, JOBS, PODS_PER_JOB, WORKERS = 1000, 20, 500, 4


class Report(msgspec.Struct):
    nodes: int
    pods: int
    workers: int
    pods_per_s: float
    p50_ms: float
    p99_ms: float
    placed: int
    audit: str
    volcano_pods_per_s: float = PUBLISHED_PODS_PER_S
    volcano_p99_ms: float = PUBLISHED_P99_MS
    volcano_host: str = PUBLISHED_HOST


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "peer", help="Volcano's published agent-scheduler shape: 1,000 nodes, 20 jobs x 500 pods, 4 workers"
    )
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class PeerBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench peer``'s flags, checked (its shape is Volcano's, fixed)."""

    redis_url: str | None = None
    json: bool = False


def config(args: argparse.Namespace) -> PeerBench:
    return from_flags(PeerBench, args, redis_url=redis_url("--redis-url", args.redis_url))


async def measure(url: str, jobs: int = JOBS) -> Report:
    nodes = pool_nodes(NodePool(name="n", count=NODES, resources={"cpu": 16, "memory": "64Gi", "pods": 110}))
    pods = [
        make_pod(f"job{j}-{i}", scheduler=AGENT, requests={"cpu": "100m", "memory": "128Mi"})
        for j in range(jobs)
        for i in range(PODS_PER_JOB)
    ]
    r: Run = await place(url, "peer", nodes, pods, workers=WORKERS, chunk=PODS_PER_JOB)
    return Report(
        nodes=NODES,
        pods=len(pods),
        workers=WORKERS,
        pods_per_s=r.pods_per_s,
        p50_ms=r.p50_ms,
        p99_ms=r.p99_ms,
        placed=r.placed,
        audit=r.audit,
    )


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench peer", args, config)
    if bench is None:
        return 2
    return run_bench(bench, measure, line, ok=lambda report: report.audit == "ok", ray=True)


def line(report: Report) -> str:
    return (
        f"{report.pods:,} pods on {report.nodes:,} nodes, {report.workers} workers: {report.pods_per_s:,.0f} pods/s, "
        f"p99 {report.p99_ms / 1000:.2f} s (Volcano published {PUBLISHED_PODS_PER_S:.0f} pods/s, "
        f"p99 {PUBLISHED_P99_MS / 1000:.2f} s on a {PUBLISHED_HOST} host); audit {report.audit}"
    )
