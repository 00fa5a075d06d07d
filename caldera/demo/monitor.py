"""The demo's monitor: once a second, the shards (their nodes, allocation and GPU fragmentation) and the
processes' heartbeats (conflicts, queues, the agent pods' stages), for the live view and the report."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import msgspec

from agent_scheduler.stages import StageFigures
from caldera.demo.report import Conflicts
from caldera.demo.workload import AGENT, VOLCANO
from cluster.model.devices import CARD_PREFIX, is_card_resource
from cluster.model.resources import CPU, GPU, Resources
from cluster.runtime import heartbeat
from cluster.store.informer import Informer
from cluster.store.keys import Keys, Kind
from cluster.store.pause import pause
from cluster.store.records import NodeRecord
from cluster.store.store import Store

FOLLOW_SETTLE_S = 5.0
"""The monitor's reader of the nodes waits this long after a read that found changes, unless a poll asks
it to catch up first (once a second): its reads are the polls'."""


class Monitor:
    """Once a second: shard sizes and allocation (from the nodes) and the processes' heartbeats.

    The nodes are followed on the feed (:meth:`follow`), read once a second when :meth:`poll` asks the
    informer to catch up, not listed whole: a listing of the default demo's 1,000 nodes took 14 ms of the
    demo process's CPU and 2.3 ms of Redis's, every second; the nodes that changed in a second, their
    accounting carried by the feed, take a few."""

    def __init__(self, store: Store, keys: Keys) -> None:
        self.store, self.keys = store, keys
        self._informer = Informer(store, [Kind.NODE], block_ms=500, settle_s=FOLLOW_SETTLE_S)
        self._listed = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None
        self.owners: dict[str, str] = {}
        self.start_sizes: dict[str, int] = {}
        self.shards: dict[str, dict[str, float]] = {}
        self.figures: dict[str, dict[str, Any]] = {}
        self.moves = 0
        self.largest_change: dict[str, int] = {}
        self._stages_then: dict[str, StageFigures] = {}  # at the last stages_lately()

    async def start(self) -> None:
        """Follow the nodes: returns once they are listed."""
        self._follower = asyncio.create_task(self.follow(), name="the monitor's nodes")
        listed = asyncio.create_task(self._listed.wait())
        await asyncio.wait([listed, self._follower], return_when=asyncio.FIRST_COMPLETED)
        listed.cancel()
        if self._follower.done():
            self._follower.result()  # raises what stopped it

    async def follow(self) -> None:
        async for _ in self._informer.updates():  # the informer holds the nodes as each update leaves them
            self._listed.set()

    @property
    def nodes(self) -> Mapping[str, NodeRecord]:
        return self._informer.nodes

    async def stop(self) -> None:
        self._informer.stop()
        if self._follower is not None:
            await self._follower

    async def poll(self) -> None:
        if self._follower is not None:
            if self._follower.done():
                self._follower.result()  # what stopped it, if it failed: the demo says a part of it died
            else:
                await self._informer.caught_up(timeout_s=1.0)
        shards: dict[str, dict[str, float]] = {}
        for n in self.nodes.values():
            s = shards.setdefault(
                n.owner, {"nodes": 0, "cpu_used": 0, "cpu": 0, "gpu_used": 0, "gpus": 0, "fragment": 0.0}
            )
            s["fragment"] += fragment_gpus(n.allocatable, n.allocated)
            s["nodes"] += 1
            s["cpu_used"] += n.allocated.get(CPU, 0)
            s["cpu"] += n.allocatable.get(CPU, 0)
            s["gpu_used"] += n.allocated.get(GPU, 0)
            s["gpus"] += n.allocatable.get(GPU, 0)
            if self.owners and self.owners.get(n.name, n.owner) != n.owner:
                self.moves += 1
            self.owners[n.name] = n.owner
        self.shards = {
            name: {
                "nodes": s["nodes"],
                "cpu": s["cpu_used"] / s["cpu"] if s["cpu"] else 0.0,
                "gpu": s["gpu_used"] / s["gpus"] if s["gpus"] else 0.0,
                "gpus": s["gpus"],
                "fragment": s["fragment"] / s["gpus"] if s["gpus"] else 0.0,
            }
            for name, s in sorted(shards.items())
        }
        if not self.start_sizes:
            self.start_sizes = {name: int(s["nodes"]) for name, s in self.shards.items()}
        for name, s in self.shards.items():
            change = abs(int(s["nodes"]) - self.start_sizes.get(name, 0))
            self.largest_change[name] = max(self.largest_change.get(name, 0), change)
        # Each process's last figures: a process that stopped took its heartbeat with it, and the
        # report (read once the run ends, maybe after a poll that raced the processes' exit)
        # needs them.
        for b in await heartbeat.beats(self.store.client, self.keys):
            self.figures[b.component] = b.stats

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll()
            await pause(stop, 1.0)
        await self.stop()

    def stages(self) -> dict[str, StageFigures]:
        """The agent pods' stages so far, from the agent scheduler's heartbeat ({} before one)."""
        try:
            return msgspec.convert(self.figures.get("agent-scheduler", {}).get("stages") or {}, dict[str, StageFigures])
        except msgspec.ValidationError:
            return {}

    def stages_lately(self) -> dict[str, float | None]:
        """Each stage's p50 in ms over the pods counted since the last call (None: none counted)."""
        now = self.stages()
        out = {name: p50_ms(f.since(self._stages_then.get(name))) for name, f in now.items()}
        self._stages_then = now
        return out

    def conflicts(self) -> dict[str, Conflicts]:
        agent, batch = self.figures.get("agent-scheduler", {}), self.figures.get("batch-scheduler", {})
        return {
            AGENT: Conflicts(
                true=int(agent.get("conflicts", 0)),
                resolved=int(agent.get("conflicts_resolved", 0)),
                handed_over=int(agent.get("handed_over", 0)),
            ),
            VOLCANO: Conflicts(true=int(batch.get("conflicts", 0)), resolved=0),
        }


def p50_ms(f: StageFigures | None) -> float | None:
    """A stage's p50 in ms (None: no pod counted, or the counts went back: a restarted agent)."""
    p50 = f.quantile(0.5) if f is not None else None
    return None if p50 is None else round(p50 * 1000, 2)


def fragment_gpus(allocatable: Resources, allocated: Resources) -> float:
    """GPUs free on cards partly in use (in cards): room a whole-GPU pod cannot use."""
    total = 0.0
    for name, room in allocatable.items():
        if is_card_resource(name) and "." not in name[len(CARD_PREFIX) :] and room > 0:
            used = allocated.get(name, 0)
            if 0 < used < room:
                total += (room - used) / room
    return total
