"""What plugins answer beyond yes and no: an enqueue :class:`Vote`, a :class:`Refusal` saying why not.

Both carry the :class:`~batch_scheduler.reasons.PendingReason` that ends up in the job's
PodGroup condition, and a message a user can act on.
"""

from __future__ import annotations

import enum

import msgspec

from batch_scheduler.reasons import PendingReason


class VoteKind(enum.Enum):
    PERMIT = "permit"
    ABSTAIN = "abstain"
    REJECT = "reject"


class Vote(msgspec.Struct, frozen=True):
    """A plugin's enqueue vote; a reject says why, in words a user can act on."""

    kind: VoteKind
    reason: str = ""
    condition: PendingReason | None = None  # a reject's PodGroup condition reason (None: NotEnqueued)


PERMIT = Vote(VoteKind.PERMIT)
ABSTAIN = Vote(VoteKind.ABSTAIN)


class Refusal(msgspec.Struct, frozen=True):
    """Why a job may not be scheduled, a queue may not take a task (allocatable) or is overused:
    a message and the PodGroup condition reason."""

    message: str
    condition: PendingReason
