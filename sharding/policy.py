"""The band policy (DESIGN.md §5): which scheduler owns which node. Pure and synchronous.

Per scheduler, in config order: the candidates are the nodes no earlier scheduler took
whose utilization lies in the band [MIN_UTIL, MAX_UTIL] — plus the scheduler's own
current nodes that hysteresis lets it keep; warmup nodes first when PREFER_WARMUP, then
the scheduler's current nodes (so a full shard does not churn), then the most utilized;
at most MAX_NODES are taken. Then MIN_NODES is kept, unlike Volcano's best effort: a
shard short of it borrows the nodes nearest its band by utilization (its former nodes
first among equally near ones) — unowned nodes first, then nodes of shards holding more
than their own MIN_NODES. Nodes in no band stay unowned.

Hysteresis, both ways (a Schmitt trigger around every inner band edge):
- a node *enters* a band only when its utilization is inside it by ``margin``, away from
  edges that are the ends of the scale (MIN_UTIL 0, MAX_UTIL 1: there is nothing beyond
  them to flap with);
- a node *leaves* its shard only once its utilization is outside the band by more than
  ``margin``, or has been outside the band (by any amount) for ``dwell`` seconds.
A load that wobbles around a band edge by less than the margin therefore moves a node at
most once, however long it wobbles: having left, it cannot come back without first
crossing the whole margin. MIN_NODES borrowing is not bound by the margin.
"""

from __future__ import annotations

import msgspec
import numpy as np
import numpy.typing as npt

from sharding.config import ShardConfig

NO_OWNER = -1

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class Hysteresis(msgspec.Struct, frozen=True, kw_only=True):
    """Defaults: a 0.05 margin and a 5-minute dwell. A node in a shard whose load swings
    ±0.03 around the band edge stays put; one that drifts just past the edge and stays
    there moves after 5 minutes; one that jumps clear of the edge moves at the next sync."""

    margin: float = 0.05
    dwell: float = 300.0


class NodeState(msgspec.Struct, kw_only=True):
    """The policy's input, one entry per node (arrays of equal length).

    ``owner``: index of the current owner in the configs, or NO_OWNER.
    ``outside_since``: when the node's utilization left its owner's band (NaN: inside,
    or unowned, or borrowed).
    """

    util: Floats
    warmup: Bools
    owner: Ints
    outside_since: Floats


class Assignment(msgspec.Struct, kw_only=True):
    owner: Ints
    borrowed: Bools
    outside_since: Floats


def in_band(util: Floats, config: ShardConfig, margin: float = 0.0) -> Bools:
    """Inside the band widened by ``margin``. A band reaching 1.0 is open above: an
    over-committed node (utilization past 1) is as busy as a node can be."""
    hi = config.max_util + margin if config.max_util < 1.0 else np.inf
    return (util >= config.min_util - margin) & (util <= hi)


def entry_band(util: Floats, config: ShardConfig, margin: float) -> Bools:
    """Where a node may join the band: inside it by ``margin``, except at the scale's ends."""
    lo = config.min_util + margin if config.min_util > 0.0 else -np.inf
    hi = config.max_util - margin if config.max_util < 1.0 else np.inf
    return (util >= lo) & (util <= hi)


def band_signature(util: Floats, configs: list[ShardConfig], margin: float) -> Ints:
    """Per node, a bitmask of the bands it lies in: strictly, within the margin (where a
    member may stay), and inside the entry band (where a node may join).

    A change of signature is a band-edge crossing worth an early resync."""
    sig = np.zeros(len(util), dtype=np.int64)
    for i, c in enumerate(configs):
        sig |= in_band(util, c).astype(np.int64) << (3 * i)
        sig |= in_band(util, c, margin).astype(np.int64) << (3 * i + 1)
        sig |= entry_band(util, c, margin).astype(np.int64) << (3 * i + 2)
    return sig


def assign(state: NodeState, configs: list[ShardConfig], now: float, hysteresis: Hysteresis) -> Assignment:
    """The new owner of every node."""
    n = len(state.util)
    util = state.util
    owner = np.full(n, NO_OWNER, dtype=np.int64)
    borrowed = np.zeros(n, dtype=np.bool_)
    outside = np.full(n, np.nan)

    # Hysteresis: which current members may stay although outside their band.
    retained = np.zeros(n, dtype=np.bool_)
    for ci, c in enumerate(configs):
        members = state.owner == ci
        strictly = in_band(util, c)
        since = np.where(members & ~strictly, np.where(np.isnan(state.outside_since), now, state.outside_since), np.nan)
        outside = np.where(members, since, outside)
        near = in_band(util, c, hysteresis.margin)
        retained |= members & ~strictly & near & (now - since < hysteresis.dwell)

    for ci, c in enumerate(configs):
        members = state.owner == ci
        eligible = (owner == NO_OWNER) & (
            (members & (in_band(util, c) | retained)) | entry_band(util, c, hysteresis.margin)
        )
        candidates = np.flatnonzero(eligible)
        if not len(candidates):
            continue
        keys = [-util[candidates], ~members[candidates]]
        if c.prefer_warmup:
            keys.append(~state.warmup[candidates])
        chosen = candidates[np.lexsort(keys)[: c.max_nodes]]
        owner[chosen] = ci

    counts = np.bincount(owner[owner >= 0], minlength=len(configs)) if len(configs) else np.zeros(0, dtype=np.int64)
    for ci, c in enumerate(configs):
        need = c.min_nodes - int(counts[ci])
        if need <= 0:
            continue
        distance = np.maximum(np.maximum(c.min_util - util, util - c.max_util), 0.0)
        free = np.flatnonzero(owner == NO_OWNER)
        if len(free):
            order = np.lexsort([state.owner[free] != ci, distance[free]])
            take = free[order[:need]]
            owner[take], borrowed[take] = ci, True
            counts[ci] += len(take)
            need -= len(take)
        if need <= 0:
            continue
        others = np.flatnonzero((owner >= 0) & (owner != ci))
        for i in others[np.lexsort([state.owner[others] != ci, distance[others]])]:
            donor = owner[i]
            if counts[donor] <= configs[donor].min_nodes:
                continue
            counts[donor] -= 1
            owner[i], borrowed[i] = ci, True
            counts[ci] += 1
            need -= 1
            if need == 0:
                break

    changed = owner != state.owner
    kept_outside = ~changed & (owner >= 0) & ~borrowed
    outside = np.where(kept_outside, outside, np.nan)
    return Assignment(owner=owner, borrowed=borrowed, outside_since=outside)
