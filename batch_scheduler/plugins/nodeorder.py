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

``podaffinity.weight``, ``imagelocality.weight`` and ``podtopologyspread.weight`` are read
as Volcano reads them but caldera models neither inter-pod affinity, nor images, nor
spread constraints, so they add nothing (an image-less node scores 0 in Volcano too).

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
from cluster.nodeview.plugins import NODE_ORDER_WEIGHTS, NodeOrder
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import NodeTable

DEFAULTS = NODE_ORDER_WEIGHTS
NO_EFFECT = {
    "podaffinity.weight": 2,
    "imagelocality.weight": 1,
    "podtopologyspread.weight": 2,
    "selectorspread.weight": 0,
    "volumebinding.weight": 0,
}


class NodeOrderArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset(DEFAULTS) | frozenset(NO_EFFECT)
    weights: Mapping[str, int] = msgspec.field(default_factory=lambda: dict(DEFAULTS))  # those with an effect

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        for name, default in NO_EFFECT.items():
            weight(arguments, name, default)
        return cls(weights={name: weight(arguments, name, default) for name, default in DEFAULTS.items()})


class NodeOrderPlugin(PluginBase[NodeOrderArguments]):
    def __init__(self, name: str, args: NodeOrderArguments) -> None:
        super().__init__(name, args)
        self.node_order = NodeOrder(weights=args.weights)

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        return self.node_order.score(table, placing, rows)
