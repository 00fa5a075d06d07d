"""NodeShard custom resources in the API server, as in Volcano: the sharding controller writes the
spec, each scheduler the status.

After each sync the controller hands every NodeShard to :class:`NodeShardPublisher`; one
whose ``spec.nodesDesired`` changed since it was last published is created or replaced.
Each scheduler runs a :class:`ShardStatusReporter`: the nodes it owns in the store (what
it really uses) become ``status.nodesInUse``, with ``nodesToAdd`` / ``nodesToRemove``
against the desired list, merge-patched onto ``/status`` when they change. Writes are
paced to the process's QPS; the store stays the source the schedulers read.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from cluster.kube.connect import KUBE_API_BURST, KUBE_API_QPS
from cluster.kube.pacing import Pacer
from cluster.model.text import one_line
from cluster.model.volcano import NodeShard
from cluster.store.client import periodically
from cluster.store.store import Store

log = logging.getLogger("caldera.shards")
GROUP, VERSION, PLURAL = "shard.volcano.sh", "v1alpha1", "nodeshards"


class NodeShardPublisher:
    def __init__(self, api: k8s.ApiClient, *, qps: float = KUBE_API_QPS, burst: int = KUBE_API_BURST) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.pacer = Pacer(qps, burst)
        self.published: dict[str, tuple[list[str], list[str]]] = {}  # name -> (desired, in use) last written
        self.writes = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodeshards")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def publish(self, shards: Sequence[NodeShard]) -> None:
        for shard in shards:
            key: tuple[list[str], list[str]] = (list(shard.spec.nodes_desired), [])
            if self.published.get(shard.name) == key:
                continue
            await self.pacer.take()
            try:
                await asyncio.get_running_loop().run_in_executor(self._pool, self._write, shard)
            except Exception as e:  # the API server is unreachable: the next sync writes again
                log.warning("NodeShard %s not written: %s", shard.name, e)
                continue
            self.published[shard.name] = key
            self.writes += 1

    def _write(self, shard: NodeShard) -> None:
        body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NodeShard",
            "metadata": {"name": shard.name},
            "spec": msgspec.to_builtins(shard.spec),
        }
        try:
            current: Any = self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, shard.name)
        except ApiException as e:
            if e.status != 404:
                raise
            self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
            return
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, shard.name, body)  # status is left as it is


class ShardStatusReporter:
    """One scheduler's report of the nodes it holds, onto its NodeShard's status."""

    def __init__(
        self,
        api: k8s.ApiClient,
        scheduler: str,
        store: Store,
        *,
        qps: float = KUBE_API_QPS,
        burst: int = KUBE_API_BURST,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.scheduler = scheduler
        self.store = store
        self.pacer = Pacer(qps, burst)
        self.wall = wall
        self.reported: tuple[list[str], list[str]] | None = None
        self.reports = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-status")

    async def report(self) -> None:
        owners = await self.store.owners()
        in_use = sorted(n for n, owner in owners.items() if owner == self.scheduler)
        shard = (await self.store.get_objects(NodeShard, [self.scheduler])).get(self.scheduler)
        desired = sorted(shard.spec.nodes_desired) if shard is not None else []
        if self.reported == (desired, in_use):
            return
        stamp = datetime.datetime.fromtimestamp(self.wall(), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "nodesInUse": in_use,
            "nodesToAdd": sorted(set(desired) - set(in_use)),
            "nodesToRemove": sorted(set(in_use) - set(desired)),
            "lastUpdateTime": stamp,
        }
        await self.pacer.take()
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._pool,
                lambda: self.custom.patch_cluster_custom_object_status(
                    GROUP,
                    VERSION,
                    PLURAL,
                    self.scheduler,
                    {"status": status},
                    _content_type="application/merge-patch+json",
                ),
            )
        except ApiException as e:  # 404: not created yet (the controller has not synced): next time
            log.info("NodeShard %s status not written: %s %s", self.scheduler, e.status, e.reason)
            return
        except Exception as e:  # unreachable: next time
            log.info("NodeShard %s status not written: %s", self.scheduler, one_line(str(e)))
            return
        self.reported = (desired, in_use)
        self.reports += 1

    async def run(self, stop: asyncio.Event, every: float = 5.0) -> None:
        try:
            await periodically(log, "shard status", every, stop, self.report)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
