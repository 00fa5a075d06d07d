"""The parts ``caldera bench api`` runs: the in-repo API server and caldera's processes on it, each a
process of its own, and what the bench reads of the store while it waits (:mod:`caldera.bench.api`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from caldera._store import client
from caldera.bench.chaos.system import KUBECONFIG, kubeapi
from caldera.bench.runner import MAX_NODES
from caldera.demo.supervisor import Supervisor
from cluster.model.volcano import NodeShard
from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys, Kind

AGENT = "agent-scheduler"
START_S = 180.0  # a process must serve within this long (the agent's first start waits for Ray)


@contextlib.contextmanager
def api_server(logs: Path) -> Iterator[str]:
    """The in-repo API server as a process (``python -m tests.kubeapi``); its URL."""
    kubeapi()  # fails with NoApiServer outside a checkout with the test extras
    root = Path(__file__).resolve().parents[2]
    log = (logs / "kubeapi.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.kubeapi", "--port", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("serving "):
            raise RuntimeError(f"the API server did not start (see {logs / 'kubeapi.log'})")
        yield line.split(" ", 1)[1]
    finally:
        end(proc)
        log.close()


def end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not exited 15 s later."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(what: str, done: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            print(f"bench api: {what}: not within {timeout:.0f}s", file=sys.stderr, flush=True)
            return False
        time.sleep(every)
    return True


def kubeconfig_file(folder: Path, url: str) -> Path:
    path = folder / "kubeconfig"
    path.write_text(KUBECONFIG % url)
    return path


def common_flags(kubeconfig: Path, store: Stored) -> list[str]:
    """The flags every caldera process of the bench takes."""
    return [
        "--kubeconfig",
        str(kubeconfig),
        "--redis-url",
        store.url,
        "--cluster",
        store.keys.cluster,
        "--metrics-port",
        "0",
        "--log-format",
        "json",
    ]


@contextlib.contextmanager
def caldera_processes(folder: Path, url: str, *, sharding: bool = True) -> Iterator[tuple[Supervisor, Stored]]:
    """A redis-server and, on the API server at ``url``, ``caldera mirror`` and (with ``sharding``) ``caldera
    sharding`` handing every node to the agent scheduler's shard."""
    kubeconfig = kubeconfig_file(folder, url)
    with RedisServer() as redis:
        store = Stored(redis.url, Keys("bench-api"))
        supervisor = Supervisor(folder / "logs", env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        common = common_flags(kubeconfig, store)
        caldera = [sys.executable, "-m", "caldera"]
        try:
            supervisor.start("mirror", [*caldera, "mirror", *common], ready="following the cluster")
            if sharding:
                shard = f"{AGENT}:agent:0.0:1.0:true:1:{MAX_NODES}"
                argv = [*caldera, "sharding", *common, "--scheduler-configs", shard, "--shard-sync-period", "5s"]
                supervisor.start("sharding", argv, ready="serving")
            for name in supervisor.names():
                supervisor.wait_ready(name, START_S)
            yield supervisor, store
        finally:
            supervisor.stop_all()


class Stored:
    """What the bench reads of the store while it waits (each read on a connection of its own: the
    bench's threads have no event loop)."""

    def __init__(self, url: str, keys: Keys) -> None:
        self.url, self.keys = url, keys

    def _read(self, command: Callable[[Any], Awaitable[Any]]) -> Any:
        async def go() -> Any:
            async with client(self.url) as c:
                return await command(c)

        return asyncio.run(go())

    def count(self, kind: Kind) -> int:
        return int(self._read(lambda c: c.scard(self.keys.index(kind))))

    def shard_size(self) -> int:
        spec = self._read(lambda c: c.hget(self.keys.object(Kind.NODESHARD, AGENT), "spec"))
        if not isinstance(spec, bytes):
            return 0
        return len(msgspec.msgpack.decode(spec, type=NodeShard).spec.nodes_desired)
