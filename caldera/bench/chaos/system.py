"""The system a fault is done to: caldera's processes on a Kubernetes API, with load, on this machine.

:class:`System` starts a redis-server with its append-only file, the in-repo Kubernetes API
server (``tests/kubeapi``: the bench runs from a checkout with the test extras, as ``make
test`` installs them), and, supervised as a cluster's Deployments (restarted when they die),
``caldera mirror``, ``caldera sharding``, two replicas of ``caldera batch-scheduler`` (one leads)
and ``caldera agent-scheduler`` with Ray workers — each with ``--kubeconfig`` and
``--leader-elect`` on short leases, as ``deploy/`` runs them. Then the cluster and a steady
mixed load through the API: gangs (a PodGroup and its pods) into a queue and bursts of agent
pods, each pod deleted by the stand-in kubelet once it has run its seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from caldera.demo.supervisor import Supervisor
from cluster.kube.connect import api_client
from cluster.kube.lease import lease_holder
from cluster.kube.workload import ApiLoad, Kubelet
from cluster.model.core import Node
from cluster.runtime.redis_server import RedisServer
from cluster.store.client import Client, connect
from cluster.store.keys import Keys
from cluster.store.pause import pause
from cluster.store.store import Store

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: chaos, cluster: {server: "%s"}}]
users: [{name: chaos, user: {}}]
contexts: [{name: chaos, context: {cluster: chaos, user: chaos}}]
current-context: chaos
"""
LEASE_S = 4.0  # the processes' lease: a replica takes over this long after its leader stopped renewing
LEASE_FLAGS = [
    "--leader-elect",
    "--leader-elect-lease-duration",
    f"{LEASE_S:g}s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "1s",
]
BATCH = ("batch-scheduler-a", "batch-scheduler-b")
GPU_NODES, CPU_NODES = 12, 16
GANG_EVERY_S, BURST_EVERY_S = 4.0, 2.0
GANG_SIZES, BURST_SIZES = (2, 4), (5, 15)
GANG_RUN_S, AGENT_RUN_S = (10.0, 20.0), (3.0, 6.0)


class NoApiServer(RuntimeError):
    """The in-repo API server cannot be imported (not a checkout, or no test extras)."""


def kubeapi() -> ModuleType:
    """``tests.kubeapi.server``, from the checkout this caldera runs from."""
    root = Path(__file__).resolve().parents[3]
    if (root / "tests" / "kubeapi" / "server.py").exists() and str(root) not in sys.path:
        sys.path.append(str(root))
    try:
        return importlib.import_module("tests.kubeapi.server")
    except ImportError as e:
        raise NoApiServer(
            f"needs the in-repo Kubernetes API server (tests/kubeapi) and the test extras ({e}): run it from a "
            "checkout after `make test` (or pip install -e '.[test]')"
        ) from None


