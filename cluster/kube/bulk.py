"""Bulk load through the Kubernetes API for the benches: many nodes and pods created from threads,
a watcher of when each pod was first seen and first seen bound, and a binder that decides nothing.

Raw calls throughout (``_preload_content=False``, bodies as dicts, watch events decoded with msgspec):
at thousands of pods per second the client's models would be the bench's own bottleneck.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
from kubernetes import client as k8s

from cluster.kube.bind import binding_body
from cluster.kube.connect import api_client
from cluster.kube.reflector import Changed, Delta, KubeKind, Listed, Reflector
from cluster.kube.workload import ApiLoad
from cluster.model.core import Pod
from cluster.store.keys import Kind

NODE = {"cpu": "16", "memory": "64Gi", "pods": "110"}
REQUESTS = {"cpu": "100m", "memory": "128Mi"}


def pooled_client(master: str, connections: int) -> k8s.ApiClient:
    """A client of the API server at ``master`` keeping ``connections`` connections for as many threads."""
    config = api_client(None, master).configuration
    config.connection_pool_maxsize = connections
    return k8s.ApiClient(config)


class Watcher:
    """The bench's own watch of every pod: when each was first seen, and when first seen bound."""

    def __init__(self, api: k8s.ApiClient) -> None:
        core: Any = k8s.CoreV1Api(api)
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._lock = threading.Lock()
        kind = KubeKind(kind=Kind.POD, call=core.list_pod_for_all_namespaces, type=Pod, fast=True)
        self.reflector = Reflector(kind, self._sink, watch_seconds=300, resync_seconds=3600)
        self.thread = threading.Thread(target=self.reflector.run, name="bench-watch", daemon=True)

    def _sink(self, delta: Delta) -> None:
        now = time.monotonic()
        pods = delta.objects if isinstance(delta, Listed) else [delta.object] if isinstance(delta, Changed) else []
        with self._lock:
            for pod in pods:
                self.seen.setdefault(pod.name, now)
                if pod.node_name:
                    self.bound.setdefault(pod.name, now)

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.reflector.stop()
        self.thread.join(10)

    def snapshot(self) -> tuple[dict[str, float], dict[str, float]]:
        """Copies of when each pod was first seen, and first seen bound (by name)."""
        with self._lock:
            return dict(self.seen), dict(self.bound)

    def count_bound(self) -> int:
        with self._lock:
            return len(self.bound)


def create_nodes(api: k8s.ApiClient, count: int, threads: int) -> None:
    """``count`` nodes of :data:`NODE`, named node-00000 on, ``threads`` create calls at once."""
    load = ApiLoad(api)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: load.node(f"node-{i:05d}", NODE), range(count)))


def create_pods(
    api: k8s.ApiClient, names: Sequence[str], scheduler: str, threads: int, rate: float = 0.0
) -> dict[str, float]:
    """Pods for ``scheduler``, ``threads`` create calls at once — as fast as the server takes them, or
    each at its moment of a steady ``rate`` per second; when each call was answered."""
    core: Any = k8s.CoreV1Api(api)

    def one(name: str) -> tuple[str, float]:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedulerName": scheduler,
                "containers": [{"name": "main", "image": "work", "resources": {"requests": REQUESTS}}],
            },
        }
        # Read to its end (drain_conn), which gives the connection back: given back with the answer
        # unread (release_conn), a connection could be taken again before the rest of that answer
        # arrived, and the next call on it failed (`Connection aborted`, seen in 1 `bench api` run of 6).
        core.create_namespaced_pod("default", body, _preload_content=False).drain_conn()
        return name, time.monotonic()

    with ThreadPoolExecutor(threads) as pool:
        if rate <= 0:
            return dict(pool.map(one, names))
        started, futures = time.monotonic(), []
        for i, name in enumerate(names):
            time.sleep(max(0.0, started + i / rate - time.monotonic()))
            futures.append(pool.submit(one, name))
        return dict(f.result() for f in futures)


class _Names(msgspec.Struct):
    items: list[dict[str, Any]] = msgspec.field(default_factory=list)


class PlainBinder:
    """Binds each pending pod of ``scheduler`` to the next node in turn, from ``threads`` threads,
    unpaced and with no check of room: the most pods/s the API server's binding path allows."""

    def __init__(self, api: k8s.ApiClient, scheduler: str, threads: int) -> None:
        core: Any = k8s.CoreV1Api(api)  # raw calls (_preload_content=False): no models built
        self.core = core
        self.scheduler = scheduler
        self.todo: queue.SimpleQueue[Pod | None] = queue.SimpleQueue()
        self.sent: set[str] = set()
        self.threads = threads
        self.following = threading.Event()
        self._lock = threading.Lock()  # the turn of nodes
        body = core.list_node(_preload_content=False).data
        names = [item["metadata"]["name"] for item in msgspec.json.decode(body, type=_Names).items]
        if not names:
            raise SystemExit("caldera.bench.api_ceiling: the cluster has no nodes")
        self.nodes = itertools.cycle(names)
        kind = KubeKind(kind=Kind.POD, call=self.core.list_pod_for_all_namespaces, type=Pod, fast=True)
        self.reflector = Reflector(kind, self._seen, watch_seconds=300, resync_seconds=3600)

    def _seen(self, delta: Delta) -> None:
        pods = delta.objects if isinstance(delta, Listed) else [delta.object] if isinstance(delta, Changed) else []
        for pod in pods:
            if pod.spec.scheduler_name == self.scheduler and not pod.node_name and pod.uid not in self.sent:
                self.sent.add(pod.uid)
                self.todo.put(pod)
        self.following.set()

    def _bind(self) -> None:
        while (pod := self.todo.get()) is not None:
            with self._lock:
                node = next(self.nodes)
            body = binding_body(pod.name, pod.namespace, node)
            with contextlib.suppress(Exception):  # a bind refused is left unbound: the bench reports it
                self.core.create_namespaced_pod_binding(
                    pod.name, pod.namespace, body, _preload_content=False, _request_timeout=(5, 30)
                ).drain_conn()

    def run(self, stop: threading.Event) -> None:
        workers = [threading.Thread(target=self._bind, daemon=True) for _ in range(self.threads)]
        watch = threading.Thread(target=self.reflector.run, daemon=True)
        for t in [watch, *workers]:
            t.start()
        self.following.wait()
        print("binding", flush=True)
        stop.wait()
        self.reflector.stop()
        for _ in workers:
            self.todo.put(None)
        for t in [watch, *workers]:
            t.join(10)
