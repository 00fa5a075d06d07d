"""The change feed: one Redis stream, one entry per write script, ids ``<version>-0``, and
:class:`FeedReader`, which reads it from a position (the informer over it:
:mod:`cluster.store.informer`).

An entry names what changed; a reader fetches the changed objects after it. The observed writes
of pods (a burst created, pods started) also carry the pods' records, in the ``recent`` stream
under the entry's id (the prelude's ``carry``), read in the same XREAD: the pods a burst creates
reach a reader in one round trip instead of two. Measured in the demo before this (the agent
loop, the demo's kubelets and the batch scheduler each fetching every burst): the fetch after the
read took 4.0–5.3 ms (p50 over the reads of 50 pods or more). The binder's commits carry what they
change of each pod (the binding, the accounted node, the cards, the version, and the version they
change), and so do the kubelets' reports of a pod's phase (:meth:`Store.set_phases`): an informer
applies that to the record it holds of a pod not started yet (the newest
:data:`~cluster.store.informer.PENDING_KEPT`), so neither a burst's commit nor its start is a fetch,
nor a whole record to decode again. Every write that accounts pods on nodes (a commit, a deletion, a
pod arriving bound) carries, in the ``recent_nodes`` stream, each node's version before it and the
amounts used after it: a reader of nodes applies that to the node it holds (every node it has
yielded) instead of fetching the node and decoding its spec again — in the demo, ~60% of an agent
worker's time went to following its node replica, its fetches a third of that. ``recent`` is kept
short; a reader further behind than it, a pod changed by a write that carries nothing (the binder's
release), or a change of a record not held, is fetched as before.

Every write that changes a node, accounting or not, adds an entry to ``recent_nodes``; a reader of
nodes alone (``wake_on_nodes``: each agent worker's replica, the sharding controller) waits on that
stream rather than the feed, so the writes that change pods alone — a burst created, a pod
started, a third of the demo's feed — do not wake it: it reads past them when a node changes or its
wait ends. Alternated with the tree before it in the default demo, ten pairs (seven with it second,
three first): agent pods' p50 lower in all ten, 36.0 → 33.1 ms on average (25.6–37.7 against
30.5–41.0), p99 lower in nine, 100.7 → 92.7 ms on average (at most 100 ms in nine runs against
five) — the likely reason: a worker's replica no longer reads a burst's creations while the worker
decides the burst. The worker's CPU over a run is about the same (a wake by a node now takes a read
more), and an idle reader's a little more: 3.5 → 3.7–4.2 ms of CPU a second, waiting 50 ms a read.
``bench agent --fill 0.9 --take 0.8 --workers 8``, two pairs: no true conflict either way, 3,531 /
4,058 → 4,345 / 4,263 pods/s.

A read that follows one that brought no node's change waits on ``recent_nodes`` at once, without a
first look at the feed: a replica that read pods alone (a burst's creations, taken while its worker
decided the burst) would otherwise take the pods written meanwhile and wake again and again through
the burst, in the worker's own thread. Six pairs of the default demo against the tree before it
(three with it second, three first): agent pods' p50 lower in all six, 32.5 → 28.5 ms on average,
p99 98.4 → 67.8 ms (at most 77 ms in every run); at ``--workers 2``, two pairs: p50 51.6 / 50.4 →
45.9 / 44.1 ms, p99 272 / 173 → 118 / 123 ms, true conflicts 22 / 25 → 32 / 22 of 12,195 pods. Not
confirmed later in the same sitting: six pairs of the tree before it against the one after the next
change too, 30.9 → 31.7 ms p50 on average (the README, *Readers woken less*).

The agent loop's reader of pods likewise waits on ``recent`` (``wake_on_pods``): the simulated
kubelets' ends — single-pod deletions, 197 of the demo's 322 feed entries a second — no longer wake
it one by one between the bursts; it reads them with the next pod written, or when its 50-ms wait
ends (a pod deleted while pending stays queued that much longer; a worker's commit of it is refused,
the pod gone). Six pairs of the default demo: the loop's CPU 0.088 → 0.052 cores on average (lower in
all six), all processes' 0.657 → 0.598; agent pods' p50 32.2 → 32.2 ms and p99 81.1 → 82.2 ms on
average — the CPU it saves is between the bursts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from cluster.store.held import HeldConnection
from cluster.store.keys import Kind
from cluster.store.records import (
    CarriedFields,
    NodeChange,
    carried_decoder,
    carried_nodes_decoder,
    is_change,
    merged_fields,
    merged_node_change,
)
from cluster.store.scripts import Arg
from cluster.store.store import Store

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


_KINDS: dict[str, tuple[Kind, bool]] = {
    **{k.value: (k, False) for k in Kind},
    **{f"-{k.value}": (k, True) for k in Kind},
}
"""A feed line's code (``pod``, ``-pod`` for a deletion, ...) -> its kind and whether it was deleted: a
dict's lookup, where ``Kind(code)`` took ~0.5 µs a line in every reader of the feed."""


