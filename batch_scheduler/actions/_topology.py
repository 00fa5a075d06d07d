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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.jobs import JobInfo, SubJob
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.subjobs import order
from batch_scheduler.tasks import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from cluster.model.resources import Resources
from cluster.model.topology import NetworkTopologySpec
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
    return _held(ssn, list(job.tasks.values()))


def _need_of(tasks: Sequence[TaskInfo], count: int) -> Resources:
    """The first ``count`` (at least one) of ``tasks``, summed."""
    need = Resources()
    for t in list(tasks)[: max(count, 1)]:
        need = need + t.request
    return need


def _need(job: JobInfo, tasks: Sequence[TaskInfo], count: int) -> Resources:
    """What a domain must have free to hold the gang: the job's minResources when it states them,
    and at least the first ``count`` of ``tasks`` (the ones still needed), whichever asks more."""
    need = _need_of(tasks, count)
    if job.min_resources is not None:
        need = need.max_with(job.min_resources.to_amounts(pods=False))
    return need


def _with_room(ssn: Session, need: Resources, level: list[Domain]) -> list[Domain]:
    """The domains whose summed free room (and what evictions under way free there) could hold
    ``need`` — Volcano's prefilter, by the job's minResources; caldera also counts the tasks it
    needs, so a gang no leaf can hold is not dry-run in every leaf. The root always passes."""
    if need.is_empty or not level:
        return level
    sums, cols = ssn.domain_sums, ssn.columns
    columns = sums.columns(level)
    free = sums.capacity[:, columns] - sums.used[:, columns]
    for node, freed in ssn.releasing.items():
        i = cols.index.get(node)
        if i is None:
            continue
        inside = np.array([d.mask[i] for d in level])
        for name, amount in freed.items():
            r = sums.resource_index.get(name)
            if r is not None:
                free[r, inside] += amount
    ok = np.ones(len(level), dtype=np.bool_)
    for name, amount in need.items():
        r = sums.resource_index.get(name)
        if amount > 0:
            ok &= free[r] >= amount if r is not None else False
    return [d for d, keep in zip(level, ok.tolist()) if keep or d.name == ROOT]


def gradients(
    ssn: Session, job: JobInfo, tier: int, *, room: bool = True, tasks: Sequence[TaskInfo] = ()
) -> list[list[Domain]]:
    """The domains to try, by tier, lowest first (see the module docstring); ``room=False`` skips
    the free-room prefilter (preempt makes the room); ``tasks``: the pending ones, in order."""
    topology = ssn.topology
    held = held_domain(ssn, job)
    if held is not None:
        top = topology.highest_within(held.name, tier)
        return topology.within(top.name, tier) if top is not None else []
    need = _need(job, tasks, job.min_member - job.ready_count) if room else Resources()
    levels = [_with_room(ssn, need, level) for level in topology.within(ROOT, tier)]
    return [level for level in levels if level]


def _sub_tier(ssn: Session, spec: NetworkTopologySpec | None, job_tier: int | None) -> int | None:
    """A subgroup's highest tier: its own; soft is bounded by its job's (else the root's)."""
    if spec is None:
        return None
    if spec.mode == "soft":
        return job_tier if job_tier is not None else ssn.topology.root.tier
    if spec.highest_tier_allowed is not None:
        return spec.highest_tier_allowed
    return ssn.topology.tier_names.get(spec.highest_tier_name) if spec.highest_tier_name else None


def _held(ssn: Session, tasks: Sequence[TaskInfo]) -> Domain | None:
    """The lowest domain holding every node ``tasks`` placed are on, or None with none placed."""
    index = ssn.columns.index
    rows = [index[t.node] for t in tasks if t.status in ALLOCATED_STATUSES and t.node in index]
    return ssn.topology.lowest_holding(rows) if rows else None


def _sub_levels(ssn: Session, sj: SubJob, scope: Domain, tier: int | None) -> list[list[Domain]]:
    """The domains inside ``scope`` to try for one subgroup, lowest tier first."""
    if tier is None:
        return [[scope]]
    topology = ssn.topology
    held = _held(ssn, sj.tasks)
    if held is None:
        pending = sj.pending()
        need = _need_of(pending, sj.min_available - (len(sj.tasks) - len(pending)))
        return [kept for level in topology.within(scope.name, tier) if (kept := _with_room(ssn, need, level))]
    top = topology.highest_within(held.name, tier)
    if top is None:
        return []
    if any(d.name == scope.name for d in topology.ancestors(top.name)):
        return topology.within(top.name, tier)  # top lies inside the job's domain
    if any(d.name == top.name for d in topology.ancestors(scope.name)):
        return [[scope]]  # the job's domain lies inside top
    return []


def _tasks_in(ssn: Session, queue: QueueInfo, job: JobInfo, sj: SubJob, within: Mask) -> Statement | None:
    """One subgroup's pending tasks on ``within``'s nodes, until it is ready (Volcano's
    allocateResourcesForTasks for a subjob); None (discarded) unless it is ready or pipelined."""
    stmt = Statement(ssn)
    for task in sj.pending():
        if ssn.tiers.allocatable(queue, task) is not None:
            continue
        choice = ssn.best_node(task, within)
        if not isinstance(choice, tuple):
            job.fit_errors[task.uid] = f"task {task.name}: {choice.reason()}"
            job.set_reason(PendingReason.NOT_ENOUGH_RESOURCES, f"subgroup {sj.id}: task {task.name}: {choice.reason()}")
            break
        row, pipelined = choice
        (stmt.pipeline if pipelined else stmt.allocate)(task, ssn.columns.names[row])
        if sj.ready():
            break
    if sj.ready() or sj.pipelined():
        return stmt
    stmt.discard()
    return None


