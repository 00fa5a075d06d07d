"""The Ray side of the agent scheduler: workers as Ray actors. The only module that imports ray.

Ray runs the workers (placement, restarts on a Ray cluster, death notices); the batches
themselves travel through Redis lists, not Ray calls: a Ray call costs several times a
list push and a blocking pop (the README gives the figures), and would be paid twice per batch. Each worker's actor runs one long ``serve`` call for its whole life: it
pops batches from its inbox list, schedules them (up to ``CONCURRENCY`` at once) and
pushes each answer to the loop's outbox list. When the actor dies, that call fails at
once, and every batch in flight on it fails with it, so the loop hands those pods to the
other workers as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec
import psutil
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from agent_scheduler.outcome import BatchResult
from agent_scheduler.pod_context import PlacedRef
from agent_scheduler.worker import Worker, WorkerConfig
from binder.bind import BindTarget
from binder.commit import Binder
from cluster.kube.bind import KubeTarget
from cluster.kube.connect import KubeConnection
from cluster.model.memo import Memo
from cluster.model.resources import Resources
from cluster.runtime import heap
from cluster.sim.cluster import SimBindTarget
from cluster.store.client import STORE_DOWN, Client, Outage, connect
from cluster.store.keys import Keys
from cluster.store.pause import pause, within
from cluster.store.records import PodRecord
from cluster.store.store import Store

CONCURRENCY = 4  # batches one worker works on at once (its I/O overlaps)
RESTART_TIMEOUT_S = 30.0  # a new actor in place of a dead one, on a Ray that is up
READ_STOP_S = 5.0  # a handle's answer reader and actor watcher end this soon after it drops its actor
log = logging.getLogger("caldera.agent")


class ActorSpec(msgspec.Struct, frozen=True, kw_only=True):
    redis_url: str
    cluster: str
    worker: WorkerConfig
    kube: KubeConnection | None = None  # None: bind in the simulator


class Call(msgspec.Struct, frozen=True, array_like=True):
    id: int
    pods: list[PodRecord]
    context: list[PlacedRef] = msgspec.field(default_factory=list)  # what the pods' inter-pod rules see
    namespaces: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)  # their namespaces' labels
    keep: list[str] = msgspec.field(default_factory=list)  # pods handed over to this worker already


# msgspec's hooks for the one field type it does not know; NotImplementedError is how a
# hook says "not mine" to msgspec.
def _encode_resources(value: Any) -> Any:
    if isinstance(value, Resources):
        return dict(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def _decode_resources(kind: type, value: Any) -> Any:
    if kind is Resources:
        try:
            return _RESOURCES.get(tuple(value.items()), lambda: Resources(value))
        except (AttributeError, TypeError):  # not a map of hashables: Resources says what is wrong
            return Resources(value)
    raise NotImplementedError(f"cannot decode {kind.__name__}")


_RESOURCES: Memo[Resources] = Memo()
"""Resources already decoded, by their items as sent (Resources are immutable; a batch's pods repeat a
few requests). Each pod of a batch carries two (its request and its cards): made anew each time, a
213-pod batch took 1.22 ms to decode (in a process settled as the worker's is, ``heap.settle``) before
the worker could start on it; looked up, 0.54 ms."""


CALLS = msgspec.msgpack.Encoder(enc_hook=_encode_resources)


class Answer(msgspec.Struct, frozen=True, array_like=True):
    id: int
    result: BatchResult | None
    error: str = ""


@ray.remote(num_cpus=0)
class WorkerActor:
    """Holds one :class:`Worker`; its methods run on the actor's own event loop."""

    def __init__(self, spec: bytes, binder: type[Binder] = Binder) -> None:
        self.spec = msgspec.msgpack.decode(spec, type=ActorSpec)
        self.binder = binder
        self.worker: Worker | None = None
        self.client: Client | None = None
        self.kube: KubeTarget | None = None
        self.stopping = asyncio.Event()

    async def start(self) -> tuple[int, str]:
        """Start the worker; the actor's pid and the Ray node (raylet) it runs on."""
        self.client = connect(self.spec.redis_url)
        keys = Keys(self.spec.cluster)
        store = Store(self.client, keys)
        core = self.spec.worker.core
        binder = self.binder(self.client, keys, core.scheduler, sharding=core.sharding)
        kube = self.spec.kube
        self.kube = KubeTarget(kube.client(), qps=kube.qps, burst=kube.burst) if kube is not None else None
        target: BindTarget = self.kube if self.kube is not None else SimBindTarget(store)
        self.worker = Worker(store, binder, target, self.spec.worker)
        await self.worker.start()
        heap.settle()  # the actor's process: Ray's, numpy's and the worker's replica, out of the collector's way
        return os.getpid(), ray.get_runtime_context().get_node_id()

    async def serve(self, inbox: str, outbox: str) -> None:
        """Answer the batches pushed to ``inbox`` into ``outbox`` until :meth:`stop`."""
        assert self.worker is not None and self.client is not None, "start() first"
        blocking = connect(self.spec.redis_url)  # a blocking pop holds its connection
        slots = asyncio.Semaphore(CONCURRENCY)
        running: set[asyncio.Task[None]] = set()
        decoder = msgspec.msgpack.Decoder(Call, dec_hook=_decode_resources)
        outage = Outage(log, "worker inbox")
        try:
            while not self.stopping.is_set():
                try:
                    item = await blocking.blpop([inbox], timeout=0.5)
                    outage.ok()
                except STORE_DOWN as e:  # the loop gives the batches lost with it to the others
                    await asyncio.sleep(outage.failed(e))
                    continue
                if item is None:
                    continue
                payload = item[1]
                assert isinstance(payload, bytes)  # no decode_responses on this client
                await slots.acquire()
                task = asyncio.create_task(self._answer(decoder.decode(payload), outbox, slots))
                running.add(task)
                task.add_done_callback(running.discard)
            if running:
                await asyncio.wait(running)
        finally:
            await blocking.aclose()

    async def _answer(self, call: Call, outbox: str, slots: asyncio.Semaphore) -> None:
        assert self.worker is not None and self.client is not None
        try:
            answer = Answer(call.id, await self.worker.schedule(call.pods, call.context, call.namespaces, call.keep))
        except Exception as e:  # the loop requeues the batch
            answer = Answer(call.id, None, f"{type(e).__name__}: {e}")
        finally:
            slots.release()
        with contextlib.suppress(*STORE_DOWN):  # lost: the loop's wait for it times out and requeues the batch
            await self.client.rpush(outbox, msgspec.msgpack.encode(answer))

    async def stop(self) -> None:
        self.stopping.set()
        if self.worker is not None:
            await self.worker.stop()
        if self.client is not None:
            await self.client.aclose()
        if self.kube is not None:
            self.kube.close()


class WorkerFailed(RuntimeError):
    """The worker's actor died or could not schedule a batch."""


def placement(index: int) -> Any:
    """Where worker ``index`` runs: on a Ray cluster of several raylets, the alive ones in turn (by
    node id); on one raylet, Ray's default. Ray would otherwise put actors that ask for no CPU on the
    driver's node: SPREAD and soft node affinity both fell back to it while the other raylet was
    still starting a worker process. Strict: an actor whose raylet died fails, and its restart
    places the new actor among the raylets alive then."""
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))  # type: ignore[no-untyped-call]
    if len(nodes) < 2:
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_id=nodes[index % len(nodes)], soft=False)


