"""What a scheduler killed between its commit and its bind leaves behind is bound by its successor
(against a real redis-server and the in-repo API server, through the official client)."""

from __future__ import annotations

import asyncio

import kubernetes

from binder.bind import bind_committed
from binder.commit import Binder
from binder.rebind import Rebinder
from binder.results import Committed, Placement
from cluster.kube.bind import KubeTarget
from cluster.model.binding import Binding
from cluster.sim.pods import make_pod
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


async def binding_set(store: Store) -> list[str]:
    return sorted(u.decode() for u in await store.client.zrange(store.keys.binding("volcano"), 0, -1))


async def test_commit_enters_the_binding_set_and_the_bind_step_or_a_release_leaves_it(store: Store) -> None:
    await store.upsert_nodes([node("n1")])
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="volcano", uid=f"u{i}") for i in range(3)]
    await store.upsert_pods(pods)
    binder = Binder(store.client, store.keys, "volcano")
    version = (await store.get_nodes(["n1"]))["n1"].version
    results = await binder.commit([Placement(uid=p.uid, node="n1", request=p.request(), version=version) for p in pods])
    assert all(isinstance(r, Committed) for r in results)
    assert await binding_set(store) == ["u0", "u1", "u2"]
    await binder.bound(["u0"])
    await binder.release(["u1"])
    assert await binding_set(store) == ["u2"]


async def test_a_rebinder_binds_what_a_stopped_scheduler_committed_and_releases_what_it_cannot(
    store: Store,
    kube_api: KubeAPIServer,  # noqa: F811
) -> None:
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    for name in ("a", "b", "c", "d"):
        core.create_namespaced_pod("default", pod_body(name))
    uids = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod("default").items}
    await store.upsert_nodes([node("n1"), node("n2")])
    pods = [make_pod(name, requests={"cpu": "1"}, scheduler="volcano", uid=uid) for name, uid in uids.items()]
    await store.upsert_pods(pods)
    binder = Binder(store.client, store.keys, "volcano")
    nodes = await store.get_nodes(["n1", "n2"])
    gang = [
        Placement(uid=uids[name], node=where, request=pods[0].request(), version=nodes[where].version)
        for name, where in (("a", "n1"), ("b", "n2"), ("c", "n1"), ("d", "n2"))
    ]
    assert all(isinstance(r, Committed) for r in await binder.commit(gang, gang=True))
    target = KubeTarget(api, qps=100, burst=100, backoff=0.01)
    try:
        # The scheduler bound "a" before it was killed (its bound() never ran); "c" was bound to another
        # node by someone else meanwhile; "d" was deleted. "b" was never bound at all.
        core.create_namespaced_pod_binding(
            "a",
            "default",
            {"target": {"kind": "Node", "name": "n1"}, "metadata": {"name": "a"}},
            _preload_content=False,
        )
        core.create_namespaced_pod_binding(
            "c",
            "default",
            {"target": {"kind": "Node", "name": "n9"}, "metadata": {"name": "c"}},
            _preload_content=False,
        )
        await store.delete_pods([uids["d"]])
        rebinder = Rebinder(store, binder, target, after=0.5)
        assert await rebinder.run_once() == 0  # too young: the scheduler may still be binding them
        await asyncio.sleep(0.6)
        assert await rebinder.run_once() == 3
        assert {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("default").items} == {
            "a": "n1",
            "b": "n2",
            "c": "n9",
            "d": None,
        }
        assert (rebinder.rebound, rebinder.released) == (2, 1)
        assert await binding_set(store) == []
        assert (await store.get_pods([uids["c"]]))[uids["c"]].pending  # released: its scheduler tries again
    finally:
        target.close()


async def test_a_bind_that_already_happened_counts_as_bound(store: Store, kube_api: KubeAPIServer) -> None:  # noqa: F811
    """A bind whose answer was lost (a timeout here) is tried again: the 409 of a pod already bound
    to that very node is success, not a failure that would release a pod bound in the cluster."""
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    uid = core.create_namespaced_pod("default", pod_body("a")).metadata.uid
    await store.upsert_nodes([node("n1")])
    await store.upsert_pods([make_pod("a", requests={"cpu": "1"}, scheduler="volcano", uid=uid)])
    binder = Binder(store.client, store.keys, "volcano")
    version = (await store.get_nodes(["n1"]))["n1"].version
    await binder.commit(
        [Placement(uid=uid, node="n1", request=make_pod("a", requests={"cpu": "1"}).request(), version=version)]
    )
    target = KubeTarget(api, qps=100, burst=100, backoff=0.01)
    try:
        binding = Binding(uid=uid, namespace="default", name="a", node="n1")
        assert await bind_committed(binder, target, [binding]) == [None]
        assert await bind_committed(binder, target, [binding]) == [None]
        assert not (await store.get_pods([uid]))[uid].pending
    finally:
        target.close()
