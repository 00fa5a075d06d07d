"""Replaying an OpenB-format trace in the demo: ``caldera demo --trace PODS.csv --trace-nodes NODES.csv``.

The cluster is the trace's nodes (GPU model as the ``caldera.io/gpu-model`` label). Each
pod is created at its creation time and deleted at its deletion time, both measured from
the trace's first pod and divided by ``--speedup`` (0: the whole trace, to its last
creation or deletion, fits into the first 90% of ``--duration``, so its last deletions
are seen done); a pod the trace never deletes runs to the end. By qos class, pods go to
the agent scheduler or to the batch scheduler (``--trace-schedulers``, default
``LS=agent-scheduler,*=volcano``); batch pods are lone pods in the ``default`` queue, each
its own implicit PodGroup, as in Volcano. See ``cluster/sim/trace.py`` for the format and
how GPU sharing is requested.

The public OpenB trace (Alibaba's ``cluster-trace-gpu-v2023``) keeps few pods alive at
once — at its own pace, at most ~55 — and fitting its 149 days into a minute makes its
pods live about a millisecond, so most are deleted before they could be placed (the
demo counts them); ``caldera bench trace`` is the saturation run (submit until the
cluster is full).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from pathlib import Path

import msgspec

from caldera.demo.resources import WARMUP_SHARE
from caldera.demo.tracker import Tracker
from caldera.demo.workload import AGENT, VOLCANO
from cluster.model.core import Node
from cluster.model.resources import GPU
from cluster.model.volcano import Queue
from cluster.sim.trace import (
    DEFAULT_MAPPING,
    TracePod,
    parse_mapping,
    read_nodes,
    read_pods,
    scheduler_for,
    to_pod,
)
from cluster.store.pause import pause
from cluster.store.store import Put, Store

SHARDING = "volcano:volcano:0.0:0.6:false:64:4000,agent-scheduler:agent:0.6:1.0:true:32:2000"
QUEUE = "default"
FIT = 0.9  # with the default speedup, the trace takes this share of --duration


class Trace(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    nodes: list[Node]
    pods: list[TracePod]
    mapping: dict[str, str]
    speedup: float  # trace seconds per second of the replay


def load_trace(pods_csv: str, nodes_csv: str, mapping: str | None, speedup: float, duration: float) -> Trace:
    """The trace, checked; ValueError with one line when a file or the mapping is malformed."""
    schedulers = parse_mapping(mapping or DEFAULT_MAPPING)
    unknown = sorted(set(schedulers.values()) - {AGENT, VOLCANO})
    if unknown:
        raise ValueError(
            f"--trace-schedulers: {', '.join(unknown)} (expected {AGENT} or {VOLCANO}, the demo's schedulers)"
        )
    nodes, pods = read_nodes(nodes_csv), read_pods(pods_csv)
    if not nodes:
        raise ValueError(f"--trace-nodes {nodes_csv}: no nodes (expected at least one row)")
    end = max((t for p in pods for t in (p.created, p.deleted) if t is not None), default=0.0)
    span = end - pods[0].created if pods else 0.0
    if speedup <= 0:  # the trace ends a little before the run does, so its last deletions are seen done
        speedup = max(span / (FIT * duration), 1.0)
    return Trace(name=Path(pods_csv).name, nodes=nodes, pods=pods, mapping=schedulers, speedup=speedup)


class TraceDriver:
    """Creates and deletes the trace's pods at their compressed times."""

    sharding = SHARDING
    steady_after = WARMUP_SHARE  # the resources' warm-up: a trace's load does not ramp

    def __init__(self, trace: Trace, store: Store, tracker: Tracker) -> None:
        self.trace, self.store, self.tracker = trace, store, tracker

    def describe(self) -> str:
        gpus = sum(n.allocatable_resources().get(GPU, 0) for n in self.trace.nodes)
        return (
            f"trace {self.trace.name}: {len(self.trace.nodes):,} nodes, {gpus:,} GPUs, {len(self.trace.pods):,} pods, "
            f"{self.trace.speedup:,.0f}× its own pace"
        )

    def queues(self) -> list[str]:
        return [QUEUE]

    async def prepare(self) -> None:
        for i in range(0, len(self.trace.nodes), 1000):
            await self.store.upsert_nodes(self.trace.nodes[i : i + 1000])
        await self.store.write([Put(msgspec.convert({"metadata": {"name": QUEUE}, "spec": {"weight": 1}}, Queue))])

    async def run(self, stop: asyncio.Event) -> None:
        pods, speedup = self.trace.pods, self.trace.speedup
        origin = pods[0].created if pods else 0.0
        deletions: list[tuple[float, str]] = []
        started = time.monotonic()
        i = 0
        while not stop.is_set() and (i < len(pods) or deletions):
            now = (time.monotonic() - started) * speedup + origin  # in trace seconds
            due = []
            while i < len(pods) and pods[i].created <= now:
                tp = pods[i]
                pod = to_pod(tp, scheduler_for(tp, self.trace.mapping))
                due.append(pod)
                if tp.deleted is not None:
                    heapq.heappush(deletions, (tp.deleted, pod.uid))
                i += 1
            if due:
                await self.store.upsert_pods(due)
                self.tracker.submitted(due)
            gone = []
            while deletions and deletions[0][0] <= now:
                gone.append(heapq.heappop(deletions)[1])
            if gone:
                await self.store.delete_pods(gone)
            await pause(stop, 0.05)
