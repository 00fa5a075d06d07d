"""network-topology-aware's node scores (Volcano's ``batchNodeOrderFn``), per node in [0, 1] (up to 2 with the tie share).

The tiers both scores run over are every tier from the lowest HyperNode's up to the cluster
root's (one above the highest HyperNode's), as in Volcano, whose session counts its virtual
root among the tiers.

- **A pod of a job with a network topology** (its subgroup's, else its job's): once the job has
  placed tasks, their lowest common HyperNode A is the job's domain; a node whose own (lowest)
  HyperNode is A scores 1, any other (rootTier − tier of the lowest HyperNode holding both) ÷
  (rootTier − lowestTier) — 0 when only the cluster's root holds both, or the node is in no
  HyperNode. Where several candidate nodes share the best score, each adds the share of the
  subgroup's tasks placed on its HyperNode's nodes. A job with nothing placed yet gets no
  score (the first task goes where the other plugins say).
- **Any other pod** (``hypernode.binpack.normal-pod.enable``, on by default): per tier t,
  weight fading^(t − 1), the HyperNode binpack score of the node's HyperNode of that tier for
  the pod's request (1 where the node is in none: pods stay off HyperNodes when they can; at
  the root's tier, the whole cluster's), weighted mean over the tiers — plain pods fill
  domains and leave whole ones free.

Both depend on where the session has put other pods, so they answer through the ``PlacedScore``
point; the plugin multiplies by 100 × ``weight``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo
from cluster.model.resources import Resources
from cluster.nodeview.topology import ROOT, DomainSums, Topology

Values = npt.NDArray[np.float64]


class TierIndex:
    """The tiers the scores run over — every tier from the lowest HyperNode's up to the cluster
    root's, as Volcano's session counts them (its virtual root is one of its tiers) — and, per
    tier, each node row's domain of that tier (−1: none)."""

    def __init__(self, topology: Topology) -> None:
        low = min((d.tier for d in topology.domains.values() if d.name != ROOT), default=topology.root.tier)
        self.low, self.high = low, topology.root.tier
        self.tiers = list(range(low, self.high + 1))
        self.n = len(topology.leaf)
        order = topology.order
        position = {name: d for d, name in enumerate(order)}
        chains = [[position[a.name] for a in topology.ancestors(name)] for name in order]  # itself first
        depth = max(len(c) for c in chains)
        root = position[ROOT]
        # Per domain (a row), its chain of ancestors, itself first, padded with the root.
        self.chain = np.array([c + [root] * (depth - len(c)) for c in chains], dtype=np.intp)
        tier_of = np.array([topology.domains[name].tier for name in order], dtype=np.int64)
        self.tier_score_of = np.array([self.tier_score(int(t)) for t in tier_of], dtype=np.float64)
        # Per tier some domain has, each node row's domain of that tier (−1: none) — by membership,
        # not by the tree, as Volcano reads it; rows alike in all of them share a class.
        by_tier: dict[int, npt.NDArray[np.intp]] = {}
        for d, name in enumerate(order):
            domain = topology.domains[name]
            at = by_tier.get(domain.tier)
            if at is None:
                at = by_tier[domain.tier] = np.full(self.n, -1, dtype=np.intp)
            at[domain.rows] = d
        self.tiers_present = sorted(by_tier)
        stacked = np.stack([by_tier[t] for t in self.tiers_present], axis=1) if by_tier else np.zeros((self.n, 0))
        classes, inverse = np.unique(stacked, axis=0, return_inverse=True)
        self.classes: npt.NDArray[np.intp] = classes.astype(np.intp)  # class x tier -> domain (−1: none)
        self.row_class: npt.NDArray[np.intp] = inverse.reshape(-1).astype(np.intp)
        self.root = root
        self.position = position  # domain name -> index in topology.order
        self._lca_scores: dict[int, Values] = {}

    def tier_score(self, tier: int) -> float:
        """(root tier − ``tier``) ÷ (root tier − lowest tier): 1 for the lowest, 0 for the root."""
        if self.high == self.low:
            return 1.0
        return (self.high - tier) / (self.high - self.low) if self.low <= tier <= self.high else 0.0

    def lca_scores(self, allocated: int) -> Values:
        """Per domain index, the score of a node whose lowest HyperNode it is, against domain
        ``allocated``: 1 for that domain itself, else the tier score of the lowest domain holding
        both; 0 for the root (a node in no HyperNode). Over every domain at once."""
        known = self._lca_scores.get(allocated)
        if known is not None:
            return known
        chain = self.chain
        shared = np.isin(chain, chain[allocated])  # the ancestors each domain shares with it
        lca = chain[np.arange(len(chain)), shared.argmax(axis=1)]  # the first: the lowest (the root at the latest)
        out: Values = self.tier_score_of[lca]  # a copy (fancy indexing)
        out[allocated] = 1.0
        out[self.root] = 0.0
        self._lca_scores[allocated] = out
        return out


