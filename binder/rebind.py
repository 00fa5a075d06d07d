"""Finishing what a dead scheduler committed: the binds it never made.

A placement becomes real in two steps: the commit in the store, then the bind in the cluster.
A scheduler killed between the two (or whose Ray worker was) leaves pods that hold their room
in the store, are bound nowhere in the cluster, and are pending for nobody — the commit made
them not pending. Every commit therefore also enters the pod into its scheduler's binding set
(``Keys.binding``), which the bind step leaves (:meth:`Binder.bound`) or a failed bind's release
clears. :class:`Rebinder`, run by the scheduler that leads, binds what has sat there longer
than ``after`` seconds and is not in flight in this process: the decision was made and
committed — a gang's members were all placed together — so finishing it is right, where
releasing it would split the gang. Binding again is idempotent: a pod already bound to that
node counts as bound (the Kubernetes target checks a 409), one bound elsewhere or gone is
released as any failed bind is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

from binder.bind import BindTarget, bind_committed
from binder.commit import Binder
from cluster.model.binding import Binding
from cluster.model.devices import card_annotations, card_uuids
from cluster.store.store import Store

log = logging.getLogger("caldera.rebind")

DEFAULT_AFTER_S = 5.0
"""A committed pod this long unbound, and not in flight here, was left by a scheduler that died."""


class Rebinder:
    def __init__(
        self,
        store: Store,
        binder: Binder,
        target: BindTarget,
        *,
        after: float = DEFAULT_AFTER_S,
        in_flight: Callable[[], Collection[str]] = frozenset,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``in_flight``: uids this process is binding right now (left alone)."""
        self.store = store
        self.binder = binder
        self.target = target
        self.after = after
        self.in_flight = in_flight
        self.wall = wall
        self.rebound = 0  # pods bound here that a dead scheduler had committed
        self.released = 0  # ... that could not be bound (gone, bound elsewhere): pending again

    async def run_once(self) -> int:
        """Bind the pods left committed and unbound; how many were handled."""
        left = await self.binder.unbound(self.after)
        busy = self.in_flight()
        left = [(uid, node) for uid, node in left if uid not in busy]
        if not left:
            return 0
        records = await self.store.get_pods([uid for uid, _ in left])
        nodes = await self.store.get_nodes(
            sorted({node for uid, node in left if uid in records and records[uid].cards})
        )
        bindings = []
        for uid, node in left:
            record = records.get(uid)
            if record is None or record.node != node:
                continue  # changed since it was read: the next round sees it as it is
            uuids = card_uuids(nodes[node].node) if node in nodes else ()
            bindings.append(
                Binding(
                    uid=uid,
                    namespace=record.namespace,
                    name=record.name,
                    node=node,
                    annotations=card_annotations(record.pod, node, uuids, record.cards, self.wall()),
                )
            )
        failures = await bind_committed(self.binder, self.target, bindings)
        done = sum(1 for f in failures if f is None)
        self.rebound += done
        self.released += len(failures) - done
        log.warning(
            "%s: bound %d pods a stopped scheduler had committed; %d could not be bound and are pending again",
            self.binder.scheduler,
            done,
            len(failures) - done,
        )
        return len(bindings)
