"""The loop with an in-process worker (the same Worker the Ray actors hold): what it remembers."""

from __future__ import annotations

import asyncio
import time

from agent_scheduler.loop import AgentLoop, LoopConfig
from agent_scheduler.worker import Worker, WorkerConfig
from binder.commit import Binder
from cluster.sim.cluster import SimBindTarget
from cluster.sim.workload import make_pod
from cluster.store import Store
from tests.builders import node


async def test_a_long_running_loop_forgets_pods_once_they_are_gone(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i}", cpu="16") for i in range(4)])
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    worker.name = "w0"  # type: ignore[attr-defined]
    loop = AgentLoop(store, [worker], LoopConfig())  # type: ignore[list-item]
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(20)]
        await store.upsert_pods(pods)
        deadline = time.monotonic() + 20
        while len(loop.bound) < 20:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert loop.stats()["bound"] == 20
        await store.delete_pods([p.uid for p in pods])  # they finished
        while loop.bound or loop.bound_at:
            assert time.monotonic() < deadline, len(loop.bound)
            await asyncio.sleep(0.05)
        assert loop.stats()["bound"] == 20  # the count of pods bound stays
    finally:
        stop.set()
        await runner
        await worker.stop()
