"""The change feed: one Redis stream, one entry per write script, ids ``<version>-0``.

:class:`Informer` is the informer, done once: a full listing, then deltas read from the
feed, and a new full listing whenever the feed was trimmed past the reader (the
analogue of Kubernetes' 410 Gone).

An entry names what changed; a reader fetches the changed objects after it. The observed writes
of pods (a burst created, pods started) also carry the pods' records, in the ``recent`` stream
under the entry's id (the prelude's ``carry``), read in the same XREAD: the pods a burst creates
reach a reader in one round trip instead of two. Measured in the demo before this (the agent
loop, the demo's kubelets and the batch scheduler each fetching every burst): the fetch after the
read took 4.0–5.3 ms (p50 over the reads of 50 pods or more). The binder's commits carry what they
change of each pod (the binding, the accounted node, the cards, the version, and the version they
change), and so do the kubelets' reports of a pod's phase (:meth:`Store.set_phases`): an informer
applies that to the record it holds of a pod not started yet (the newest :data:`PENDING_KEPT`), so
neither a burst's commit nor its start is a fetch, nor a whole record to decode again. Every
write that accounts pods on nodes (a commit, a deletion, a pod arriving bound) carries, in the
``recent_nodes`` stream, each node's version before it and the amounts used after it: a reader of
nodes applies that to the node it holds (every node it has yielded) instead of fetching the node
and decoding its spec again — in the demo, ~60% of an agent worker's time went to following its
node replica, its fetches a third of that. ``recent`` is kept short; a reader
further behind than it, a pod changed by a write that carries nothing (the binder's release), or a
change of a record not held, is fetched as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import msgspec

from cluster.store.client import STORE_DOWN, Outage
from cluster.store.held import HeldConnection
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.records import (
    CarriedFields,
    NodeChange,
    NodeRecord,
    PodRecord,
    Update,
    carried_decoder,
    carried_nodes_decoder,
    carried_record,
    changed_node,
    changed_record,
    is_change,
    merged_fields,
    merged_node_change,
)
from cluster.store.scripts import Arg
from cluster.store.store import OBJECT_KINDS, Store

log = logging.getLogger("caldera.feed")
T = TypeVar("T")


class Change(msgspec.Struct, frozen=True):
    kind: Kind
    name: str
    deleted: bool
    at: float = 0.0  # when it was written, seconds since the epoch by the store's clock (0: not said)
    version: int = 0  # the entry's version (0: not said)


StreamEntries = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]
"""An XREAD's streams: (stream, [(entry id, {field: value})]), in the order Redis gave them."""


def stream_entries(reply: Any) -> StreamEntries:
    """An XREAD's reply as Redis gives it — a list of (stream, entries) in RESP2, a map in RESP3, nil
    when nothing came —, each entry's fields (a flat list of names and values) as a map."""
    if reply is None:
        return []
    pairs = reply.items() if isinstance(reply, dict) else reply
    return [
        (stream, [(entry_id, dict(zip(fields[::2], fields[1::2], strict=True))) for entry_id, fields in entries])
        for stream, entries in pairs
    ]


class FeedTrimmed(Exception):
    """The feed no longer holds the entries after the reader's position: list again."""


class StoreReset(FeedTrimmed):
    """The store under the reader is not the one it listed (a new epoch, or versions went back):
    list again."""


def parse_entry(text: bytes, at: float = 0.0, version: int = 0) -> list[Change]:
    changes: list[Change] = []
    if not text:
        return changes  # a new epoch's entry carries no change
    for line in text.decode().split("\n"):
        kind, _, name = line.partition(":")
        deleted = kind.startswith("-")
        changes.append(Change(Kind(kind.lstrip("-")), name, deleted, at, version))
    return changes


CarriedNodes = dict[str, tuple[int, NodeChange]]
"""Nodes' accounting changes a read of the feed brought: name -> (the version of the entry that carried
it, the change: :data:`~cluster.store.records.NodeChange`)."""

