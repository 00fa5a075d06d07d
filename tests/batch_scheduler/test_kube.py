"""The batch scheduler on Kubernetes: the mirror fills the store from the API server, the batch
scheduler binds through `pods/binding` — both as their own processes, with `--master`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request

import kubernetes

from cluster.model.labels import QUEUE_ALLOCATION_GATE as QUEUE_GATE
from cluster.runtime.redis_server import RedisServer
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer


def caldera(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def node_body(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2", "pods": "110"}},
    }


def pod_body(name: str, group: str, gpu: int, **spec: object) -> dict[str, object]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpu)},
                        "limits": {"nvidia.com/gpu": str(gpu)},
                    },
                }
            ],
            **spec,
        },
    }


PVC = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}  # not modelled: an Event says so
ANTI_AFFINITY = {  # honoured (matchLabelKeys included)
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "matchLabelKeys": ["pod-template-hash"],  # merged into the selector
                },
            }
        ]
    }
}


async def test_gangs_created_with_the_official_client_are_bound_through_the_binding_subresource(
    store: Store, redis_server: RedisServer, kube_api: KubeAPIServer
) -> None:  # noqa: F811
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
    for name in ("n1", "n2"):
        core.create_node(node_body(name))
    for group, size, gpu in (("fits", 3, 1), ("too-big", 2, 3)):
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "ml",
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": "ml"},
                "spec": {"minMember": size},
            },
        )
        for i in range(size):
            extra = {"affinity": ANTI_AFFINITY, "volumes": [PVC]} if (group, i) == ("fits", 0) else {}
            core.create_namespaced_pod("ml", pod_body(f"{group}-{i}", group, gpu, **extra))
    gated = pod_body("gated-0", "", 0, schedulingGates=[{"name": QUEUE_GATE}, {"name": "example.com/other"}])
    gated["metadata"]["annotations"] = {QUEUE_GATE: "true"}  # type: ignore[index]
    core.create_namespaced_pod("ml", gated)  # its queue has room: caldera lifts its gate; the other stays
    for name, tier, members in (  # a switch over n1, and two HyperNodes that hold each other
        ("s0", 1, [("Node", "n1")]),
        ("a", 2, [("HyperNode", "b")]),
        ("b", 2, [("HyperNode", "a")]),
    ):
        spec = {"tier": tier, "members": [{"type": t, "selector": {"exactMatch": {"name": m}}} for t, m in members]}
        custom.create_cluster_custom_object(
            "topology.volcano.sh", "v1alpha1", "hypernodes", {"metadata": {"name": name}, "spec": spec}
        )
    common = [
        "--master",
        kube_api.url,
        "--redis-url",
        redis_server.url,
        "--cluster",
        store.keys.cluster,
        "--metrics-port",
        "0",
    ]
    procs = [
        caldera("mirror", *common, "--watch-timeout", "5s"),
        caldera("batch-scheduler", *common, "--schedule-period", "200ms"),
    ]
    try:
        deadline = time.monotonic() + 30
        while True:
            pods = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("ml").items}
            if all(pods[f"fits-{i}"] for i in range(3)):
                break
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), (
                pods,
                [p.stderr.read() if p.poll() is not None and p.stderr else "" for p in procs],
            )
            await asyncio.sleep(0.2)
        deadline = time.monotonic() + 20
        while [g.name for g in core.read_namespaced_pod("gated-0", "ml").spec.scheduling_gates or []] != [
            "example.com/other"
        ]:
            assert time.monotonic() < deadline, core.read_namespaced_pod("gated-0", "ml").spec.scheduling_gates
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # a few more sessions: the gang that cannot fit must stay unbound
        pods = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("ml").items}
        assert not pods["too-big-0"] and not pods["too-big-1"]
        reasons = await store.reasons("volcano")
        records = {r.name: r for r in await store.list_pods()}
        why = reasons[records["too-big-0"].uid]
        assert why.startswith("gang: 0/2 tasks placeable, 2 short: ") and "nvidia.com/gpu" in why, why
        assert {n: r.node for n, r in records.items()} == {
            n: (node or "") for n, node in pods.items()
        }  # store == server
        assert await audit(store) == []

        def written_back() -> bool:
            groups = {
                g["metadata"]["name"]: g.get("status") or {}
                for g in custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml", "podgroups")[
                    "items"
                ]
            }
            listed = core.list_namespaced_event("ml").items
            events = [(e.involved_object.kind, e.involved_object.name, e.reason) for e in listed]
            noted = [e.message for e in listed if e.reason == "NotHonoured"]
            return (
                groups["fits"].get("phase") == "Running"
                and groups["too-big"].get("phase") == "Inqueue"
                and ("Pod", "fits-0", "Scheduled") in events
                and ("Pod", "too-big-0", "FailedScheduling") in events
                and ("PodGroup", "too-big", "FailedScheduling") in events
                and len(noted) == 1
                and "spec.volumes[0].persistentVolumeClaim is not honoured" in noted[0]
            )

        deadline = time.monotonic() + 20
        while not written_back():
            assert time.monotonic() < deadline, "status and events were not written back"
            await asyncio.sleep(0.2)

        def tree_status() -> dict[str, tuple[str, str, int]]:
            out = {}
            for hn in custom.list_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes")["items"]:
                status = hn.get("status") or {}
                ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
                if ready:
                    out[hn["metadata"]["name"]] = (ready[0]["status"], ready[0]["reason"], status.get("nodeCount", 0))
            return out

        while tree_status() != {"s0": ("True", "InTree", 1), "a": ("False", "Cycle", 0), "b": ("False", "Cycle", 0)}:
            assert time.monotonic() < deadline, tree_status()
            await asyncio.sleep(0.2)
        pending = custom.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "ml", "podgroups", "too-big")
        condition = pending["status"]["conditions"][0]
        assert condition["type"] == "Unschedulable" and "nvidia.com/gpu" in condition["message"]
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=20)
            assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)


async def test_two_replicas_with_leader_election_one_acts_and_the_other_takes_over_when_it_dies(
    store: Store, redis_server: RedisServer, kube_api: KubeAPIServer
) -> None:  # noqa: F811
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core, coordination = kubernetes.client.CoreV1Api(api), kubernetes.client.CoordinationV1Api(api)
    for name in ("n1", "n2"):
        core.create_node(node_body(name))
    common = [
        "--master",
        kube_api.url,
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
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "500ms",
    ]
    mirror = caldera("mirror", *common, "--watch-timeout", "5s")
    replicas = [caldera("batch-scheduler", *common, *lease, "--schedule-period", "200ms") for _ in range(2)]

    async def bound(names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(core.read_namespaced_pod(n, "ml").spec.node_name for n in names):
            assert time.monotonic() < deadline, f"{names} not bound"
            await asyncio.sleep(0.1)

    try:
        core.create_namespaced_pod("ml", pod_body("first-0", "", 1))
        await bound(["first-0"], 30)
        holder = coordination.read_namespaced_lease("batch-scheduler", "caldera-system").spec.holder_identity
        leader = next(p for p in replicas if holder.endswith(f"-{p.pid}"))
        other = next(p for p in replicas if p is not leader)
        port = int(other.stdout.readline().split("port")[1])  # type: ignore[union-attr]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        sessions = next(
            line
            for line in metrics.splitlines()
            if line.startswith("volcano_e2e_scheduling_latency_milliseconds_count")
        )
        assert float(sessions.split()[-1]) == 0  # the follower has not run a single session
        os.killpg(leader.pid, signal.SIGKILL)  # dies without giving the lease up
        died = time.monotonic()
        core.create_namespaced_pod("ml", pod_body("second-0", "", 1))
        await bound(["second-0"], 3 + 10)
        took = time.monotonic() - died
        assert took < 3 + 5, took  # within the lease duration, plus a session and the mirror's lag
        holder = coordination.read_namespaced_lease("batch-scheduler", "caldera-system").spec.holder_identity
        assert holder.endswith(f"-{other.pid}")
        assert await audit(store) == []
    finally:
        for p in [mirror, *replicas]:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
