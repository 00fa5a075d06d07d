"""nodeorder: kube-scheduler's node scores, weighted, over all nodes at once.

Arguments (Volcano's names; weight 0 turns a score off): ``leastrequested.weight`` (1,
spread), ``mostrequested.weight`` (0, pack), ``balancedresource.weight`` (1),
``nodeaffinity.weight`` (1, preferred node affinity), ``tainttoleration.weight`` (1,
fewer untolerated PreferNoSchedule taints is better). Each score is in [0, 1] before its
weight. ``podaffinity``, ``imagelocality``, ``podtopologyspread``, ``selectorspread`` and
``volumebinding`` weights are accepted for existing confs; caldera does not model those
features, so they have no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.framework import check_arguments, number
from batch_scheduler.info import TaskInfo
from cluster.model import Toleration
from cluster.predicates import tolerates
from cluster.scores import Index, Scores, balanced_allocation, least_allocated, most_allocated, preferred_affinity

if TYPE_CHECKING:
    from batch_scheduler.session import Session

DEFAULTS = {"leastrequested.weight": 1.0, "mostrequested.weight": 0.0, "balancedresource.weight": 1.0,
            "nodeaffinity.weight": 1.0, "tainttoleration.weight": 1.0}
NO_EFFECT = ("podaffinity.weight", "imagelocality.weight", "podtopologyspread.weight", "selectorspread.weight",
             "volumebinding.weight")
CPU_MEMORY = {"cpu": 1.0, "memory": 1.0}


class NodeOrderPlugin:
    name = "nodeorder"

    def __init__(self, weights: Mapping[str, float]) -> None:
        self.weights = weights

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> NodeOrderPlugin:
        check_arguments(cls.name, arguments, [*DEFAULTS, *NO_EFFECT])
        for name in NO_EFFECT:
            number(arguments, name, 0.0)
        return cls({name: number(arguments, name, default) for name, default in DEFAULTS.items()})

    def open(self, ssn: Session) -> None:
        self._taint_scores: dict[tuple[Toleration, ...], Scores] = {}

    def _taint_score(self, ssn: Session, tolerations: tuple[Toleration, ...]) -> Scores:
        cached = self._taint_scores.get(tolerations)
        if cached is None:
            counts = np.fromiter(
                (sum(1 for t in taints if t.effect == "PreferNoSchedule" and not any(tolerates(x, t) for x in tolerations))
                 for taints in ssn.columns.taints), dtype=np.float64, count=ssn.n)
            top = counts.max() if len(counts) else 0.0
            cached = 1.0 - counts / top if top > 0 else np.ones(ssn.n, dtype=np.float64)
            self._taint_scores[tolerations] = cached
        return cached

    def node_scores(self, ssn: Session, task: TaskInfo, nodes: Index | None = None) -> Scores:
        w, cols, req = self.weights, ssn.columns, task.request
        every: slice | Index = slice(None) if nodes is None else nodes
        total = np.zeros(ssn.n if nodes is None else len(nodes), dtype=np.float64)
        if w["leastrequested.weight"]:
            total += w["leastrequested.weight"] * least_allocated(cols, req, CPU_MEMORY, nodes)
        if w["mostrequested.weight"]:
            total += w["mostrequested.weight"] * most_allocated(cols, req, CPU_MEMORY, nodes)
        if w["balancedresource.weight"]:
            total += w["balancedresource.weight"] * balanced_allocation(cols, req, nodes=nodes)
        affinity = task.pod.spec.affinity
        terms = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution if (
            affinity and affinity.node_affinity) else []
        if w["nodeaffinity.weight"] and terms:
            total += w["nodeaffinity.weight"] * preferred_affinity(cols, terms)[every]
        if w["tainttoleration.weight"]:
            total += w["tainttoleration.weight"] * self._taint_score(ssn, tuple(task.pod.spec.tolerations))[every]
        return total
