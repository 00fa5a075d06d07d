"""The store: caldera's shared, versioned cluster state in Redis (DESIGN.md §3).

Observed state (nodes, pods, PodGroups, Queues, PriorityClasses) is written only through
the scripts here, each atomic, each bumping versions and appending to the change feed.
Allocations are the binder's (binder/); shard ownership is written with :meth:`Store.write`.
Every batch is validated whole before anything is written, so bad input changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import redis.asyncio as aioredis

from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.devices import card_uuids, foreign_vgpu, node_allocatable, pod_cards
from cluster.model.topology import HyperNode
from cluster.model.volcano import NodeShard, PodGroup, Queue
from cluster.store.keys import Keys, Kind
from cluster.store.records import (
    TERMINAL_PHASES,
    NodeRecord,
    PodRecord,
    encode_request,
    node_record,
    pod_record,
    reported,
)
from cluster.store.scripts import Arg, Script, SentAhead, call_packed, run_loaded

DEFAULT_FEED_MAXLEN = 200_000
PODS_PER_CALL = 10
"""Pods one write script takes at most (:meth:`Store.upsert_pods`, :meth:`Store.delete_pods`). Redis runs a
call whole, and a reader sees none of its pods before its end. Measured in the demo against one pod to a
call (three alternated runs each): at 100 the first pod of a round was bound 9 ms later (p50 15–18 → 23–26
ms); at 25 as soon (15–17 ms); the per-pod p50 alike, the p99 lower in five of the six pairs. Then 10
against 25, thirteen alternated pairs (ten demos, three ``bench mixed``): the first pod of a round
earlier in every pair, by 0.4–4.2 ms (p50 13.3 → 11.2 ms on average) — a round's readers start on its
first write sooner, and Redis takes the other clients' commands between shorter scripts —, the median
pod where it was (p50 33.6 → 33.5 ms on average: better in eight pairs, worse in four, even in one), the p99 as
scattered either way (104.8 → 96.7 ms on average). 234 pods upserted on a quiet Redis 8.2 / 6.1 → 5.7
/ 5.3 ms, 2,000 pods 45.5 / 49.5 → 42.7 / 43.8 ms. At 5, no better than 10 (three demo pairs: p50
29.6 / 28.8 / 29.9 → 32.7 / 27.9 / 35.0 ms)."""

ObjectT = TypeVar("ObjectT", PodGroup, Queue, PriorityClass, NodeShard, HyperNode, Namespace)

OBJECT_KINDS: dict[type[msgspec.Struct], Kind] = {
    PodGroup: Kind.PODGROUP,
    Queue: Kind.QUEUE,
    PriorityClass: Kind.PRIORITYCLASS,
    NodeShard: Kind.NODESHARD,
    HyperNode: Kind.HYPERNODE,
    Namespace: Kind.NAMESPACE,
}

_encoder = msgspec.msgpack.Encoder()


def object_name(obj: PodGroup | Queue | PriorityClass | NodeShard | HyperNode | Namespace) -> str:
    """The store name of a simple object: ``namespace/name`` for PodGroups, else the name."""
    if isinstance(obj, PodGroup):
        return f"{obj.namespace}/{obj.name}"
    return obj.metadata.name


def _decoded(members: Iterable[Any]) -> list[str]:
    """Members of a Redis reply as text (the client returns bytes)."""
    return [m.decode() if isinstance(m, bytes) else str(m) for m in members]


class Put(msgspec.Struct, frozen=True):
    """Write one simple object (PodGroup, Queue, PriorityClass, NodeShard, HyperNode, Namespace)."""

    obj: PodGroup | Queue | PriorityClass | NodeShard | HyperNode | Namespace


class Delete(msgspec.Struct, frozen=True):
    kind: Kind
    name: str


class Own(msgspec.Struct, frozen=True):
    """Set a node's owning scheduler ('' for none)."""

    node: str
    owner: str


Write = Put | Delete | Own