class RayWorker:
    """The loop's handle on one actor: ``await schedule(pods)``, with a timeout on every call.

    Batches go to the actor's inbox list and answers come back on this handle's outbox
    list (both named per actor, so a restarted actor or process never reads an old batch);
    the actor's ``serve`` call, awaited here, says when the actor dies — then
    :meth:`restart` puts a new actor in its place.
    """

    def __init__(self, name: str, spec: ActorSpec, *, timeout: float = 30.0, binder: type[Binder] = Binder) -> None:
        """``binder``: the class the actor commits through (a subclass of :class:`Binder`)."""
        self.name = name
        self.timeout = timeout
        self.spec = spec
        self.binder = binder
        self.pid = 0
        self.node_id = ""  # the Ray node (raylet) the actor runs on
        self.ids = itertools.count()
        self.waiting: dict[int, asyncio.Future[BatchResult]] = {}
        self.client: Client | None = None
        self.tasks: list[asyncio.Task[None]] = []  # the answers' reader, the actor's watcher
        self._reading = asyncio.Event()  # set: the reader stops
        self.failure: WorkerFailed | None = None
        self.restarts = 0
        self._restarting = asyncio.Lock()
        self._new_actor()

    def _new_actor(self) -> None:
        self.actor: Any = WorkerActor.options(  # type: ignore[attr-defined]
            name=None, max_concurrency=CONCURRENCY + 4, scheduling_strategy=placement(self.spec.worker.core.worker)
        ).remote(msgspec.msgpack.encode(self.spec), self.binder)
        token = uuid.uuid4().hex[:12]
        keys = Keys(self.spec.cluster)
        self.inbox, self.outbox = keys.agent_inbox(self.name, token), keys.agent_outbox(self.name, token)

    @property
    def alive(self) -> bool:
        """False once the actor died (or stopped): :meth:`restart` brings a new one."""
        return self.failure is None

    async def start(self, timeout: float = 120.0) -> None:
        """The actor's start (``timeout``: a first start waits for Ray to come up)."""
        self.pid, self.node_id = await asyncio.wait_for(self.actor.start.remote(), timeout=timeout)
        if self.client is None:
            self.client = connect(self.spec.redis_url)
        serving = self.actor.serve.remote(self.inbox, self.outbox)
        self._reading = asyncio.Event()
        self.tasks = [
            asyncio.create_task(self._read(self._reading), name=f"worker-{self.name}-answers"),
            asyncio.create_task(self._watch(serving), name=f"worker-{self.name}-watch"),
        ]

    async def restart(self) -> None:
        """A new actor in place of a dead one (once, however many of the loop's tasks ask);
        raises :class:`WorkerFailed` when it cannot be started (Ray itself is gone)."""
        async with self._restarting:
            if self.alive:
                return  # another task restarted it meanwhile
            await self._drop()
            self._new_actor()
            try:
                await self.start(timeout=RESTART_TIMEOUT_S)
            except Exception as e:
                raise WorkerFailed(f"worker {self.name} could not be started again: {type(e).__name__}: {e}") from e
            self.failure = None
            self.restarts += 1

    async def _watch(self, serving: Any) -> None:
        """The actor's ``serve`` call ends only when the actor stops or dies."""
        try:
            await serving
            self._fail(WorkerFailed(f"worker {self.name} stopped"))
        except Exception as e:
            self._fail(WorkerFailed(f"worker {self.name} died: {type(e).__name__}"))

    def _fail(self, error: WorkerFailed) -> None:
        self.failure = error
        self._cut(error)

    def _cut(self, error: WorkerFailed) -> None:
        """Every batch waiting for an answer fails with ``error`` (the loop hands it back to the queue)."""
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)

    async def _read(self, stop: asyncio.Event) -> None:
        """The answers from the outbox, until ``stop`` (within one blocking pop).

        Ended by the flag, not by a cancel: a cancel that lands inside redis-py's read of the
        blocking pop can be lost (the task then pops on forever, "cancelling"), and whoever
        awaited it — a restart — with it (seen about one run in eight of the killed-worker test)."""
        blocking = connect(self.spec.redis_url)
        decoder = msgspec.msgpack.Decoder(Answer)
        outage = Outage(log, f"worker {self.name} answers")
        outbox = self.outbox
        try:
            while not stop.is_set():
                try:
                    item = await blocking.blpop([outbox], timeout=1)
                    outage.ok()
                except STORE_DOWN as e:
                    # Batches and answers in the store may be lost with it: hand the batches back now.
                    self._cut(WorkerFailed(f"worker {self.name}: the store did not answer ({type(e).__name__})"))
                    await asyncio.sleep(outage.failed(e))
                    continue
                if item is None:
                    continue
                payload = item[1]
                assert isinstance(payload, bytes)  # no decode_responses on this client
                answer = decoder.decode(payload)
                future = self.waiting.get(answer.id)
                if future is None or future.done():
                    continue
                if answer.result is None:
                    future.set_exception(WorkerFailed(f"worker {self.name}: {answer.error}"))
                else:
                    future.set_result(answer.result)
        finally:
            await blocking.aclose()

    async def schedule(
        self,
        pods: list[PodRecord],
        context: Sequence[PlacedRef] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        keep: Collection[str] = (),
    ) -> BatchResult:
        if self.failure is not None:
            raise self.failure
        assert self.client is not None, "start() first"
        call = Call(
            next(self.ids), pods, list(context), {k: dict(v) for k, v in (namespaces or {}).items()}, list(keep)
        )
        future: asyncio.Future[BatchResult] = asyncio.get_running_loop().create_future()
        self.waiting[call.id] = future
        try:
            await self.client.rpush(self.inbox, CALLS.encode(call))
            return await within(future, self.timeout)
        finally:
            del self.waiting[call.id]

    async def _drop(self) -> None:
        """End this handle's actor and its tasks; its lists go from the store."""
        # The actor may already be dead; killing it is what matters.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.actor.stop.remote(), timeout=5)
        with contextlib.suppress(Exception):
            ray.kill(self.actor)
        self._reading.set()  # the reader ends by its flag within one blocking pop (see _read)
        for task in self.tasks[1:]:  # the actor's watcher
            task.cancel()
        late: set[asyncio.Task[None]] = set()
        if self.tasks:
            _, late = await asyncio.wait(self.tasks, timeout=READ_STOP_S)
        for task in late:  # not expected: cancel it, and go on without it
            log.warning("worker %s: %s did not end in %.0f s; cancelled", self.name, task.get_name(), READ_STOP_S)
            task.cancel()
        if self.client is not None:
            with contextlib.suppress(*STORE_DOWN):
                await self.client.delete(self.inbox, self.outbox)

    async def stop(self) -> None:
        await self._drop()
        if self.client is not None:
            await self.client.aclose()


