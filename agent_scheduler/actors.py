"""The Ray side of the agent scheduler: workers as Ray actors. The only module that imports ray."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import msgspec
import ray
import redis.asyncio as aioredis

from agent_scheduler.worker import BatchResult, Worker, WorkerConfig
from binder.bind import BindTarget
from binder.commit import Binder
from binder.kube import KubeTarget
from cluster.keys import Keys
from cluster.kube.connect import KubeConnection
from cluster.sim.cluster import SimBindTarget
from cluster.store import Store


class ActorSpec(msgspec.Struct, frozen=True, kw_only=True):
    redis_url: str
    cluster: str
    worker: WorkerConfig
    kube: KubeConnection | None = None  # None: bind in the simulator


@ray.remote(num_cpus=0)
class WorkerActor:
    """Holds one :class:`Worker`; its methods run on the actor's own event loop."""

    def __init__(self, spec: bytes) -> None:
        self.spec = msgspec.msgpack.decode(spec, type=ActorSpec)
        self.worker: Worker | None = None
        self.client: aioredis.Redis | None = None
        self.kube: KubeTarget | None = None

    async def start(self) -> int:
        self.client = aioredis.Redis.from_url(self.spec.redis_url)
        keys = Keys(self.spec.cluster)
        store = Store(self.client, keys)
        core = self.spec.worker.core
        binder = Binder(self.client, keys, core.scheduler, sharding=core.sharding, coarse=self.spec.worker.coarse)
        kube = self.spec.kube
        self.kube = KubeTarget(kube.client(), qps=kube.qps, burst=kube.burst) if kube is not None else None
        target: BindTarget = self.kube if self.kube is not None else SimBindTarget(store)
        self.worker = Worker(store, binder, target, self.spec.worker)
        await self.worker.start()
        return os.getpid()

    async def schedule(self, uids: list[str]) -> bytes:
        assert self.worker is not None, "start() first"
        return msgspec.msgpack.encode(await self.worker.schedule(uids))

    async def stop(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        if self.client is not None:
            await self.client.aclose()
        if self.kube is not None:
            self.kube.close()


class RayWorker:
    """The loop's handle on one actor: ``await schedule(uids)`` with a timeout on every call."""

    def __init__(self, name: str, spec: ActorSpec, *, timeout: float = 30.0) -> None:
        self.name = name
        self.timeout = timeout
        self.actor: Any = WorkerActor.options(name=None, max_concurrency=4).remote(msgspec.msgpack.encode(spec))  # type: ignore[attr-defined]
        self.pid = 0

    async def start(self) -> None:
        self.pid = await asyncio.wait_for(self.actor.start.remote(), timeout=120)

    async def schedule(self, uids: list[str]) -> BatchResult:
        raw = await asyncio.wait_for(self.actor.schedule.remote(uids), timeout=self.timeout)
        return msgspec.msgpack.decode(raw, type=BatchResult)

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.actor.stop.remote(), timeout=5)
        except Exception:  # the actor may already be dead; killing it is what matters
            pass
        ray.kill(self.actor)


def start_ray(address: str, num_cpus: int) -> None:
    """Join ``address`` (a Ray cluster, or ``auto``), or start a local Ray sized to this machine.

    Ray installs its own SIGTERM/SIGINT handlers in the driver; the caller's come back
    afterwards, so that SIGTERM still unwinds the caller (and stops Ray) as it expects.
    """
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=num_cpus, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def stop_ray() -> None:
    ray.shutdown()
