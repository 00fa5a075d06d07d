"""network-topology-aware: HyperNode binpack — a gang goes to the fullest network domain it fits in,
so whole domains stay free for the next big gang (Volcano 1.14's plugin, its HyperNode score).

For each domain a gang (or one subgroup) could go to, with R the summed request of its tasks to place and
"used" the domain's allocated amounts (its nodes summed): over cpu, memory and the resources
``hypernode.binpack.resources`` lists, the weighted mean of (used + R) ÷ allocatable, 0 when
R overflows some resource; when several domains share the highest score, each gets the share
of the job's tasks already on its nodes added; then × 100 × ``weight``.

Arguments (Volcano's): ``weight`` (1; negative: 1), ``hypernode.binpack.cpu`` (1),
``hypernode.binpack.memory`` (1), ``hypernode.binpack.resources`` (extra names,
comma-separated), ``hypernode.binpack.resources.<name>`` (1),
``hypernode.binpack.normal-pod.enable`` (true), ``hypernode.binpack.normal-pod.fading`` (0.8).
The plugin's node scores — pods without a topology binpacked across tiers (the two
normal-pod arguments), and a job's later pods pulled towards the domain of its earlier
ones — are not honoured yet; a conf naming the plugin says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

import msgspec

from batch_scheduler.arguments import Arguments, flag, number, weight
from batch_scheduler.framework import PluginBase
from batch_scheduler.jobs import JobInfo
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.nodeview.topology import Domain

PREFIX = "hypernode.binpack."
RESOURCES = PREFIX + "resources"
NORMAL_POD = PREFIX + "normal-pod.enable"
FADING = PREFIX + "normal-pod.fading"


class NetworkTopologyArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({"weight", PREFIX + "cpu", PREFIX + "memory", RESOURCES, NORMAL_POD, FADING})
    prefixes = (RESOURCES + ".",)
    unhonoured = (
        "its node scores (normal-pod binpack across tiers, a job's later pods pulled towards its domain) "
        "are not honoured yet; its HyperNode binpack is"
    )
    weight: int = 1
    resource_weights: Mapping[str, int] = msgspec.field(default_factory=lambda: {CPU: 1, MEMORY: 1})
    normal_pod: bool = True
    fading: float = 0.8

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        listed = [r.strip() for r in arguments.get(RESOURCES, "").split(",") if r.strip()]
        weights = {CPU: weight(arguments, PREFIX + "cpu", 1), MEMORY: weight(arguments, PREFIX + "memory", 1)}
        weights.update({r: weight(arguments, f"{RESOURCES}.{r}", 1) for r in listed})
        return cls(
            weight=weight(arguments, "weight", 1, negative=1),
            resource_weights=weights,
            normal_pod=flag(arguments, NORMAL_POD),
            fading=number(arguments, FADING, 0.8),
        )


class NetworkTopologyPlugin(PluginBase[NetworkTopologyArguments]):
    def _binpack(self, used: Resources, capacity: Resources, request: Resources) -> float:
        total = weights = 0.0
        for name, w in self.args.resource_weights.items():
            amount = request.get(name, 0)
            if amount <= 0 or w == 0:
                continue
            cap = capacity.get(name, 0)
            if used.get(name, 0) + amount > cap:
                return 0.0
            total += w * (used.get(name, 0) + amount) / cap
            weights += w
        return total / weights if weights else 0.0

    def hypernode_scores(
        self, job: JobInfo, tasks: Sequence[TaskInfo], domains: Sequence[Domain]
    ) -> Mapping[str, float]:
        cols = self.ssn.columns
        request = Resources()
        for t in tasks:
            request = request + t.request
        scores: dict[str, float] = {}
        for d in domains:
            used = Resources({r: int(cols.allocated[i, d.rows].sum()) for i, r in enumerate(cols.resources)})
            capacity = Resources({r: int(cols.allocatable[i, d.rows].sum()) for i, r in enumerate(cols.resources)})
            scores[d.name] = 100.0 * self.args.weight * self._binpack(used, capacity, request)
        best = max(scores.values(), default=0.0)
        tied = [d for d in domains if scores[d.name] == best]
        if len(tied) > 1 and job.tasks:
            index = cols.index
            for d in tied:
                placed = sum(
                    1
                    for t in job.tasks.values()
                    if t.status in ALLOCATED_STATUSES and t.node in index and d.mask[index[t.node]]
                )
                scores[d.name] += 100.0 * self.args.weight * placed / len(job.tasks)
        return scores
