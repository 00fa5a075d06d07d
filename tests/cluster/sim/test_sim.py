"""The simulator: committed pods start Running and end after their duration, freeing their node."""

from __future__ import annotations

import asyncio

import pytest

from binder.bind import bind_committed
from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.model.binding import Binding
from cluster.model.resources import Resources
from cluster.sim.cluster import SimBindTarget, SimCluster
from cluster.sim.pools import parse_pools, pool_nodes
from cluster.store.audit import audit
from cluster.store.store import Store
from tests.builders import pod

POOLS = """
pools:
  - name: gpu
    count: 2
    resources: {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""


def test_pools_make_named_nodes_and_bad_pools_say_which_field() -> None:
    nodes = [n for p in parse_pools(POOLS) for n in pool_nodes(p)]
    assert [n.name for n in nodes] == ["gpu-00000", "gpu-00001"]
    assert nodes[0].allocatable_resources()["nvidia.com/gpu"] == 8
    assert nodes[0].taints[0].key == "nvidia.com/gpu"
    with pytest.raises(ValueError, match=r"memory.*'lots'"):
        parse_pools({"pools": [{"name": "x", "count": 1, "resources": {"memory": "lots"}}]})
    with pytest.raises(ValueError, match="count"):
        parse_pools({"pools": [{"name": "x", "count": "two", "resources": {}}]})


async def test_committed_pods_run_for_their_duration_then_free_the_node(store: Store) -> None:
    await store.upsert_nodes([n for p in parse_pools(POOLS) for n in pool_nodes(p)])
    pods = [pod(f"p{i}", gpu=4, duration=0.3) for i in range(2)]
    await store.upsert_pods(pods)
    sim = SimCluster(store)
    task = asyncio.create_task(sim.run())
    binder = Binder(store.client, store.keys, "s")
    version = (await store.get_nodes(["gpu-00000"]))["gpu-00000"].version
    results = await binder.commit(
        [Placement(uid=p.uid, node="gpu-00000", request=p.request(), version=version) for p in pods]
    )
    assert all(isinstance(r, Committed) for r in results)
    failures = await bind_committed(
        binder,
        SimBindTarget(store),
        [Binding(uid=p.uid, namespace="default", name=p.name, node="gpu-00000") for p in pods],
    )
    assert failures == [None, None]
    for _ in range(100):
        recs = await store.get_pods([p.uid for p in pods])
        if all(r.phase == "Running" for r in recs.values()):
            break
        await asyncio.sleep(0.02)
    assert {r.phase for r in recs.values()} == {"Running"}
    assert await audit(store) == []
    for _ in range(200):
        if sim.completed == 2:
            break
        await asyncio.sleep(0.02)
    sim.stop()
    await asyncio.wait_for(task, timeout=5)
    assert sim.completed == 2
    assert (await store.get_nodes(["gpu-00000"]))["gpu-00000"].allocated == Resources()
    assert await audit(store) == []


async def test_a_failed_bind_releases_and_requeues(store: Store) -> None:
    await store.upsert_nodes([n for p in parse_pools(POOLS) for n in pool_nodes(p)])
    p = pod("gone-later", gpu=1)
    await store.upsert_pods([p])
    binder = Binder(store.client, store.keys, "s")
    [r] = await binder.commit([Placement(uid=p.uid, node="gpu-00001", request=p.request(), version=0)])
    assert isinstance(r, Committed)
    # The pod is bound in the store to gpu-00001, but the binding names another node: the target refuses.
    [failure] = await bind_committed(
        binder, SimBindTarget(store), [Binding(uid=p.uid, namespace="default", name=p.name, node="gpu-00000")]
    )
    assert failure is not None and "gpu-00001" in failure.reason
    assert await store.pending("s") == [p.uid]
    assert (await store.get_nodes(["gpu-00001"]))["gpu-00001"].allocated == Resources()
    assert await audit(store) == []
