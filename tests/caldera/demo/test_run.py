"""`caldera demo` as a newcomer runs it: a workload file or a trace, the report, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from caldera.demo import workload
from caldera.demo.monitor import Monitor
from caldera.demo.report import Conflicts
from caldera.demo.workload import AGENT
from cluster.runtime import heartbeat
from cluster.runtime.heartbeat import Beat
from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys
from cluster.store.records import PodRecord
from cluster.store.store import Own, Store
from tests.builders import node, pod

SMALL = """
pools:
  - {name: gpu, count: 8, resources: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8},
     taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
  - {name: cpu, count: 24, resources: {cpu: 16, memory: 64Gi}}
  - {name: warm, count: 4, resources: {cpu: 16, memory: 64Gi}, labels: {node.volcano.sh/warmup: "true"}}
queues:
  - {name: prod, weight: 4}
  - {name: research, weight: 2}
  - {name: experiments, weight: 1, capability: {nvidia.com/gpu: 8}}
priority_classes: [{name: high, value: 100}]
training:
  - {name: big, queue: prod, priority_class: high, every_s: 2, pods: [2, 4], duration_s: [3, 6],
     requests: {cpu: 4, memory: 32Gi, nvidia.com/gpu: 4}, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}
  - {name: mid, queue: research, every_s: 1.5, pods: [2], duration_s: [3, 6],
     requests: {cpu: 2, memory: 16Gi, nvidia.com/gpu: 2}, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}
  - {name: small, queue: experiments, every_s: 1, pods: [2, 4], min_available: 0.5, duration_s: [2, 4],
     requests: {cpu: 1, memory: 8Gi, nvidia.com/gpu: 1}, tolerations: [{key: nvidia.com/gpu, operator: Exists}]}
agents:
  - {name: sandbox, every_s: 0.5, burst: [20, 60], duration_s: [2, 5], requests: [{cpu: 500m, memory: 512Mi}, {cpu: "1", memory: 1Gi}]}
ramp: {start: 0.5, end: 2.0, over: 0.5}
sharding: volcano:volcano:0.0:0.6:false:4:100,agent-scheduler:agent:0.6:1.0:true:4:100
"""


def caldera_demo(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", "demo", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def run_watching_children(proc: subprocess.Popen[str], timeout: float) -> tuple[str, set[int]]:
    """Wait for the demo, noting every process it started on the way; its output and those pids."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, "demo did not finish"
        with contextlib.suppress(psutil.NoSuchProcess):
            seen |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        time.sleep(0.5)
    return proc.stdout.read() if proc.stdout else "", seen


def assert_all_gone(pids: set[int]) -> None:
    for pid in pids:
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"child {pid} ({psutil.Process(pid).cmdline()[:4]}) outlived the demo")


