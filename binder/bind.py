"""The step after a commit: make the binding real in the cluster, or give the reservation back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from binder.commit import Binder
from cluster.model.binding import Binding, Eviction, Failure, GateLift


class BindTarget(Protocol):
    """Where committed placements become real: Kubernetes' ``pods/binding``, or the simulator."""

    async def bind(self, bindings: Sequence[Binding]) -> list[Failure | None]:
        """Bind each pod; None where it worked, else why not."""
        ...


class Evictor(Protocol):
    """Where evictions happen: pod deletion through the Kubernetes API, or the simulator.

    The pod keeps its resources until it is gone from the cluster; the observed-state
    scripts release them then, as for any pod that ends.
    """

    async def evict(self, evictions: Sequence[Eviction]) -> list[Failure | None]:
        """Evict each pod; None where it worked, else why not."""
        ...


class GateLifter(Protocol):
    """Where a pod's scheduling gate is taken off: a patch through the Kubernetes API, or the simulator."""

    async def lift_gates(self, lifts: Sequence[GateLift]) -> list[Failure | None]:
        """Remove each gate (a pod already without it is fine); None where it worked, else why not."""
        ...


async def bind_committed(binder: Binder, target: BindTarget, bindings: Sequence[Binding]) -> list[Failure | None]:
    """Bind committed pods; a failed bind releases the reservation and requeues the pod, a
    bound pod leaves its scheduler's binding set (:meth:`Binder.bound`)."""
    outcomes = await target.bind(bindings)
    failed = [b.uid for b, o in zip(bindings, outcomes) if o is not None]
    if failed:
        await binder.release(failed)
    await binder.bound([b.uid for b, o in zip(bindings, outcomes) if o is None])
    return outcomes
