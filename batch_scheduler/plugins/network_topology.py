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
Its node scores (:mod:`batch_scheduler.plugins.network_topology_nodes`): a job's later pods
pulled towards the domain of its earlier ones, and pods without a topology binpacked across
tiers (the two normal-pod arguments), × 100 × ``weight``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

import msgspec
import numpy as np
import numpy.typing as npt

from batch_scheduler.arguments import Arguments, flag, number, weight
from batch_scheduler.framework import PluginBase
from batch_scheduler.jobs import JobInfo, SubJob
from batch_scheduler.plugins.network_topology_nodes import (
    TierIndex,
    domain_binpack,
    job_domain_scores,
    normal_pod_scores,
    placed_rows,
)
from batch_scheduler.tasks import TaskInfo
from cluster.model.resources import CPU, MEMORY, Resources
from cluster.model.topology import NetworkTopologySpec
from cluster.nodeview.profile import Values
from cluster.nodeview.table import Mask
from cluster.nodeview.topology import Domain

PREFIX = "hypernode.binpack."
RESOURCES = PREFIX + "resources"
NORMAL_POD = PREFIX + "normal-pod.enable"
FADING = PREFIX + "normal-pod.fading"


class NetworkTopologyArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({"weight", PREFIX + "cpu", PREFIX + "memory", RESOURCES, NORMAL_POD, FADING})
    prefixes = (RESOURCES + ".",)
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
    _tiers: TierIndex | None = None
    _sub_jobs: dict[str, SubJob] | None = None

    def _binpack(self, domains: Sequence[Domain], request: Resources) -> npt.NDArray[np.float64]:
        """The HyperNode binpack score in [0, 1] of each domain (0 where ``request`` overflows it)."""
        sums = self.ssn.domain_sums
        return domain_binpack(sums, sums.columns(domains), request, self.args.resource_weights)

    def placed_score(self, task: TaskInfo, candidates: Mask) -> Values | None:
        ssn = self.ssn
        job = ssn.jobs.get(task.job)
        if job is None or len(ssn.topology.domains) <= 1:
            return None  # no HyperNodes: nothing to score by
        if self._tiers is None:
            self._tiers = TierIndex(ssn.topology)
        tasks, spec = self._gang_of(job, task)
        if spec is not None:
            found = job_domain_scores(
                ssn.topology, self._tiers, placed_rows(tasks, ssn.columns.index), len(tasks), candidates
            )
        elif self.args.normal_pod:
            found = normal_pod_scores(
                ssn.domain_sums,
                self._tiers,
                task.request,
                self.args.resource_weights,
                self.args.fading,
            )
        else:
            return None
        return None if found is None else found * (100.0 * self.args.weight)

    def _gang_of(self, job: JobInfo, task: TaskInfo) -> tuple[list[TaskInfo], NetworkTopologySpec | None]:
        """The task's subgroup (its tasks) and the network topology it asks for (None: none)."""
        if job.sub_jobs:
            if self._sub_jobs is None:
                self._sub_jobs = {t.uid: s for j in self.ssn.jobs.values() for s in j.sub_jobs for t in s.tasks}
            sub = self._sub_jobs.get(task.uid)
            if sub is not None:
                return sub.tasks, sub.topology
        spec = job.podgroup.spec.network_topology if job.podgroup is not None else None
        return list(job.tasks.values()), spec

    def hypernode_scores(
        self, job: JobInfo, tasks: Sequence[TaskInfo], domains: Sequence[Domain]
    ) -> Mapping[str, float]:
        request = Resources()
        for t in tasks:
            request = request + t.request
        values = 100.0 * self.args.weight * self._binpack(domains, request)
        scores = {d.name: float(v) for d, v in zip(domains, values)}
        best = max(scores.values(), default=0.0)
        tied = [d for d in domains if scores[d.name] == best]
        if len(tied) > 1 and job.tasks:
            rows = placed_rows(list(job.tasks.values()), self.ssn.columns.index)
            for d in tied:
                placed = int(np.count_nonzero(d.mask[rows])) if rows else 0
                scores[d.name] += 100.0 * self.args.weight * placed / len(job.tasks)
        return scores
