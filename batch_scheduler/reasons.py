"""Why a job waits: the reason its PodGroup's ``Unschedulable`` condition carries.

The values are the condition reasons written to the store and the API (and compared by
users' tooling), so they never change: Volcano's where Volcano has one
(``NotEnoughResources``, ``NotEnoughPods``, ``NotEnqueued``, the queue ones), caldera's own
for what it reports beyond Volcano (a lost commit race, a missing PodGroup or queue,
scheduling gates, evictions under way).
"""

from __future__ import annotations

import enum


class PendingReason(enum.StrEnum):
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"  # no node has room (or the gang is short of room)
    NOT_ENOUGH_PODS = "NotEnoughPods"  # fewer pods exist than minMember / minTaskMember ask
    NOT_ENQUEUED = "NotEnqueued"  # enqueue refused it without a more precise reason
    QUEUE_CLOSED = "QueueClosed"
    QUEUE_CAPABILITY_EXCEEDED = "QueueCapabilityExceeded"
    QUEUE_SHARE_EXCEEDED = "QueueShareExceeded"  # the queue is at its deserved share
    QUEUE_HIERARCHY_INVALID = "QueueHierarchyInvalid"  # capacity's queue tree cannot be used
    QUEUE_NOT_LEAF = "QueueNotLeaf"  # with the hierarchy only leaf queues take jobs
    QUEUE_NOT_FOUND = "QueueNotFound"
    POD_GROUP_NOT_FOUND = "PodGroupNotFound"
    SCHEDULING_GATED = "SchedulingGated"
    PREEMPTING = "Preempting"  # its victims are being evicted; it starts once they are gone
    RECLAIMING = "Reclaiming"
    NETWORK_TOPOLOGY = "NetworkTopology"  # no HyperNode of the allowed tiers holds the gang
    COMMIT_CONFLICT = "CommitConflict"  # another scheduler won the race for its nodes; retried next session


MISSING = frozenset({PendingReason.POD_GROUP_NOT_FOUND, PendingReason.QUEUE_NOT_FOUND})
"""Reasons that leave a job out of the session's scheduling altogether (Volcano drops such jobs)."""
EVICTING = frozenset({PendingReason.PREEMPTING, PendingReason.RECLAIMING})
"""Reasons of jobs for which this session evicts others."""
