"""All four processes on a Kubernetes cluster (the in-repo API server), each with --kubeconfig, the
workload created with the official client as `kubectl apply` would."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import urllib.request
from pathlib import Path

import kubernetes

from cluster.runtime.redis_server import RedisServer
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.caldera.kube_processes import caldera, kubeconfig, pod
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer


async def test_all_four_processes_bind_gangs_and_agent_pods_in_kubernetes(
    store: Store, redis_server: RedisServer, kube_api: KubeAPIServer, tmp_path: Path
) -> None:  # noqa: F811
    config = kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
    for i in range(4):
        core.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"}},
            }
        )
    custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "work",
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "work"},
            "spec": {"minMember": 4},
        },
    )
    names = []
    for i in range(4):
        core.create_namespaced_pod("work", pod(f"train-{i}", "volcano", "2", gpu=2, group="train"))
        names.append(f"train-{i}")
    for i in range(20):
        core.create_namespaced_pod("work", pod(f"agent-{i}", "agent-scheduler", "500m"))
        names.append(f"agent-{i}")
    common = [
        "--kubeconfig",
        str(config),
        "--redis-url",
        redis_server.url,
        "--cluster",
        store.keys.cluster,
        "--metrics-port",
        "0",
    ]
    procs = {
        "mirror": caldera("mirror", *common, "--watch-timeout", "5s"),
        "sharding": caldera("sharding", *common, "--shard-sync-period", "2s"),
        "batch": caldera("batch-scheduler", *common, "--schedule-period", "300ms"),
        "agent": caldera("agent-scheduler", *common, "--workers", "1"),
    }
    try:
        deadline = time.monotonic() + 150
        while True:
            nodes = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("work").items}
            if all(nodes[n] for n in names):
                break
            dead = {k: p.stderr.read() if p.stderr else "" for k, p in procs.items() if p.poll() is not None}
            assert not dead and time.monotonic() < deadline, (dead, {n: v for n, v in nodes.items() if not v})
            await asyncio.sleep(0.3)
        deadline = time.monotonic() + 30
        while True:
            group = custom.get_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", "work", "podgroups", "train"
            )
            shards = custom.list_cluster_custom_object("shard.volcano.sh", "v1alpha1", "nodeshards")["items"]
            if (group.get("status") or {}).get("phase") == "Running" and len(shards) == 2:
                break
            assert time.monotonic() < deadline, (group.get("status"), shards)
            await asyncio.sleep(0.3)
        assert {s["metadata"]["name"] for s in shards} == {"volcano", "agent-scheduler"}
        assert sorted(n for s in shards for n in s["spec"]["nodesDesired"]) == ["n0", "n1", "n2", "n3"]
        deadline = time.monotonic() + 20
        while True:  # each scheduler reports the nodes it holds on its NodeShard's status
            shards = custom.list_cluster_custom_object("shard.volcano.sh", "v1alpha1", "nodeshards")["items"]
            reported = {s["metadata"]["name"]: (s.get("status") or {}).get("nodesInUse") for s in shards}
            desired = {s["metadata"]["name"]: s["spec"]["nodesDesired"] for s in shards}
            if reported == desired:
                break
            assert time.monotonic() < deadline, (reported, desired)
            await asyncio.sleep(0.3)
        records = {r.name: r.node for r in await store.list_pods()}
        assert records == nodes  # the store agrees with the server
        assert await audit(store) == []
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for name, p in procs.items():
            p.wait(timeout=30)
            assert p.returncode == 0, (name, p.stderr.read() if p.stderr else "")
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)


async def test_two_agent_scheduler_replicas_one_binds_and_the_other_takes_over(
    store: Store, redis_server: RedisServer, kube_api: KubeAPIServer, tmp_path: Path
) -> None:  # noqa: F811
    config = kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core, coordination = kubernetes.client.CoreV1Api(api), kubernetes.client.CoordinationV1Api(api)
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
        }
    )
    common = [
        "--kubeconfig",
        str(config),
        "--redis-url",
        redis_server.url,
        "--cluster",
        store.keys.cluster,
        "--metrics-port",
        "0",
    ]
    lease = [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "500ms",
    ]
    mirror = caldera("mirror", *common, "--watch-timeout", "5s")
    replicas = [caldera("agent-scheduler", *common, *lease, "--workers", "1") for _ in range(2)]

    async def bound(prefix: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (
            sum(
                1
                for p in core.list_namespaced_pod("work").items
                if p.metadata.name.startswith(prefix) and p.spec.node_name
            )
            < count
        ):
            assert time.monotonic() < deadline, f"{prefix} pods not bound"
            await asyncio.sleep(0.2)

    try:
        for i in range(10):
            core.create_namespaced_pod("work", pod(f"first-{i}", "agent-scheduler", "1"))
        await bound("first-", 10, 120)
        holder = coordination.read_namespaced_lease("agent-scheduler", "caldera-system").spec.holder_identity
        leader = next(p for p in replicas if holder.endswith(f"-{p.pid}"))
        other = next(p for p in replicas if p is not leader)
        port = int(other.stdout.readline().split("port")[1])  # type: ignore[union-attr]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'volcano_schedule_attempts_total{result="scheduled"}' not in metrics  # the follower bound nothing
        os.killpg(leader.pid, signal.SIGKILL)  # the leader, its Ray and workers, all at once
        died = time.monotonic()
        for i in range(10):
            core.create_namespaced_pod("work", pod(f"second-{i}", "agent-scheduler", "1"))
        await bound("second-", 10, 4 + 30)
        assert time.monotonic() - died < 4 + 10
        assert coordination.read_namespaced_lease("agent-scheduler", "caldera-system").spec.holder_identity.endswith(
            f"-{other.pid}"
        )
        assert await audit(store) == []  # no pod bound twice, no node over-committed
        for p in (mirror, other):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
            assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    finally:
        for p in [mirror, *replicas]:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