class System:
    """Everything a round of faults needs a handle on; :meth:`start`, then :meth:`stop` (always)."""

    def __init__(self, out: Path, *, seed: int = 1, workers: int = 2) -> None:
        self.out = out
        self.rng = random.Random(seed)
        self.workers = workers
        self.redis = RedisServer(appendonly=True)
        self.keys = Keys("chaos")
        self.client: Client = connect(self.redis.url)
        self.store = Store(self.client, self.keys)
        server = kubeapi()
        self.faults = importlib.import_module("tests.kubeapi.faults").Faults()
        self._server_type: Any = server.KubeAPIServer
        self.api_server: Any = self._server_type(faults=self.faults, bookmark_interval=5.0).start()
        self.kubeconfig = out / "kubeconfig"
        self.kubeconfig.write_text(KUBECONFIG % self.api_server.url)
        self.api = api_client(str(self.kubeconfig), None)
        self.load = ApiLoad(self.api)
        self.kubelet = Kubelet(self.api)
        self.supervisor = Supervisor(out / "logs", env=_env())
        self.nodes: list[Node] = []
        self.unbound: dict[str, float] = {}  # pods the load created, not yet seen bound: name -> when (loop clock)
        self._seq = 0

    # -- up and down ---------------------------------------------------------------------------

    def start(self) -> None:
        """The cluster's nodes and queue, then the processes (each serving before this returns)."""
        for i in range(GPU_NODES):
            self._node(f"gpu-{i:02d}", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"})
        for i in range(CPU_NODES):
            self._node(f"cpu-{i:02d}", {"cpu": "16", "memory": "64Gi", "pods": "110"})
        self.load.queue("train", weight=1)
        self.kubelet.start()
        common = [
            "--kubeconfig",
            str(self.kubeconfig),
            "--redis-url",
            self.redis.url,
            "--cluster",
            self.keys.cluster,
            "--metrics-port",
            "0",
            "--log-format",
            "json",  # with a timestamp on every line, to line the processes' logs up with each other
            *LEASE_FLAGS,
        ]
        caldera = [sys.executable, "-m", "caldera"]
        sup = self.supervisor
        sup.start("mirror", [*caldera, "mirror", *common, "--watch-timeout", "30s"], ready="following the cluster")
        sup.start("sharding", [*caldera, "sharding", *common, "--shard-sync-period", "5s"], ready="serving")
        for name in BATCH:
            argv = [*caldera, "batch-scheduler", *common, "--schedule-period", "500ms"]
            sup.start(name, [*argv, "--leader-elect-resource-name", "batch-scheduler"], ready="serving volcano")
        agent = [*caldera, "agent-scheduler", *common, "--workers", str(self.workers)]
        sup.start("agent-scheduler", agent, ready="workers ready")
        for name in sup.names():
            sup.wait_ready(name, 180)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.supervisor.stop_all()
        self.kubelet.stop()
        with contextlib.suppress(Exception):
            self.api_server.stop()
        self.redis.stop()

    def _node(self, name: str, allocatable: dict[str, str]) -> None:
        self.load.node(name, allocatable)
        body = {"metadata": {"name": name}, "status": {"allocatable": allocatable}}
        self.nodes.append(msgspec.convert(body, Node))

    # -- what faults act on ----------------------------------------------------------------------

    async def restart_api_server(self, down_s: float) -> None:
        """Stop the API server and start it again on the same port with the same objects (etcd kept them)."""
        port, objects = self.api_server.port, self.api_server.store
        await asyncio.to_thread(self.api_server.stop)
        await asyncio.sleep(down_s)
        self.api_server = self._server_type(objects, port=port, faults=self.faults, bookmark_interval=5.0).start()

    async def restart_redis(self, down_s: float, *, keep_data: bool) -> None:
        """Kill Redis, and start it again ``down_s`` later (in this thread: a child dies with the thread
        that started it)."""
        self.redis.kill()
        await asyncio.sleep(down_s)
        self.redis.start_again(keep_data=keep_data)

    def batch_leader(self) -> str | None:
        """Which batch-scheduler replica holds the lease (by its pid in the holder's name)."""
        holder = lease_holder(self.api, "batch-scheduler", "caldera-system")
        for name in BATCH:
            pid = self.supervisor.pid(name)
            if pid is not None and holder.endswith(f"-{pid}"):
                return name
        return None

    # -- the load --------------------------------------------------------------------------------

    async def probe(self, timeout: float) -> list[str]:
        """One new pod for each scheduler (a gang of one, an agent pod), made now: bound, they show that
        both serve new pods again. Retried while the API server refuses (for up to ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._seq += 1
        seq = self._seq
        while True:
            try:
                names = await asyncio.to_thread(self.load.gang, f"probe-g{seq}", 1, {"cpu": "1"}, 1.0, "train")
                names += await asyncio.to_thread(self.load.burst, f"probe-a{seq}", 1, {"cpu": "100m"}, 1.0)
                break
            except Exception:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.5)
        self.unbound.update(dict.fromkeys(names, loop.time()))
        return names

    async def generate(self, stop: asyncio.Event) -> None:
        """Gangs and agent bursts arriving as Poisson processes until ``stop``."""
        loop = asyncio.get_running_loop()
        rng = self.rng
        next_gang = loop.time() + rng.expovariate(1 / GANG_EVERY_S)
        next_burst = loop.time() + rng.expovariate(1 / BURST_EVERY_S)
        while not stop.is_set():
            wait = min(next_gang, next_burst) - loop.time()
            if wait > 0:
                await pause(stop, wait)
                continue
            self._seq += 1
            try:
                if next_gang <= next_burst:
                    next_gang += rng.expovariate(1 / GANG_EVERY_S)
                    size, run_s = rng.randint(*GANG_SIZES), rng.uniform(*GANG_RUN_S)
                    requests = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}
                    names = await asyncio.to_thread(self.load.gang, f"g{self._seq}", size, requests, run_s, "train")
                else:
                    next_burst += rng.expovariate(1 / BURST_EVERY_S)
                    count, run_s = rng.randint(*BURST_SIZES), rng.uniform(*AGENT_RUN_S)
                    requests = {"cpu": "500m", "memory": "1Gi"}
                    names = await asyncio.to_thread(self.load.burst, f"a{self._seq}", count, requests, run_s)
            except Exception:  # the API server is down or refusing: users try again later
                await asyncio.sleep(0.5)
                continue
            self.unbound.update(dict.fromkeys(names, loop.time()))

    def overdue(self, older_than: float, now: float) -> list[str]:
        """The pods created more than ``older_than`` seconds before ``now`` and still not bound (the kubelet
        deletes only bound pods: every other pod the load made is bound or waiting)."""
        bound = self.kubelet.bound_names
        for name in [n for n in self.unbound if n in bound]:
            del self.unbound[name]
        return [n for n, t in self.unbound.items() if now - t > older_than]


def _env() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "disabled"}


@contextlib.contextmanager
def running(out: Path | None = None, *, seed: int = 1, workers: int = 2) -> Iterator[System]:
    """A started :class:`System` (in ``out``, or a temporary folder), stopped on exit."""
    with contextlib.ExitStack() as stack:
        folder = out if out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        folder.mkdir(parents=True, exist_ok=True)
        system = System(folder, seed=seed, workers=workers)
        try:
            system.start()
            yield system
        finally:
            system.stop()
