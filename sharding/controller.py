"""The sharding controller loop: follow the nodes, run the band policy, write the shards.

A sync runs every ``sync_period``, and — with the node event trigger — shortly after a
node's utilization crosses a band edge (bursts of crossings are coalesced into one sync
``trigger_delay`` after the first). Each sync writes the changed owner fields and the
NodeShard records in one atomic script, which also publishes them on the feed.

NodeShard status: ``nodesInUse`` is what the scheduler held until this sync, and
``nodesToAdd`` / ``nodesToRemove`` the difference to ``nodesDesired``. Ownership changes
atomically with the write, and the binder refuses a hard-mode commit on a node the
scheduler no longer owns, so the hand-off needs no second phase.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
import numpy as np

from cluster.model.labels import WARMUP_LABEL
from cluster.model.resources import CPU, GPU, MEMORY
from cluster.model.volcano import NodeShard
from cluster.nodeview.table import NodeTable
from cluster.runtime.heartbeat import Stats
from cluster.store.client import STORE_DOWN, Outage
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.pause import within
from cluster.store.store import Own, Put, Store, Write
from sharding.config import ShardConfig, Utilization
from sharding.metrics import ShardMetrics
from sharding.policy import (
    NO_OWNER,
    Floats,
    Hysteresis,
    NodeState,
    assign,
    band_signature,
)

log = logging.getLogger("caldera.sharding")


class ShardingStats(Stats, frozen=True, kw_only=True):
    syncs: int
    moves: int
    sizes: dict[str, int]  # nodes per scheduler
    last_sync_s_ago: float | None = None


class ControllerConfig(msgspec.Struct, frozen=True, kw_only=True):
    configs: list[ShardConfig]
    sync_period: float = 60.0
    event_trigger: bool = True
    utilization: Utilization = Utilization.CPU
    hysteresis: Hysteresis = Hysteresis()
    trigger_delay: float = 0.1


FEED_SETTLE_S = 0.1
"""After a read of the feed that found changes, the controller waits this long before the next
(:attr:`Informer.settle_s`): a node many pods moved on is then fetched once, not once per commit.
Its view is that much older, as old as ``trigger_delay`` already lets a crossing wait. Read as
each change came, the controller took 1.5 CPU-seconds of every 15 of the demo (10% of one core of
two, 13% of all the demo's CPU) — most of it during the agent bursts, beside the agent path;
with the settle, 0.6."""


class SyncResult(msgspec.Struct, frozen=True):
    moves: int
    sizes: dict[str, int]


def utilization(columns: NodeTable, kind: Utilization) -> Floats:
    """Requests ÷ allocatable per node for the chosen resource (0 where a node has none of it)."""

    def ratio(resource: str) -> Floats:
        r = columns.resource_row(resource)
        n = len(columns)
        alloc = columns.allocatable[r, :n].astype(np.float64)
        used = columns.allocated[r, :n].astype(np.float64)
        return np.divide(used, alloc, out=np.zeros(n), where=alloc > 0)

    if kind is Utilization.MAX:
        return np.maximum(np.maximum(ratio(CPU), ratio(MEMORY)), ratio(GPU))
    return ratio({Utilization.CPU: CPU, Utilization.MEMORY: MEMORY, Utilization.GPU: GPU}[kind])


class ShardingController:
    def __init__(
        self,
        store: Store,
        config: ControllerConfig,
        *,
        metrics: ShardMetrics | None = None,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        publish: Callable[[list[NodeShard]], Awaitable[None]] | None = None,
    ) -> None:
        """``publish`` gets every NodeShard after each sync (to write them to the API server)."""
        self.store = store
        self.publish = publish
        self.config = config
        self.metrics = metrics
        self.leading = leading
        self.clock = clock
        self.wall = wall
        self.columns = NodeTable()
        self.outside_since: dict[str, float] = {}
        self.signature: dict[str, int] = {}
        self.index = {c.name: i for i, c in enumerate(config.configs)}
        self.last_sync = -1.0
        self.syncs = 0
        self.moves = 0
        self.sizes: dict[str, int] = {}
        self._trigger = asyncio.Event()
        self._informer = Informer(store, [Kind.NODE], block_ms=100, settle_s=FEED_SETTLE_S)

    def _state(self) -> NodeState:
        owners = self.columns.owner_array()
        owner = np.full(len(self.columns), NO_OWNER, dtype=np.int64)
        for name, ci in self.index.items():  # a loop over schedulers, numpy over nodes
            owner[owners == name] = ci
        warm = self.columns.label_column(WARMUP_LABEL) == "true"
        since = np.full(len(self.columns), np.nan)
        for node, t in self.outside_since.items():  # only the nodes outside their band
            row = self.columns.index.get(node)
            if row is not None:
                since[row] = t
        return NodeState(
            util=utilization(self.columns, self.config.utilization),
            warmup=np.asarray(warm, dtype=np.bool_),
            owner=owner,
            outside_since=since,
        )

    async def sync(self, trigger: str = "period") -> SyncResult:
        """Run the policy over every node and write what changed."""
        start = time.perf_counter()
        configs = self.config.configs
        state = self._state()
        result = assign(state, configs, self.clock(), self.config.hysteresis)
        names = self.columns.names
        name_of = [c.name for c in configs]
        writes: list[Write] = []
        shards: list[NodeShard] = []
        moved = np.flatnonzero(result.owner != state.owner)
        for i in moved:
            writes.append(Own(names[i], name_of[result.owner[i]] if result.owner[i] >= 0 else ""))
        stamp = datetime.datetime.fromtimestamp(self.wall(), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        sizes: dict[str, int] = {}
        for ci, c in enumerate(configs):
            desired = sorted(names[i] for i in np.flatnonzero(result.owner == ci))
            held = sorted(names[i] for i in np.flatnonzero(state.owner == ci))
            sizes[c.name] = len(desired)
            shards.append(
                msgspec.convert(
                    {
                        "apiVersion": "shard.volcano.sh/v1alpha1",
                        "kind": "NodeShard",
                        "metadata": {"name": c.name},
                        "spec": {"nodesDesired": desired},
                        "status": {
                            "nodesInUse": held,
                            "nodesToAdd": sorted(set(desired) - set(held)),
                            "nodesToRemove": sorted(set(held) - set(desired)),
                            "lastUpdateTime": stamp,
                        },
                    },
                    NodeShard,
                )
            )
        await self.store.write(writes + [Put(shard) for shard in shards])
        if self.publish is not None:
            await self.publish(shards)
        for i in moved:
            self.columns.set_owner(names[i], name_of[result.owner[i]] if result.owner[i] >= 0 else "")
        self.outside_since = {names[i]: float(t) for i, t in enumerate(result.outside_since) if not np.isnan(t)}
        sig = band_signature(state.util, configs, self.config.hysteresis.margin)
        self.signature = dict(zip(names, sig.tolist()))
        if self.metrics is not None:
            self.metrics.sync_seconds.observe(time.perf_counter() - start)
            self.metrics.syncs.labels(trigger).inc()
            for i in moved:
                old, new = state.owner[i], result.owner[i]
                self.metrics.moves.labels(
                    name_of[old] if old >= 0 else "none", name_of[new] if new >= 0 else "none"
                ).inc()
            for name, size in sizes.items():
                self.metrics.nodes.labels(name).set(size)
            self.metrics.nodes.labels("none").set(int((result.owner == NO_OWNER).sum()))
        self.last_sync = self.clock()
        self.syncs += 1
        self.moves += len(moved)
        self.sizes = sizes
        return SyncResult(moves=len(moved), sizes=sizes)

    def stats(self) -> ShardingStats:
        """The figures ``caldera status`` shows: shard sizes, syncs, nodes moved, seconds since the last sync."""
        ago = round(self.clock() - self.last_sync, 1) if self.last_sync >= 0 else None
        return ShardingStats(syncs=self.syncs, moves=self.moves, sizes=dict(self.sizes), last_sync_s_ago=ago)

    def _check_edges(self, changed: list[str]) -> None:
        """Set the trigger when a changed node's band signature differs from the last sync's."""
        rows = [self.columns.index[n] for n in changed if n in self.columns.index]
        if not rows:
            return
        util = utilization(self.columns, self.config.utilization)[rows]
        sig = band_signature(util, self.config.configs, self.config.hysteresis.margin)
        for row, s in zip(rows, sig.tolist()):
            if self.signature.get(self.columns.names[row]) != s:
                self._trigger.set()
                return

    async def follow(self) -> None:
        """Keep the node columns current from the feed."""
        async for update in self._informer.updates():
            self.columns.apply(update)
            if update.full:
                self._trigger.set()
            elif self.config.event_trigger:
                self._check_edges([n for n, r in update.nodes.items() if r is not None])

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the nodes and sync on the period or an edge crossing, until ``stop``."""
        follower = asyncio.create_task(self.follow(), name="sharding-follow")
        outage = Outage(log, "shard sync")
        try:
            while not stop.is_set():
                next_sync = self.last_sync + self.config.sync_period if self.last_sync >= 0 else self.clock()
                trigger = "period"
                try:
                    await within(self._wait_trigger_or_stop(stop), max(next_sync - self.clock(), 0.0))
                    trigger = "event"
                    await asyncio.sleep(self.config.trigger_delay)  # coalesce a burst of crossings
                except TimeoutError:
                    pass
                if stop.is_set():
                    break
                self._trigger.clear()
                if self.leading() and len(self.columns):
                    try:
                        await self.sync(trigger)
                        outage.ok()
                    except STORE_DOWN as e:  # tried again on the next trigger or period
                        outage.failed(e)
                        self.last_sync = self.clock()
                else:
                    self.last_sync = self.clock()
        finally:
            self._informer.stop()
            await follower

    async def _wait_trigger_or_stop(self, stop: asyncio.Event) -> None:
        waiters = [asyncio.ensure_future(self._trigger.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
