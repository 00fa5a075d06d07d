"""All four processes under their own ServiceAccounts, on an API server that authorizes with deploy/rbac: each
kubeconfig carries its account's token and each process runs with --leader-elect. The workload is bound
(gangs, agent pods, shared-GPU pods with their card annotations), statuses and NodeShards are written,
the Leases are held, and the server refused nothing: a call a role lacks would show here."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes

from cluster.runtime.redis_server import RedisServer
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.caldera.kube_processes import caldera, kubeconfig, pod
from tests.deploy.manifests import NAMESPACE
from tests.deploy.rbac import NEEDS, apply, rbac_objects, token
from tests.kubeapi.fixtures import kube_api_factory  # noqa: F401
from tests.kubeapi.server import KubeAPIServer

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
SHARDS = ("shard.volcano.sh", "v1alpha1", "nodeshards")
GPUSHARE = {"volcano.sh/gpu-memory": "4000"}  # MiB of one card: the bind writes which card on the pod
CARD = "volcano.sh/gpu-index"
PROCESSES = {  # ServiceAccount -> the subcommand and its own flags
    "caldera-mirror": ("mirror", "--watch-timeout", "5s"),
    "caldera-sharding": ("sharding", "--shard-sync-period", "2s"),
    "caldera-batch-scheduler": ("batch-scheduler", "--schedule-period", "300ms"),
    "caldera-agent-scheduler": ("agent-scheduler", "--workers", "1"),
}


def workload(api: kubernetes.client.ApiClient) -> list[str]:
    """Nodes with shareable GPUs, a Queue, a HyperNode, a gang of 4 and 20 agent pods (2 on a GPU share)."""
    core: Any = kubernetes.client.CoreV1Api(api)
    custom: Any = kubernetes.client.CustomObjectsApi(api)
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110", "volcano.sh/gpu-number": "2"}
    for i in range(4):
        status = {"allocatable": allocatable | {"volcano.sh/gpu-memory": "32000"}}
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}, "status": status})
    custom.create_cluster_custom_object(*VOLCANO, "queues", {"metadata": {"name": "default"}, "spec": {"weight": 1}})
    custom.create_cluster_custom_object(
        "topology.volcano.sh",
        "v1alpha1",
        "hypernodes",
        {
            "metadata": {"name": "rack"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[0-9]+$"}}}]},
        },
    )
    group = {"metadata": {"name": "train", "namespace": "work"}, "spec": {"minMember": 4, "queue": "default"}}
    custom.create_namespaced_custom_object(*VOLCANO, "work", "podgroups", group)
    names = []
    for i in range(4):
        core.create_namespaced_pod("work", pod(f"train-{i}", "volcano", "2", group="train", limits=GPUSHARE))
        names.append(f"train-{i}")
    for i in range(20):
        core.create_namespaced_pod(
            "work", pod(f"agent-{i}", "agent-scheduler", "500m", limits=GPUSHARE if i < 2 else None)
        )
        names.append(f"agent-{i}")
    return names


def refused(server: KubeAPIServer) -> list[str]:
    assert server.auth is not None
    return [f"{d.attributes.describe()} ({d.reason or 'no rule allows it'})" for d in server.auth.denied()]


async def until(
    check: Callable[[], bool], timeout: float, server: KubeAPIServer, procs: dict[str, Any], what: Callable[[], object]
) -> None:
    """Wait for ``check``; fail at once if a process died or the server refused one of them anything."""
    deadline = time.monotonic() + timeout
    while not check():
        dead = {k: p.stderr.read() if p.stderr else "" for k, p in procs.items() if p.poll() is not None}
        assert refused(server) == [], "a process needs a permission its role lacks"
        assert not dead and time.monotonic() < deadline, (dead, what())
        await asyncio.sleep(0.3)


async def test_the_four_processes_work_under_their_own_service_accounts_and_nothing_is_refused(
    store: Store, redis_server: RedisServer, kube_api_factory: Callable[..., KubeAPIServer], tmp_path: Path
) -> None:  # noqa: F811
    server = kube_api_factory(authorize=True)
    assert server.auth is not None
    admin = kubernetes.client.ApiClient(server.configuration())
    apply(admin, rbac_objects())
    names = workload(admin)
    core: Any = kubernetes.client.CoreV1Api(admin)
    custom: Any = kubernetes.client.CustomObjectsApi(admin)
    common = ["--redis-url", redis_server.url, "--cluster", store.keys.cluster, "--metrics-port", "0", "--leader-elect"]
    procs = {}
    for account, (command, *flags) in PROCESSES.items():
        config = kubeconfig(tmp_path / f"{account}.kubeconfig", server.url, token(admin, account))
        procs[account] = caldera(command, "--kubeconfig", str(config), *common, *flags)
    try:

        def pods() -> dict[str, Any]:
            return {p.metadata.name: p for p in core.list_namespaced_pod("work").items}

        await until(lambda: all(p.spec.node_name for p in pods().values()), 150, server, procs, pods)
        annotated = sorted(n for n, p in pods().items() if CARD in (p.metadata.annotations or {}))
        assert annotated == ["agent-0", "agent-1", "train-0", "train-1", "train-2", "train-3"]

        def written() -> dict[str, object]:
            group = custom.get_namespaced_custom_object(*VOLCANO, "work", "podgroups", "train")
            shards = custom.list_cluster_custom_object(*SHARDS)["items"]
            return {
                "group": (group.get("status") or {}).get("phase"),
                "queue": "status" in custom.get_cluster_custom_object(*VOLCANO, "queues", "default"),
                "hypernode": "status"
                in custom.get_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", "rack"),
                "in use": {s["metadata"]["name"]: (s.get("status") or {}).get("nodesInUse") for s in shards},
                "desired": {s["metadata"]["name"]: s["spec"]["nodesDesired"] for s in shards},
                "scheduled": {
                    e.involved_object.name for e in core.list_namespaced_event("work").items if e.reason == "Scheduled"
                },
                "leases": {
                    lease.metadata.name: bool(lease.spec.holder_identity)
                    for lease in kubernetes.client.CoordinationV1Api(admin).list_namespaced_lease(NAMESPACE).items
                },
            }

        def done() -> bool:
            w = written()
            return (
                w["group"] == "Running"
                and w["queue"] is True
                and w["hypernode"] is True
                and set(w["desired"]) == {"volcano", "agent-scheduler"}  # type: ignore[arg-type]
                and w["in use"] == w["desired"]
                and w["scheduled"] == set(names)
                and w["leases"] == dict.fromkeys(("mirror", "sharding", "batch-scheduler", "agent-scheduler"), True)
            )

        await until(done, 60, server, procs, written)
        assert {r.name: r.node for r in await store.list_pods()} == {n: p.spec.node_name for n, p in pods().items()}
        assert await audit(store) == []
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for account, p in procs.items():
            p.wait(timeout=30)
            assert p.returncode == 0, (account, p.stderr.read() if p.stderr else "")
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        kubernetes.client.ApiClient.close(admin)  # type: ignore[no-untyped-call]
    assert refused(server) == []
    for account, needs in NEEDS.items():
        user = f"system:serviceaccount:{NAMESPACE}:{account}"
        used = [d.attributes for d in server.auth.decisions if d.attributes.user.name == user]
        assert used and all(any(n.allows(a) for n in needs) for a in used), account
        idle = [n.why for n in needs if not n.rare and not any(n.allows(a) for a in used)]
        assert idle == [], f"{account}: needs its process did not use (stale in tests/deploy/rbac.py?)"
