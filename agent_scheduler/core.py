"""The agent scheduler's decision core: pure, no Ray, no I/O.

Given the node columns of the shard and a micro-batch of pods: filter every node at once
(resources, nodeSelector, taints, required node affinity, unschedulable, shard mode),
score the feasible ones (binpack or least-allocated, plus a bonus for warmup nodes), and
pick among the top K at random (seeded) so that workers holding the same view do not all
chase the same node. Each choice is applied to the columns before the next pod, so one
batch never over-fills a node by itself. In soft sharding mode the scheduler's own
nodes come first, then unowned nodes, then others.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from cluster.model.core import Pod
from cluster.model.labels import WARMUP_LABEL
from cluster.model.resources import Resources
from cluster.nodeview.predicates import filter_nodes
from cluster.nodeview.scores import label_bonus, least_allocated, most_allocated
from cluster.nodeview.shard import ShardingMode, shard_feasible, shard_rank
from cluster.nodeview.table import NodeColumns


class ScoreKind(enum.StrEnum):
    BINPACK = "binpack"
    LEAST_ALLOCATED = "least-allocated"


class CoreConfig(msgspec.Struct, frozen=True, kw_only=True):
    scheduler: str = "agent-scheduler"
    sharding: ShardingMode = ShardingMode.SOFT
    score: ScoreKind = ScoreKind.BINPACK
    weights: Mapping[str, float] = msgspec.field(default_factory=lambda: {"cpu": 1.0, "memory": 1.0})
    candidates: int = 3
    warmup_bonus: float = 0.1
    # Worker partitions: worker i of n prefers the nodes whose name hashes to i (mod n), so
    # that workers sharing one view fill different nodes first and rarely collide; a
    # worker whose partition is full falls back to the rest.
    worker: int = 0
    workers: int = 1
    partition_bonus: float = 1.0


class Task(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    pod: Pod
    request: Resources


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    node: str
    version: int


class NoFit(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    reason: str


def _standing(columns: NodeColumns, config: CoreConfig) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """What does not change from pod to pod or batch to batch: the nodes the shard allows,
    their shard rank, and their bonus (warmup label, this worker's partition)."""
    allowed = shard_feasible(columns, config.scheduler, config.sharding)
    rank = shard_rank(columns, config.scheduler, config.sharding)
    bonus = label_bonus(columns, WARMUP_LABEL, "true") * config.warmup_bonus
    if config.workers > 1:
        bonus = bonus + (columns.name_hash[: len(columns)] % config.workers == config.worker) * config.partition_bonus
    for shared in (allowed, rank, bonus):  # kept across batches: nothing may write to them
        shared.flags.writeable = False
    return allowed, rank, bonus


def decide(columns: NodeColumns, tasks: Sequence[Task], config: CoreConfig, rng: random.Random) -> list[Choice | NoFit]:
    """A node for each task (applied to ``columns``), or why none fits."""
    out: list[Choice | NoFit] = []
    if not len(columns):
        return [NoFit(uid=t.uid, reason="0/0 nodes are available: the cluster has no nodes.") for t in tasks]
    key = ("agent-core", config.scheduler, config.sharding, config.warmup_bonus, config.worker, config.workers, config.partition_bonus)
    allowed, rank, bonus = columns.derived(key, lambda: _standing(columns, config))
    score_fn = most_allocated if config.score is ScoreKind.BINPACK else least_allocated
    for task in tasks:
        filtered = filter_nodes(columns, task.pod, task.request, allowed=allowed)
        idx = np.flatnonzero(filtered.mask)
        if not len(idx):
            out.append(NoFit(uid=task.uid, reason=filtered.reason()))
            continue
        tiers = rank[idx]
        idx = idx[tiers == tiers.min()]
        score = score_fn(columns, task.request, config.weights)[idx]
        score = score + bonus[idx]
        k = min(config.candidates, len(idx))
        top = idx[np.argpartition(-score, k - 1)[:k]] if k < len(idx) else idx
        i = int(top[rng.randrange(len(top))])
        name = columns.names[i]
        columns.add(name, task.request)
        out.append(Choice(uid=task.uid, node=name, version=int(columns.version[i])))
    return out
