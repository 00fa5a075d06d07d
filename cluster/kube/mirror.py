"""The mirror: keeps the store equal to what the Kubernetes API server holds.

One :class:`~cluster.kube.reflector.Reflector` thread per kind (Nodes, all Pods —
those other schedulers placed are accounted too —, PodGroups, Queues, PriorityClasses)
hands listings and watch events to the asyncio side, which applies them in batches
through the store's observed-state scripts. A listing is a reconcile: whatever the store
holds of that kind and the listing lacks is removed. Listings happen at start, after a
410 or a broken watch, and every ``resync_seconds``.

The store is filled whole, in order (a *full sync*): at start, and whenever it lost what
the mirror wrote — Redis restarted (its ``run_id`` changed: it may be empty, or an older
copy from its append-only file; the mirror starts a new epoch so that every reader lists
again), the store was emptied under it (its epoch changed), or a write failed because
Redis did not answer. A full sync asks every reflector for a new listing, holds all deltas
until each kind has listed, then writes the listings in :data:`FILL_ORDER` — pods before
nodes, so that a node enters the store already counting the pods bound to it (a scheduler
reading a half-filled store never sees a full node as empty) — and then the watch events
that came after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from cluster.kube.reflector import Changed, Delta, KubeKind, Listed, Reflector
from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.quantity import QuantityError
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.store.client import STORE_DOWN, Outage
from cluster.store.keys import Kind
from cluster.store.pause import within
from cluster.store.store import Delete, Put, Store, Write, object_name

log = logging.getLogger("caldera.mirror")
CHUNK = 1000
OBJECT_KINDS = (Kind.PODGROUP, Kind.QUEUE, Kind.PRIORITYCLASS, Kind.HYPERNODE, Kind.NAMESPACE)
FILL_ORDER = (Kind.NAMESPACE, Kind.PRIORITYCLASS, Kind.QUEUE, Kind.PODGROUP, Kind.HYPERNODE, Kind.POD, Kind.NODE)
"""The order a full sync writes its listings in: what pods refer to first, nodes last."""
STORE_CHECK_S = 1.0


def store_name(kind: Kind, obj: Any) -> str:
    """The name the store gives an object: uid for pods, namespace/name for PodGroups, else the name."""
    if kind is Kind.POD:
        return str(obj.uid)
    if kind is Kind.NODE:
        return str(obj.name)
    return object_name(obj)


class Mirror:
    def __init__(
        self,
        store: Store,
        kinds: Sequence[KubeKind],
        *,
        watch_seconds: int = 60,
        resync_seconds: float = 300.0,
        observe: Callable[[Kind, Any], None] | None = None,
        forget: Callable[[Kind, str], None] | None = None,
    ) -> None:
        """``observe`` sees every object as the API server reported it (the write-back's baseline);
        ``forget`` hears of each one gone (by its store name), so that what follows them can let go."""
        self.store = store
        self.observe = observe
        self.forget = forget
        self.reflectors = [
            Reflector(k, self._sink, watch_seconds=watch_seconds, resync_seconds=resync_seconds) for k in kinds
        ]
        self.synced = asyncio.Event()  # every kind listed into the store at least once
        self.skipped = 0  # objects refused (e.g. a bad quantity), one log line each
        self.full_syncs = 0  # the store filled whole (the first at start)
        self._queue: asyncio.Queue[Delta] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        # During a full sync: the kinds still to list, and every delta held meanwhile.
        self._waiting: set[Kind] = {r.kind.kind for r in self.reflectors}
        self._held: list[Delta] = []
        self._run_id = ""  # the Redis server's, to tell when it restarted
        self._epoch = ""  # the store's, to tell when it was emptied or replaced
        self._outage = Outage(log, "mirror")

    def _sink(self, delta: Delta) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, delta)

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the cluster until ``stop``; the reflector threads end with it."""
        self._loop = asyncio.get_running_loop()
        threads = [
            threading.Thread(target=r.run, name=f"reflector-{r.kind.kind}", daemon=True) for r in self.reflectors
        ]
        for t in threads:
            t.start()
        checked = 0.0
        try:
            while not stop.is_set():
                batch: list[Delta] = []
                with contextlib.suppress(TimeoutError):
                    batch.append(await within(self._queue.get(), 0.2))  # a cancelled get leaves its item queued
                while not self._queue.empty() and len(batch) < 10 * CHUNK:
                    batch.append(self._queue.get_nowait())
                try:
                    if time.monotonic() - checked >= STORE_CHECK_S:
                        checked = time.monotonic()
                        await self.check_store()
                    if batch:
                        await self.apply(batch)
                    self._outage.ok()
                except STORE_DOWN as e:
                    # What this batch (and perhaps earlier ones) wrote may be lost: fill the store again
                    # (unless a full sync is already holding everything back: nothing was written since).
                    await asyncio.sleep(self._outage.failed(e))
                    if not self._waiting:
                        self.full_sync("Redis did not answer a write")
        finally:
            for r in self.reflectors:
                r.stop()
            for t in threads:
                await asyncio.to_thread(t.join, 10)

    async def check_store(self) -> None:
        """Start a full sync when Redis restarted (a new epoch first) or the store was emptied."""
        run_id = str((await self.store.client.info("server")).get("run_id", ""))
        epoch, _ = await self.store.head()
        if self._run_id and run_id != self._run_id:
            self._run_id, self._epoch = run_id, await self.store.new_epoch()
            self.full_sync("Redis restarted")
            return
        self._run_id = run_id
        if self._epoch and epoch != self._epoch:
            self.full_sync("the store was emptied or replaced")
        self._epoch = epoch

    def full_sync(self, why: str) -> None:
        """Fill the store whole again: every kind listed anew, written in :data:`FILL_ORDER`."""
        if not self._waiting:
            log.warning("filling the store again: %s", why)
        else:
            log.info("listing everything again: %s", why)
        self._waiting = {r.kind.kind for r in self.reflectors}
        self._held = []
        for r in self.reflectors:
            r.relist()

    async def apply(self, deltas: Sequence[Delta]) -> None:
        """Apply deltas in order; runs of watch events are coalesced per object. During a full
        sync they are held until every kind has listed."""
        filling = bool(self._waiting)
        if filling:
            self._held += deltas
            self._waiting -= {d.kind for d in deltas if isinstance(d, Listed)}
            if self._waiting:
                return
            deltas, self._held = _fill_order(self._held), []
            self.full_syncs += 1
            started = time.monotonic()
        run: list[Changed] = []
        for delta in deltas:
            if isinstance(delta, Listed):
                await self._changes(run)
                run = []
                await self._reconcile(delta)
            else:
                run.append(delta)
        await self._changes(run)
        if filling:
            listed = sum(len(d.objects) for d in deltas if isinstance(d, Listed))
            log.info("store filled: %d objects in %.2fs", listed, time.monotonic() - started)
        if not self._waiting and not self.synced.is_set():
            self.synced.set()

    async def _changes(self, changes: Sequence[Changed]) -> None:
        latest: dict[tuple[Kind, str], Changed] = {}
        for c in changes:
            latest[c.kind, store_name(c.kind, c.object)] = c
        by_kind: dict[Kind, list[Changed]] = {}
        for c in latest.values():
            by_kind.setdefault(c.kind, []).append(c)
        for kind, items in by_kind.items():
            await self._write(
                kind,
                [c.object for c in items if not c.deleted],
                [store_name(kind, c.object) for c in items if c.deleted],
            )

    async def _reconcile(self, listed: Listed) -> None:
        present = {store_name(listed.kind, o) for o in listed.objects}
        gone = [name for name in await self.store.names(listed.kind) if name not in present]
        await self._write(listed.kind, listed.objects, gone)

    async def _write(self, kind: Kind, objects: Sequence[Any], gone: Sequence[str]) -> None:
        if self.observe is not None:
            for obj in objects:
                self.observe(kind, obj)
        for i in range(0, len(objects), CHUNK):
            await self._upsert(kind, objects[i : i + CHUNK])
        if not gone:
            return
        if self.forget is not None:
            for name in gone:
                self.forget(kind, name)
        if kind is Kind.NODE:
            await self.store.delete_nodes(gone)
        elif kind is Kind.POD:
            await self.store.delete_pods(gone)
        else:
            await self.store.write([Delete(kind, name) for name in gone])

    async def _upsert(self, kind: Kind, objects: Sequence[Any]) -> None:
        try:
            await self._upsert_all(kind, objects)
        except QuantityError:
            # One bad object must not hold the rest back: write them one by one and skip it.
            for obj in objects:
                try:
                    await self._upsert_all(kind, [obj])
                except QuantityError as e:
                    self.skipped += 1
                    log.warning("skipping %s %s: %s", kind, store_name(kind, obj), e)

    async def _upsert_all(self, kind: Kind, objects: Sequence[Any]) -> None:
        if kind is Kind.NODE:
            await self.store.upsert_nodes([o for o in objects if isinstance(o, Node)])
        elif kind is Kind.POD:
            await self.store.upsert_pods([o for o in objects if isinstance(o, Pod)])
        else:
            writes: list[Write] = [
                Put(o) for o in objects if isinstance(o, (PodGroup, Queue, PriorityClass, HyperNode, Namespace))
            ]
            if writes:
                await self.store.write(writes)


def _fill_order(held: Sequence[Delta]) -> list[Delta]:
    """A full sync's deltas as written: each kind's last listing, in :data:`FILL_ORDER`, then
    the watch events that came after their kind's listing (older ones it already holds)."""
    last = {d.kind: i for i, d in enumerate(held) if isinstance(d, Listed)}
    listings = sorted((held[i] for i in last.values()), key=lambda d: FILL_ORDER.index(d.kind))
    later = [d for i, d in enumerate(held) if isinstance(d, Changed) and i > last.get(d.kind, -1)]
    return [*listings, *later]
