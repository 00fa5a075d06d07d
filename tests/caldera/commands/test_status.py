"""`caldera status`: what the store says about shards, processes, queues, and why jobs wait."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from cluster.model.core import Pod
from cluster.model.labels import TASK_SPEC_KEY
from cluster.model.volcano import PodGroup
from cluster.runtime.redis_server import RedisServer
from cluster.sim.pods import make_pod, make_podgroup
from cluster.store.store import Own, Put, Store
from tests.builders import hypernode, node


def status(redis_server: RedisServer, store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera",
            "status",
            "--redis-url",
            redis_server.url,
            "--cluster",
            store.keys.cluster,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}, {name: task-topology}]
"""


def _tf() -> tuple[PodGroup, Pod]:
    group = make_podgroup("tf", min_member=1)
    group = msgspec.structs.replace(
        group,
        metadata=msgspec.structs.replace(group.metadata, annotations={"volcano.sh/task-topology-affinity": "ps,chief"}),
    )
    pod = make_pod("tf-ps-0", requests={"cpu": "100"}, scheduler="volcano", group="tf")  # waits: stays in the sessions
    pod = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, annotations={**pod.metadata.annotations, TASK_SPEC_KEY: "ps"}),
    )
    return group, pod


async def test_status_shows_shards_processes_queues_and_why_the_top_jobs_wait(
    store: Store, redis_server: RedisServer, tmp_path: Path
) -> None:
    tf_group, tf_pod = _tf()
    await store.upsert_nodes([node("g1", cpu="8", gpu=4), node("g2", cpu="8", gpu=4), node("c1", cpu="16")])
    await store.write(
        [
            Own("g1", "volcano"),
            Own("g2", "volcano"),
            Own("c1", "agent-scheduler"),
            Put(make_podgroup("big", min_member=3)),
            Put(hypernode("x", 1, children=["y"])),  # a cycle: caldera status names it
            Put(hypernode("y", 2, children=["x"])),
            Put(tf_group),  # its task-topology annotation names a task it lacks: ignored, and named
        ]
    )
    gang = [
        make_pod(f"big-{i}", requests={"cpu": "1", "nvidia.com/gpu": 4}, scheduler="volcano", group="big")
        for i in range(3)
    ]
    lone = make_pod("web", requests={"cpu": "1"}, scheduler="agent-scheduler")
    running = make_pod(
        "busy", requests={"cpu": "4", "nvidia.com/gpu": 2}, scheduler="volcano", node="g1", phase="Running"
    )
    await store.upsert_pods([*gang, lone, running, tf_pod])
    await store.set_reasons(
        "volcano", {p.uid: "gang: 2/3 tasks placeable, 1 short: 0/2 nodes have 4 nvidia.com/gpu free" for p in gang}
    )
    # A live batch scheduler, so that processes and queues come from its heartbeat.
    (tmp_path / "conf.yaml").write_text(CONF)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caldera",
            "batch-scheduler",
            "--redis-url",
            redis_server.url,
            "--cluster",
            store.keys.cluster,
            "--metrics-port",
            "0",
            "--schedule-period",
            "200ms",
            "--scheduler-conf",
            str(tmp_path / "conf.yaml"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            r = status(redis_server, store, "-o", "json")
            assert r.returncode == 0, r.stderr
            report = json.loads(r.stdout)
            batch = [p for p in report["processes"] if p["component"] == "batch-scheduler"]
            if batch and batch[0]["stats"].get("sessions", 0) > 0 and report["queues"]:
                break
            assert time.monotonic() < deadline, report
            await asyncio.sleep(0.5)
        shards = {s["scheduler"]: s for s in report["shards"]}
        assert shards["volcano"]["nodes"] == 2 and shards["volcano"]["gpu"] == 0.25  # 2 of 8 GPUs held
        assert shards["agent-scheduler"]["nodes"] == 1 and shards["agent-scheduler"]["cpu"] == 0.0
        assert batch[0]["up"] and batch[0]["leading"]
        assert batch[0]["stats"]["hypernode_problems"] == ["HyperNodes x -> y -> x form a cycle: left out"]
        assert batch[0]["stats"]["ignored_settings"] == [
            "default/tf: volcano.sh/task-topology-affinity: task chief do not exist in job <default/tf>; "
            "the job's task topology is ignored"
        ]
        assert [q["name"] for q in report["queues"]] == ["default"]
        assert report["queues"][0]["weight"] == 1 and report["queues"][0]["allocated"] == {
            "cpu": "4",
            "nvidia.com/gpu": "2",
        }
        top = report["pending"][0]
        assert (top["job"], top["scheduler"], top["waiting"]) == ("default/big", "volcano", 3)
        assert "nvidia.com/gpu" in top["reason"]  # the scheduler's own words, refreshed by its sessions
        assert {(e["job"], e["scheduler"]) for e in report["pending"]} >= {("default/web", "agent-scheduler")}
        table = status(redis_server, store)
        assert (
            table.returncode == 0 and "why the top pending jobs wait" in table.stdout and "default/big" in table.stdout
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        after = json.loads(status(redis_server, store, "-o", "json").stdout)
        assert not [p for p in after["processes"] if p["component"] == "batch-scheduler"]  # gone when it stops
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_bad_flags_exit_2_with_one_line(redis_server: RedisServer) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "status", "--redis-url", redis_server.url, "--top", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip() == "caldera status: error: --top: 0 (expected a positive integer)"
