"""One round of a fault, measured as the API server shows it, and the rows the bench reports.

A round: the fault at a random moment of the steady load, and from when the fault is over (see
:mod:`.faults`) at least :data:`OBSERVE_S` of watching, as the stand-in kubelet's watch sees the
cluster, with two probes made at that moment (a gang of one for the batch scheduler, an agent
pod). A pod is *overdue* when it has waited unbound more than :data:`OVERDUE_S` — far past
either scheduler's latency on this load, which always has room. *Recovery* is the time from
the fault's end to the last moment a pod was overdue (0 when none ever was): every pod, old
or new, is bound in time again from then on. It counts faults that show late (a raylet's
death takes its actors some seconds later). Every half second the pods bound to each node
are checked against its allocatable (:func:`cluster.kube.audit.overcommits`):
*overcommitted* counts the nodes ever seen over-committed, and *wait_s_max* is the longest any
pod had waited unbound (the fault's own length shows here). At the end: *lost* — overdue pods
with no reason in the store; *double* — pods with a second binding that worked in the API
server, and pods the store holds bound to another node than the API server does; and the
store's own audit.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics

import msgspec

from caldera.bench.chaos.faults import Fault, inject
from caldera.bench.chaos.system import System
from cluster.kube.audit import overcommits
from cluster.store.audit import audit
from cluster.store.client import STORE_DOWN
from cluster.store.pause import pause

SAMPLE_S = 0.5
OVERDUE_S = 3.0
OBSERVE_S = 20.0
SETTLE_S = 2.0  # after recovery, before the store is compared with the API server


class Round(msgspec.Struct, frozen=True, kw_only=True):
    fault: str
    recovery_s: float | None  # None: not recovered within the timeout
    lost: int
    waiting: int  # not bound at the end, but waiting with a reason
    double: int
    overcommitted: int
    store_violations: int
    wait_s_max: float  # the longest a pod waited unbound during the round, fault included


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One fault's rounds: the keys the issue names, then the bench's own."""

    fault: str
    rounds: int
    recovery_s_p50: float | None
    recovery_s_max: float | None
    lost: int
    double: int
    overcommitted: int
    unrecovered: int = 0  # rounds that did not recover within the timeout
    store_violations: int = 0
    wait_s_max: float = 0.0  # the longest a pod waited unbound in any round, fault included
    what: str = ""


def row(fault: Fault, rounds: list[Round]) -> Row:
    times = [r.recovery_s for r in rounds if r.recovery_s is not None]
    return Row(
        fault=fault.name,
        rounds=len(rounds),
        recovery_s_p50=round(statistics.median(times), 1) if times else None,
        recovery_s_max=round(max(times), 1) if times else None,
        lost=sum(r.lost for r in rounds),
        double=sum(r.double for r in rounds),
        overcommitted=sum(r.overcommitted for r in rounds),
        unrecovered=sum(1 for r in rounds if r.recovery_s is None),
        store_violations=sum(r.store_violations for r in rounds),
        wait_s_max=max((r.wait_s_max for r in rounds), default=0.0),
        what=fault.what,
    )


class _Seen:
    """What the sampler saw during a round."""

    def __init__(self) -> None:
        self.over: set[str] = set()  # "node NAME" or "pod NS/NAME"
        self.wait = 0.0  # the longest any pod had waited unbound


async def _sample(system: System, seen: _Seen, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        pods, _ = system.kubelet.snapshot()
        for line in overcommits(system.nodes, pods.values()):
            seen.over.add(line.split(":")[0])
        now = loop.time()
        system.overdue(0.0, now)  # forget the bound
        seen.wait = max([seen.wait, *(now - t for t in system.unbound.values())])
        await pause(stop, SAMPLE_S)


async def settled(system: System, timeout: float) -> None:
    """Until no pod is overdue (or ``timeout``): a quiet moment to start a round in."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while system.overdue(OVERDUE_S, loop.time()) and loop.time() < deadline:
        await asyncio.sleep(0.25)


async def run_round(system: System, fault: Fault, *, timeout: float, observe: float = OBSERVE_S) -> Round:
    loop = asyncio.get_running_loop()
    twice_before = set(system.faults.bound_twice())
    seen = _Seen()
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(system, seen, stop))
    try:
        await inject(fault, system)
        end = loop.time()
        await system.probe(timeout)
        last: float | None = None  # the last moment a pod was overdue
        while True:
            now = loop.time()
            overdue = system.overdue(OVERDUE_S, now)
            if overdue:
                last = now
            if (now - end >= observe and not overdue) or now - end >= timeout:
                break
            await asyncio.sleep(0.25)
        recovery = None if overdue else round(last - end if last is not None else 0.0, 2)
        await asyncio.sleep(SETTLE_S)
    finally:
        stop.set()
        await sampler
    lost, reasoned = await _lost(system, set(overdue))
    diverged, violations = await _store_view(system)
    return Round(
        fault=fault.name,
        recovery_s=recovery,
        lost=lost,
        waiting=reasoned,
        double=len(set(system.faults.bound_twice()) - twice_before) + diverged,
        overcommitted=len(seen.over),
        store_violations=violations,
        wait_s_max=round(seen.wait, 1),
    )


async def _lost(system: System, unbound: set[str]) -> tuple[int, int]:
    """Of the pods still unbound: (lost — no reason anywhere, waiting with a reason)."""
    if not unbound:
        return 0, 0
    pods, _ = system.kubelet.snapshot()
    uids = {p.name: p.uid for p in pods.values() if p.name in unbound}
    reasons: dict[str, str] = {}
    for scheduler in ("volcano", "agent-scheduler"):
        with contextlib.suppress(*STORE_DOWN):
            reasons |= await system.store.reasons(scheduler)
    reasoned = sum(1 for name in unbound if uids.get(name) in reasons)
    return len(unbound) - reasoned, reasoned


async def _store_view(system: System) -> tuple[int, int]:
    """(pods the store holds bound elsewhere than the API server does, the store audit's violations)."""
    for _ in range(10):
        try:
            records = {r.uid: r for r in await system.store.list_pods()}
            violations = len(await audit(system.store))
            break
        except STORE_DOWN:
            await asyncio.sleep(1.0)
    else:
        raise RuntimeError("the store did not answer the audit for 10 s after the round")
    pods, _ = system.kubelet.snapshot()
    diverged = sum(
        1
        for uid, pod in pods.items()
        if pod.node_name and uid in records and records[uid].node not in ("", pod.node_name)
    )
    return diverged, violations