def job_domain_scores(
    topology: Topology, index: TierIndex, rows: list[int], tasks: int, candidates: npt.NDArray[np.bool_]
) -> Values | None:
    """The topology pod's score per node, ``rows`` the nodes of its subgroup's placed tasks (None: none)."""
    if not rows or len(index.tiers) <= 1:
        return None
    allocated = index.position[topology.lowest_holding(rows).name]
    leaf = topology.leaf
    score = index.lca_scores(allocated)[leaf]
    if not candidates.any():
        return score
    best = float(score[candidates].max())
    tied = candidates & (score == best)
    if np.count_nonzero(tied) > 1 and tasks:
        # Each tied node adds the share of the tasks placed on its HyperNode's nodes (sub-HyperNodes'
        # included); a node in no HyperNode adds nothing.
        placed = np.asarray(rows, dtype=np.intp)
        counts = np.zeros(len(topology.order), dtype=np.float64)
        for d in np.unique(leaf[tied]).tolist():
            if d:  # 0: the root
                counts[d] = np.count_nonzero(topology.domains[topology.order[d]].mask[placed])
        score = score + np.where(tied, counts[leaf] / tasks, 0.0)
    return score


def normal_pod_scores(
    sums: DomainSums,
    index: TierIndex,
    request: Resources,
    weights: Mapping[str, int],
    fading: float,
) -> Values | None:
    """The plain pod's score per node: HyperNode binpack per tier, fading with the tier."""
    if len(index.tiers) <= 1:
        return None
    tier_weights = {t: _fade(fading, t) for t in index.tiers}
    weight_sum = sum(tier_weights.values())
    if weight_sum <= 0:
        return None
    every = domain_binpack(sums, np.arange(sums.capacity.shape[1]), request, weights)
    per_class = np.zeros(len(index.classes), dtype=np.float64)  # rows of one class score alike
    for t, w in tier_weights.items():
        if t not in index.tiers_present:
            per_class += w  # no HyperNode of this tier: a full score (pods stay off HyperNodes when they can)
        elif w:
            domains = index.classes[:, index.tiers_present.index(t)]
            per_class += w * np.where(domains >= 0, every[np.maximum(domains, 0)], 1.0)
    out: Values = per_class[index.row_class] / weight_sum
    return out


def _fade(fading: float, tier: int) -> float:
    """A tier's weight, fading^(tier − 1) (0^0 = 1: with fading 0 only tier 1 counts)."""
    if fading == 0:
        return 1.0 if tier == 1 else 0.0
    return float(fading ** (tier - 1))


def domain_binpack(
    sums: DomainSums, columns: npt.NDArray[np.intp], request: Resources, weights: Mapping[str, int]
) -> Values:
    """Volcano's HyperNode binpack score in [0, 1] of each column: 0 where ``request`` overflows it in
    a resource with a weight — weight 0 included, as in Volcano, which checks it and adds nothing."""
    total = np.zeros(len(columns), dtype=np.float64)
    short = np.zeros(len(columns), dtype=np.bool_)
    weight_sum = 0.0
    for name, w in weights.items():
        amount = request.get(name, 0)
        if amount <= 0:
            continue
        weight_sum += w
        r = sums.resource_index.get(name)
        if r is None:
            short[:] = True
            continue
        cap = sums.capacity[r, columns].astype(np.float64)
        after = sums.used[r, columns] + amount
        short |= after > cap
        total += w * np.divide(after, cap, out=np.zeros(len(columns)), where=cap > 0)
    out = total / weight_sum if weight_sum else total
    out[short] = 0.0
    return out


def placed_rows(tasks: list[TaskInfo], index: Mapping[str, int]) -> list[int]:
    """The node rows of the tasks that hold a node (placed this session or before)."""
    return [index[t.node] for t in tasks if t.status in ALLOCATED_STATUSES and t.node in index]
