"""The agent scheduler's decision core: pure, no Ray, no I/O.

Given the node table and a micro-batch of pods, each pod is placed through the agent's
profile of the placement framework (``cluster.nodeview.profile``): the predicates filter
every node at once (resources, nodeSelector, taints, required node affinity,
unschedulable, shard mode), binpack or least-allocated plus the warmup and worker-partition
bonuses score the feasible ones of the best shard rank (own, then unowned, then others in
soft mode), and a seeded draw among the top K (and any tied with the K-th) picks, so that
workers holding the same view do not all chase the same node. With several workers, each
fills its own partition of the nodes first; out of room there, it takes from the next
worker's partition, the end its owner comes to last (:class:`~cluster.nodeview.plugins.PartitionBonus`,
:class:`~cluster.nodeview.plugins.Allocated`'s ``own``). Each choice is taken on the table before the next pod, so
one batch never over-fills a node by itself; pods alike are judged over every node once a batch
(:class:`~cluster.nodeview.alike.Alike`), each take re-judging its one node.

Inter-pod affinity, anti-affinity and topology spread (required ones filter, preferred and
ScheduleAnyway ones score, as in kube-scheduler) are judged against the placed pods the loop
sends with the batch (:mod:`agent_scheduler.pod_context`), for the pods they bear on only.
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Iterator, Mapping, Sequence

import msgspec
import numpy as np

from cluster.model.core import Pod
from cluster.model.labels import WARMUP_LABEL
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.nodeview.alike import Alike, takes_alike
from cluster.nodeview.devices import CardPolicy, card_need, choose_cards
from cluster.nodeview.fgd_score import FgdConfig, FgdScore
from cluster.nodeview.plugins import (
    Allocated,
    LabelBonus,
    NodePredicates,
    PartitionBonus,
    PodPreferences,
    PodRules,
    TopK,
    partition_steps,
)
from cluster.nodeview.pod_affinity import PlacedPods, bears_rules
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.profile import Bonus, Placing, Profile, Score
from cluster.nodeview.shard import OWN, shard_rank
from cluster.nodeview.table import NodeTable


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
    # that workers sharing one view fill different nodes first and rarely collide; a worker
    # whose partition is full takes room in worker i+1's partition, then i+2's …, there the
    # emptiest nodes first (its owner fills the fullest first).
    worker: int = 0
    workers: int = 1
    partition_bonus: float = 1.0
    # Which GPU card a pod asking for one gets on its node (cluster.nodeview.devices), and
    # with fgd where its typical pods come from.
    gpu_policy: CardPolicy = CardPolicy.VOLCANO
    fgd: FgdConfig = FgdConfig()


class Task(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    pod: Pod
    request: Resources


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    node: str
    version: int
    cards: Resources = Resources()  # the GPU cards' shares it takes there


class NoFit(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    reason: str


def profile(config: CoreConfig) -> Profile:
    """The agent's profile of the placement framework: the predicates (the batch ``predicates``
    plugin's filter); binpack or least-allocated; the warmup bonus and, with several workers,
    the partition bonus (node-only scores, summed once per table topology); a seeded top-K draw."""
    bonuses: list[Bonus] = [LabelBonus(WARMUP_LABEL, "true", config.warmup_bonus)]
    own = None
    if config.workers > 1:
        own = (config.worker, config.workers)
        bonuses.append(PartitionBonus(worker=config.worker, workers=config.workers, weight=config.partition_bonus))
    scores: list[Score] = [Allocated(weights=config.weights, most=config.score is ScoreKind.BINPACK, own=own)]
    if config.gpu_policy is CardPolicy.FGD:
        scores.append(FgdScore.of(config.fgd))  # 0–100: it leads, the resource score breaks its ties
    return Profile(
        filters=(NodePredicates(),),
        scores=tuple(scores),
        bonuses=tuple(bonuses),
        select=TopK(config.candidates),
        scheduler=config.scheduler,
        sharding=config.sharding,
    )


def with_pod_rules(chosen: Profile, placed: PlacedPods) -> Profile:
    """``chosen`` judging inter-pod rules too: required ones filter, preferred ones score."""
    return dataclasses.replace(
        chosen, filters=(*chosen.filters, PodRules(placed)), scores=(*chosen.scores, PodPreferences(placed))
    )


def decide(
    columns: NodeTable,
    tasks: Sequence[Task],
    config: CoreConfig,
    rng: random.Random,
    chosen: Profile | None = None,
    placed: PlacedPods | None = None,
) -> list[Choice | NoFit]:
    """A node for each task (taken on ``columns``, so the next task sees it), or why none fits.

    ``placed``: the pods already on the nodes, for inter-pod rules (None: no pod of the batch has
    one and no placed pod has terms); each choice is added to it, so the batch's pods count each
    other. A pod is judged by the rules only when it has some or a placed pod has terms."""
    return list(decisions(columns, tasks, config, rng, chosen, placed))


def decisions(
    columns: NodeTable,
    tasks: Sequence[Task],
    config: CoreConfig,
    rng: random.Random,
    chosen: Profile | None = None,
    placed: PlacedPods | None = None,
) -> Iterator[Choice | NoFit]:
    """:func:`decide`, one task at a time: the worker commits the first pods of a batch while it
    decides the rest. Each decision is taken on ``columns`` as it is yielded; the table must not
    change otherwise until the last (the pods alike are judged once for all)."""
    if not len(columns):
        for t in tasks:
            yield NoFit(uid=t.uid, reason="0/0 nodes are available: the cluster has no nodes.")
        return
    placing = chosen if chosen is not None else profile(config)
    ruled = with_pod_rules(placing, placed) if placed is not None else placing
    fgd = next((s for s in placing.scores if isinstance(s, FgdScore)), None)
    if fgd is not None:
        fgd.observe([(t.pod, t.request) for t in tasks])
    # Pods alike judged over every node once (exact; not for GPU cards, inter-pod rules or FGD).
    alike = Alike(placing) if fgd is None and takes_alike(placing) else None
    for task in tasks:
        judged = placed is not None and (bool(placed.with_terms) or bears_rules(task.pod))
        need = card_need(task.pod, task.request)
        if alike is not None and not judged and need is None:
            row = alike.place(columns, task.pod, task.request, rng)
        else:
            row = (ruled if judged else placing).place(columns, task.pod, task.request, rng)
        if isinstance(row, Filtered):
            yield NoFit(uid=task.uid, reason=row.reason())
            continue
        name = columns.names[row]
        cards = Resources()
        if need is not None:
            first = None
            if fgd is not None and need.sharing is None:
                _, card = fgd.score_and_cards(columns, Placing(task.pod, task.request), np.array([row]))
                first = int(card[0]) if card[0] >= 0 else None
            picked = choose_cards(columns, row, need, config.gpu_policy, first)
            if picked is None:  # the filter judged the cards as they are: not reached
                yield NoFit(uid=task.uid, reason=f"no GPU card on {name} has room for the pod")
                continue
            cards = picked
        columns.take(name, task.request)
        if cards:
            columns.take(name, cards)
        if alike is not None:
            alike.taken(row)
        if placed is not None:
            placed.add(task.uid, task.pod, row)
        yield Choice(uid=task.uid, node=name, version=int(columns.version[row]), cards=cards)


def partition_room(columns: NodeTable, requests: Sequence[Resources], config: CoreConfig) -> int | None:
    """How many more pods like ``requests`` (their mean) fit on the nodes this worker fills
    first: its partition (:class:`~cluster.nodeview.plugins.PartitionBonus`) of the usable nodes
    of the best shard rank that has room for one (own, else unowned, else others': a worse rank
    comes after every partition of a better one) — as its replica has them now. The loop sizes the
    worker's share of a burst by it, so that a partition short of room is not handed pods it
    would place in another worker's. None with one worker (no partitions) or no request."""
    if config.workers <= 1 or not requests or not len(columns):
        return None
    n = len(columns)
    totals: dict[str, int] = {}
    for r in requests:
        for name, amount in r.items():
            totals[name] = totals.get(name, 0) + amount
    mean = {name: -(-amount // len(requests)) for name, amount in totals.items() if amount > 0}
    if not mean:
        return None
    usable = columns.unschedulable[:n] == 0
    rank = shard_rank(columns, config.scheduler, config.sharding)
    if config.sharding is ShardingMode.HARD:
        usable &= rank == OWN
    fits = np.where(usable, np.iinfo(np.int64).max, 0)
    for name, amount in mean.items():
        row = columns.resource_index.get(name)
        if row is None:
            return 0
        free = columns.allocatable[row, :n] - columns.allocated[row, :n]
        np.minimum(fits, np.maximum(free, 0) // amount, out=fits)
    roomy = fits > 0
    if not roomy.any():
        return 0
    # the best shard rank with room: a worse one comes after every partition of it
    mine = (rank == rank[roomy].min()) & (partition_steps(columns, config.worker, config.workers) == 0)
    return int(fits[mine].sum())