def _sub_job_in(
    ssn: Session, queue: QueueInfo, job: JobInfo, sj: SubJob, scope: Domain, tier: int | None
) -> Statement | None:
    """Volcano's allocateForSubJob: the subgroup inside one domain of ``scope`` (its own tier
    limit), domains in HyperNode-score order."""
    for level in _sub_levels(ssn, sj, scope, _sub_tier(ssn, sj.topology, tier)):
        pending = sj.pending()
        scores = ssn.tiers.hypernode_scores(job, pending, level)
        for domain in sorted(level, key=lambda d: (-scores[d.name], d.name)):
            stmt = _tasks_in(ssn, queue, job, sj, domain.mask)
            if stmt is not None:
                return stmt
    return None


def _sub_jobs_in(ssn: Session, queue: QueueInfo, job: JobInfo, scope: Domain, tier: int | None) -> Statement | None:
    """The job's subgroups, one after another, inside ``scope``, until the job is ready; the whole
    is one statement (one gang batch for the binder), or None (discarded)."""
    stmt = Statement(ssn)
    line = deque(s for s in order(job) if s.pending())
    while line:
        sj = line.popleft()
        sub = _sub_job_in(ssn, queue, job, sj, scope, tier)
        if sub is None or sub.empty:
            continue
        stmt.merge(sub)
        if ssn.tiers.job_ready(job):
            break
        if sj.pending():
            line.append(sj)
    if not stmt.empty and (ssn.tiers.job_ready(job) or ssn.tiers.job_pipelined(job)):
        return stmt
    stmt.discard()
    return None


def place_in_topology(
    ssn: Session, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo], place: PlaceTasks, tier: int | None
) -> Statement | None:
    """The job's statement inside the first domain that holds its gang (its subgroups each inside
    a domain of their own), or None (discarded) with a reason naming the topology. ``tier``:
    the job's highest tier; None (a job with subgroups and no topology of its own): the whole cluster."""
    tried: list[str] = []
    first = ""
    before = job.reason, job.reason_kind  # each dry run's own reason is undone with it
    levels = gradients(ssn, job, tier, tasks=tasks) if tier is not None else [[ssn.topology.root]]
    for level in levels:
        scores = ssn.tiers.hypernode_scores(job, list(tasks), level)
        for domain in sorted(level, key=lambda d: (-scores[d.name], d.name)):
            job.fit_errors.clear()  # each domain is a fresh dry run (Volcano resets the fit errors)
            if job.sub_jobs:
                stmt = _sub_jobs_in(ssn, queue, job, domain, tier)
                sheet = deque(t for t in tasks if t.status is TaskStatus.PENDING)
            else:
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
    if tier is None:
        message = "subgroups: no placement holds every subgroup the job needs"
    else:
        where = f"the job's HyperNode {held.name}" if held is not None else f"any HyperNode of tier {tier} or lower"
        message = f"network topology: no room for the gang in {where}"
    if tried:
        message += f" ({len(tried)} tried: {', '.join(tried[:5])}{', …' if len(tried) > 5 else ''}; first: {first})"
    else:
        message += " (none has the free room its tasks need)"
    blocked = ssn.topology.blocking(tier if tier is not None else ssn.topology.root.tier)
    if blocked:
        message += f"; left out of the tree: {'; '.join(blocked)}"
    job.set_reason(PendingReason.NETWORK_TOPOLOGY, message)
    return None


Attempt = Callable[[Statement, list[TaskInfo], "Mask | None"], bool]
"""An eviction pass for a job: into the statement, taking tasks off the list, on the mask's nodes
(None: every node); whether its last task got a node."""


def in_one_domain(
    ssn: Session, job: JobInfo, tasks: list[TaskInfo], attempt: Attempt
) -> tuple[Statement, bool, list[TaskInfo]] | None:
    """Preempt's and reclaim's evictions for a job, kept only when they make it pipelined — for a
    job with a network topology, all inside one domain of its allowed tiers (lowest tier first,
    in HyperNode-score order; Volcano skips such jobs, volcano#4374): the statement, whether
    the last task got a node, and the tasks left; None when no pass made it pipelined."""
    tier = highest_tier(ssn, job)
    masks: list[Mask | None] = [None]
    if tier is not None:
        masks = []
        for level in gradients(ssn, job, tier, room=False):
            scores = ssn.tiers.hypernode_scores(job, tasks, level)
            masks += [d.mask for d in sorted(level, key=lambda d: (-scores[d.name], d.name))]
    for mask in masks:
        stmt = Statement(ssn)
        left = tasks if mask is None else list(tasks)  # without a topology, one pass uses the list up
        assigned = attempt(stmt, left, mask)
        if ssn.tiers.job_pipelined(job):
            return stmt, assigned, left
        stmt.discard()
    return None


def own_domain(ssn: Session, job: JobInfo) -> Mask | None:
    """Where a job with a network topology may grow (its placed tasks' domain, climbed to its tier
    limit); None: anywhere."""
    tier = highest_tier(ssn, job)
    held = held_domain(ssn, job) if tier is not None else None
    top = ssn.topology.highest_within(held.name, tier) if held is not None and tier is not None else None
    return top.mask if top is not None else None
