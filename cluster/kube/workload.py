"""Load through the API server, made as a cluster's users and kubelets make it.

:class:`ApiLoad` creates nodes, Queues, gangs (a PodGroup and its pods, ``schedulerName:
volcano``) and bursts of agent pods (``schedulerName: agent-scheduler``) with the official
client. :class:`Kubelet` stands in for the kubelets: it watches every pod (a
:class:`~cluster.kube.reflector.Reflector`, raw JSON), and once a pod is bound lets it run
for the seconds its ``caldera.io/run-seconds`` annotation names, then deletes it — so the
room comes back through the API, as on a real cluster. Its view (every live pod, when each
was bound) is what a bench measures the system by: as a separate watcher of the API sees it.
The fault bench (``caldera bench chaos``) uses both.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s

from cluster.kube.reflector import Changed, Delta, KubeKind, Listed, Reflector
from cluster.model.core import Pod
from cluster.store.keys import Kind

RUN_SECONDS = "caldera.io/run-seconds"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


def pod_body(
    name: str, namespace: str, scheduler: str, requests: Mapping[str, str], run_s: float, group: str = ""
) -> dict[str, Any]:
    annotations = {RUN_SECONDS: f"{run_s:.1f}"} | ({GROUP_ANNOTATION: group} if group else {})
    limits = {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}  # extended resources: limits = requests
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "main", "image": "work", "resources": {"requests": dict(requests), "limits": limits}}
            ],
        },
    }


class ApiLoad:
    """Creates the cluster and its work through the API server (synchronous calls: run them in a thread)."""

    def __init__(self, api: k8s.ApiClient, namespace: str = "default") -> None:
        self.core: Any = k8s.CoreV1Api(api)  # raw calls (_preload_content=False): no models built
        self.custom = k8s.CustomObjectsApi(api)
        self.namespace = namespace

    def node(self, name: str, allocatable: Mapping[str, str], labels: Mapping[str, str] | None = None) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "status": {"allocatable": dict(allocatable), "capacity": dict(allocatable)},
        }
        self.core.create_node(body, _preload_content=False).drain_conn()

    def queue(self, name: str, weight: int = 1) -> None:
        body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}}
        body["spec"] = {"weight": weight, "reclaimable": True}
        self.custom.create_cluster_custom_object(*VOLCANO, "queues", body)

    def gang(self, name: str, size: int, requests: Mapping[str, str], run_s: float, queue: str) -> list[str]:
        """A PodGroup needing all ``size`` pods, then its pods; their names."""
        group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"minMember": size, "queue": queue},
        }
        self.custom.create_namespaced_custom_object(*VOLCANO, self.namespace, "podgroups", group)
        names = [f"{name}-{i}" for i in range(size)]
        for pod in names:
            body = pod_body(pod, self.namespace, "volcano", requests, run_s, group=name)
            self.core.create_namespaced_pod(self.namespace, body, _preload_content=False).drain_conn()
        return names

    def burst(self, prefix: str, count: int, requests: Mapping[str, str], run_s: float) -> list[str]:
        names = [f"{prefix}-{i}" for i in range(count)]
        for pod in names:
            body = pod_body(pod, self.namespace, "agent-scheduler", requests, run_s)
            self.core.create_namespaced_pod(self.namespace, body, _preload_content=False).drain_conn()
        return names


class Kubelet:
    """Every node's kubelet at once, as far as a scheduler can tell: bound pods run, then go."""

    def __init__(self, api: k8s.ApiClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.core: Any = k8s.CoreV1Api(api)  # raw calls (_preload_content=False): no models built
        self.clock = clock
        self.pods: dict[str, Pod] = {}  # uid -> the live pod as last seen
        self.bound_at: dict[str, float] = {}  # uid -> when it was first seen bound (live pods)
        self.bound_names: set[str] = set()  # the name of every pod ever seen bound (a bench's names are unique)
        self.deleted = 0
        self._lock = threading.Lock()
        self._due: list[tuple[float, str, str, str]] = []  # (when, uid, namespace, name)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        kind = KubeKind(kind=Kind.POD, call=self.core.list_pod_for_all_namespaces, type=Pod, fast=True)
        self.reflector = Reflector(kind, self._seen, watch_seconds=30, resync_seconds=3600)
        self._threads = [
            threading.Thread(target=self.reflector.run, name="kubelet-watch", daemon=True),
            threading.Thread(target=self._delete_when_due, name="kubelet-delete", daemon=True),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self.reflector.stop()
        for t in self._threads:
            t.join(10)

    def snapshot(self) -> tuple[dict[str, Pod], dict[str, float]]:
        """The live pods and when each was bound, as of now (copies)."""
        with self._lock:
            return dict(self.pods), dict(self.bound_at)

    def _seen(self, delta: Delta) -> None:
        now = self.clock()
        with self._lock:
            if isinstance(delta, Listed):
                self.pods = {p.uid: p for p in delta.objects}
                self.bound_at = {uid: t for uid, t in self.bound_at.items() if uid in self.pods}
                for pod in delta.objects:
                    self._note(pod, now)
                return
            assert isinstance(delta, Changed)
            pod = delta.object
            if delta.deleted:
                self.pods.pop(pod.uid, None)
                self.bound_at.pop(pod.uid, None)
                return
            self.pods[pod.uid] = pod
            self._note(pod, now)

    def _note(self, pod: Pod, now: float) -> None:
        if not pod.node_name or pod.uid in self.bound_at:
            return
        self.bound_at[pod.uid] = now
        self.bound_names.add(pod.name)
        run_s = float(pod.metadata.annotations.get(RUN_SECONDS, "0") or 0)
        heapq.heappush(self._due, (now + run_s, pod.uid, pod.namespace, pod.name))
        self._wake.set()

    def _delete_when_due(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                due = self._due[0][0] if self._due else None
                item = heapq.heappop(self._due) if due is not None and due <= self.clock() else None
            if item is None:
                self._wake.wait(0.2 if due is None else max(0.0, min(0.2, due - self.clock())))
                self._wake.clear()
                continue
            _, uid, namespace, name = item
            try:
                self.core.delete_namespaced_pod(
                    name, namespace, grace_period_seconds=0, _preload_content=False, _request_timeout=(5, 30)
                ).drain_conn()
                self.deleted += 1
            except k8s.ApiException as e:
                if e.status != 404:  # gone already is fine; anything else: try again in a moment
                    with self._lock:
                        heapq.heappush(self._due, (self.clock() + 1.0, uid, namespace, name))
            except Exception:  # the server is down or slow: try again in a moment
                with self._lock:
                    heapq.heappush(self._due, (self.clock() + 1.0, uid, namespace, name))
                with contextlib.suppress(Exception):
                    self._stopping.wait(0.5)
