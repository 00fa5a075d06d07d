"""The agent scheduler end to end: real redis-server, real local Ray, the simulator."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator

import msgspec
import psutil
import pytest
import ray
from prometheus_client import CollectorRegistry

from agent_scheduler.actors import ActorSpec, RayWorker
from agent_scheduler.core import CoreConfig
from agent_scheduler.loop import AgentLoop, LoopConfig
from agent_scheduler.metrics import AgentMetrics
from agent_scheduler.worker import WorkerConfig
from binder.metrics import BinderMetrics
from cluster.model.core import Pod
from cluster.model.sharding import ShardingMode
from cluster.runtime.redis_server import RedisServer
from cluster.sim.cluster import SimCluster
from cluster.store.audit import audit
from cluster.store.store import Own, Store
from tests.builders import node, pod

AGENT = "agent-scheduler"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def picky(name: str) -> Pod:
    """A pod whose nodeSelector no node satisfies."""
    p = pod(name, cpu="100m", scheduler=AGENT)
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_selector={"disk": "nvme-none"}))


async def run_until(loop: AgentLoop, store: Store, done, timeout: float, during=None) -> None:  # type: ignore[no-untyped-def]
    stop = asyncio.Event()
    sim = SimCluster(store)
    tasks = [asyncio.create_task(loop.run(stop)), asyncio.create_task(sim.run())]
    try:
        deadline = time.monotonic() + timeout
        while not await done():
            assert time.monotonic() < deadline, f"not done in {timeout}s; queue {loop.queue.depth()}"
            if during is not None:
                await during()
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        sim.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)


async def ray_workers(store: Store, redis_server: RedisServer, cores: list[CoreConfig]) -> list[RayWorker]:
    """One started Ray worker per core config, named w0, w1, …"""
    handles = [
        RayWorker(
            f"w{i}",
            ActorSpec(redis_url=redis_server.url, cluster=store.keys.cluster, worker=WorkerConfig(core=core, seed=i)),
        )
        for i, core in enumerate(cores)
    ]
    await asyncio.gather(*(h.start() for h in handles))
    return handles


async def bind_all(loop: AgentLoop, store: Store, handles: list[RayWorker], pods: int, timeout: float) -> None:
    """Run the loop until it bound ``pods`` pods, then stop the workers."""

    async def all_bound() -> bool:
        return len(loop.bound) >= pods

    try:
        await run_until(loop, store, all_bound, timeout=timeout)
    finally:
        await asyncio.gather(*(h.stop() for h in handles))


async def test_two_workers_place_2000_pods_on_their_shard_and_explain_the_rest(
    local_ray: None, store: Store, redis_server: RedisServer
) -> None:
    await store.upsert_nodes([node(f"n{i:03d}", cpu="16", memory="64Gi") for i in range(200)])
    await store.write([Own(f"n{i:03d}", AGENT if i < 150 else "volcano") for i in range(200)])
    pods = [pod(f"a{i}", cpu="500m", memory="1Gi", scheduler=AGENT) for i in range(2000)]
    await store.upsert_pods(pods)
    await store.upsert_pods([picky(f"picky{i}") for i in range(3)])
    handles = await ray_workers(store, redis_server, [CoreConfig(sharding=ShardingMode.HARD)] * 2)
    registry = CollectorRegistry()
    loop = AgentLoop(
        store,
        handles,
        LoopConfig(batch_size=64),
        metrics=AgentMetrics(registry),
        binder_metrics=BinderMetrics(registry),
    )
    await bind_all(loop, store, handles, 2000, timeout=120)
    records = await store.list_pods()
    placed = {r.name: r.node for r in records if r.node}
    assert len(placed) == 2000
    assert all(int(n[1:]) < 150 for n in placed.values()), "a pod landed outside the agent shard in hard mode"
    assert await audit(store) == []
    reasons = await store.reasons(AGENT)
    picky_uids = [r.uid for r in records if r.name.startswith("picky")]
    assert set(picky_uids) <= set(reasons)
    assert all("node affinity/selector" in reasons[u] for u in picky_uids), reasons
    assert not set(placed) & {"picky0", "picky1", "picky2"}
    sample = registry.get_sample_value
    assert sample("volcano_schedule_attempts_total", {"result": "scheduled"}) == 2000
    assert (sample("volcano_schedule_attempts_total", {"result": "unschedulable"}) or 0) >= 3
    assert sample("volcano_e2e_scheduling_latency_milliseconds_count") == 2000
    assert sample("caldera_binder_commits_total", {"result": "committed"}) == 2000
    # The workers commit in their own processes; their round trips and releases reach the loop's metrics.
    assert (sample("caldera_binder_commit_duration_seconds_count") or 0) > 0
    assert sample("caldera_binder_releases_total") == 0  # every bind worked
    # Where each pod's time went, stage by stage: every pod counted in every stage it went through
    # (a pod handed out twice counts twice). These pods were listed, not brought by the feed: no feed
    # stage (tests/agent_scheduler/test_loop.py has one).
    stages = loop.stats().stages
    for stage in ("queue", "handoff", "decide", "commit", "bind", "reply"):
        assert sample("caldera_agent_stage_seconds_count", {"stage": stage}) == stages[stage].pods >= 2000, stage
    assert (sample("caldera_agent_stage_seconds_sum", {"stage": "bind"}) or 0) > 0
    assert 1000 <= stages["observed"].pods <= 2000  # bound pods seen back on the feed before the loop stopped
    assert sample("caldera_agent_queue_depth", {"queue": "backoff"}) is not None
    assert (sample("caldera_agent_batch_duration_seconds_count", {"worker": "w0"}) or 0) > 0


async def test_ray_workers_hand_over_pods_with_room_only_in_the_others_partition(
    local_ray: None, store: Store, redis_server: RedisServer
) -> None:
    """Two Ray workers, each with its partition of the nodes (crc32 of the name, mod 2); only
    worker 1's nodes have room for the pods. Worker 0's share is handed over to worker 1 through the
    loop (the answer's worker index, the next call's pods to keep, over Redis): every pod bound on
    worker 1's nodes, none of its commits refused, the hand-overs counted in the metric."""
    names = [f"n{i:03d}" for i in range(40)]
    roomy = [n for n in names if zlib.crc32(n.encode()) % 2 == 1]
    await store.upsert_nodes([node(n, cpu="32" if n in roomy else "1", memory="64Gi") for n in names])
    await store.upsert_pods([pod(f"h{i}", cpu="2", memory="1Gi", scheduler=AGENT) for i in range(200)])
    handles = await ray_workers(store, redis_server, [CoreConfig(worker=i, workers=2) for i in range(2)])
    registry = CollectorRegistry()
    loop = AgentLoop(store, handles, LoopConfig(batch_size=32), metrics=AgentMetrics(registry))
    await bind_all(loop, store, handles, 200, timeout=60)
    placed = [r.node for r in await store.list_pods() if r.node]
    assert len(placed) == 200 and set(placed) <= set(roomy)
    assert loop.totals["conflicts"] == 0 and loop.totals["handed_over"] > 0
    assert registry.get_sample_value("caldera_agent_handovers_total") == loop.totals["handed_over"]
    assert await audit(store) == []


