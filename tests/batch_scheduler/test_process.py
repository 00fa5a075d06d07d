"""The batch scheduler as users run it: its own process, beside the agent scheduler and the
sharding controller, on a simulated cluster under mixed load; its flags; its conf reload."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import msgspec
import pytest

from batch_scheduler.cache import KINDS
from batch_scheduler.conf import DEFAULT_CONF
from batch_scheduler.cycle import BatchScheduler, SchedulerConfig
from batch_scheduler.main import run_scheduler
from cluster.model.volcano import PodGroup, Queue
from cluster.runtime.redis_server import RedisServer
from cluster.sim.cluster import SimBindTarget, SimCluster, SimEvictor
from cluster.sim.pods import make_pod, make_podgroup
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.audit import audit
from cluster.store.informer import Informer
from cluster.store.store import Put, Store
from tests.batch_scheduler.inputs import load

LOAD_SECONDS = 20.0  # an audit every 4 s of it; the soak (caldera demo --duration 30m) runs longer


def caldera(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


async def _wait_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        seen += await asyncio.to_thread(proc.stdout.readline)  # type: ignore[union-attr]
    return seen


class Load:
    """Gang jobs into two queues and bursts of short agent pods, for ``seconds``."""

    def __init__(self, store: Store, seed: int = 7) -> None:
        self.store = store
        self.rng = random.Random(seed)
        self.gangs: dict[str, tuple[int, list[str]]] = {}  # group key -> (minMember, pod uids)
        self.agent: list[str] = []

    async def run(self, seconds: float) -> None:
        start, n = time.monotonic(), 0
        while time.monotonic() - start < seconds:
            for _ in range(self.rng.randint(1, 3)):
                size = self.rng.choice([2, 4, 8])
                name = f"job-{n}"
                n += 1
                queue = self.rng.choice(["research", "prod"])
                duration = self.rng.uniform(15, 30)
                pods = [
                    make_pod(
                        f"{name}-{i}",
                        requests={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
                        scheduler="volcano",
                        group=name,
                        duration=duration,
                    )
                    for i in range(size)
                ]
                await self.store.write([Put(make_podgroup(name, min_member=size, queue=queue))])
                await self.store.upsert_pods(pods)
                self.gangs[f"default/{name}"] = (size, [p.uid for p in pods])
            burst = [
                make_pod(
                    f"agent-{n}-{i}",
                    requests={"cpu": "500m", "memory": "512Mi"},
                    scheduler="agent-scheduler",
                    duration=self.rng.uniform(1, 3),
                )
                for i in range(self.rng.randint(50, 150))
            ]
            await self.store.upsert_pods(burst)
            self.agent += [p.uid for p in burst]
            await asyncio.sleep(1.0)


async def _check_gangs(store: Store, load: Load) -> int:
    """Every gang whose pods all still exist is bound whole (≥ minMember) or not at all; returns gangs bound."""
    records = {r.uid: r for r in await store.list_pods()}
    whole = 0
    for key, (min_member, uids) in load.gangs.items():
        if not all(u in records for u in uids):
            continue  # some finished: the sim deletes them
        bound = sum(1 for u in uids if records[u].node)
        assert bound == 0 or bound >= min_member, f"{key}: {bound}/{min_member} bound"
        whole += bound >= min_member
    return whole


async def test_batch_and_agent_schedulers_share_a_cluster_in_soft_mode_under_mixed_load(
    store: Store, redis_server: RedisServer
) -> None:
    nodes = pool_nodes(NodePool(name="gpu", count=24, resources={"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8}))
    nodes += pool_nodes(NodePool(name="cpu", count=24, resources={"cpu": 32, "memory": "128Gi"}))
    await store.upsert_nodes(nodes)
    await store.write(
        [
            Put(msgspec.convert({"metadata": {"name": q}, "spec": {"weight": w}}, Queue))
            for q, w in (("research", 1), ("prod", 2))
        ]
    )
    common = ["--redis-url", redis_server.url, "--cluster", store.keys.cluster, "--metrics-port", "0"]
    procs = {
        "sharding": caldera(
            "sharding",
            *common,
            "--scheduler-configs",
            "volcano:volcano:0.0:0.6:false:4:48,agent-scheduler:agent:0.7:1.0:false:4:48",
        ),
        "batch": caldera("batch-scheduler", *common, "--sharding-mode", "soft", "--schedule-period", "500ms"),
        "agent": caldera("agent-scheduler", *common, "--sharding-mode", "soft", "--workers", "2"),
    }
    sim = SimCluster(store)
    runner = asyncio.create_task(sim.run())
    try:
        batch_port = int((await _wait_line(procs["batch"], "serving", 30)).split("port")[1].split()[0])
        await _wait_line(procs["agent"], "workers ready", 120)
        load = Load(store)
        loader = asyncio.create_task(load.run(LOAD_SECONDS))
        whole = 0
        while not loader.done():
            await asyncio.sleep(4)
            assert await audit(store) == []  # no node over-committed, no pod bound twice, at any moment
            whole = max(whole, await _check_gangs(store, load))
        await loader
        await asyncio.sleep(3)
        whole = max(whole, await _check_gangs(store, load))
        metrics = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{batch_port}/metrics", timeout=5).read().decode()
        )
        start = time.monotonic()
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for name, proc in procs.items():
            proc.wait(timeout=30)
            assert proc.returncode == 0, (name, proc.stderr.read() if proc.stderr else "")
        assert time.monotonic() - start < 20
    finally:
        sim.stop()
        await runner
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert whole > 0, "no gang ever ran"
    assert sim.started > len(load.agent) // 2, (sim.started, len(load.agent))
    assert 'volcano_queue_pod_group_running_count{queue_name="prod"}' in metrics
    count = next(
        line for line in metrics.splitlines() if line.startswith("volcano_e2e_scheduling_latency_milliseconds_count")
    )
    assert float(count.split()[-1]) > 10
    verdict = subprocess.run(
        [sys.executable, "-m", "caldera", "audit", "--redis-url", redis_server.url, "--cluster", store.keys.cluster],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verdict.returncode == 0 and "audit: ok" in verdict.stdout, verdict


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--schedule-period", "soon"], "--schedule-period"),
        (["--schedule-period", "0"], "--schedule-period"),
        (["--scheduler-conf", "/nonexistent/volcano.conf"], "--scheduler-conf: /nonexistent/volcano.conf"),
        (["--scheduler-name", ""], "--scheduler-name"),
        (["--default-queue", " "], "--default-queue"),
        (["--sharding-mode", "loose"], "invalid choice"),
        (["--cluster", "a b"], "invalid name"),
        (["--leader-elect-renew-deadline", "20s"], "must hold"),
        (["--leader-elect-retry-period", "soon"], "--leader-elect-retry-period"),
        (["--master", "127.0.0.1:6443"], "--master"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig: /nonexistent/kubeconfig"),
        (["--hypernode-labels", "rack,bad key"], "--hypernode-labels: 'bad key' is not a label key"),
        (["--hypernode-labels", "rack,rack"], "names a key twice"),
    ],
)
def test_malformed_flags_exit_2_with_one_line(flags: list[str], needle: str) -> None:
    proc = caldera("batch-scheduler", "--metrics-port", "0", *flags)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_a_broken_conf_file_is_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "volcano.conf"
    conf.write_text('actions: "enqueue, allocate, teleport"\ntiers:\n- plugins:\n  - name: gang\n')
    proc = caldera("batch-scheduler", "--metrics-port", "0", "--scheduler-conf", str(conf))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert (out + err).strip() == (
        "caldera batch-scheduler: error: scheduler conf: actions: unknown action 'teleport' "
        "(known: allocate, backfill, enqueue, preempt, reclaim)"
    )


async def test_the_conf_is_reloaded_when_the_file_changes_and_a_broken_one_keeps_the_old(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "volcano.conf"
    path.write_text(DEFAULT_CONF)
    scheduler = BatchScheduler(
        store,
        load(str(path)),
        SchedulerConfig(conf_path=str(path)),
        bind_target=SimBindTarget(store),
        evictor=SimEvictor(store),
    )
    assert scheduler.conf.actions == ("enqueue", "allocate", "backfill")

    def rewrite(text: str, stamp: float) -> None:
        path.write_text(text)
        os.utime(path, (stamp, stamp))

    rewrite(DEFAULT_CONF.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt"'), 1_000_000)
    scheduler.reload_conf()
    assert scheduler.conf.actions == ("enqueue", "allocate", "preempt")
    rewrite(DEFAULT_CONF.replace("name: binpack", "name: bogus"), 2_000_000)
    scheduler.reload_conf()
    assert scheduler.conf.actions == ("enqueue", "allocate", "preempt")  # kept
    out = capsys.readouterr().out
    assert "keeping the previous scheduler conf" in out and "unknown plugin 'bogus'" in out
    await store.upsert_nodes(pool_nodes(NodePool(name="n", count=2, resources={"cpu": 8, "memory": "32Gi"})))
    await store.write([Put(make_podgroup("g", min_member=1))])
    await store.upsert_pods([make_pod("p", requests={"cpu": "1"}, scheduler="volcano", group="g")])
    scheduler.apply(await Informer(store, KINDS).listing())
    report = await scheduler.run_session()  # the kept conf still schedules
    assert report.committed == 1
    groups = await store.list_objects(PodGroup)
    assert groups["default/g"].status.phase == "Running"


async def test_a_session_sees_every_change_made_before_it_however_long_the_feed_settles(store: Store) -> None:
    """The scheduler reads the feed in settled steps (a busy feed costs it little) and catches up
    before each session: a gang written just before a session is placed by it, not a settle later."""
    await store.upsert_nodes(pool_nodes(NodePool(name="n", count=2, resources={"cpu": 8, "memory": "32Gi"})))
    scheduler = BatchScheduler(
        store, load(None), SchedulerConfig(), bind_target=SimBindTarget(store), evictor=SimEvictor(store)
    )
    informer = Informer(store, KINDS, block_ms=50, settle_s=60.0)  # were a session to wait, it would wait long
    stop = asyncio.Event()
    running = asyncio.create_task(run_scheduler(scheduler, informer, 0.05, stop))
    try:
        for round_ in range(3):
            await store.write([Put(make_podgroup(f"g{round_}", min_member=2))])
            pods = [
                make_pod(f"p{round_}-{i}", requests={"cpu": "1"}, scheduler="volcano", group=f"g{round_}")
                for i in range(2)
            ]
            await store.upsert_pods(pods)
            async with asyncio.timeout(10):
                while not all(r.node for r in (await store.get_pods([p.uid for p in pods])).values()):
                    await asyncio.sleep(0.02)
    finally:
        stop.set()
        await running


async def test_the_store_url_can_come_from_a_file_so_no_password_is_on_the_command_line(
    store: Store, redis_server: RedisServer, tmp_path: Path
) -> None:
    secret = tmp_path / "redis-url"
    secret.write_text(redis_server.url + "\n")
    await store.upsert_nodes(pool_nodes(NodePool(name="n", count=1, resources={"cpu": 8, "memory": "32Gi"})))
    await store.write([Put(make_podgroup("g", min_member=1))])
    await store.upsert_pods([make_pod("p", requests={"cpu": "1"}, scheduler="volcano", group="g")])
    proc = caldera(
        "batch-scheduler",
        "--redis-url-file",
        str(secret),
        "--cluster",
        store.keys.cluster,
        "--metrics-port",
        "0",
        "--schedule-period",
        "200ms",
    )
    try:
        await _wait_line(proc, "serving", 30)
        assert redis_server.url not in " ".join(str(a) for a in proc.args)  # only the file's path is
        deadline = time.monotonic() + 20
        while not (await store.list_pods())[0].node:
            assert time.monotonic() < deadline, "the pod was never bound"
            await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