def parse_entry(text: bytes, at: float = 0.0, version: int = 0) -> list[Change]:
    changes: list[Change] = []
    if not text:
        return changes  # a new epoch's entry carries no change
    for line in text.decode().split("\n"):
        code, _, name = line.partition(":")
        known = _KINDS.get(code)
        if known is None:
            raise ValueError(
                f"feed entry {version}: kind {code!r} (expected one of {', '.join(Kind)}, '-' before a deletion)"
            )
        changes.append(Change(known[0], name, known[1], at, version))
    return changes


CarriedNodes = dict[str, tuple[int, NodeChange]]
"""Nodes' accounting changes a read of the feed brought: name -> (the version of the entry that carried
it, the change: :data:`~cluster.store.records.NodeChange`)."""

Carried = dict[str, tuple[int, CarriedFields]]
"""Pod records a read of the feed brought: uid -> (the version of the entry that carried it, its
fields as the store held them then, or the change that entry made)."""


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
    ``wake_on_nodes``: a reader of nodes alone — a read that finds nothing new waits for a write
    that changed a node (the ``recent_nodes`` stream), not for any write, then takes the feed; a read
    after one that brought no node's change waits so at once.
    ``wake_on_pods``: likewise for a reader of pods woken by the writes that carry a pod (the
    ``recent`` stream: created, updated, committed, started), not by deletions nor writes of other
    kinds, which come with its next read — at the latest when its wait ends.
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
        wake_on_nodes: bool = False,
        wake_on_pods: bool = False,
        reads: HeldConnection | None = None,
    ) -> None:
        self.store = store
        self.position = position
        self.epoch = epoch
        self.records = records
        self.nodes = nodes
        if wake_on_nodes and wake_on_pods:
            raise ValueError("wake_on_nodes and wake_on_pods: a reader waits on one stream")
        # The stream a read waits on (None: the feed itself), and the kind of change it wakes for.
        self._wake = store.keys.recent_nodes if wake_on_nodes else store.keys.recent if wake_on_pods else None
        self._wakes_for = Kind.NODE if wake_on_nodes else Kind.POD
        self.reads = reads if reads is not None else HeldConnection(store.client)
        self._owns_reads = reads is None
        self.carried: Carried = {}  # the pod records the last read brought
        self.carried_nodes: CarriedNodes = {}  # the nodes' accounting changes the last read brought
        self._quiet = False  # the last read brought no change that wakes it: the next waits first

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
        if self._wake is not None and block_ms is not None:
            reply = [] if self._quiet else await self._xread(streams, count, None)  # what came meanwhile
            if not any(stream == keys.feed.encode() for stream, _ in reply):
                await self._xread({self._wake: start}, 1, block_ms)  # a change that wakes it, or the wait's end
                reply = await self._xread(streams, count, None)
        else:
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
        # A node's deletion is written to recent_nodes too, a pod's to recent not.
        kind = self._wakes_for
        self._quiet = not any(c.kind is kind and not (c.deleted and kind is Kind.POD) for c in changes)
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
