"""The sharding controller against a real redis-server: bands, event trigger, hand-off, process."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import redis.asyncio as aioredis

from binder.commit import Binder
from binder.results import Committed, Placement, Reason, Rejected
from cluster.model.sharding import ShardingMode
from cluster.model.volcano import NodeShard
from cluster.runtime.redis_server import RedisServer
from cluster.store.audit import audit
from cluster.store.lease import RedisLease
from cluster.store.store import Store
from sharding.config import parse_scheduler_configs
from sharding.controller import ControllerConfig, ShardingController
from tests.builders import node, pod

CONFIGS = "volcano:volcano:0.0:0.6:false:2:100,agent-scheduler:agent:0.7:1.0:true:2:100"


async def owners(store: Store) -> dict[str, str]:
    return dict(await store.owners())


async def wait_for(predicate, timeout: float = 10.0) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if await predicate():
            return time.monotonic() - start
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


async def fill(store: Store, name: str, cpu: str, tag: str) -> None:
    """Load lands on the node: a pod submitted to the simulated cluster and committed there through the binder."""
    p = pod(f"fill-{name}-{tag}", cpu=cpu, scheduler="agent-scheduler")
    await store.upsert_pods([p])
    [r] = await Binder(store.client, store.keys, "agent-scheduler").commit(
        [Placement(uid=p.uid, node=name, request=p.request(), version=0)]
    )
    assert isinstance(r, Committed)


async def test_nodes_filled_by_load_move_to_the_agent_shard_on_the_event_trigger(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i:02d}", cpu="10") for i in range(20)])
    controller = ShardingController(store, ControllerConfig(configs=parse_scheduler_configs(CONFIGS), sync_period=60.0))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await wait_for(lambda: _sized(store, {"volcano": 18, "agent-scheduler": 2}))
    shards = await store.list_objects(NodeShard)
    assert len(shards["volcano"].spec.nodes_desired) == 18 and len(shards["agent-scheduler"].spec.nodes_desired) == 2
    borrowed = set(shards["agent-scheduler"].spec.nodes_desired)

    targets = [f"n{i:02d}" for i in range(10, 15) if f"n{i:02d}" not in borrowed][:3]
    start = time.monotonic()
    for name in targets:
        await fill(store, name, "8", "a")
    await wait_for(lambda: _owned(store, targets, "agent-scheduler"), timeout=5.0)
    took = time.monotonic() - start
    # The period is 60 s: only the event trigger can have moved them this fast.
    assert took < 2.0, took
    o = await owners(store)
    assert sum(v == "agent-scheduler" for v in o.values()) >= len(targets)
    shards = await store.list_objects(NodeShard)
    assert set(targets) <= set(shards["agent-scheduler"].spec.nodes_desired)
    assert set(targets) <= set(shards["agent-scheduler"].status.nodes_to_add)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert await audit(store) == []


async def _sized(store: Store, sizes: dict[str, int]) -> bool:
    o = await owners(store)
    return all(sum(v == name for v in o.values()) == n for name, n in sizes.items())


async def _owned(store: Store, names: list[str], owner: str) -> bool:
    o = await owners(store)
    return all(o.get(n) == owner for n in names)


async def test_hand_off_refuses_the_old_owner_and_admits_the_new(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i}", cpu="10") for i in range(6)])
    controller = ShardingController(
        store, ControllerConfig(configs=parse_scheduler_configs(CONFIGS.replace(":2:100", ":0:100")), sync_period=60.0)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await wait_for(lambda: _owned(store, ["n3"], "volcano"))
    await store.upsert_pods(
        [pod("train", cpu="1", scheduler="volcano"), pod("agent", cpu="1", scheduler="agent-scheduler")]
    )
    seen = (await store.get_nodes(["n3"]))["n3"].version  # volcano decides on n3 now...
    await fill(store, "n3", "8", "x")  # ...while load moves n3 to the agent band
    await wait_for(lambda: _owned(store, ["n3"], "agent-scheduler"), timeout=5.0)
    volcano = Binder(store.client, store.keys, "volcano", sharding=ShardingMode.HARD)
    agent = Binder(store.client, store.keys, "agent-scheduler", sharding=ShardingMode.HARD)
    [old] = await volcano.commit(
        [Placement(uid="uid-train", node="n3", request=pod("train", cpu="1").request(), version=seen)]
    )
    [new] = await agent.commit(
        [Placement(uid="uid-agent", node="n3", request=pod("agent", cpu="1").request(), version=0)]
    )
    assert isinstance(old, Rejected) and old.reason is Reason.NOT_OWNER
    assert isinstance(new, Committed)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert await audit(store) == []


async def test_only_one_lease_holder_leads_and_the_other_takes_over(rclient: aioredis.Redis, store: Store) -> None:
    key = store.keys.prefix + "lease:test"
    a = RedisLease(rclient, key, "a", ttl=1.0, renew_every=0.2)
    b = RedisLease(rclient, key, "b", ttl=1.0, renew_every=0.2)
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    ta = asyncio.create_task(a.run(stop_a))
    await asyncio.wait_for(a.acquired.wait(), 5)
    tb = asyncio.create_task(b.run(stop_b))
    await asyncio.sleep(0.5)
    assert a.leading and not b.leading
    stop_a.set()  # a steps down and gives the lease up
    await ta
    await asyncio.wait_for(b.acquired.wait(), 5)
    assert b.leading and not a.leading
    stop_b.set()
    await tb


def sharding(*args: str, **kw) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", "sharding", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


async def test_the_process_shards_a_cluster_and_stops_on_sigterm(store: Store, redis_server: RedisServer) -> None:
    await store.upsert_nodes([node(f"n{i}", cpu="10") for i in range(8)])
    proc = sharding("--redis-url", redis_server.url, "--cluster", store.keys.cluster, "--metrics-port", "0")
    try:
        first = await asyncio.to_thread(proc.stdout.readline)  # type: ignore[union-attr]
        assert "serving /metrics and /healthz" in first
        port = int(first.split("port")[1])
        await wait_for(lambda: _sized(store, {"volcano": 6, "agent-scheduler": 2}), timeout=20)
        health = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
        )
        assert health == b"ok\n"
        metrics = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        )
        assert 'caldera_shard_nodes{scheduler="volcano"} 6.0' in metrics
        assert 'caldera_shard_nodes{scheduler="agent-scheduler"} 2.0' in metrics
        assert 'caldera_shard_moves_total{from="none",to="volcano"} 6.0' in metrics
        assert "caldera_shard_sync_duration_seconds_count" in metrics
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--scheduler-configs", "a:volcano:0.1:0.5:false:1"], "expected 7"),
        (["--scheduler-configs", "a:volcano:0.7:0.2:false:1:2"], "MIN_UTIL 0.7 > MAX_UTIL 0.2"),
        (["--scheduler-configs", "a:volcano:0.1:1.5:false:1:2"], "outside [0, 1]"),
        (["--scheduler-configs", "a:volcano:0.1:0.5:false:5:2"], "MIN_NODES 5 > MAX_NODES 2"),
        (["--scheduler-configs", "a:volcano:0:0.5:false:1:2,a:agent:0.6:1:true:1:2"], "appears twice"),
        (["--scheduler-configs", "a:kube:0:0.5:false:1:2"], "TYPE 'kube'"),
        (["--shard-sync-period", "10 seconds"], "invalid duration"),
        (["--min-dwell", "5q"], "invalid duration"),
        (["--utilization", "disk"], "invalid choice"),
        (["--band-margin", "2"], "--band-margin"),
        (["--scheduler-configs", "a:volcano:0.4:0.48:false:0:2"], "narrower than twice --band-margin"),
    ],
)
def test_malformed_flags_exit_2_with_one_line(flags: list[str], needle: str) -> None:
    proc = sharding(*flags)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
