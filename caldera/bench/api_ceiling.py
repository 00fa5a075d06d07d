"""The API path's ceiling: a binder that decides nothing, as a process of its own.

``python -m caldera.bench.api_ceiling --master URL --scheduler NAME`` lists the nodes, watches
every pod (raw JSON, decoded with msgspec, as the mirror does), and binds each pending pod of
``NAME`` to the next node in turn with ``pods/binding``, from ``--threads`` threads, unpaced and
with no check of room. Whatever rate it reaches is the most pods/s the API server, its watch and
its binding calls allow this machine: ``caldera bench api`` measures caldera beside it. Prints
``binding`` once it follows the pods, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import itertools
import queue
import signal
import sys
import threading
from typing import Any

import msgspec
from kubernetes import client as k8s

from cluster.kube.connect import api_client
from cluster.kube.reflector import Changed, Delta, KubeKind, Listed, Reflector
from cluster.model.core import Pod
from cluster.store.keys import Kind


class _Names(msgspec.Struct):
    items: list[dict[str, Any]] = msgspec.field(default_factory=list)


class PlainBinder:
    def __init__(self, api: k8s.ApiClient, scheduler: str, threads: int) -> None:
        core: Any = k8s.CoreV1Api(api)  # raw calls (_preload_content=False): no models built
        self.core = core
        self.scheduler = scheduler
        self.todo: queue.SimpleQueue[Pod | None] = queue.SimpleQueue()
        self.sent: set[str] = set()
        self.threads = threads
        self.following = threading.Event()
        self.bound = 0
        self.failed = 0
        self._lock = threading.Lock()
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
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            try:
                self.core.create_namespaced_pod_binding(
                    pod.name, pod.namespace, body, _preload_content=False, _request_timeout=(5, 30)
                ).release_conn()
                ok = True
            except Exception:
                ok = False
            with self._lock:
                self.bound += ok
                self.failed += not ok

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caldera.bench.api_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True, help="the API server's address")
    parser.add_argument("--scheduler", required=True, help="bind the pods whose schedulerName is this")
    parser.add_argument("--threads", type=int, default=8, help="binding calls at once (default: 8)")
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= 256:
        parser.error(f"--threads {args.threads}: expected 1 to 256")
    try:
        config = api_client(None, args.master).configuration
    except ValueError as e:
        parser.error(str(e))
    config.connection_pool_maxsize = args.threads + 2  # a connection per thread, none waited for
    api = k8s.ApiClient(config)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    PlainBinder(api, args.scheduler, args.threads).run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
