"""The mirror against the in-repo Kubernetes API server, driven by the official client as kubectl would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import kubernetes
import pytest

from cluster.kube.mirror import Mirror, _fill_order
from cluster.kube.reflector import Changed, Listed, kinds
from cluster.model.core import Namespace
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup
from cluster.runtime.redis_server import RedisServer
from cluster.store.client import STORE_DOWN, connect
from cluster.store.keys import Keys, Kind
from cluster.store.store import Store
from tests.kubeapi.fixtures import kube_api, kube_api_factory  # noqa: F401
from tests.kubeapi.objects import ObjectStore
from tests.kubeapi.server import KubeAPIServer


def node_body(name: str, cpu: str = "8") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"zone": "a"}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def pod_body(name: str, node: str = "", cpu: str = "1") -> dict[str, object]:
    spec: dict[str, object] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "the store did not converge"
        await asyncio.sleep(0.05)


async def run_mirror(store: Store, server: KubeAPIServer, **kw: object) -> AsyncIterator[Mirror]:
    api = kubernetes.client.ApiClient(server.configuration())
    mirror = Mirror(store, kinds(api), watch_seconds=2, **kw)  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(mirror.run(stop))
    try:
        yield mirror
    finally:
        stop.set()
        await task


async def test_the_store_follows_the_cluster(store: Store, kube_api: KubeAPIServer) -> None:  # noqa: F811
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(kube_api.configuration()))
    custom = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(kube_api.configuration()))
    core.create_node(node_body("n1"))
    core.create_namespaced_pod("default", pod_body("other", node="n1", cpu="2"))  # placed by another scheduler
    async for mirror in run_mirror(store, kube_api):
        await asyncio.wait_for(mirror.synced.wait(), 15)

        async def first() -> bool:
            nodes = await store.list_nodes()
            return len(nodes) == 1 and nodes[0].allocated.get("cpu") == 2000

        await eventually(first)  # the other scheduler's pod is accounted on its node
        core.create_node(node_body("n2", cpu="16"))
        core.create_namespaced_pod("default", pod_body("p1"))
        custom.create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "default",
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {"minMember": 2, "queue": "q"},
            },
        )
        custom.create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "q"},
                "spec": {"weight": 3},
            },
        )
        custom.create_cluster_custom_object(
            "topology.volcano.sh",
            "v1alpha1",
            "hypernodes",
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": "leaf"},
                "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n"}}}]},
            },
        )

        core.create_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})

        async def added() -> bool:
            groups = await store.list_objects(PodGroup)
            leaves = await store.list_objects(HyperNode)
            spaces = await store.list_objects(Namespace)  # what a namespaceSelector reads
            return (
                "team-a" in spaces
                and spaces["team-a"].metadata.labels == {"team": "a"}
                and len(await store.names(Kind.NODE)) == 2
                and len(await store.pending("volcano")) == 1
                and "default/g" in groups
                and await store.names(Kind.QUEUE) == ["q"]
                and "leaf" in leaves
                and leaves["leaf"].spec.members[0].selector.regex_match is not None
            )

        await eventually(added)
        core.delete_namespaced_pod("other", "default")
        core.delete_node("n2")

        async def removed() -> bool:
            nodes = await store.list_nodes()
            return [n.name for n in nodes] == ["n1"] and not nodes[0].allocated.get("cpu")

        await eventually(removed)  # the deleted pod's resources came back


async def test_a_restarted_server_and_a_410_make_the_mirror_list_again_and_converge(
    store: Store, kube_api_factory: Callable[..., KubeAPIServer]
) -> None:  # noqa: F811
    server = kube_api_factory(ObjectStore(history=5))
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(server.configuration()))
    core.create_node(node_body("n1"))
    async for mirror in run_mirror(store, server):
        await asyncio.wait_for(mirror.synced.wait(), 15)
        server.stop()
        fresh = ObjectStore(history=5)  # a new server: n1 is gone, n9 is there, old versions unknown
        server = kube_api_factory(fresh, port=server.port)
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(server.configuration()))
        core.create_node(node_body("n9"))
        for i in range(20):  # more changes than the history keeps: a resume from an old version is 410
            core.create_namespaced_pod("default", pod_body(f"p{i}"))

        async def converged() -> bool:
            return await store.names(Kind.NODE) == ["n9"] and len(await store.names(Kind.POD)) == 20

        await eventually(converged, timeout=30)
        assert sum(r.lists for r in mirror.reflectors) > len(mirror.reflectors)  # it listed again


@pytest.mark.parametrize("bad", ["lots"])
async def test_a_pod_with_a_bad_quantity_is_skipped_not_fatal(store: Store, kube_api: KubeAPIServer, bad: str) -> None:  # noqa: F811
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(kube_api.configuration()))
    core.create_node(node_body("n1"))
    async for mirror in run_mirror(store, kube_api):
        await asyncio.wait_for(mirror.synced.wait(), 15)
        core.create_namespaced_pod("default", pod_body("good"))
        body = pod_body("bad")
        body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = bad  # type: ignore[index]
        try:
            core.create_namespaced_pod("default", body)
        except kubernetes.client.ApiException:
            pytest.skip("the API server refuses the bad quantity itself")

        async def good_only() -> bool:
            return len(await store.names(Kind.POD)) == 1 and mirror.skipped >= 1  # noqa: B023 (awaited in this iteration)

        await eventually(good_only)


@pytest.mark.parametrize("keep_data", [False, True], ids=["restarted-empty", "restarted-from-aof"])
async def test_the_mirror_fills_a_restarted_redis_again_under_a_new_epoch(
    kube_api: KubeAPIServer,  # noqa: F811
    keep_data: bool,
) -> None:
    """Redis killed and started again, empty or from its append-only file (which may lack its
    last second): the mirror notices, starts a new epoch (so every reader lists again) and fills
    the store whole — the pods bound in Kubernetes count on their nodes again, the pending pod
    is pending again, and changes made while Redis was down are there."""
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(kube_api.configuration()))
    core.create_node(node_body("n1"))
    core.create_namespaced_pod("default", pod_body("bound", node="n1", cpu="3"))
    core.create_namespaced_pod("default", pod_body("waiting"))
    with RedisServer(appendonly=True) as server:
        client = connect(server.url)
        store = Store(client, Keys("mirror-restart"))

        async def filled(cpu: int, pending: int) -> bool:
            try:
                nodes = await store.list_nodes()
                return [n.allocated.get("cpu") for n in nodes] == [cpu] and len(
                    await store.pending("volcano")
                ) == pending
            except STORE_DOWN:
                return False

        try:
            async for mirror in run_mirror(store, kube_api):
                await eventually(lambda: filled(3000, 1))
                before, _ = await store.head()
                await asyncio.sleep(1.2)  # the append-only file is written every second
                await asyncio.to_thread(server.restart, keep_data=keep_data, down_s=0.5)
                core.create_namespaced_pod("default", pod_body("late", node="n1", cpu="2"))

                async def refilled(old: str = before) -> bool:
                    epoch = (await store.head())[0] if await filled(5000, 1) else old
                    return epoch not in ("", old) and mirror.full_syncs >= 2  # noqa: B023 (awaited here)

                await eventually(refilled, timeout=30)
        finally:
            await client.aclose()


def test_a_full_sync_writes_pods_before_nodes_and_only_the_events_after_each_listing() -> None:
    listed_nodes = Listed(kind=Kind.NODE, objects=[], version="5")
    listed_pods = Listed(kind=Kind.POD, objects=[], version="6")
    early = Changed(kind=Kind.POD, object="p-before", deleted=False)
    late_pod = Changed(kind=Kind.POD, object="p-after", deleted=False)
    late_node = Changed(kind=Kind.NODE, object="n-after", deleted=False)
    held = [listed_nodes, early, late_node, listed_pods, late_pod]
    assert _fill_order(held) == [listed_pods, listed_nodes, late_node, late_pod]


def test_a_relist_cuts_a_quiet_watch_at_once(kube_api_factory: Callable[..., KubeAPIServer]) -> None:  # noqa: F811
    """A full sync asks every reflector to list again; the mirror's loop asks, so the asking must not
    wait for the watch's next event — on a quiet kind that is the next bookmark, or the watch's end."""
    import threading

    from cluster.kube.reflector import Reflector

    server = kube_api_factory(bookmark_interval=30.0)
    api = kubernetes.client.ApiClient(server.configuration())
    kind = next(k for k in kinds(api) if k.kind is Kind.QUEUE)
    seen: list[tuple[float, str]] = []
    reflector = Reflector(kind, lambda d: seen.append((time.monotonic(), type(d).__name__)), watch_seconds=60)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not seen:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # the watch is open and quiet
        start = time.monotonic()
        reflector.relist()
        assert time.monotonic() - start < 0.5
        while len(seen) < 2:
            assert time.monotonic() - start < 5, seen
            time.sleep(0.05)
        assert seen[1][1] == "Listed"
    finally:
        reflector.stop()
        thread.join(10)


async def test_the_write_back_lets_go_of_pods_gone_from_the_cluster(store: Store, kube_api: KubeAPIServer) -> None:  # noqa: F811
    """A pod seen bound gets its Scheduled Event; once deleted, nothing of it stays in the write-back
    (a mirror that sees pods come and go for months must not grow with them)."""
    from cluster.kube.writeback import WriteBack

    api = kubernetes.client.ApiClient(kube_api.configuration())
    core = kubernetes.client.CoreV1Api(api)
    core.create_node(node_body("n1"))
    writeback = WriteBack(store, api, schedulers=["volcano"])
    async for mirror in run_mirror(store, kube_api, observe=writeback.observe, forget=writeback.forget):
        await asyncio.wait_for(mirror.synced.wait(), 15)
        for i in range(5):
            core.create_namespaced_pod("default", pod_body(f"p{i}", node="n1", cpu="100m"))

        async def seen() -> bool:
            return len(writeback.bound) == 5

        await eventually(seen)
        await writeback._flush()
        scheduled = [e for e in core.list_namespaced_event("default").items if e.reason == "Scheduled"]
        assert sorted(e.involved_object.name for e in scheduled) == [f"p{i}" for i in range(5)]
        assert len(writeback.said) == 5
        for i in range(5):
            core.delete_namespaced_pod(f"p{i}", "default")

        async def forgotten() -> bool:
            return not writeback.bound and not writeback.said and not writeback.noted

        await eventually(forgotten)
