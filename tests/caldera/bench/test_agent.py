"""``caldera bench agent --fill``: the resident pods that fill the shard before the run."""

from __future__ import annotations

import numpy as np

from caldera.bench.agent import NODE_CPU_M, AgentBench, pod_cpu, residents
from cluster.sim.pools import NodePool, pool_nodes


def test_residents_fill_each_node_unevenly_to_the_share_asked_on_average() -> None:
    nodes = pool_nodes(NodePool(name="n", count=2000, resources={"cpu": 16, "memory": "64Gi", "pods": 110}))
    pods = residents(nodes, 0.9)
    shares = np.array([p.request()["cpu"] / NODE_CPU_M for p in pods])
    assert len(pods) == len(nodes) and {p.spec.node_name for p in pods} == {n.name for n in nodes}
    assert all(p.status.phase == "Running" and p.spec.scheduler_name == "other" for p in pods)
    assert abs(shares.mean() - 0.9) < 0.01 and shares.min() >= 0.8 and shares.max() <= 1.0 and shares.std() > 0.05
    assert residents(nodes, 0.0) == []


def test_the_measured_pods_take_their_share_of_the_room_the_residents_leave() -> None:
    assert pod_cpu(AgentBench(nodes=1000, pods=2000, fill=0.0, take=0.8)) == 6400  # today's default shape
    assert pod_cpu(AgentBench(nodes=1000, pods=2000, fill=0.9, take=0.5)) == 400
