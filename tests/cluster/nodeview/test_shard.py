"""The shared shard view: which nodes a scheduler may use, and in which order, per mode."""

from __future__ import annotations

from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.nodeview.shard import OTHER, OWN, UNOWNED, shard_feasible, shard_rank
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord
from tests.builders import node


def columns(owners: dict[str, str]) -> NodeTable:
    return NodeTable(
        NodeRecord(
            name=n,
            allocatable=Resources({"cpu": 1000}),
            allocated=Resources(),
            version=1,
            owner=o,
            unschedulable=False,
            node=node(n),
        )
        for n, o in owners.items()
    )


def test_modes() -> None:
    cols = columns({"a": "volcano", "b": "", "c": "agent-scheduler"})
    assert list(shard_feasible(cols, "volcano", ShardingMode.HARD)) == [True, False, False]
    assert list(shard_feasible(cols, "volcano", ShardingMode.SOFT)) == [True, True, True]
    assert list(shard_rank(cols, "volcano", ShardingMode.SOFT)) == [OWN, UNOWNED, OTHER]
    assert list(shard_rank(cols, "volcano", ShardingMode.NONE)) == [OWN, OWN, OWN]


def test_the_view_follows_owner_changes() -> None:
    cols = columns({"a": "volcano", "b": ""})
    assert list(shard_feasible(cols, "volcano", ShardingMode.HARD)) == [True, False]
    cols.set_owner("b", "volcano")
    cols.set_owner("a", "agent-scheduler")
    assert list(shard_feasible(cols, "volcano", ShardingMode.HARD)) == [False, True]
    cols.remove("a")
    assert list(shard_rank(cols, "volcano", ShardingMode.SOFT)) == [OWN]
