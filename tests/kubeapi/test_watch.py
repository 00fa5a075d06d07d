"""Watches on the test API server through the official clients: order, selectors, bookmarks, timeouts,
410 for a version too old, an informer's list+watch loop across a server restart, and the asyncio client."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes_asyncio
import pytest
from kubernetes import client, watch
from kubernetes.client import ApiException

from tests.kubeapi import KubeAPIServer, ObjectStore
from tests.kubeapi.clients import NAMESPACE, Calls, close, pod, sample
from tests.kubeapi.resources import NODE, POD, QUEUE

Start = Callable[..., KubeAPIServer]
Watch: Any = watch.Watch  # kubernetes.watch is not annotated


def events(
    func: Callable[..., Any], *args: Any, count: int, during: Callable[[], object] | None = None, **kwargs: Any
) -> list[tuple[str, str, int]]:
    """(type, name, resourceVersion) of the first ``count`` events of a watch (or all until its timeout);
    ``during`` runs in a thread once the watch has started."""
    w = Watch()
    seen: list[tuple[str, str, int]] = []
    kwargs.setdefault("timeout_seconds", 5)
    if during is not None:
        threading.Timer(0.2, during).start()
    for event in w.stream(func, *args, **kwargs):
        meta = event["raw_object"]["metadata"]
        seen.append((event["type"], meta.get("name", ""), int(meta["resourceVersion"])))
        if len(seen) == count:
            w.stop()
    return seen


def raw_lines(func: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    response = func(*args, watch=True, _preload_content=False, **kwargs)
    try:
        return [json.loads(line) for line in response.data.splitlines() if line.strip()]
    finally:
        response.release_conn()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def version(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_watch_from_a_version_replays_then_follows_in_order(kube_client: client.ApiClient) -> None:
    core, calls = client.CoreV1Api(kube_client), Calls(kube_client, POD)
    calls.create(pod("before"))
    since = calls.list()["metadata"]["resourceVersion"]
    calls.create(pod("p"))
    calls.patch("p", {"metadata": {"labels": {"v": "2"}}})
    calls.delete("p")

    seen = events(
        core.list_namespaced_pod, NAMESPACE, resource_version=since, count=4, during=lambda: calls.create(pod("live"))
    )
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p"), ("ADDED", "live")]
    versions = [v for _, _, v in seen]
    assert versions == sorted(versions) and len(set(versions)) == 4 and versions[0] > int(since)


def test_watch_without_a_version_starts_with_what_exists(kube_client: client.ApiClient) -> None:
    core, calls = client.CoreV1Api(kube_client), Calls(kube_client, NODE)
    for name in ("n1", "n2"):
        calls.create(sample(NODE, name))
    seen = events(core.list_node, count=3, during=lambda: calls.delete("n1"))
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "n1"), ("ADDED", "n2"), ("DELETED", "n1")]


def test_a_watch_through_a_selector_sees_objects_leave_it(kube_client: client.ApiClient) -> None:
    core, pods = client.CoreV1Api(kube_client), Calls(kube_client, POD)
    since = pods.list()["metadata"]["resourceVersion"]
    pods.create(pod("a"))
    pods.create(pod("b", scheduler="other"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="a"), target=client.V1ObjectReference(name="n1"))
    core.create_namespaced_pod_binding("a", NAMESPACE, body, _preload_content=False)
    bound = version(pods.get("a"))
    unbound = events(
        core.list_pod_for_all_namespaces,
        resource_version=since,
        count=2,
        field_selector="spec.nodeName=,spec.schedulerName=caldera",
    )
    assert unbound == [("ADDED", "a", bound - 2), ("DELETED", "a", bound)]

    queues = Calls(kube_client, QUEUE)
    since = queues.list()["metadata"]["resourceVersion"]
    queues.create(sample(QUEUE, "q", {"team": "x"}))
    queues.patch("q", {"metadata": {"labels": {"team": None}}})
    queues.patch("q", {"metadata": {"labels": {"team": "x"}}})
    custom = client.CustomObjectsApi(kube_client)
    seen = events(
        custom.list_cluster_custom_object,
        QUEUE.group,
        QUEUE.version,
        QUEUE.plural,
        resource_version=since,
        label_selector="team=x",
        count=3,
    )
    assert [t for t, _, _ in seen] == ["ADDED", "DELETED", "ADDED"]


def test_bookmarks_carry_the_current_version(kube_api_factory: Start) -> None:
    server = kube_api_factory(bookmark_interval=0.05)
    api = client.ApiClient(server.configuration())
    core, calls = client.CoreV1Api(api), Calls(api, POD)
    calls.create(pod("p"))
    Calls(api, NODE).create(sample(NODE, "n"))  # a later version, of another kind
    since = calls.list()["metadata"]["resourceVersion"]
    seen = events(core.list_namespaced_pod, NAMESPACE, resource_version=since, allow_watch_bookmarks=True, count=1)
    assert seen == [("BOOKMARK", "", server.store.revision)]
    lines = raw_lines(core.list_namespaced_pod, NAMESPACE, resource_version=since, timeout_seconds=1)
    assert lines == []  # no bookmarks unless asked for
    close(api)


def test_timeout_seconds_ends_the_stream(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    since = Calls(kube_client, POD).list()["metadata"]["resourceVersion"]
    started = time.monotonic()
    assert events(core.list_namespaced_pod, NAMESPACE, resource_version=since, timeout_seconds=1, count=-1) == []
    assert 0.9 < time.monotonic() - started < 3


def test_a_version_older_than_the_history_is_gone(kube_api_factory: Start) -> None:
    server = kube_api_factory(ObjectStore(history=3))
    api = client.ApiClient(server.configuration())
    core, calls = client.CoreV1Api(api), Calls(api, POD)
    first = version(calls.create(pod("p0")))
    for i in range(1, 5):
        calls.create(pod(f"p{i}"))
    for i in range(10):  # other kinds' changes do not push pods out of the history
        Calls(api, NODE).create(sample(NODE, f"n{i}"))

    [error] = raw_lines(core.list_namespaced_pod, NAMESPACE, resource_version=str(first), timeout_seconds=1)
    assert error["type"] == "ERROR"
    assert error["object"] | {"message": ""} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "",
    }
    with pytest.raises(ApiException) as e:
        events(core.list_namespaced_pod, NAMESPACE, resource_version=str(first), timeout_seconds=1, count=-1)
    assert e.value.status == 410

    recent = events(core.list_namespaced_pod, NAMESPACE, resource_version=str(first + 2), count=2)
    assert [n for _, n, _ in recent] == ["p3", "p4"]
    [future] = raw_lines(
        core.list_namespaced_pod, NAMESPACE, resource_version=str(server.store.revision + 10), timeout_seconds=1
    )
    assert future["type"] == "ERROR" and future["object"]["code"] == 504  # a version this store never reached
    close(api)


def test_stopping_the_server_ends_open_watches(kube_api_factory: Start) -> None:
    server = kube_api_factory()
    api = client.ApiClient(server.configuration())
    core: Any = client.CoreV1Api(api)  # typed as returning a V1PodList, even without preloading
    response = core.list_namespaced_pod(NAMESPACE, watch=True, _preload_content=False)
    started = time.monotonic()
    server.stop()
    assert response.read() == b"" and time.monotonic() - started < 3
    close(api)


class Informer:
    """A controller's list+watch loop: list, watch from the listing's version, resume a watch that timed out from
    the last version seen, and list again after a 410 or a broken connection."""

    def __init__(self, config: client.Configuration) -> None:
        self.api = client.ApiClient(config)
        self.core: Any = client.CoreV1Api(self.api)
        self.lists = 0
        self._pods: dict[str, str] = {}  # name → the "v" label
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Informer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join(10)
        close(self.api)

    def pods(self) -> dict[str, str]:
        with self._lock:
            return dict(self._pods)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._list_and_watch()
            except Exception:  # 410, refused, reset: list again
                self._stopping.wait(0.05)

    def _list_and_watch(self) -> None:
        listing = self.core.list_namespaced_pod(NAMESPACE, _request_timeout=2)
        with self._lock:
            self._pods = {p.metadata.name: (p.metadata.labels or {}).get("v", "") for p in listing.items}
        self.lists += 1
        since = listing.metadata.resource_version
        while not self._stopping.is_set():
            w = Watch()
            for event in w.stream(
                self.core.list_namespaced_pod,
                NAMESPACE,
                resource_version=since,
                timeout_seconds=1,
                allow_watch_bookmarks=True,
                _request_timeout=3,
            ):
                if event["type"] != "BOOKMARK":
                    obj = event["object"]
                    with self._lock:
                        if event["type"] == "DELETED":
                            self._pods.pop(obj.metadata.name, None)
                        else:
                            self._pods[obj.metadata.name] = (obj.metadata.labels or {}).get("v", "")
            since = w.resource_version or since


@pytest.mark.parametrize("same_store", [True, False], ids=["same-store", "re-created-objects"])
def test_an_informer_converges_across_a_restart(kube_api_factory: Start, same_store: bool) -> None:
    server = kube_api_factory()
    calls = Calls(client.ApiClient(server.configuration()), POD)
    calls.create(pod("a", labels={"v": "1"}))
    calls.create(pod("b", labels={"v": "1"}))
    with Informer(server.configuration()) as informer:
        wait_for(lambda: informer.pods() == {"a": "1", "b": "1"})
        calls.patch("a", {"metadata": {"labels": {"v": "2"}}})
        wait_for(lambda: informer.pods() == {"a": "2", "b": "1"})
        lists = informer.lists

        server.stop()
        if same_store:  # changes made while it was down
            store = server.store
            store.delete(POD, NAMESPACE, "b")
            store.create(POD, pod("c", labels={"v": "1"}))
        else:  # a new cluster state: versions start again from 1, below the informer's
            store = ObjectStore()
            store.create(POD, pod("a", labels={"v": "3"}))
            store.create(POD, pod("d", labels={"v": "1"}))
        server = kube_api_factory(store, port=server.port)
        expected = {"a": "2", "c": "1"} if same_store else {"a": "3", "d": "1"}
        wait_for(lambda: informer.pods() == expected)
        if not same_store:  # a resumed watch cannot see a new state: only a new listing can
            assert informer.lists > lists

        calls.patch("a", {"metadata": {"labels": {"v": "4"}}})  # and it follows the new server live
        wait_for(lambda: informer.pods() == expected | {"a": "4"})
    close(calls.api)


async def test_the_asyncio_client_lists_and_watches(kube_api: KubeAPIServer) -> None:
    async with kubernetes_asyncio.client.ApiClient(kube_api.async_configuration()) as api:
        core: Any = kubernetes_asyncio.client.CoreV1Api(api)  # dict bodies: the calls' annotations want models
        await core.create_namespaced_pod(NAMESPACE, pod("a"))
        listing = await core.list_namespaced_pod(NAMESPACE, label_selector="!v")
        assert [p.metadata.name for p in listing.items] == ["a"]

        async def change() -> None:
            await asyncio.sleep(0.1)
            await core.patch_namespaced_pod("a", NAMESPACE, {"metadata": {"labels": {"v": "2"}}})
            await core.delete_namespaced_pod("a", NAMESPACE)

        changing = asyncio.create_task(change())
        seen = []
        w: Any = kubernetes_asyncio.watch.Watch()
        async with w.stream(
            core.list_namespaced_pod,
            NAMESPACE,
            resource_version=listing.metadata.resource_version,
            timeout_seconds=5,
            allow_watch_bookmarks=True,
        ) as stream:
            async for event in stream:
                if event["type"] != "BOOKMARK":
                    seen.append((event["type"], event["object"].metadata.name, event["object"].metadata.labels))
                if len(seen) == 2:
                    w.stop()
        await changing
        assert seen == [("MODIFIED", "a", {"v": "2"}), ("DELETED", "a", {"v": "2"})]

        custom: Any = kubernetes_asyncio.client.CustomObjectsApi(api)
        await custom.create_cluster_custom_object(QUEUE.group, QUEUE.version, QUEUE.plural, sample(QUEUE, "q"))
        queues = await custom.list_cluster_custom_object(QUEUE.group, QUEUE.version, QUEUE.plural)
        assert [q["metadata"]["name"] for q in queues["items"]] == ["q"]
        await custom.patch_cluster_custom_object_status(  # for a dict, this client's default is a JSON patch
            QUEUE.group,
            QUEUE.version,
            QUEUE.plural,
            "q",
            {"status": {"state": "Open"}},
            _content_type="application/merge-patch+json",
        )
        after = await custom.get_cluster_custom_object(QUEUE.group, QUEUE.version, QUEUE.plural, "q")
        assert after["status"] == {"state": "Open"}
