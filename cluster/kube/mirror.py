"""The mirror: keeps the store equal to what the Kubernetes API server holds.

One :class:`~cluster.kube.reflector.Reflector` thread per kind (Nodes, all Pods —
those other schedulers placed are accounted too —, PodGroups, Queues, PriorityClasses)
hands listings and watch events to the asyncio side, which applies them in batches
through the store's observed-state scripts. A listing is a reconcile: whatever the store
holds of that kind and the listing lacks is removed. Listings happen at start, after a
410 or a broken watch, and every ``resync_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from cluster.kube.reflector import Changed, Delta, KubeKind, Listed, Reflector
from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.quantity import QuantityError
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.store.keys import Kind
from cluster.store.store import Delete, Put, Store, Write, object_name

log = logging.getLogger("caldera.mirror")
CHUNK = 1000
OBJECT_KINDS = (Kind.PODGROUP, Kind.QUEUE, Kind.PRIORITYCLASS, Kind.HYPERNODE, Kind.NAMESPACE)


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
    ) -> None:
        """``observe`` sees every object as the API server reported it (the write-back's baseline)."""
        self.store = store
        self.observe = observe
        self.reflectors = [
            Reflector(k, self._sink, watch_seconds=watch_seconds, resync_seconds=resync_seconds) for k in kinds
        ]
        self.listed: set[Kind] = set()
        self.synced = asyncio.Event()  # every kind listed into the store at least once
        self.skipped = 0  # objects refused (e.g. a bad quantity), one log line each
        self._queue: asyncio.Queue[Delta] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

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
        try:
            while not stop.is_set():
                batch: list[Delta] = []
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        batch.append(await self._queue.get())
                while not self._queue.empty() and len(batch) < 10 * CHUNK:
                    batch.append(self._queue.get_nowait())
                if batch:
                    await self.apply(batch)
        finally:
            for r in self.reflectors:
                r.stop()
            for t in threads:
                await asyncio.to_thread(t.join, 10)

    async def apply(self, deltas: Sequence[Delta]) -> None:
        """Apply deltas in order; runs of watch events are coalesced per object."""
        run: list[Changed] = []
        for delta in deltas:
            if isinstance(delta, Listed):
                await self._changes(run)
                run = []
                await self._reconcile(delta)
            else:
                run.append(delta)
        await self._changes(run)

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
        self.listed.add(listed.kind)
        if len(self.listed) == len(self.reflectors):
            self.synced.set()

    async def _write(self, kind: Kind, objects: Sequence[Any], gone: Sequence[str]) -> None:
        if self.observe is not None:
            for obj in objects:
                self.observe(kind, obj)
        for i in range(0, len(objects), CHUNK):
            await self._upsert(kind, objects[i : i + CHUNK])
        if not gone:
            return
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
