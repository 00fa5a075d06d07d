"""The binder's contract: placements in, one typed result per placement out."""

from __future__ import annotations

import enum

import msgspec

from cluster.model.resources import Resources


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """A scheduler's decision: put pod ``uid`` on ``node``, judged at node ``version``.

    ``request`` is the pod's request as the scheduler saw it; the commit refuses it when it
    differs from the stored one. ``version`` 0 means "not known": the fit is re-checked.
    ``cards``: the GPU cards' shares it takes on the node besides (``gpu.caldera.io/<i>``
    resources, ``cluster.model.devices``), checked and taken in the same step.
    """

    uid: str
    node: str
    request: Resources
    version: int
    cards: Resources = Resources()


class Committed(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The pod is bound to ``node`` in the store; ``version`` is the node's new version.

    ``resolved``: the node had moved since the scheduler looked but the pod still fit; then
    ``allocatable``/``allocated``/``unschedulable`` are the node's figures as the commit
    left it (the call's own placements included), to refresh the scheduler's view — except
    from :meth:`~binder.commit.Binder.commit_gangs`, which leaves them out.
    ``idempotent``: the pod was already bound to this node (a repeated commit).
    """

    node: str
    version: int
    resolved: bool = False
    idempotent: bool = False
    allocatable: Resources | None = None
    allocated: Resources | None = None
    unschedulable: bool = False


class Conflict(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The node moved and the pod no longer fits; here are its current figures to decide again."""

    node: str
    version: int
    allocatable: Resources
    allocated: Resources
    unschedulable: bool

    @property
    def free(self) -> Resources:
        return self.allocatable - self.allocated


class Reason(enum.StrEnum):
    """Why a placement was refused outright. Retrying the same placement will not help."""

    UNKNOWN_POD = "unknown-pod"
    POD_FINISHED = "pod-finished"
    ALREADY_BOUND = "already-bound"  # bound to another node
    REQUEST_MISMATCH = "request-mismatch"  # the placement's request differs from the pod's
    INVALID_REQUEST = "invalid-request"  # negative amounts; refused before Redis is asked
    UNKNOWN_NODE = "unknown-node"
    NOT_OWNER = "not-owner"  # hard sharding: the node belongs to another scheduler
    UNSCHEDULABLE = "unschedulable"
    INSUFFICIENT = "insufficient"  # did not fit at the very version the scheduler saw
    GANG_MEMBER_FAILED = "gang-member-failed"  # would fit, but another member of the gang did not


class Rejected(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    reason: Reason
    detail: str = ""


Result = Committed | Conflict | Rejected
