"""How a scheduler uses its shard: the view of "my nodes" that both schedulers share.

``hard``: only the nodes the scheduler owns are feasible (and the binder refuses others);
``soft`` (default): every node is feasible, preferred in the order own, unowned, others —
safe here because the binder re-checks fit atomically; ``none``: shards are ignored.
"""

from __future__ import annotations

import enum

import numpy as np
import numpy.typing as npt

from cluster.model.sharding import ShardingMode
from cluster.nodeview.table import NodeTable


class Rank(enum.IntEnum):
    """A node's place in a scheduler's order of preference (lower first)."""

    OWN = 0
    UNOWNED = 1
    OTHER = 2


OWN, UNOWNED, OTHER = Rank.OWN, Rank.UNOWNED, Rank.OTHER


def shard_rank(columns: NodeTable, scheduler: str, mode: ShardingMode) -> npt.NDArray[np.int8]:
    """Per node: OWN, UNOWNED or OTHER; with mode ``none`` every node ranks as OWN."""
    n = len(columns)
    if mode is ShardingMode.NONE:
        return np.zeros(n, dtype=np.int8)
    owners = columns.owner_array()
    rank = np.full(n, OTHER, dtype=np.int8)
    rank[owners == ""] = UNOWNED
    rank[owners == scheduler] = OWN
    return rank


RANK_PENALTY = 1e9
"""Far above any sum of score plugins: a node of a worse rank never beats one of a better rank."""


def preference_penalty(rank: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
    """What each node's score loses for its shard rank: own shard first, then unowned, then others."""
    penalty: npt.NDArray[np.float64] = rank.astype(np.float64) * RANK_PENALTY
    return penalty


def shard_feasible(columns: NodeTable, scheduler: str, mode: ShardingMode) -> npt.NDArray[np.bool_]:
    """Nodes the scheduler may use at all: its own in hard mode, every node otherwise."""
    if mode is ShardingMode.HARD:
        return np.asarray(columns.owner_array() == scheduler, dtype=np.bool_)
    return np.ones(len(columns), dtype=np.bool_)