class Store:
    """Async access to one cluster's state in Redis."""

    def __init__(self, client: aioredis.Redis, keys: Keys, *, feed_maxlen: int = DEFAULT_FEED_MAXLEN) -> None:
        self.client = client
        self.keys = keys
        self._head: list[Arg] = [keys.prefix, feed_maxlen]
        self._upsert_node = Script("cluster.store", "upsert_node")
        self._delete_node = Script("cluster.store", "delete_node")
        self._upsert_pod = Script("cluster.store", "upsert_pod")
        self._delete_pod = Script("cluster.store", "delete_pod")
        self._set_phase = Script("cluster.store", "set_phase")
        self._put_objects = Script("cluster.store", "put_objects")
        self._new_epoch = Script("cluster.store", "new_epoch")
        self._scripts = [
            self._upsert_node,
            self._delete_node,
            self._upsert_pod,
            self._delete_pod,
            self._set_phase,
            self._put_objects,
        ]

    async def _run(self, script: Script, calls: Sequence[Sequence[Arg]], per_call: int = 1) -> list[int]:
        """Call one script for every argument list, pipelined in one round trip: ``per_call`` lists to a
        call for a script that takes many objects' arguments at once and answers one version per
        object (the pods': :data:`PODS_PER_CALL`), one to a call otherwise. A call is one version and
        one feed entry: a burst of 200 pods is eight entries, not 200, for each of the store's readers."""
        if not calls:
            return []

        async def go() -> list[int]:
            commands = [
                script.command([self.keys.rv], [*self._head, *(a for args in calls[i : i + per_call] for a in args)])
                for i in range(0, len(calls), per_call)
            ]
            answers = await call_packed(self.client, commands)
            return [int(v) for answer in answers for v in (answer if isinstance(answer, list) else [answer])]

        return await run_loaded(self.client, self._scripts, go)

    async def _stream(self, script: Script, calls: Iterator[Sequence[Arg]], per_call: int) -> list[int]:
        """:meth:`_run` for argument lists made as it goes: each call written to Redis as soon as its
        ``per_call`` lists are made (:class:`~cluster.store.scripts.SentAhead`), its replies read
        once all are sent. ``calls`` must not raise (check the input first): the calls sent before
        would stand. Measured, 200 of the demo's pods on a quiet Redis (medians of 30, two runs): the
        first call's feed entry 2.46 / 2.83 → 1.25 / 1.78 ms after the write began, the middle one's
        4.43 / 5.28 → 3.41 / 4.72 ms."""
        ahead = await SentAhead.open(self.client)
        try:
            args: list[Arg] = []
            made = 0
            for call in calls:
                args += call
                made += 1
                if made == per_call:
                    ahead.send(script.command([self.keys.rv], [*self._head, *args]))
                    args, made = [], 0
            if made:
                ahead.send(script.command([self.keys.rv], [*self._head, *args]))
        except BaseException:
            await ahead.abandon()
            raise
        answers = await ahead.replies_loaded(self._scripts)
        return [int(v) for answer in answers for v in (answer if isinstance(answer, list) else [answer])]

    # -- observed state -------------------------------------------------------------

    async def upsert_nodes(self, nodes: Iterable[Node]) -> list[int]:
        """Create or update nodes; returns the version each write got."""
        calls: list[list[Arg]] = []
        for node in nodes:
            allocatable = node_allocatable(node)  # raises on a bad quantity, before any write
            calls.append([node.name, int(node.unschedulable), encode_request(allocatable), _encoder.encode(node)])
        return await self._run(self._upsert_node, calls)

    async def delete_nodes(self, names: Iterable[str]) -> list[int]:
        return await self._run(self._delete_node, [[name] for name in names])

    async def upsert_pods(self, pods: Iterable[Pod]) -> list[int]:
        """Create or update pods as observed (a pod that arrives bound is accounted on its node, with
        the GPU cards its annotations name — HAMi's by UUID, read against the node's cards).

        Each call of :data:`PODS_PER_CALL` pods goes to Redis as soon as its pods are encoded
        (:meth:`_stream`): a burst's first pods are written while the rest are encoded."""
        pods = list(pods)
        if not pods:
            return []
        foreign = sorted({p.node_name for p in pods if foreign_vgpu(p)})
        uuids = {name: card_uuids(r.node) for name, r in (await self.get_nodes(foreign)).items()} if foreign else {}
        requests = [pod.request() for pod in pods]  # raises on a bad quantity, before any write

        def calls() -> Iterator[list[Arg]]:
            for pod, request in zip(pods, requests):
                group = f"{pod.namespace}/{pod.group_name}" if pod.group_name else ""
                yield [
                    pod.uid,
                    pod.namespace,
                    pod.name,
                    pod.scheduler_name,
                    group,
                    pod.priority,
                    encode_request(request),
                    pod.node_name,
                    pod.phase,
                    _encoder.encode(pod),
                    encode_request(pod_cards(pod, uuids.get(pod.node_name, ()))) if pod.node_name else "",
                ]

        return await self._stream(self._upsert_pod, calls(), PODS_PER_CALL)

    async def set_phases(self, records: Iterable[PodRecord], phase: str) -> list[int]:
        """Bound pods' phase as their kubelets report it (Running, once started): each pod as
        :func:`~cluster.store.records.reported`, its phase and spec written, nothing accounted anew;
        the version each write got, 0 for a pod left as it was (gone, changed since ``records`` were
        read — bound elsewhere, its spec updated —, ended, in that phase already). A pod's end is its
        deletion (:meth:`delete_pods`), not a phase.

        Its feed entry carries the change, not the record: a reader that holds the pod applies it (a
        record decoded again is ~12 µs of every reader's time a pod; a demo's simulated kubelets
        started every pod with a whole upsert before this, :meth:`upsert_pods`). The mirror still
        writes each pod whole as Kubernetes' watch gives it."""
        if phase in TERMINAL_PHASES or not phase:
            raise ValueError(f"phase {phase!r}: a pod's end is its deletion; accepted: Pending, Running, Unknown")
        calls: list[list[Arg]] = []
        for rec in records:
            if not rec.node:
                raise ValueError(f"pod {rec.namespace}/{rec.name}: not bound, so no kubelet reports its phase")
            calls.append([rec.uid, rec.node, phase, rec.version, _encoder.encode(reported(rec.pod, rec.node, phase))])
        return await self._run(self._set_phase, calls, PODS_PER_CALL)

    async def delete_pods(self, uids: Iterable[str]) -> list[int]:
        """Remove pods; bound ones return their resources in the same step."""
        return await self._run(self._delete_pod, [[uid] for uid in uids], PODS_PER_CALL)

    async def write(self, writes: Sequence[Write]) -> int:
        """Apply simple-object writes and owner changes atomically, under one version."""
        args: list[Arg] = []
        for w in writes:
            if isinstance(w, Put):
                args += ["put", OBJECT_KINDS[type(w.obj)], object_name(w.obj), _encoder.encode(w.obj)]
            elif isinstance(w, Delete):
                args += ["del", w.kind, w.name, ""]
            else:
                args += ["own", Kind.NODE, w.node, w.owner]
        if not args:
            return await self.version()
        return (await self._run(self._put_objects, [args]))[0]

    # -- scheduling reasons (written by the schedulers, read by status and Events) ------

    async def set_reasons(self, scheduler: str, reasons: Mapping[str, str]) -> None:
        """Why each of these pods is still pending, in the scheduler's words."""
        if reasons:
            await self.client.hset(self.keys.reasons(scheduler), mapping={k: v for k, v in reasons.items()})

    async def clear_reasons(self, scheduler: str, uids: Sequence[str]) -> None:
        if uids:
            await self.client.hdel(self.keys.reasons(scheduler), *uids)

    async def reasons(self, scheduler: str) -> dict[str, str]:
        raw: dict[bytes, bytes] = await self.client.hgetall(self.keys.reasons(scheduler))  # type: ignore[assignment]
        return {k.decode(): v.decode() for k, v in raw.items()}

    # -- reads ----------------------------------------------------------------------

    async def version(self) -> int:
        """The cluster's current resourceVersion."""
        return int(await self.client.get(self.keys.rv) or 0)

    async def head(self) -> tuple[str, int]:
        """The store's epoch ('' before its first write) and current resourceVersion, read together."""
        pipe = self.client.pipeline(transaction=True)
        pipe.get(self.keys.epoch)
        pipe.get(self.keys.rv)
        epoch, version = await pipe.execute()
        return (epoch or b"").decode(), int(version or 0)

    async def new_epoch(self) -> str:
        """Start a new epoch (the store may not follow from what its readers hold): they list again."""
        await self._new_epoch.call(self.client, [self.keys.rv], self._head)
        return (await self.head())[0]

    async def names(self, kind: Kind) -> list[str]:
        return sorted(_decoded(await self.client.smembers(self.keys.index(kind))))

    async def _hashes(self, kind: Kind, names: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The objects' hashes ({} for one that is gone), in one round trip. Packed as the scripts'
        calls are (:func:`call_packed`), not through redis-py's pipeline: 200 pods' hashes in 2.3 ms
        instead of 3.3 (the same replies) — every informer's fetch of what changed goes this way."""
        if not names:
            return []
        return await call_packed(self.client, [("HGETALL", self.keys.object(kind, name)) for name in names])

    async def get_nodes(self, names: Sequence[str]) -> dict[str, NodeRecord]:
        """Records of the named nodes that exist."""
        hashes = await self._hashes(Kind.NODE, names)
        return {n: node_record(n, h) for n, h in zip(names, hashes) if h}

    async def list_nodes(self) -> list[NodeRecord]:
        return list((await self.get_nodes(await self.names(Kind.NODE))).values())

    async def get_pods(self, uids: Sequence[str]) -> dict[str, PodRecord]:
        hashes = await self._hashes(Kind.POD, uids)
        return {u: pod_record(u, h) for u, h in zip(uids, hashes) if h}

    async def list_pods(self) -> list[PodRecord]:
        return list((await self.get_pods(await self.names(Kind.POD))).values())

    async def pending(self, scheduler: str) -> list[str]:
        """Uids of the pending pods of a scheduler, oldest first."""
        return _decoded(await self.client.zrange(self.keys.pending(scheduler), 0, -1))

    async def get_objects(self, cls: type[ObjectT], names: Sequence[str]) -> dict[str, ObjectT]:
        decoder = msgspec.msgpack.Decoder(cls)
        hashes = await self._hashes(OBJECT_KINDS[cls], names)
        return {n: decoder.decode(h[b"spec"]) for n, h in zip(names, hashes) if h}

    async def list_objects(self, cls: type[ObjectT]) -> dict[str, ObjectT]:
        return await self.get_objects(cls, await self.names(OBJECT_KINDS[cls]))

    async def owners(self) -> Mapping[str, str]:
        """Owner of every node ('' when unowned)."""
        names = await self.names(Kind.NODE)
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hget(self.keys.node(name), "owner")
        return {n: (o or b"").decode() for n, o in zip(names, await pipe.execute())}
