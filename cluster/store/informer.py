"""The informer, done once: a full listing, then deltas read from the feed
(:class:`~cluster.store.feed.FeedReader`), and a new full listing whenever the feed was trimmed past
the reader (the analogue of Kubernetes' 410 Gone), the store was reset under it, or it was out of
reach. It keeps the pending pods and the nodes it yielded, so that the changes the feed's entries
carry (:mod:`cluster.store.feed`) apply to them instead of a fetch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping

from cluster.store.client import STORE_DOWN, Outage
from cluster.store.feed import Carried, CarriedNodes, Change, FeedReader, FeedTrimmed, StoreReset
from cluster.store.held import HeldConnection
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.records import NodeRecord, PodRecord, Update, carried_record, changed_node, changed_record, is_change
from cluster.store.store import OBJECT_KINDS, Store

log = logging.getLogger("caldera.feed")

PENDING_KEPT = 10_000
"""Pods in phase Pending (waiting, or bound and not started yet) whose records an informer keeps (the
latest it yielded, the oldest dropped first), to apply a commit's or a kubelet's carried change to
rather than fetch the pod. A burst is committed moments after it was created, and started moments
after that; a pod pending longer than this many others came after it is fetched as before. The
cost is the records a consumer does not hold itself: 10,000 of the demo's agent pods, decoded, take
22 MB; a consumer that holds the pending pods anyway (the batch scheduler's cache) pays nothing."""


class Informer:
    """Keeps a consumer current: yields one full :class:`Update`, then deltas, forever.

    An informer of nodes alone is woken only by writes that change a node; with ``wake_on_pods``, one
    of pods only by writes that carry a pod (not its deletion): what else came is read with the next
    such write or when ``block_ms`` ends (:class:`~cluster.store.feed.FeedReader`)."""

    def __init__(
        self,
        store: Store,
        kinds: Iterable[Kind],
        *,
        block_ms: int = 500,
        count: int = 2000,
        settle_s: float = 0.0,
        keep_pending: int = PENDING_KEPT,
        wake_on_pods: bool = False,
    ) -> None:
        self.store = store
        self.wake_on_pods = wake_on_pods
        self.kinds = frozenset(kinds)
        self.block_ms = block_ms
        self.count = count
        # After a read that found changes, wait this long before the next one, so that a
        # busy feed is read in few large steps instead of many small ones (each a wake-up,
        # a round trip and a fetch); the consumer's view is that much older in exchange —
        # except when it asks to be current (:meth:`caught_up`).
        self.settle_s = settle_s
        # The feed position whose changes the consumer has taken: the last update yielded was
        # handed back (the consumer asked for the next), or the read brought none it wants.
        self.taken = 0
        self._hurry = asyncio.Event()  # cuts a settle short: a caller of caught_up waits
        self._hurry_to = 0  # no settle while the consumer has not taken this version
        self._progress = asyncio.Event()  # set whenever ``taken`` moves
        self.relists = 0
        self.resets = 0  # listings because the store was reset under this informer
        self._stopping = False
        # The pending pods' records as last yielded (``keep_pending`` at most): a commit's carried
        # change applies to them.
        self.keep_pending = keep_pending
        self._pending: OrderedDict[str, PodRecord] = OrderedDict()
        # Every node as last yielded (a reader of nodes): a carried accounting change applies to it.
        self._nodes: dict[str, NodeRecord] = {}

    @property
    def nodes(self) -> Mapping[str, NodeRecord]:
        """Every node as the updates yielded so far left it (a reader of nodes; read-only): a consumer that
        wants the nodes as they are keeps no copy of its own."""
        return self._nodes

    def stop(self) -> None:
        """End :meth:`updates` within one ``block_ms``.

        Preferred to cancelling a task blocked in XREAD: a cancellation that lands inside
        the Redis client's read can leave its connection unusable; a stop flag cannot.
        """
        self._stopping = True
        self._hurry.set()
        self._progress.set()

    async def caught_up(self, timeout_s: float) -> bool:
        """Wait until the consumer has taken every change the store had made when this was called,
        cutting the settle short (one read and fetch, not a settle's wait); whether it has, within
        ``timeout_s``. A consumer that settles its reads so that a busy feed costs it little (the batch
        scheduler) calls this before it acts on its view (a session), and acts on a current one."""
        target = await self.store.version()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.taken < target and not self._stopping:
            self._hurry_to = max(self._hurry_to, target)
            self._hurry.set()
            self._progress.clear()
            if not await pause(self._progress, deadline - loop.time()):
                break
        return self.taken >= target

    def _took(self, version: int) -> None:
        if version > self.taken:
            self.taken = version
            self._progress.set()

    async def _settle(self) -> None:
        """The settle after a read, unless a caller of :meth:`caught_up` waits for changes the consumer
        has not taken (this read brought some of them, or all)."""
        if self.taken < self._hurry_to:
            return
        self._hurry.clear()
        await pause(self._hurry, self.settle_s)

    async def updates(self) -> AsyncIterator[Update]:
        """A listing, then deltas; a new listing after a gap, a reset store, or an outage (the
        store unreachable: retried with backoff — what changed meanwhile is in the next listing)."""
        outage = Outage(log, "the feed")
        reads = HeldConnection(self.store.client)  # every reader of this informer reads through it
        try:
            while not self._stopping:
                try:
                    update = await self.listing()
                except STORE_DOWN as e:
                    await self._pause(outage.failed(e))
                    continue
                outage.ok()
                self._keep(update)
                self.taken = self._hurry_to = 0  # a listing: versions of another store may be lower
                yield update
                self._took(update.version)
                reader = FeedReader(
                    self.store,
                    update.version,
                    update.epoch,
                    records=Kind.POD in self.kinds,
                    nodes=Kind.NODE in self.kinds,
                    wake_on_nodes=self.kinds == {Kind.NODE},  # writes of pods alone wake it no more
                    wake_on_pods=self.wake_on_pods,
                    reads=reads,
                )
                try:
                    while not self._stopping:
                        changes = await reader.read(block_ms=self.block_ms, count=self.count)
                        if changes and self.settle_s > 0 and len(changes) < self.count:
                            await self._settle()
                        wanted = [c for c in changes if c.kind in self.kinds]
                        if wanted:
                            update = await self.fetch(
                                reader.position, reader.epoch, wanted, reader.carried, reader.carried_nodes
                            )
                            self._keep(update)
                            yield update
                        self._took(reader.position)
                except StoreReset as e:
                    self.relists += 1
                    self.resets += 1
                    log.warning("listing again: %s", e)
                except FeedTrimmed:
                    self.relists += 1
                except STORE_DOWN as e:
                    self.relists += 1
                    await self._pause(outage.failed(e))
        finally:
            await reads.close()

    def _keep(self, update: Update) -> None:
        """Hold the pods of ``update`` in phase Pending (a listing: only them), forget the others it brings."""
        if update.full:
            self._nodes.clear()
        if Kind.NODE in self.kinds:
            for name, node in update.nodes.items():
                if node is None:
                    self._nodes.pop(name, None)
                else:
                    self._nodes[name] = node
        pending = self._pending
        if update.full:
            pending.clear()
        for uid, rec in update.pods.items():
            if rec is not None and rec.phase == "Pending":
                pending[uid] = rec
                if len(pending) > self.keep_pending:
                    pending.popitem(last=False)
            else:
                pending.pop(uid, None)

    async def _pause(self, seconds: float) -> None:
        """Wait, but no longer than a stop allows."""
        end = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < end:
            await asyncio.sleep(min(0.05, end - time.monotonic()))

    async def listing(self) -> Update:
        """A full listing. The version is read first: anything written during the listing
        is also on the feed after it, and applying a change twice is harmless."""
        epoch, version = await self.store.head()
        update = Update(version=version, epoch=epoch, full=True, nodes={}, pods={}, objects={})
        if Kind.NODE in self.kinds:
            update.nodes = {r.name: r for r in await self.store.list_nodes()}
        if Kind.POD in self.kinds:
            update.pods = {r.uid: r for r in await self.store.list_pods()}
        for cls, kind in OBJECT_KINDS.items():
            if kind in self.kinds:
                update.objects[kind] = dict(await self.store.list_objects(cls))  # type: ignore[type-var]
        return update

    def _pods_changed(self, live: list[str], last: dict[str, int], carried: Carried) -> dict[str, PodRecord]:
        """The pods of ``live`` whose last change (``last``: its version) carried their record, or a
        change of the record held here."""
        found: dict[str, PodRecord] = {}
        for n in live:
            got = carried.get(n)
            if got is None or got[0] != last[n]:
                continue
            if not is_change(got[1]):
                found[n] = carried_record(n, got[1])
            elif (base := self._pending.get(n)) is not None and (rec := changed_record(base, got[1])):
                found[n] = rec
        return found

    def _nodes_changed(self, live: list[str], last: dict[str, int], carried: CarriedNodes) -> dict[str, NodeRecord]:
        """The nodes of ``live`` whose last change (``last``: its version) carried their accounting, of
        the node held here."""
        found: dict[str, NodeRecord] = {}
        for n in live:
            got = carried.get(n)
            if got is None or got[0] != last[n] or (base := self._nodes.get(n)) is None:
                continue
            if (rec := changed_node(base, got[1])) is not None:
                found[n] = rec
        return found

    async def fetch(
        self,
        version: int,
        epoch: str,
        changes: list[Change],
        carried: Carried | None = None,
        carried_nodes: CarriedNodes | None = None,
    ) -> Update:
        """Read the current state of every changed object (one round trip per kind). A pod whose
        last change here carried its record (``carried``) is taken as that record, not fetched; one
        whose last change carried a change of the pending record held here, as that record changed.
        A node whose last change here carried its accounting (``carried_nodes``), as the node held
        here changed."""
        latest: dict[Kind, dict[str, bool]] = {}
        last: dict[Kind, dict[str, int]] = {}  # each object's last change's version
        for c in changes:
            latest.setdefault(c.kind, {})[c.name] = c.deleted
            last.setdefault(c.kind, {})[c.name] = c.version
        update = Update(version=version, epoch=epoch, full=False, nodes={}, pods={}, objects={})
        for kind, names in latest.items():
            live = [n for n, deleted in names.items() if not deleted]
            if kind is Kind.NODE:
                found_nodes = self._nodes_changed(live, last[kind], carried_nodes or {})
                missing_nodes = [n for n in live if n not in found_nodes]
                if missing_nodes:
                    found_nodes.update(await self.store.get_nodes(missing_nodes))
                update.nodes = {n: found_nodes.get(n) for n in names}
            elif kind is Kind.POD:
                found_pods = self._pods_changed(live, last[kind], carried or {})
                missing = [n for n in live if n not in found_pods]
                if missing:
                    found_pods.update(await self.store.get_pods(missing))
                update.pods = {n: found_pods.get(n) for n in names}
                for c in changes:
                    if c.kind is Kind.POD:
                        update.written.setdefault(c.name, c.at)
                        update.last_written[c.name] = c.at
            else:
                cls = next(c for c, k in OBJECT_KINDS.items() if k is kind)
                found = await self.store.get_objects(cls, live)  # type: ignore[type-var]
                update.objects[kind] = {n: found.get(n) for n in names}
        return update
