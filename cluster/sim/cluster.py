"""The simulated cluster: plays Kubernetes' kubelets against the store.

It watches the feed for pods the binder committed, marks them Running (as a kubelet
reports a pod's phase: :meth:`Store.set_phases`), and when a pod's duration is up
deletes it, which returns its resources in the same atomic script. It never decides
placements.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Sequence

import msgspec

from cluster.model.binding import Binding, Eviction, Failure, GateLift
from cluster.sim.pods import pod_duration
from cluster.store.informer import Informer
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.records import Update
from cluster.store.scripts import Script
from cluster.store.store import Store


class SimCluster:
    """Starts committed pods and ends them after their duration."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.monotonic,
        observers: Sequence[Callable[[Update], None]] = (),
    ) -> None:
        """``observers``: each is handed every update of the pods this simulator reads, as it reads it (the
        demo's tracker follows the pods this way rather than fetching and decoding every change again)."""
        self.store = store
        self.clock = clock
        self.observers = list(observers)
        self.started = 0
        self.completed = 0
        self._due: list[tuple[float, str]] = []
        self._wake = asyncio.Event()
        self._informer = Informer(self.store, [Kind.POD], block_ms=200)
        self._stopping = False

    def stop(self) -> None:
        """Make :meth:`run` return within a fraction of a second."""
        self._stopping = True
        self._informer.stop()
        self._wake.set()

    async def run(self) -> None:
        """Run until stopped."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._start_pods(), name="sim-start-pods")
            tg.create_task(self._complete_pods(), name="sim-complete-pods")

    async def _start_pods(self) -> None:
        async for update in self._informer.updates():
            for observe in self.observers:
                observe(update)
            starting = [r for r in update.pods.values() if r is not None and r.node and r.phase == "Pending"]
            if not starting:
                continue
            await self.store.set_phases(starting, "Running")
            now = self.clock()
            for r in starting:
                duration = pod_duration(r.pod)
                if duration is not None:
                    heapq.heappush(self._due, (now + duration, r.uid))
            self.started += len(starting)
            self._wake.set()

    async def _complete_pods(self) -> None:
        while not self._stopping:
            now = self.clock()
            done = []
            while self._due and self._due[0][0] <= now:
                done.append(heapq.heappop(self._due)[1])
            if done:
                await self.store.delete_pods(done)
                self.completed += len(done)
            wait = min(self._due[0][0] - now, 0.05) if self._due else 0.05
            self._wake.clear()
            await pause(self._wake, max(wait, 0.001))


class SimBindTarget:
    """The simulator's ``pods/binding``: it works while the pod still exists, bound as committed.

    ``annotations``: what each bind wrote on its pod (GPU cards for the device plugins), by uid."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.annotations: dict[str, dict[str, str]] = {}
        self._nodes = Script("cluster.store", "pod_nodes")  # one round trip for the whole batch

    async def bind(self, bindings: Sequence[Binding]) -> list[Failure | None]:
        if not bindings:
            return []
        nodes = await self._nodes.call(
            self.store.client, [self.store.keys.rv], [self.store.keys.prefix, 0, *(b.uid for b in bindings)]
        )
        out: list[Failure | None] = []
        for b, node in zip(bindings, nodes):
            if node is None:
                out.append(Failure(reason="pod not found"))
            elif node.decode() != b.node:
                out.append(Failure(reason=f"pod is bound to {node.decode()!r}"))
            else:
                out.append(None)
                if b.annotations:
                    self.annotations[b.uid] = dict(b.annotations)
                    if len(self.annotations) > 10_000:  # the newest are what a reader wants
                        del self.annotations[next(iter(self.annotations))]
        return out


class SimEvictor:
    """The simulator's eviction: the pod terminates at once, and its deletion releases its resources."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.evicted = 0

    async def evict(self, evictions: Sequence[Eviction]) -> list[Failure | None]:
        versions = await self.store.delete_pods([e.uid for e in evictions])
        self.evicted += sum(1 for v in versions if v)
        return [None if v else Failure(reason="pod not found") for v in versions]

    async def lift_gates(self, lifts: Sequence[GateLift]) -> list[Failure | None]:
        """The simulator's pod patch: the pod's record without the gate."""
        found = await self.store.get_pods([g.uid for g in lifts])
        out: list[Failure | None] = []
        changed = []
        for g in lifts:
            rec = found.get(g.uid)
            if rec is None:
                out.append(Failure(reason="pod not found"))
                continue
            gates = [x for x in rec.pod.spec.scheduling_gates if x.name != g.gate]
            changed.append(
                msgspec.structs.replace(rec.pod, spec=msgspec.structs.replace(rec.pod.spec, scheduling_gates=gates))
            )
            out.append(None)
        if changed:
            await self.store.upsert_pods(changed)
        return out
