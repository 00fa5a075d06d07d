"""``caldera bench saturation``: a real trace through the agent scheduler until a GPU pod no longer fits.

The cluster is the trace's nodes; the trace's pods (OpenB format, see
``cluster/sim/trace.py``) are submitted in creation order as fast as the agent scheduler
takes them, none deleted, until the first pod asking for a GPU can no longer be placed:
the share of the cluster's GPUs allocated at that moment. (``caldera bench trace``
measures fragmentation as Weng et al. do, per card; this run is the schedulers' own
throughput on real pod shapes.) Reported: pods/s and p99 submit → bound up to
then, pods placed, and that share (GPU-milli allocated ÷ GPU-milli the nodes have, so
whole and shared GPUs both count), with binpack scoring (GPU weighted) — beside the same
run with least-allocated scoring (spreading), in the same process, and with ``--fgd`` a
third: binpack with the agent scheduler's ``--gpu-policy fgd`` (FGD's node score and card,
its typical pods learned from the pods it is shown), FGD measured through the scheduler.
"""

from __future__ import annotations

import argparse
import os
from typing import Annotated, Any

import msgspec

from agent_scheduler.core import ScoreKind
from agent_scheduler.loop import AgentLoop
from caldera.bench.agent import AGENT, Run, place
from caldera.bench.runner import MAX_WORKERS, figures, positive_int, run_bench
from caldera.flag_config import checked, from_flags, readable_file, redis_url
from cluster.model.core import Node, Pod
from cluster.model.resources import GPU
from cluster.nodeview.devices import CardPolicy
from cluster.sim.trace import GPU_MILLI, read_nodes, read_pods, to_pod
from cluster.store.store import Store

WEIGHTS = {"cpu": 1.0, "memory": 1.0, GPU_MILLI: 3.0}


class Policy(msgspec.Struct):
    pods_per_s: float
    p99_ms: float
    placed: int
    gpu_allocated: float  # share of the cluster's GPU-milli when the first GPU pod could not be placed
    first_gpu_failure: bool  # False: every GPU pod fit, the share is at the end
    audit: str


class Report(msgspec.Struct):
    trace: str
    nodes: int
    gpus: int
    pods: int
    workers: int
    gpu_allocated: float  # binpack
    pods_per_s: float
    p99_ms: float
    binpack: Policy
    least_allocated: Policy
    fgd: Policy | None = None  # with --fgd


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "saturation",
        help="a real trace through the agent scheduler until a GPU pod no longer fits: GPUs allocated, pods/s, p99",
    )
    p.add_argument("--trace", required=True, help="the pods CSV (OpenB format)")
    p.add_argument("--trace-nodes", required=True, help="the nodes CSV (OpenB format)")
    p.add_argument("--workers", type=positive_int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--fgd", action="store_true", help="also run with the agent scheduler's --gpu-policy fgd")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class SaturationBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench saturation``'s flags, checked."""

    trace: str
    trace_nodes: str
    workers: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS, description=f"1 to {MAX_WORKERS} workers")] = 2
    fgd: bool = False
    redis_url: str | None = None
    json: bool = False


def config(args: argparse.Namespace) -> tuple[SaturationBench, list[Node], list[Pod]]:
    """The flags checked and the trace read (ValueError naming the flag or the file); nothing started."""
    bench = from_flags(
        SaturationBench,
        args,
        trace=readable_file("--trace", args.trace),
        trace_nodes=readable_file("--trace-nodes", args.trace_nodes),
        redis_url=redis_url("--redis-url", args.redis_url),
    )
    nodes, pods = load(bench.trace, bench.trace_nodes)
    return bench, nodes, pods


def load(pods_csv: str, nodes_csv: str) -> tuple[list[Node], list[Pod]]:
    """The trace's nodes, and its pods for the agent scheduler in creation order; ValueError when malformed."""
    return read_nodes(nodes_csv), [to_pod(tp, AGENT) for tp in read_pods(pods_csv)]


async def fill(
    url: str,
    name: str,
    nodes: list[Node],
    pods: list[Pod],
    workers: int,
    score: ScoreKind,
    gpu_policy: CardPolicy = CardPolicy.VOLCANO,
) -> Policy:
    milli = {p.uid: p.request().get(GPU_MILLI, 0) for p in pods}  # whole or shared GPUs, in thousandths
    total = sum(n.allocatable_resources().get(GPU_MILLI, 0) for n in nodes)
    gpu_pods = {u for u, m in milli.items() if m > 0}
    seen = {"share": 0.0, "failed": False}

    async def first_gpu_failure(store: Store, loop: AgentLoop) -> bool:
        # Nothing is deleted in this run, so what the bound pods ask is what the nodes have allocated.
        seen["share"] = sum(milli[u] for u in loop.bound) / total if total else 0.0
        seen["failed"] = not gpu_pods.isdisjoint((await store.reasons(AGENT)).keys())
        return bool(seen["failed"])

    run: Run = await place(
        url,
        name,
        nodes,
        pods,
        workers=workers,
        score=score,
        weights=WEIGHTS,
        until=first_gpu_failure,
        gpu_policy=gpu_policy,
    )
    if run.placed == len(pods):  # every pod fit: the share at the end
        seen["share"] = sum(milli.values()) / total if total else 0.0
    return Policy(
        pods_per_s=run.pods_per_s,
        p99_ms=run.p99_ms,
        placed=run.placed,
        gpu_allocated=round(seen["share"], 4),
        first_gpu_failure=bool(seen["failed"]),
        audit=run.audit,
    )


async def measure(url: str, name: str, nodes: list[Node], pods: list[Pod], workers: int, fgd: bool = False) -> Report:
    binpack = await fill(url, "trace-binpack", nodes, pods, workers, ScoreKind.BINPACK)
    spread = await fill(url, "trace-spread", nodes, pods, workers, ScoreKind.LEAST_ALLOCATED)
    with_fgd = await fill(url, "trace-fgd", nodes, pods, workers, ScoreKind.BINPACK, CardPolicy.FGD) if fgd else None
    gpus = sum(n.allocatable_resources().get(GPU, 0) for n in nodes)
    return Report(
        trace=name,
        nodes=len(nodes),
        gpus=gpus,
        pods=len(pods),
        workers=workers,
        gpu_allocated=binpack.gpu_allocated,
        pods_per_s=binpack.pods_per_s,
        p99_ms=binpack.p99_ms,
        binpack=binpack,
        least_allocated=spread,
        fgd=with_fgd,
    )


def run(args: argparse.Namespace) -> int:
    checked_flags = checked("caldera bench saturation", args, config)
    if checked_flags is None:
        return 2
    bench, nodes, pods = checked_flags
    return run_bench(
        bench,
        lambda url: measure(url, os.path.basename(bench.trace), nodes, pods, bench.workers, bench.fgd),
        figures(16),
        ok=lambda report: (
            report.binpack.audit == report.least_allocated.audit == "ok"
            and (report.fgd is None or report.fgd.audit == "ok")
        ),
        ray=True,
    )
