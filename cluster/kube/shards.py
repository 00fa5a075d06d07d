"""NodeShard custom resources in the API server: the sharding controller's decisions, for ``kubectl``.

After each sync the controller hands every NodeShard here; one that changed since it was
last published is created, or its spec and status are replaced (``spec.nodesDesired``;
``status`` nodesInUse / nodesToAdd / nodesToRemove / lastUpdateTime), paced to the
process's QPS. The store stays the source the schedulers read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from cluster.kube.pacing import Pacer
from cluster.model import NodeShard

log = logging.getLogger("caldera.shards")
GROUP, VERSION, PLURAL = "shard.volcano.sh", "v1alpha1", "nodeshards"


class NodeShardPublisher:
    def __init__(self, api: k8s.ApiClient, *, qps: float = 50.0, burst: int = 100) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.pacer = Pacer(qps, burst)
        self.published: dict[str, tuple[list[str], list[str]]] = {}  # name -> (desired, in use) last written
        self.writes = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodeshards")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def publish(self, shards: Sequence[NodeShard]) -> None:
        for shard in shards:
            key = (list(shard.spec.nodes_desired), list(shard.status.nodes_in_use))
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
        body: dict[str, Any] = msgspec.to_builtins(shard)
        body["metadata"] = {"name": shard.name}
        try:
            current: Any = self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, shard.name)
        except ApiException as e:
            if e.status != 404:
                raise
            created: Any = self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
            current = created
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            current = self.custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, shard.name, body)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.custom.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, shard.name, body)
