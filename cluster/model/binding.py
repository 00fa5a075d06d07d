"""What the bind step makes real in the cluster: bindings and evictions, and why one failed."""

from __future__ import annotations

import msgspec


class Binding(msgspec.Struct, frozen=True, kw_only=True):
    """A committed placement to make real in the cluster (the ``pods/binding`` POST)."""

    uid: str
    namespace: str
    name: str
    node: str
    annotations: dict[str, str] = {}  # written on the pod before the binding (its GPU cards, for the device plugins)


class Eviction(msgspec.Struct, frozen=True, kw_only=True):
    """A running pod a scheduler evicts (preempt, reclaim): deleted in the cluster, released when gone."""

    uid: str
    namespace: str
    name: str
    node: str
    reason: str  # e.g. "preempted by team-a/train-7"


class GateLift(msgspec.Struct, frozen=True, kw_only=True):
    """A scheduling gate to take off a pending pod (the queue-allocation gate, once its queue has room)."""

    uid: str
    namespace: str
    name: str
    gate: str


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """Why a binding or an eviction did not happen: the pod is gone, bound elsewhere, or the API failed."""

    reason: str