Carried = dict[str, tuple[int, CarriedFields]]
"""Pod records a read of the feed brought: uid -> (the version of the entry that carried it, its
fields as the store held them then, or the change that entry made)."""

PENDING_KEPT = 10_000
"""Pods in phase Pending (waiting, or bound and not started yet) whose records an informer keeps (the
latest it yielded, the oldest dropped first), to apply a commit's or a kubelet's carried change to
rather than fetch the pod. A burst is committed moments after it was created, and started moments
after that; a pod pending longer than this many others came after it is fetched as before. The
cost is the records a consumer does not hold itself: 10,000 of the demo's agent pods, decoded, take
22 MB; a consumer that holds the pending pods anyway (the batch scheduler's cache) pays nothing."""


def _merged_pod(earlier: CarriedFields, later: CarriedFields) -> CarriedFields | None:
    """A pod's two carried records or changes within one read: a later record stands alone, a later
    change goes on the earlier one (created, committed and started within the read)."""
    return merged_fields(earlier, later) if is_change(later) else later


class FeedReader:
    """Reads the feed from a position (a resourceVersion) in one epoch of the store.

    Raises :class:`FeedTrimmed` on a gap, and :class:`StoreReset` when the store is no longer
    the one the position belongs to: an entry of another epoch, or — seen when a read finds
    nothing — another epoch or a version behind the position (the store was emptied or
    restored from an older copy, and its new entries would never reach this position). A
    reader that listed before the store had an epoch ('') takes the first one it reads, if
    no entry was skipped.

    ``records``: read the pod records entries carry too (a reader of pods); a reader of other
    kinds leaves them in the store rather than take and decode a burst's pods for nothing.
    ``nodes``: read the nodes' accounting changes entries carry too (a reader of nodes).
    ``reads``: the connection its reads go through (:class:`~cluster.store.held.HeldConnection`: an
    informer keeps one across its readers); without one, it holds one of its own until :meth:`close`.
    """

    def __init__(
        self,
        store: Store,
        position: int,
        epoch: str = "",
        *,
        records: bool = True,
        nodes: bool = False,
        reads: HeldConnection | None = None,
    ) -> None:
        self.store = store
        self.position = position
        self.epoch = epoch
        self.records = records
        self.nodes = nodes
        self.reads = reads if reads is not None else HeldConnection(store.client)
        self._owns_reads = reads is None
        self.carried: Carried = {}  # the pod records the last read brought
        self.carried_nodes: CarriedNodes = {}  # the nodes' accounting changes the last read brought

    async def read(self, *, block_ms: int | None = 500, count: int = 2000) -> list[Change]:
        """The changes after the position (waiting up to ``block_ms`` for some), in order; the
        records their entries carried in :attr:`carried`."""
        keys = self.store.keys
        start = f"{self.position}-0"
        streams = {keys.feed: start}
        if self.records:
            streams[keys.recent] = start
        if self.nodes:
            streams[keys.recent_nodes] = start
        reply = await self._xread(streams, count, block_ms)
        carrying: dict[bytes, list[tuple[bytes, dict[bytes, bytes]]]] = {
            keys.recent.encode(): [],
            keys.recent_nodes.encode(): [],
        }
        changes: list[Change] = []
        for stream, entries in reply:
            if stream in carrying:
                carrying[stream] = entries
                continue
            for entry_id, fields in entries:
                version = int(entry_id.split(b"-")[0])
                if version != self.position + 1:
                    raise FeedTrimmed(f"feed resumes at {version}, reader was at {self.position}")
                epoch = fields.get(b"e", b"").decode()
                if epoch != self.epoch:
                    if self.epoch:
                        raise StoreReset(f"the store's epoch is {epoch or 'gone'}, the reader listed in {self.epoch}")
                    self.epoch = epoch
                self.position = version
                changes += parse_entry(fields[b"c"], int(fields.get(b"t", b"0")) / 1e6, version)
        await self._read_left_out(carrying, start, changes, count)
        self.carried = self._carried(carrying[keys.recent.encode()], b"r", carried_decoder.decode, _merged_pod)
        self.carried_nodes = self._carried(
            carrying[keys.recent_nodes.encode()], b"n", carried_nodes_decoder.decode, merged_node_change
        )
        if not reply:
            await self._check_store()
        return changes

    async def _read_left_out(
        self,
        carrying: dict[bytes, list[tuple[bytes, dict[bytes, bytes]]]],
        start: str,
        changes: list[Change],
        count: int,
    ) -> None:
        """The carried streams a read left out, read again (without blocking) when its changes could
        be in them. A read that waited gets, from Redis before 7.2, the entries of the first stream a
        write added to and no other (measured on 7.0: two streams written by one script, a blocked
        XREAD of both answered with the first): the feed alone, so every burst that woke a reader
        was fetched pod by pod, not taken as carried."""
        keys = self.store.keys
        wanted: dict[str, str] = {}
        if self.records and not carrying[keys.recent.encode()] and self._may_carry(changes, Kind.POD):
            wanted[keys.recent] = start
        if self.nodes and not carrying[keys.recent_nodes.encode()] and self._may_carry(changes, Kind.NODE):
            wanted[keys.recent_nodes] = start
        if not wanted:
            return
        for stream, entries in await self._xread(wanted, count, None):
            carrying[stream] = entries

    async def _xread(self, streams: dict[str, str], count: int, block_ms: int | None) -> StreamEntries:
        """XREAD of ``streams`` (key -> the id to read after) through :attr:`reads`."""
        block: tuple[Arg, ...] = () if block_ms is None else ("BLOCK", block_ms)
        reply = await self.reads.call("XREAD", "COUNT", count, *block, "STREAMS", *streams, *streams.values())
        return stream_entries(reply)

    async def close(self) -> None:
        """Give back the connection it held of its own (one it was given stays open)."""
        if self._owns_reads:
            await self.reads.close()

    @staticmethod
    def _may_carry(changes: list[Change], kind: Kind) -> bool:
        """Whether ``changes`` hold one of ``kind`` that an entry may carry: not a deletion (a pod's
        deletion carries nothing, and the simulated kubelets' ends are most of a busy feed's entries)."""
        return any(c.kind is kind and not c.deleted for c in changes)

    def _carried(
        self,
        entries: list[tuple[bytes, dict[bytes, bytes]]],
        field: bytes,
        decode: Callable[[bytes], dict[str, T]],
        merge: Callable[[T, T], T | None],
    ) -> dict[str, tuple[int, T]]:
        """What ``entries`` of a carried stream carry (``field``, decoded), up to the position read, by
        name, with the version of the entry that carried it. Two of one object within the read are
        merged; one whose two cannot be (a write that carried nothing came between) is dropped, and
        fetched."""
        carried: dict[str, tuple[int, T]] = {}
        for entry_id, fields in entries:
            version = int(entry_id.split(b"-")[0])
            if version > self.position:
                break  # past the entries of the feed this read took: the next read brings them again
            for name, value in decode(fields[field]).items():
                earlier = carried.get(name)
                if earlier is not None:
                    merged = merge(earlier[1], value)
                    if merged is None:
                        del carried[name]
                        continue
                    value = merged
                carried[name] = (version, value)
        return carried

    async def _check_store(self) -> None:
        epoch, version = await self.store.head()
        if (self.epoch and epoch != self.epoch) or version < self.position:
            raise StoreReset(
                f"the store is at version {version} of epoch {epoch or 'none'}; the reader was at "
                f"{self.position} of {self.epoch or 'none'}"
            )


class Informer:
    """Keeps a consumer current: yields one full :class:`Update`, then deltas, forever."""

    def __init__(
        self,
        store: Store,
        kinds: Iterable[Kind],
        *,
        block_ms: int = 500,
        count: int = 2000,
        settle_s: float = 0.0,
        keep_pending: int = PENDING_KEPT,
    ) -> None:
        self.store = store
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