async def test_a_worker_killed_mid_run_loses_nothing_and_is_restarted(
    local_ray: None, store: Store, redis_server: RedisServer
) -> None:
    await store.upsert_nodes([node(f"n{i:03d}", cpu="16", memory="64Gi") for i in range(100)])
    await store.upsert_pods([pod(f"k{i}", cpu="250m", memory="512Mi", scheduler=AGENT) for i in range(3000)])
    handles = [
        RayWorker(
            f"w{i}", ActorSpec(redis_url=redis_server.url, cluster=store.keys.cluster, worker=WorkerConfig(seed=i))
        )
        for i in range(3)
    ]
    await asyncio.gather(*(h.start() for h in handles))
    loop = AgentLoop(store, handles, LoopConfig(batch_size=16))
    killed = []

    async def kill_one() -> None:
        if not killed and len(loop.bound) > 300:
            ray.kill(handles[0].actor)
            killed.append(handles[0].name)

    async def all_bound() -> bool:
        return sum(1 for r in await store.list_pods() if r.node) >= 3000 and not any(loop.queue.depth().values())

    try:
        await run_until(loop, store, all_bound, timeout=120, during=kill_one)
        # Before stop(): a stopped handle's actor ends its serve call and counts as not alive.
        alive_at_end = handles[0].alive
    finally:
        await asyncio.gather(*(h.stop() for h in handles))
    assert killed and loop.failed_workers == [] and loop.restarts == {"w0": 1}  # a new actor took its place
    assert alive_at_end and handles[0].restarts == 1
    records = await store.list_pods()
    assert len([r for r in records if r.node]) == 3000
    assert all(r.phase == "Running" for r in records), "every committed pod was bound (the simulator started it)"
    assert await store.pending(AGENT) == []
    assert await audit(store) == []


def test_sigterm_stops_the_process_ray_and_every_child(redis_server: RedisServer) -> None:
    """Started without --workers (auto: one worker per core beyond one), it stops on SIGTERM with every child."""
    from agent_scheduler.main import auto_workers

    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caldera",
            "agent-scheduler",
            "--redis-url",
            redis_server.url,
            "--cluster",
            "sigterm",
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        seen = ""
        while "workers ready" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen + (
                proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
            )
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        ready = re.search(r" (\d+) workers ready \(auto, of (\d+) CPUs\)", seen)
        assert ready and int(ready[1]) == auto_workers(int(ready[2])) and int(ready[2]) <= (os.cpu_count() or 1), seen
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "Ray's processes should be children of the scheduler"
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [p.info if hasattr(p, "info") else p.pid for p in alive]
    assert took < 15, took


def test_a_dead_raylet_makes_the_process_exit_1_in_one_line_leaving_no_child(redis_server: RedisServer) -> None:
    """Its local Ray is gone for good (every worker with it): the process says so and exits, for its
    Deployment to start it again with a new Ray — not six minutes of actors failing to start."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    argv = [sys.executable, "-m", "caldera", "agent-scheduler", "--redis-url", redis_server.url]
    argv += ["--cluster", "raylet", "--metrics-port", "0", "--workers", "1"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 90
        seen = ""
        while "workers ready" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        children = psutil.Process(proc.pid).children(recursive=True)
        raylet = next(p for p in children if p.name() == "raylet")
        raylet.kill()
        start = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1] == (
        f"caldera agent-scheduler: error: Ray's raylet (pid {raylet.pid}) died: exiting to be started again"
    )
    assert took < 30, took
    _, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [(p.pid, p.name()) for p in alive]
