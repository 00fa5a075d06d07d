"""A gang with a network topology, placed inside one HyperNode: Volcano's ``allocateForJob``.

A job asks, through its PodGroup's ``networkTopology``, for a highest tier (Volcano 1.14.4's
reading, ``adjustNetworkTopologySpec``): ``highestTierName`` becomes the tier of that name;
``soft`` becomes hard up to the root's tier, so a soft gang tries every domain lowest tier
first and falls back to the whole cluster — never pending for topology alone; ``hard``
without a tier, or with a tier name no HyperNode carries, does not constrain the job (as in
Volcano).

The search, per job: the domains of the allowed tiers, grouped by tier, lowest first
(:meth:`~cluster.nodeview.topology.Topology.within`). A job with tasks already placed (a
replacement pod, more pods of an elastic job, tasks placed earlier this session) searches
only under the highest ancestor, within the tier limit, of the lowest domain holding them; a
fresh job only the domains whose summed free room could hold its ``minResources``. Within a
tier, domains go in order of the plugins' HyperNode scores (``network-topology-aware``'s
HyperNode binpack; then the name), and the gang is dry-run in each until one holds it — the
domain Volcano's argmax over every successful dry run would pick, ties aside (Volcano breaks
them at random). The successful run's statement is the job's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo
from cluster.nodeview.table import Mask
from cluster.nodeview.topology import ROOT, Domain

if TYPE_CHECKING:
    from batch_scheduler.session import Session

PlaceTasks = Callable[["Session", QueueInfo, JobInfo, "deque[TaskInfo]", "Mask | None"], "Statement | None"]
"""allocate's per-task loop over a worksheet, within a node mask (None: every node)."""


def highest_tier(ssn: Session, job: JobInfo) -> int | None:
    """The highest tier the job's gang may span, or None when its topology does not constrain it."""
    spec = job.podgroup.spec.network_topology if job.podgroup is not None else None
    if spec is None:
        return None
    topology = ssn.topology
    tier = spec.highest_tier_allowed
    if tier is None and spec.highest_tier_name:
        tier = topology.tier_names.get(spec.highest_tier_name)
    if spec.mode == "soft":
        return topology.root.tier
    return tier


def held_domain(ssn: Session, job: JobInfo) -> Domain | None:
    """The lowest domain holding every node the job's placed tasks are on, or None with none placed."""
    index = ssn.columns.index
    rows = [index[t.node] for t in job.tasks.values() if t.status in ALLOCATED_STATUSES and t.node in index]
    return ssn.topology.lowest_holding(rows) if rows else None


def _room_for(ssn: Session, job: JobInfo, domain: Domain) -> bool:
    """Whether the domain's summed free room (and what evictions under way free there) could hold
    the job's minResources (Volcano's prefilter; a job stating none passes)."""
    if job.min_resources is None or domain.name == ROOT:
        return True
    cols, rows = ssn.columns, domain.rows
    free = cols.allocatable[:, rows].sum(axis=1) - cols.allocated[:, rows].sum(axis=1)
    for node in ssn.releasing:
        i = cols.index.get(node)
        if i is not None and domain.mask[i]:
            for name, amount in ssn.releasing[node].items():
                r = cols.resource_index.get(name)
                if r is not None:
                    free[r] += amount
    for name, amount in job.min_resources.to_amounts(pods=False).items():
        r = cols.resource_index.get(name)
        if amount > 0 and (r is None or free[r] < amount):
            return False
    return True


def gradients(ssn: Session, job: JobInfo, tier: int) -> list[list[Domain]]:
    """The domains to try, by tier, lowest first (see the module docstring)."""
    topology = ssn.topology
    held = held_domain(ssn, job)
    if held is not None:
        if held.tier > tier:
            return []
        top = held
        for d in topology.ancestors(held.name):
            if d.tier > tier:
                break
            top = d
        return topology.within(top.name, tier)
    levels = [[d for d in level if _room_for(ssn, job, d)] for level in topology.within(ROOT, tier)]
    return [level for level in levels if level]


def place_in_topology(
    ssn: Session, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo], place: PlaceTasks, tier: int
) -> Statement | None:
    """The job's statement inside the first domain that holds its gang, or None (discarded) with
    a reason naming the topology."""
    tried: list[str] = []
    first = ""
    before = job.reason, job.reason_kind  # each dry run's own reason is undone with it
    for level in gradients(ssn, job, tier):
        scores = ssn.tiers.hypernode_scores(job, level)
        for domain in sorted(level, key=lambda d: (-scores[d.name], d.name)):
            job.fit_errors.clear()  # each domain is a fresh dry run (Volcano resets the fit errors)
            sheet = deque(tasks)
            stmt = place(ssn, queue, job, sheet, domain.mask)
            if stmt is not None:
                tasks.clear()
                tasks.extend(sheet)
                return stmt
            tried.append(domain.name)
            first = first or job.reason
            job.reason, job.reason_kind = before
    held = held_domain(ssn, job)
    where = f"the job's HyperNode {held.name}" if held is not None else f"any HyperNode of tier {tier} or lower"
    message = f"network topology: no room for the gang in {where}"
    if tried:
        message += f" ({len(tried)} tried: {', '.join(tried[:5])}{', …' if len(tried) > 5 else ''}; first: {first})"
    blocked = ssn.topology.blocking(tier)
    if blocked:
        message += f"; left out of the tree: {'; '.join(blocked)}"
    job.set_reason(PendingReason.NETWORK_TOPOLOGY, message)
    return None
