"""What the schedulers decided, written back to the API server: PodGroup and Queue status, and Events.

The schedulers write status and reasons into the store only; the mirror process carries
them to Kubernetes, so users see them with ``kubectl``:

- a PodGroup's, Queue's or HyperNode's status in the store that differs from the last one the
  API server reported is merge-patched onto its ``/status`` subresource (a HyperNode's says
  whether it is in the topology tree, and why not: a cycle, two parents);
- ``FailedScheduling`` Events (Warning) on each waiting pod with its reason, and on a
  PodGroup whose condition says why it is Unschedulable; ``Scheduled`` (Normal) when a pod
  of a served scheduler is seen bound. An object gets an Event when its reason changes,
  and the same one again at most every ``repeat`` seconds;
- ``NotHonoured`` (Warning) when a served scheduler has bound a pod that asks for something
  caldera's placement does not model yet (pod affinity, topology spread, ...: see
  :mod:`cluster.model.unhonoured`) — once per pod and field, naming the field.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import msgspec
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from cluster.kube.bind import Post
from cluster.kube.connect import KUBE_API_BURST, KUBE_API_QPS
from cluster.kube.pacing import Pacer
from cluster.model.core import Pod
from cluster.model.topology import HyperNode
from cluster.model.unhonoured import notice, unhonoured
from cluster.model.volcano import PodGroup, Queue
from cluster.store.client import STORE_DOWN, Outage
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.store import Store

log = logging.getLogger("caldera.writeback")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
TOPOLOGY = ("topology.volcano.sh", "v1alpha1")
STATUS_KINDS = (Kind.PODGROUP, Kind.QUEUE, Kind.HYPERNODE)
COMPONENT = "caldera"


EVENTS_PER_RUN = 100  # Events one executor job posts, one after another on one connection


def _now(wall: Callable[[], float]) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(wall(), datetime.UTC)


def _event_body(
    namespace: str, name: str, ref: dict[str, Any], type_: str, reason: str, message: str, when: str
) -> dict[str, Any]:
    """A core/v1 Event about ``ref`` as a plain JSON body (what the client would send for a CoreV1Event)."""
    involved = {"kind": ref["kind"], "apiVersion": ref["apiVersion"], "namespace": namespace, "name": name}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": namespace},
        "involvedObject": involved | ({"uid": ref["uid"]} if ref.get("uid") else {}),
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "count": 1,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
    }


class WriteBack:
    def __init__(
        self,
        store: Store,
        api: k8s.ApiClient,
        *,
        schedulers: Sequence[str],
        qps: float = KUBE_API_QPS,
        burst: int = KUBE_API_BURST,
        repeat: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.post = Post(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.schedulers = tuple(schedulers)
        self.pacer = Pacer(qps, burst)
        self.repeat = repeat
        self.clock, self.wall = clock, wall
        self.seen: dict[tuple[Kind, str], Any] = {}  # the status the API server last reported
        self.bound: dict[str, str] = {}  # pod uid -> node, as last seen from the API server
        # object (a pod's uid, else kind/namespace/name) -> reason -> (last event message, when)
        self.said: dict[str, dict[str, tuple[str, float]]] = {}
        self.noted: dict[str, set[str]] = {}  # pod uid -> fields already named in a NotHonoured Event
        self.patched = 0
        self.events = 0
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kube-writeback")
        self._pending: list[tuple[str, str, dict[str, Any], str, str, str]] = []

    # -- what the API server reported (the mirror calls this for every object it applies) --

    def observe(self, kind: Kind, obj: Any) -> None:
        if kind is Kind.PODGROUP and isinstance(obj, PodGroup):
            self.seen[kind, f"{obj.namespace}/{obj.name}"] = obj.status
        elif (kind is Kind.QUEUE and isinstance(obj, Queue)) or (kind is Kind.HYPERNODE and isinstance(obj, HyperNode)):
            self.seen[kind, obj.name] = obj.status
        elif kind is Kind.POD and isinstance(obj, Pod):
            was = self.bound.get(obj.uid)
            self.bound[obj.uid] = obj.node_name
            if obj.node_name and not was and obj.scheduler_name in self.schedulers:
                ref = {"kind": "Pod", "apiVersion": "v1", "uid": obj.uid}
                self._event(
                    obj.namespace,
                    obj.name,
                    ref,
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {obj.namespace}/{obj.name} to {obj.node_name}",
                )
                noted = self.noted.setdefault(obj.uid, set())
                for path in unhonoured(obj):
                    if path not in noted:
                        noted.add(path)
                        self._pending.append(
                            (
                                obj.namespace,
                                obj.name,
                                ref,
                                "Warning",
                                "NotHonoured",
                                f"placed on {obj.node_name}; {notice(path)}",
                            )
                        )

    def forget(self, kind: Kind, name: str) -> None:
        """An object is gone from the cluster (``name``: the store's, a pod's uid): what was kept
        for it goes, so a mirror that sees pods come and go for months does not grow."""
        if kind is Kind.POD:
            self.bound.pop(name, None)
            self.noted.pop(name, None)
            self.said.pop(name, None)
        elif kind is Kind.PODGROUP:
            self.said.pop(f"PodGroup/{name}", None)
        self.seen.pop((kind, name), None)

    # -- the loop ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        informer = Informer(self.store, STATUS_KINDS, block_ms=200)

        async def statuses() -> None:
            async for update in informer.updates():
                for kind, objects in update.objects.items():
                    for name, obj in objects.items():
                        if obj is not None:
                            await self._status(kind, name, obj)

        follower = asyncio.create_task(statuses(), name="writeback-status")
        try:
            outage = Outage(log, "write-back")
            while not stop.is_set():
                try:
                    await self._reasons()
                    outage.ok()
                except STORE_DOWN as e:
                    await asyncio.sleep(outage.failed(e))
                await self._flush()
                await pause(stop, 1.0)
        finally:
            informer.stop()
            await follower
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _call(self, call: Callable[[], Any]) -> bool:
        await self.pacer.take()
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, call)
            return True
        except ApiException as e:
            log.warning("API server refused a write-back (%s %s)", e.status, e.reason)
        except Exception as e:  # a broken connection: the next change or resync writes again
            log.warning("write-back failed: %s", e)
        return False

    async def _status(self, kind: Kind, name: str, obj: Any) -> None:
        if kind not in STATUS_KINDS or self.seen.get((kind, name)) == obj.status:
            return
        if (kind, name) not in self.seen:
            return  # not (yet) in the cluster: nothing to patch
        body = {"status": msgspec.to_builtins(obj.status)}
        if kind is Kind.PODGROUP:
            namespace, _, short = name.partition("/")
            call: Callable[[], Any] = lambda: self.custom.patch_namespaced_custom_object_status(  # noqa: E731
                *VOLCANO, namespace, "podgroups", short, body, _content_type="application/merge-patch+json"
            )
        else:
            group, plural = (VOLCANO, "queues") if kind is Kind.QUEUE else (TOPOLOGY, "hypernodes")
            call = lambda: self.custom.patch_cluster_custom_object_status(  # noqa: E731
                *group, plural, name, body, _content_type="application/merge-patch+json"
            )
        if await self._call(call):
            self.seen[kind, name] = obj.status
            self.patched += 1
        if kind is Kind.PODGROUP and obj.status.conditions and obj.status.conditions[0].type == "Unschedulable":
            self._event(
                obj.namespace,
                obj.name,
                {"kind": "PodGroup", "apiVersion": "/".join(VOLCANO), "uid": obj.metadata.uid},
                "Warning",
                "FailedScheduling",
                obj.status.conditions[0].message,
            )

    async def _reasons(self) -> None:
        for scheduler in self.schedulers:
            reasons = await self.store.reasons(scheduler)
            if not reasons:
                continue
            records = await self.store.get_pods(list(reasons))
            for uid, reason in reasons.items():
                record = records.get(uid)
                if record is not None and not record.node:
                    self._event(
                        record.namespace,
                        record.name,
                        {"kind": "Pod", "apiVersion": "v1", "uid": uid},
                        "Warning",
                        "FailedScheduling",
                        reason,
                    )

    def _event(self, namespace: str, name: str, ref: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an Event unless the object got the same one less than ``repeat`` seconds ago."""
        key = ref["uid"] if ref["kind"] == "Pod" and ref.get("uid") else f"{ref['kind']}/{namespace}/{name}"
        said = self.said.setdefault(key, {})
        last = said.get(reason)
        now = self.clock()
        if last is not None and last[0] == message and now - last[1] < self.repeat:
            return
        said[reason] = (message, now)
        self._pending.append((namespace, name, ref, type_, reason, message))

    async def _flush(self) -> None:
        """Post the queued Events as plain JSON bodies (no client models), in runs of
        :data:`EVENTS_PER_RUN` one after another on one thread — best effort, as kube-scheduler's
        recorder: they never hold more than one of the API server's connections at once. A refused
        Event is counted in the log, not posted again."""
        pending, self._pending = self._pending, []
        when = _now(self.wall).strftime("%Y-%m-%dT%H:%M:%SZ")
        calls = [
            (
                f"/api/v1/namespaces/{quote(namespace, safe='')}/events",
                _event_body(namespace, name, ref, type_, reason, message, when),
            )
            for namespace, name, ref, type_, reason, message in pending
        ]
        loop = asyncio.get_running_loop()
        for i in range(0, len(calls), EVENTS_PER_RUN):
            run = calls[i : i + EVENTS_PER_RUN]
            for _ in run:
                await self.pacer.take()
            statuses = await loop.run_in_executor(self._pool, self.post.many, run)
            refused = [s for s in statuses if s not in (200, 201)]
            self.events += len(run) - len(refused)
            if refused:
                log.warning("%d Events not written (the API server answered %s)", len(refused), refused[0] or "nothing")
