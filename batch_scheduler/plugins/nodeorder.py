"""nodeorder: kube-scheduler's node scores times Volcano's weights, over all nodes at once — Volcano's nodeorder plugin.

The plugin is the placement framework's :class:`~cluster.nodeview.plugins.NodeOrder`
score, built from the conf's weights (an agent profile can run the same one).

Each score is kube-scheduler's integer in [0, 100], computed as Volcano's plugin gets it
(so a weight means what it means in Volcano), times its weight, and the plugin answers
their sum. Arguments (Volcano's names and defaults; a number that is not an integer leaves
the default, as in Volcano; weight 0 turns a score off):

- ``leastrequested.weight`` (1): free cpu and memory after placing, the two averaged
  with weights 50/50; a container stating no cpu counts 100m, no memory 200Mi;
- ``mostrequested.weight`` (0): the same, used instead of free (pack);
- ``balancedresource.weight`` (1): 100 × (1 − the spread of the used fractions of cpu,
  memory and ``nvidia.com/gpu`` when the pod asks for GPUs);
- ``nodeaffinity.weight`` (2): the summed weight of the preferred node-affinity terms the
  node matches (not normalised, as Volcano calls it);
- ``tainttoleration.weight`` (3): fewer untolerated ``PreferNoSchedule`` taints is
  better, normalised to 100 for the node with none.

- ``podaffinity.weight`` (2): kube-scheduler's InterPodAffinity score — preferred inter-pod
  affinity and anti-affinity, the pod's own and placed pods' terms that select it
  (:mod:`cluster.nodeview.pod_scores`);
- ``podtopologyspread.weight`` (2): kube-scheduler's PodTopologySpread score for the pod's
  ``ScheduleAnyway`` constraints.

These two depend on where the session has put other pods, so they answer through the
``PlacedScore`` point (asked for each placement), and only for pods they bear on.
``imagelocality.weight`` is read as Volcano reads it, but caldera does not model images, so
it adds nothing (an image-less node scores 0 in Volcano too).

Where caldera's figures differ from Volcano's: least/most requested count the pods
already on a node by their requests (kube-scheduler counts 100m/200Mi for an existing
container stating none); taint scores are normalised over the nodes the predicates allow
the task, free resources aside (Volcano normalises over the nodes with room now); and
in-session placements count even without the predicates plugin (Volcano's node view is
updated by that plugin).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import msgspec

from batch_scheduler.arguments import Arguments, weight
from batch_scheduler.framework import PluginBase
from batch_scheduler.tasks import TaskInfo
from cluster.nodeview.plugins import NODE_ORDER_WEIGHTS, NodeOrder
from cluster.nodeview.pod_scores import affinity_score, spread_score, wants_affinity_score, wants_spread_score
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import Mask, NodeTable

DEFAULTS = NODE_ORDER_WEIGHTS
PLACED = {"podaffinity.weight": 2, "podtopologyspread.weight": 2}
NO_EFFECT = {
    "imagelocality.weight": 1,
    "selectorspread.weight": 0,
    "volumebinding.weight": 0,
}


class NodeOrderArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset(DEFAULTS) | frozenset(PLACED) | frozenset(NO_EFFECT)
    weights: Mapping[str, int] = msgspec.field(default_factory=lambda: dict(DEFAULTS))  # the node-only scores
    affinity_weight: int = PLACED["podaffinity.weight"]
    spread_weight: int = PLACED["podtopologyspread.weight"]

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        for name, default in NO_EFFECT.items():
            weight(arguments, name, default)
        return cls(
            weights={name: weight(arguments, name, default) for name, default in DEFAULTS.items()},
            affinity_weight=weight(arguments, "podaffinity.weight", PLACED["podaffinity.weight"]),
            spread_weight=weight(arguments, "podtopologyspread.weight", PLACED["podtopologyspread.weight"]),
        )


class NodeOrderPlugin(PluginBase[NodeOrderArguments]):
    def __init__(self, name: str, args: NodeOrderArguments) -> None:
        super().__init__(name, args)
        self.node_order = NodeOrder(weights=args.weights)

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        return self.node_order.score(table, placing, rows)

    def placed_score(self, task: TaskInfo, candidates: Mask) -> Values | None:
        args, ssn, pod = self.args, self.ssn, task.pod
        total: Values | None = None
        if args.affinity_weight and (wants_affinity_score(pod) or ssn.pods_with_terms):
            found = affinity_score(ssn.columns, pod, ssn.placed, candidates)
            if found is not None:
                total = found * args.affinity_weight
        if args.spread_weight and wants_spread_score(pod):
            found = spread_score(ssn.columns, pod, ssn.placed, candidates)
            if found is not None:
                total = found * args.spread_weight if total is None else total + found * args.spread_weight
        return total
