"""nodeorder: kube-scheduler's node scores times Volcano's weights, over all nodes at once — Volcano's nodeorder plugin.

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
import numpy as np

from batch_scheduler.arguments import Arguments, weight
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.tasks import TaskInfo
from cluster.model.core import Pod
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.nodeview.predicates import tolerates
from cluster.nodeview.scores import (
    DEFAULT_MEMORY,
    DEFAULT_MILLI_CPU,
    Index,
    Scores,
    balanced_resource_score,
    default_normalize,
    preferred_affinity_weight,
    requested_score,
)

DEFAULTS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "tainttoleration.weight": 3,
}
NO_EFFECT = {
    "podaffinity.weight": 2,
    "imagelocality.weight": 1,
    "podtopologyspread.weight": 2,
    "selectorspread.weight": 0,
    "volumebinding.weight": 0,
}
LEAST_WEIGHTS = {CPU: 50, MEMORY: 50}  # Volcano's NodeResourcesFit args for LeastAllocated
MOST_WEIGHTS = {CPU: 1, MEMORY: 1}


def nonzero_request(pod: Pod, request: Resources) -> Resources:
    """The request kube-scheduler's least/most requested score: a container that states no cpu
    (request or limit) counts 100m, no memory 200Mi (``NonMissingContainerRequests``)."""
    extra: dict[str, int] = {}
    level = pod.spec.resources
    for name, default in ((CPU, DEFAULT_MILLI_CPU), (MEMORY, DEFAULT_MEMORY)):
        if level is not None and (name in level.requests or name in level.limits):
            continue
        missing = sum(
            1 for c in pod.spec.containers if name not in c.resources.requests and name not in c.resources.limits
        )
        if missing:
            extra[name] = missing * default
    return request + extra if extra else request


class NodeOrderArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset(DEFAULTS) | frozenset(NO_EFFECT)
    weights: Mapping[str, int] = msgspec.field(default_factory=lambda: dict(DEFAULTS))  # those with an effect

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        for name, default in NO_EFFECT.items():
            weight(arguments, name, default)
        return cls(weights={name: weight(arguments, name, default) for name, default in DEFAULTS.items()})


class NodeOrderPlugin(PluginBase[NodeOrderArguments]):
    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        self._taint_scores: dict[bytes, Scores] = {}

    def _taint_score(self, ssn: SessionView, task: TaskInfo) -> Scores:
        """kube-scheduler's TaintToleration score per node, normalised over the nodes the task may go to."""
        key = task.template[1]
        cached = self._taint_scores.get(key)
        if cached is None:
            tolerations = [t for t in task.pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
            counts = np.fromiter(
                (
                    sum(
                        1
                        for t in taints
                        if t.effect == "PreferNoSchedule" and not any(tolerates(x, t) for x in tolerations)
                    )
                    for taints in ssn.columns.taints[: ssn.n]
                ),
                dtype=np.float64,
                count=ssn.n,
            )
            allowed = ssn.feasible(task, ignore_resources=True).mask
            cached = np.zeros(ssn.n, dtype=np.float64)
            cached[allowed] = default_normalize(counts[allowed], reverse=True)
            self._taint_scores[key] = cached
        return cached

    def node_scores(self, ssn: SessionView, task: TaskInfo, nodes: Index | None = None) -> Scores:
        w, cols, req = self.args.weights, ssn.columns, task.request
        every: slice | Index = slice(None) if nodes is None else nodes
        total = np.zeros(ssn.n if nodes is None else len(nodes), dtype=np.float64)
        if w["leastrequested.weight"] or w["mostrequested.weight"]:
            nonzero = nonzero_request(task.pod, req)
            if w["leastrequested.weight"]:
                total += w["leastrequested.weight"] * requested_score(
                    cols, nonzero, LEAST_WEIGHTS, most=False, nodes=nodes
                )
            if w["mostrequested.weight"]:
                total += w["mostrequested.weight"] * requested_score(
                    cols, nonzero, MOST_WEIGHTS, most=True, nodes=nodes
                )
        if w["balancedresource.weight"]:
            total += w["balancedresource.weight"] * balanced_resource_score(cols, req, nodes=nodes)
        affinity = task.pod.spec.affinity
        terms = (
            affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
            if (affinity and affinity.node_affinity)
            else []
        )
        if w["nodeaffinity.weight"] and terms:
            total += w["nodeaffinity.weight"] * preferred_affinity_weight(cols, terms)[every]
        if w["tainttoleration.weight"]:
            total += w["tainttoleration.weight"] * self._taint_score(ssn, task)[every]
        return total