def start_ray(address: str, num_cpus: int | None = None) -> None:
    """Join ``address`` (a Ray cluster, or ``auto``), or start a local Ray with ``num_cpus`` (None: as many
    as Ray finds — this machine's cores, or a container's CPU limit).

    Ray installs its own SIGTERM/SIGINT handlers in the driver; the caller's come back
    afterwards, so that SIGTERM still unwinds the caller (and stops Ray) as it expects.
    """
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        # The workers do the scheduling: they run at the loop's priority, not at the nice 15 Ray gives
        # its workers by default (on a busy host that starved them; bench api: ~20% fewer pods/s).
        os.environ.setdefault("RAY_worker_niceness", "0")
        # address="local": a Ray of its own even where `ray start` left a cluster running on this
        # machine (ray.init without an address joins that one, and refuses num_cpus).
        ray.init(
            address="local", num_cpus=num_cpus, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False
        )
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def ray_cpus() -> int:
    """The CPUs of the Ray this process started or joined (a local one has this machine's)."""
    return int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]


RAY_DAEMONS = ("raylet", "gcs_server")
"""The processes a local Ray lives by: when one dies, its actors die with it soon and none can be
started again."""


def local_ray_daemons() -> list[psutil.Process]:
    """The raylet and GCS of the local Ray this process started ([] when it joined a cluster)."""
    return [p for p in psutil.Process().children(recursive=True) if p.name() in RAY_DAEMONS]


async def watch_ray(stop: asyncio.Event, every: float = 1.0) -> str:
    """Until ``stop`` (''), or until a daemon of the local Ray this process started dies: then what
    died, in a few words. The daemons are looked for until both are seen (a loaded machine may
    list them late)."""
    daemons: dict[str, psutil.Process] = {}
    while not stop.is_set():
        if len(daemons) < len(RAY_DAEMONS):
            daemons |= {p.name(): p for p in local_ray_daemons() if p.name() not in daemons}
        for p in daemons.values():
            try:
                alive = p.is_running() and p.status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                alive = False
            if not alive:
                return f"Ray's {p.name()} (pid {p.pid}) died"
        await pause(stop, every)
    return ""


def stop_ray() -> None:
    """Disconnect from Ray; a local Ray this process started is stopped, and its processes
    (raylet, GCS, monitor, log monitor, workers) have exited when this returns, so that a
    process stopped by SIGTERM leaves none of them behind."""
    ray.shutdown(wait_for_processes=True)
