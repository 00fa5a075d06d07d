"""Node pools: the simulated cluster's shape, e.g. ``gpu: 100 x {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}``.

A pool description is YAML (or the same data in Python)::

    pools:
      - name: gpu
        count: 100
        resources: {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}
        labels: {node.kubernetes.io/instance-type: gpu-8x}
        taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import yaml

from cluster.model import yaml_input
from cluster.model.core import Node
from cluster.model.resources import DEFAULT_MAX_PODS, PODS, Resources


class TaintSpec(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: str = "NoSchedule"


LEAF_LABEL = "topology.caldera.io/leaf"
SPINE_LABEL = "topology.caldera.io/spine"
"""The labels a pool's ``switches`` put on its nodes: the leaf switch and the spine each is under."""


class SwitchSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A pool's network: ``leaf`` nodes to a leaf switch, ``spine`` leaves to a spine."""

    leaf: int
    spine: int

    def __post_init__(self) -> None:
        for name, value in (("leaf", self.leaf), ("spine", self.spine)):
            if value < 1:
                raise ValueError(f"switches.{name}: {value} (expected 1 or more)")


MAX_POOL_NODES = 100_000  # nodes one pool builds (the largest clusters run ~65,000)


class NodePool(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    count: int
    resources: dict[str, str | int | float]
    labels: dict[str, str] = {}
    taints: list[TaintSpec] = []
    unschedulable: bool = False
    switches: SwitchSpec | None = None  # label each node with its leaf and spine (LEAF_LABEL, SPINE_LABEL)

    def __post_init__(self) -> None:
        if not 0 <= self.count <= MAX_POOL_NODES:
            raise ValueError(f"pools[{self.name}].count: {self.count} (expected 0 to {MAX_POOL_NODES:,} nodes)")
        Resources.from_quantities(self.resources, field=f"pools[{self.name}].resources")


class PoolSpec(msgspec.Struct, frozen=True, kw_only=True):
    pools: list[NodePool]


def parse_pools(data: str | dict[str, Any]) -> list[NodePool]:
    """Pools from YAML text or already-parsed data; a bad field raises ValueError naming it."""
    try:
        raw = yaml_input.load(data) if isinstance(data, str) else data
    except yaml.YAMLError as e:
        raise ValueError(f"node pools: invalid YAML: {' '.join(str(e).split())}") from None
    try:
        return msgspec.convert(raw, PoolSpec).pools
    except msgspec.ValidationError as e:
        raise ValueError(f"node pools: {e}") from None


def pool_nodes(pool: NodePool, *, start: int = 0) -> list[Node]:
    """The nodes of a pool, named ``<pool>-<index>``; ``pods`` defaults to the kubelet's 110."""
    labels = {"caldera.io/pool": pool.name, **pool.labels}

    def switched(i: int) -> dict[str, str]:
        s = pool.switches
        if s is None:
            return labels
        leaf = i // s.leaf
        return {**labels, LEAF_LABEL: f"{pool.name}-l{leaf}", SPINE_LABEL: f"{pool.name}-s{leaf // s.spine}"}

    return [
        make_node(
            f"{pool.name}-{i:05d}",
            allocatable=pool.resources,
            labels=switched(i),
            taints=pool.taints,
            unschedulable=pool.unschedulable,
        )
        for i in range(start, start + pool.count)
    ]


def make_node(
    name: str,
    *,
    allocatable: Mapping[str, str | int | float],
    labels: Mapping[str, str] | None = None,
    taints: Sequence[TaintSpec] = (),
    unschedulable: bool = False,
) -> Node:
    """A Node as a simulated kubelet reports it: capacity = allocatable, ``pods`` 110 unless given.

    It carries ``kubernetes.io/hostname: <name>`` unless ``labels`` says otherwise.
    """
    resources = {k: str(v) for k, v in allocatable.items()}
    resources.setdefault(PODS, str(DEFAULT_MAX_PODS))
    return msgspec.convert(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"unschedulable": unschedulable, "taints": [msgspec.to_builtins(t) for t in taints]},
            "status": {"allocatable": resources, "capacity": resources},
        },
        Node,
    )