def test_demo_runs_a_workload_file_and_reports(tmp_path: Path) -> None:
    (tmp_path / "small.yaml").write_text(SMALL)
    out, children = run_watching_children(
        caldera_demo(
            "--duration",
            "20",
            "--workload",
            str(tmp_path / "small.yaml"),
            "--out",
            str(tmp_path),
            "--sample-every",
            "5s",
            "--workers",
            "2",  # two workers, told apart in the resources table
        ),
        240,
    )
    assert "Traceback" not in out, out
    assert "caldera audit: ok" in out, out
    # redis-server, the sharding controller, the batch and agent schedulers, Ray's processes
    assert len(children) >= 4
    assert_all_gone(children)
    report = json.loads((tmp_path / "demo-report.json").read_text())
    assert report["audit"] == "ok" and report["tracebacks"] == []
    assert 19 < report["duration_s"] < 25
    agent, batch = report["schedulers"]["agent-scheduler"], report["schedulers"]["volcano"]
    assert agent["pods_bound"] > 100 and agent["pods_per_s"] > 0 and agent["p99_ms"] >= agent["p50_ms"] > 0
    assert batch["pods_bound"] > 0 and batch["pods_per_s"] > 0
    assert set(report["jobs"]) == {"prod", "research", "experiments"}
    assert all(q["started"] > 0 for q in report["jobs"].values()), report["jobs"]
    assert report["shards"]["moves"] > 0 and report["shards"]["largest_change"]["agent-scheduler"] > 0
    assert report["conflicts"]["from_heartbeats_of"] == ["agent-scheduler", "batch-scheduler"]
    # Where the agent pods' time went, stage by stage (the feed's from the store's write): in the
    # report, in the summary, and over time in the chart's samples.
    stages = report["agent_stages"]
    assert list(stages) == ["write", "feed", "queue", "handoff", "decide", "commit", "bind", "reply", "observed"]
    assert all(s["pods"] >= agent["pods_bound"] * 0.9 and s["p99_ms"] >= s["p50_ms"] >= 0 for s in stages.values())
    assert "agent pods' time by stage, p50 ms" in out and "bind" in out, out
    assert any(s["agent_stage_p50_ms"].get("bind") for s in report["samples"])
    assert len(report["samples"]) >= 8
    last = report["samples"][-1]
    assert set(last["shard_nodes"]) >= {"agent-scheduler", "volcano"} and "volcano" in last["shard_gpu"]
    assert all(
        (tmp_path / "demo-logs" / f"{p}.log").stat().st_size > 0
        for p in ("sharding", "batch-scheduler", "agent-scheduler")
    )
    png = (tmp_path / "demo-report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    # every process of the system sampled (RSS, open files) at each --sample-every, the audit with it
    sampled = {r["process"] for r in report["resources"]}
    assert {"caldera demo", "redis-server", "sharding", "batch-scheduler", "agent-scheduler"} <= sampled, sampled
    assert {"raylet", "gcs_server", "ray::WorkerActor #1", "ray::WorkerActor #2"} <= sampled, sampled
    assert all(r["rss_mb"] > 1 and r["fds"] > 2 for r in report["resources"])
    assert len(report["audits"]) >= 4 and report["audits"][0]["t_s"] == 0.0  # at 0, 5, 10, 15 s
    assert all(a["ok"] for a in report["audits"]) and report["restarts"] == [] and report["failed"] == []
    assert {g["process"] for g in report["growth"]} == sampled
    resources = (tmp_path / "demo-resources.png").read_bytes()
    assert resources[:8] == b"\x89PNG\r\n\x1a\n" and len(resources) > 20_000
    assert "resources after the warm-up" in out, out
    # where the run's CPU went, process by process: in the report and the summary
    used = {c["process"]: c for c in report["cpu"]}
    assert {"caldera demo", "redis-server", "agent-scheduler", "ray::WorkerActor #1"} <= set(used), used
    assert all(used[p]["cores"] > 0 and used[p]["cpu_s"] > 0 for p in ("redis-server", "agent-scheduler")), used
    assert all(r["cpu_s"] >= 0 for r in report["resources"]) and "CPU by process" in out, out


NODES_CSV = """sn,cpu_milli,memory_mib,gpu,model
n-cpu-0,32000,131072,0,
n-cpu-1,32000,131072,0,
n-t4-0,32000,131072,2,T4
n-v100-0,64000,262144,8,V100M32
n-v100-1,64000,262144,8,V100M32
"""


def pods_csv() -> str:
    rows = [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    ]
    for i in range(60):  # agent-scheduler pods: latency sensitive, cpu only, short-lived
        rows.append(f"ls-{i},1000,2048,0,0,,LS,Running,{100 * i},{100 * i + 300},{100 * i}")
    for i in range(20):  # batch pods, some sharing a GPU; never deleted
        rows.append(f"be-{i},2000,4096,1,{500 if i % 2 else 1000},,BE,Running,{300 * i},,")
    rows.append("pinned,1000,1024,1,1000,T4,BE,Running,50,,")  # only the T4 node will do
    return "\n".join(rows) + "\n"


def test_demo_replays_a_trace_with_pods_created_and_deleted_at_their_times(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    (tmp_path / "pods.csv").write_text(pods_csv())
    proc = caldera_demo(
        "--duration",
        "12",
        "--trace",
        str(tmp_path / "pods.csv"),
        "--trace-nodes",
        str(tmp_path / "nodes.csv"),
        "--redis-url",
        redis_server.url,
        "--out",
        str(tmp_path),
    )
    out, _ = run_watching_children(proc, 240)
    assert proc.returncode == 0 and "caldera audit: ok" in out, out
    assert "5 nodes" in out and "81 pods" in out
    report = json.loads((tmp_path / "demo-report.json").read_text())
    agent, batch = report["schedulers"]["agent-scheduler"], report["schedulers"]["volcano"]
    assert agent["pods_submitted"] == 60 and batch["pods_submitted"] == 21
    assert agent["pods_bound"] > 0 and batch["pods_bound"] > 0
    assert report["pods_completed"] > 0  # agent pods were deleted at their (compressed) deletion times

    import asyncio

    import redis.asyncio as aioredis

    async def records() -> list[PodRecord]:
        c = aioredis.Redis.from_url(redis_server.url)
        try:
            return await Store(c, Keys("demo")).list_pods()
        finally:
            await c.aclose()

    held = asyncio.run(records())
    nodes = {r.name: r.node for r in held}
    # each bound half-GPU pod holds 500 thousandths of one card; whole-GPU ones a card of their own
    cards = {r.name: dict(r.cards) for r in held if r.node and r.name.startswith("be-")}
    assert cards and all(sorted(c.values()) == ([500] if int(n[3:]) % 2 else [1000]) for n, c in cards.items()), cards
    gpu_shards = [s["shard_fragment"] for s in report["samples"] if s["shard_fragment"]]
    assert gpu_shards and all(0 <= v <= 1 for shard in gpu_shards for v in shard.values())
    assert nodes["pinned"] == "n-t4-0"  # gpu_spec T4 → required node affinity on the model label
    assert not any(name.startswith("ls-") for name in nodes)  # every agent pod was deleted by the trace
    shared = [nodes[f"be-{i}"] for i in range(1, 20, 2)]
    assert all(n.startswith(("n-t4", "n-v100")) for n in shared if n)


@pytest.mark.parametrize(
    "text, message",
    [
        ("pools: []\n", "pools: no nodes (expected at least one pool with count > 0)"),
        (
            "pools: [{name: a, count: 1, resources: {cpu: 2}}]\nqueues: [{name: q, weight: 0}]\n",
            "Expected `int` >= 1 - at `$.queues[0].weight`",
        ),
        ("pools: [{name: a, count: 1, resources: {cpu: lots}}]\n", "pools[a].resources"),
        (
            "pools: [{name: a, count: 1, resources: {cpu: 2}}]\ntraining: [{name: t, queue: nope, every_s: 1, pods: [1],"
            " duration_s: [1, 2], requests: {cpu: 1}}]\n",
            "training[t].queue: 'nope' is not a queue of the workload (expected one of [])",
        ),
        (
            "pools: [{name: a, count: 1, resources: {cpu: 2}}]\nagents: [{name: s, every_s: 1, burst: [5, 2], duration_s: [1, 2],"
            " requests: [{cpu: 1}]}]\n",
            "agents[s].burst: [5, 2] (expected [low, high] with low <= high)",
        ),
        (
            "pools: [{name: a, count: 1, resources: {cpu: 2}}]\nagents: [{name: s, every_s: 0, burst: [1, 2], duration_s: [1, 2],"
            " requests: [{cpu: 1}]}]\n",
            "Expected `float` >= 0.001 - at `$.agents[0].every_s`",
        ),
        (
            "pools: [{name: a, count: 1, resources: {cpu: 2}}]\nspeed: 3\n",
            "speed: unknown field (expected one of: agents, ",
        ),
        ("pools: [\n", "not YAML"),
    ],
)
def test_a_bad_workload_is_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        workload.load(str(path))
    assert str(e.value).startswith(f"workload {path}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_the_packaged_default_workload_loads() -> None:
    w = workload.load(None)
    assert 900 <= len(w.nodes()) <= 1100
    assert len(w.queues) == 3 and any(q.capability for q in w.queues)
    assert {c.queue for c in w.training} == {q.name for q in w.queues}
    assert any("node.volcano.sh/warmup" in p.labels for p in w.pools) and any(p.taints for p in w.pools)


def test_demo_refuses_bad_input_before_starting_anything(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("pools: []\n")
    for args, needle in [
        (["--workload", str(tmp_path / "w.yaml")], "pools: no nodes"),
        (["--workload", str(tmp_path / "missing.yaml")], "missing.yaml: no such file"),
        (["--trace", str(tmp_path / "p.csv")], "--trace and --trace-nodes go together"),
        (["--duration", "0"], "--duration 0"),
        (["--trace", "a.csv", "--trace-nodes", "b.csv", "--workload", "w.yaml"], "give one"),
    ]:
        r = subprocess.run(
            [sys.executable, "-m", "caldera", "demo", *args, "--out", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2 and len(out.splitlines()) == 1 and needle in out, (args, out)
    assert not (tmp_path / "demo-report.json").exists()


def test_sigterm_stops_the_demo_and_everything_it_started_and_writes_the_report_so_far(tmp_path: Path) -> None:
    (tmp_path / "small.yaml").write_text(SMALL)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caldera",
            "demo",
            "--duration",
            "60",
            "--workload",
            str(tmp_path / "small.yaml"),
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        seen = ""
        while "shards at start" not in seen:  # redis, the sharding controller and the schedulers (with Ray) are up
            assert time.monotonic() < deadline and proc.poll() is None, seen
            seen += proc.stdout.readline()  # type: ignore[union-attr]
        children = {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        assert len(children) >= 4
        time.sleep(5)  # a couple of samples
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert_all_gone(children)
    report = json.loads((tmp_path / "demo-report.json").read_text())
    assert report["audit"] == "ok" and report["samples"] and 0 < report["duration_s"] < 60
    assert (tmp_path / "demo-report.png").stat().st_size > 0


def test_a_scheduler_killed_mid_run_is_restarted_named_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """As a new user tried it: ``kill -9`` of the batch scheduler in the middle of ``caldera demo`` once left
    its pods pending to the end while the summary said nothing. Now it is restarted, binds again, and its
    death is in the summary and the report; the agent scheduler killed too leaves no Ray process behind."""
    (tmp_path / "small.yaml").write_text(SMALL)
    proc = caldera_demo(
        "--duration", "45", "--workload", str(tmp_path / "small.yaml"), "--out", str(tmp_path), "--sample-every", "5s"
    )
    seen: set[int] = set()
    out = ""
    try:
        deadline = time.monotonic() + 150
        while "shards at start" not in out:
            assert time.monotonic() < deadline and proc.poll() is None, out
            out += proc.stdout.readline()  # type: ignore[union-attr]
        time.sleep(6)  # some load placed
        kids = psutil.Process(proc.pid).children(recursive=True)
        seen |= {c.pid for c in kids}

        own = {c.cmdline()[3]: c for c in psutil.Process(proc.pid).children() if c.cmdline()[1:3] == ["-m", "caldera"]}
        own["batch-scheduler"].kill()
        own["agent-scheduler"].kill()  # Ray's agents, orphaned, must not outlive the demo
        rest, later = run_watching_children(proc, 200)
        out += rest
        seen |= later
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out  # a process died: not a clean run
    assert_all_gone(seen)
    report = json.loads((tmp_path / "demo-report.json").read_text())
    died = {r["process"]: r for r in report["restarts"]}
    assert set(died) == {"batch-scheduler", "agent-scheduler"}, report["restarts"]
    batch = died["batch-scheduler"]
    assert batch["how"] == "SIGKILL" and batch["traceback"] is False and 5 < batch["at_s"] < 20
    assert batch["ready_after_s"] is not None and batch["ready_after_s"] < 20
    back = batch["at_s"] + batch["ready_after_s"]
    assert any(s["pods_per_s"]["volcano"] > 0 for s in report["samples"] if s["t"] > back), "nothing bound after"
    assert any(s["pods_per_s"]["agent-scheduler"] > 0 for s in report["samples"] if s["t"] > back + 15)
    assert report["audit"] == "ok" and all(a["ok"] for a in report["audits"]) and report["tracebacks"] == []
    assert "batch-scheduler died at" in out and "SIGKILL" in out and "serving again" in out, out
    log = (tmp_path / "demo-logs" / "batch-scheduler.log").read_text()
    assert (
        "----- supervisor: batch-scheduler restarted at" in log and log.count("batch-scheduler: serving volcano") == 2
    )


async def test_the_monitor_keeps_a_processs_figures_once_its_heartbeat_is_gone(store: Store) -> None:
    """The report reads the conflicts from the schedulers' last heartbeats: a poll that raced the
    processes' exit (each deletes its heartbeat) must not leave it 0 / 0."""
    monitor = Monitor(store, store.keys)
    stats = {"conflicts": 1077, "conflicts_resolved": 2407}
    await heartbeat.beat(
        store.client, store.keys, Beat(component="agent-scheduler", holder="h", leading=True, at=1.0, stats=stats)
    )
    await monitor.poll()
    await store.client.hdel(store.keys.processes, "agent-scheduler/h")  # the process stopped
    await monitor.poll()
    assert monitor.conflicts()[AGENT] == Conflicts(true=1077, resolved=2407)


async def test_the_monitor_sees_owners_allocation_and_nodes_gone_as_each_poll_finds_them(store: Store) -> None:
    """The shard panel: each poll sees the owners and the allocation as the store has them then, read off
    the feed (a listing of every node each second cost the demo's process more than any one scheduler's
    share of a burst)."""
    await store.upsert_nodes([node("n1", cpu="8"), node("n2", cpu="8")])
    await store.write([Own("n1", "volcano"), Own("n2", "agent-scheduler")])
    monitor = Monitor(store, store.keys)
    await monitor.start()
    try:
        await monitor.poll()
        assert {k: v["nodes"] for k, v in monitor.shards.items()} == {"agent-scheduler": 1, "volcano": 1}
        assert monitor.shards["agent-scheduler"]["cpu"] == 0.0
        await store.upsert_pods([pod("a", cpu="2", node="n2", phase="Running")])
        await store.write([Own("n1", "agent-scheduler")])
        await monitor.poll()
        assert {k: v["nodes"] for k, v in monitor.shards.items()} == {"agent-scheduler": 2}
        assert monitor.shards["agent-scheduler"]["cpu"] == pytest.approx(2 / 16)
        assert monitor.moves == 1
        await store.delete_pods(["uid-a"])
        await store.delete_nodes(["n2"])
        await monitor.poll()
        assert monitor.shards == {"agent-scheduler": {"nodes": 1, "cpu": 0.0, "gpu": 0.0, "gpus": 0, "fragment": 0.0}}
    finally:
        await monitor.stop()
