"""What a session tells users: each PodGroup's phase and condition, each Queue's status, each
HyperNode's place in the tree, each waiting pod's reason."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import COMPLETED_STATUSES, SCHEDULED_STATUSES, TaskStatus
from batch_scheduler.vector import Vector
from cluster.model.core import Quantity
from cluster.model.topology import HyperNode, HyperNodeCondition, HyperNodeStatus
from cluster.model.volcano import PodGroupCondition, PodGroupStatus, QueueStatus
from cluster.nodeview.topology import Topology

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"


def gang_unschedulable(job: JobInfo) -> bool:
    """What Volcano's gang plugin marks Unschedulable at session close: a job with tasks that is not
    ready — unless only releasing tasks on nodes keep it short and nothing waits to be placed."""
    if not job.tasks or job.is_ready():
        return False
    releasing = sum(1 for t in job.tasks.values() if t.status is TaskStatus.RELEASING and t.node)
    if releasing and not job.count((TaskStatus.PENDING, TaskStatus.PIPELINED)):
        return job.count(SCHEDULED_STATUSES) + releasing < job.min_member
    return True


def job_phase(job: JobInfo, gang: bool = True) -> str:
    """The PodGroup phase at session close, as Volcano's ``getPodGroupPhase``: Unknown when tasks
    run but the gang is not whole (``gang``: the conf has the gang plugin), Running once minMember
    tasks are bound or finished (Completed when all of them finished), else Inqueue if admitted,
    else Pending. Tasks placed in this session are not bound yet: their job turns Running in the
    next session."""
    if gang and job.count((TaskStatus.RUNNING,)) and gang_unschedulable(job):
        return "Unknown"
    scheduled = job.count(SCHEDULED_STATUSES)
    completed = job.count(COMPLETED_STATUSES)
    scheduled += sum(1 for t in job.tasks.values() if t.status is TaskStatus.RELEASING and t.node)
    if scheduled >= job.min_member:
        return "Completed" if scheduled == completed else "Running"
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def pending_reason(job: JobInfo) -> str:
    """The job's reason, or what it waits for when no action gave one."""
    if job.reason:
        return job.reason
    if job.phase == "Pending":
        return "waiting to be admitted to its queue (enqueue)"
    return "waiting for the next session"


def podgroup_status(job: JobInfo, old: PodGroupStatus, now: str, gang: bool = True) -> PodGroupStatus:
    phase = job_phase(job, gang)
    if phase in ("Running", "Completed") or (job.tasks and job.is_ready() and not job.pending()):
        condition = PodGroupCondition(
            type=SCHEDULED,
            status="True",
            reason="tasks in gang are ready to be scheduled",
            message=f"{job.ready_count}/{job.min_member} tasks placed",
        )
    elif job.pending() or job.reason:
        reason = job.reason_kind or PendingReason.NOT_ENOUGH_RESOURCES
        condition = PodGroupCondition(
            type=UNSCHEDULABLE, status="True", reason=reason.value, message=pending_reason(job)
        )
    else:
        condition = PodGroupCondition(
            type=UNSCHEDULABLE,
            status="True",
            reason=PendingReason.NOT_ENOUGH_PODS.value,
            message=f"gang: 0/{job.min_member} pods exist",
        )
    before = old.conditions[0] if old.conditions else None
    if before is not None and (before.type, before.status, before.reason) == (
        condition.type,
        condition.status,
        condition.reason,
    ):
        condition = msgspec.structs.replace(condition, last_transition_time=before.last_transition_time)
    else:
        condition = msgspec.structs.replace(condition, last_transition_time=now)
    return PodGroupStatus(
        phase=phase,
        conditions=[condition],
        running=job.count((TaskStatus.RUNNING,)),
        succeeded=job.count(frozenset({TaskStatus.SUCCEEDED})),
        failed=job.count(frozenset({TaskStatus.FAILED})),
    )


def same_status(a: PodGroupStatus, b: PodGroupStatus) -> bool:
    """Equal but for transition times (so an unchanged status is not written again)."""

    def plain(s: PodGroupStatus) -> tuple[object, ...]:
        return (
            s.phase,
            s.running,
            s.succeeded,
            s.failed,
            tuple((c.type, c.status, c.reason, c.message) for c in s.conditions),
        )

    return plain(a) == plain(b)


def queue_status(queue: QueueInfo, phases: Mapping[str, str], allocated: Vector | None = None) -> QueueStatus:
    """The Queue's status: its PodGroups by phase (``phases``: job key -> phase, as this session wrote
    them) and what its jobs hold (``allocated``, worked out from its jobs when not given)."""
    counts = {"Pending": 0, "Inqueue": 0, "Running": 0, "Unknown": 0, "Completed": 0}
    for job in queue.jobs:
        if job.podgroup is not None:
            counts[phases.get(job.key, "Pending")] += 1
    state = queue.queue.status.state if queue.queue is not None else "Open"
    held = queue.allocated if allocated is None else allocated
    quantities: dict[str, Quantity] = dict(held.to_amounts(pods=False).to_quantities())
    return QueueStatus(
        state=state,
        allocated=quantities,
        pending=counts["Pending"],
        inqueue=counts["Inqueue"],
        running=counts["Running"],
        unknown=counts["Unknown"],
        completed=counts["Completed"],
    )


READY = "Ready"


def hypernode_status(hn: HyperNode, topology: Topology, old: HyperNodeStatus, now: str) -> HyperNodeStatus:
    """A HyperNode's status as the session's tree has it: ``nodeCount`` (the nodes in its domain)
    and one ``Ready`` condition — True (reason ``InTree``) when it is in the tree, False when it
    is left out, with the reason (``Cycle``, ``TwoParents``) and the message ``caldera status``
    shows. The transition time moves only when the condition's status does."""
    domain = topology.domains.get(hn.name)
    left = topology.left_out.get(hn.name)
    if left is None and domain is not None:
        condition = HyperNodeCondition(
            type=READY, status="True", reason="InTree", message=f"in the topology tree, tier {domain.tier}"
        )
    else:
        found = next((p for p in topology.problems if p.hypernode == hn.name), None)
        reason = found.reason if found is not None else "LeftOut"
        message = found.message if found is not None else (left[1] if left is not None else "not in the topology tree")
        condition = HyperNodeCondition(type=READY, status="False", reason=reason, message=message)
    before = next((c for c in old.conditions if c.type == READY), None)
    since = before.last_transition_time if before is not None and before.status == condition.status else now
    return HyperNodeStatus(
        conditions=[msgspec.structs.replace(condition, last_transition_time=since)],
        node_count=int(len(domain.rows)) if domain is not None and left is None else 0,
    )


def same_hypernode_status(a: HyperNodeStatus, b: HyperNodeStatus) -> bool:
    """Equal but for the conditions' transition times."""

    def plain(s: HyperNodeStatus) -> list[tuple[str, str, str, str]]:
        return [(c.type, c.status, c.reason, c.message) for c in s.conditions]

    return a.node_count == b.node_count and plain(a) == plain(b)
