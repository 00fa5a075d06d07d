"""The Kubernetes bind target and evictor against the in-repo API server."""

from __future__ import annotations

import kubernetes

from binder.bind import bind_committed
from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.kube.bind import KubeTarget
from cluster.model.binding import Binding, Eviction, Failure
from cluster.sim.pods import make_pod
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.builders import node
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer


def pod_body(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]},
    }


async def test_bindings_land_and_a_bound_or_missing_pod_is_a_failure_to_release(kube_api: KubeAPIServer) -> None:  # noqa: F811
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    for name in ("a", "b"):
        core.create_namespaced_pod("default", pod_body(name))
    target = KubeTarget(api, qps=100, burst=10, backoff=0.01)
    try:
        first = await target.bind(
            [
                Binding(uid="ua", namespace="default", name="a", node="n1"),
                Binding(uid="ub", namespace="default", name="b", node="n2"),
                Binding(uid="uc", namespace="default", name="ghost", node="n1"),
            ]
        )
        assert first[:2] == [None, None]
        assert first[2] == Failure(reason="pod not found")
        assert core.read_namespaced_pod("a", "default").spec.node_name == "n1"
        assert core.read_namespaced_pod("b", "default").spec.node_name == "n2"
        again = await target.bind([Binding(uid="ua", namespace="default", name="a", node="n2")])
        assert again == [Failure(reason="pod already bound")]
        assert core.read_namespaced_pod("a", "default").spec.node_name == "n1"
        evicted = await target.evict(
            [
                Eviction(uid="ub", namespace="default", name="b", node="n2", reason="preempted by default/x"),
                Eviction(uid="uz", namespace="default", name="ghost", node="n1", reason="x"),
            ]
        )
        assert evicted == [None, Failure(reason="pod not found")]
        names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
        assert names == ["a"]
        events = [(e.involved_object.name, e.reason, e.message) for e in core.list_namespaced_event("default").items]
        assert events == [("b", "Preempted", "preempted by default/x (on node n2)")]
    finally:
        target.close()


async def test_the_pace_holds_the_call_rate_to_qps_after_the_burst(kube_api: KubeAPIServer) -> None:  # noqa: F811
    import time

    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    for i in range(12):
        core.create_namespaced_pod("default", pod_body(f"p{i}"))
    target = KubeTarget(api, qps=20, burst=2)
    try:
        start = time.monotonic()
        out = await target.bind([Binding(uid=f"u{i}", namespace="default", name=f"p{i}", node="n") for i in range(12)])
        took = time.monotonic() - start
    finally:
        target.close()
    assert out == [None] * 12
    assert took >= (12 - 2) / 20 * 0.9  # 2 at once, then 20 per second


async def test_a_pod_deleted_between_commit_and_bind_gives_its_reservation_back(
    kube_api: KubeAPIServer,  # noqa: F811
    store: Store,
) -> None:
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod_body("p"))
    pod = make_pod("p", requests={"cpu": "2"}, scheduler="volcano", uid="uid-p")
    await store.upsert_nodes([node("n1", cpu="4")])
    await store.upsert_pods([pod])
    binder = Binder(store.client, store.keys, "volcano")
    [result] = await binder.commit([Placement(uid="uid-p", node="n1", request=pod.request(), version=0)])
    assert isinstance(result, Committed)
    core.delete_namespaced_pod("p", "default")  # gone before the binding is posted
    target = KubeTarget(api, backoff=0.01)
    try:
        outcome = await bind_committed(binder, target, [Binding(uid="uid-p", namespace="default", name="p", node="n1")])
    finally:
        target.close()
    assert outcome == [Failure(reason="pod not found")]
    [n1] = await store.list_nodes()
    assert not n1.allocated.get("cpu")  # released
    assert await store.pending("volcano") == ["uid-p"]  # pending again, until the mirror sees it gone
    assert await audit(store) == []


async def test_bindings_in_runs_answer_each_pod_in_its_place_and_retry_a_server_error(
    kube_api: KubeAPIServer,  # noqa: F811
) -> None:
    import asyncio

    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    names = [f"p{i}" for i in range(20)]
    for name in names:
        if name not in ("p3", "p10", "p17"):  # these three are never created
            core.create_namespaced_pod("default", pod_body(name))
    target = KubeTarget(api, backoff=0.05)  # 8 runs at once: more pods than runs
    bindings = [Binding(uid=f"u{i}", namespace="default", name=name, node=f"n{i}") for i, name in enumerate(names)]
    kube_api.api.faults.bind_status = 500  # every first try fails; the retry after the backoff lands

    async def heal() -> None:
        await asyncio.sleep(0.02)
        kube_api.api.faults.bind_status = 0

    try:
        out, _ = await asyncio.gather(target.bind(bindings), heal())
    finally:
        target.close()
    missing = Failure(reason="pod not found")
    assert out == [missing if name in ("p3", "p10", "p17") else None for name in names]
    for i, name in enumerate(names):
        if name not in ("p3", "p10", "p17"):
            assert core.read_namespaced_pod(name, "default").spec.node_name == f"n{i}"
