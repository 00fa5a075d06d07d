"""Commit/release/observe sequences against a pure-Python model of the node table.

Every step runs against the real scripts in a real redis-server; the model predicts each
placement's result and the resulting node and pod state, and the audit must agree.
"""

from __future__ import annotations

import asyncio
import itertools

import msgspec
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from binder.commit import Binder
from binder.results import Committed, Conflict, Placement, Reason, Rejected
from caldera.bench.binders import VersionOnlyBinder
from cluster.model.devices import card_resources
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.runtime.redis_server import RedisServer
from cluster.store.audit import audit
from cluster.store.keys import Keys
from cluster.store.store import Own, Store
from tests.builders import node, pod

NODES = ["n0", "n1", "n2"]
PODS = [f"p{i}" for i in range(8)]
RES = ["cpu", "memory", "nvidia.com/gpu", "pods"]
TERMINAL = {"Succeeded", "Failed"}


class ModelPod:
    def __init__(self, req: Resources, scheduler: str) -> None:
        self.req = req
        self.node = ""
        self.acct = ""
        self.phase = "Pending"
        self.scheduler = scheduler


class Model:
    def __init__(self) -> None:
        self.alloc: dict[str, Resources] = {}
        self.used: dict[str, Resources] = {}
        self.unsched: dict[str, bool] = {}
        self.owner: dict[str, str] = {}
        self.pods: dict[str, ModelPod] = {}

    def account(self, uid: str, target: str) -> None:
        p = self.pods[uid]
        if p.acct and p.acct in self.used:
            self.used[p.acct] = self.used[p.acct] - p.req
        if target:
            self.used[target] = self.used[target] + p.req
        p.acct = target

    def settle(self, uid: str) -> None:
        p = self.pods[uid]
        target = p.node if p.node and p.phase not in TERMINAL and p.node in self.alloc else ""
        if target != p.acct:
            self.account(uid, target)

    def fits(self, uid: str, name: str, extra: Resources) -> bool:
        free = self.alloc[name] - self.used[name] - extra
        return not self.unsched[name] and self.pods[uid].req.fits_in(free)


class Machine(RuleBasedStateMachine):
    url = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = aioredis.Redis.from_url(self.url)
        self.keys = Keys(f"sm{next(_ids)}")
        self.store = Store(self.client, self.keys)
        self.model = Model()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.client.aclose())
        self.loop.close()

    @initialize(
        cpus=st.lists(st.integers(1, 6), min_size=len(NODES), max_size=len(NODES)),
        pods=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)), min_size=4, max_size=len(PODS)),
    )
    def populate(self, cpus: list[int], pods: list[tuple[int, int]]) -> None:
        """Start every run with all nodes and some pending pods, so that most steps commit."""
        for name, cpu in zip(NODES, cpus):
            self.upsert_node(name, cpu, 1, 3, False)
        for name, (cpu, gpu) in zip(PODS, pods):
            self.add_pod(name, cpu, gpu, "s", None)

    @rule(
        name=st.sampled_from(NODES),
        cpu=st.integers(1, 6),
        gpu=st.integers(0, 2),
        pods=st.integers(1, 4),
        unsched=st.booleans(),
    )
    def upsert_node(self, name: str, cpu: int, gpu: int, pods: int, unsched: bool) -> None:
        n = node(name, cpu=cpu, memory="8Gi", gpu=gpu, pods=pods, unschedulable=unsched)
        self.run(self.store.upsert_nodes([n]))
        new = name not in self.model.alloc
        self.model.alloc[name] = n.allocatable_resources() + card_resources(n)
        self.model.unsched[name] = unsched
        if new:
            self.model.used[name] = Resources()
            self.model.owner[name] = ""
            for uid, p in self.model.pods.items():
                if p.node == name:
                    self.model.settle(uid)

    @precondition(lambda self: self.model.alloc)
    @rule(data=st.data())
    def delete_node(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model.alloc)))
        self.run(self.store.delete_nodes([name]))
        for p in self.model.pods.values():
            if p.acct == name:
                p.acct = ""
        for d in (self.model.alloc, self.model.used, self.model.unsched, self.model.owner):
            del d[name]

    @rule(
        name=st.sampled_from(PODS),
        cpu=st.integers(0, 3),
        gpu=st.integers(0, 1),
        scheduler=st.sampled_from(["s", "t"]),
        bound=st.one_of(st.none(), st.sampled_from(NODES)),
    )
    def add_pod(self, name: str, cpu: int, gpu: int, scheduler: str, bound: str | None) -> None:
        uid = f"uid-{name}"
        if uid in self.model.pods:
            return
        p = pod(
            name,
            cpu=f"{cpu * 500}m",
            memory="1Gi",
            gpu=gpu,
            scheduler=scheduler,
            node=bound or "",
            phase="Running" if bound else "Pending",
        )
        self.run(self.store.upsert_pods([p]))
        mp = ModelPod(p.request(), scheduler)
        self.model.pods[uid] = mp
        if bound:
            mp.node, mp.phase = bound, "Running"
            self.model.settle(uid)

    @precondition(lambda self: self.model.pods)
    @rule(data=st.data(), phase=st.sampled_from(["Running", "Succeeded", "Failed"]))
    def observe_phase(self, data: st.DataObject, phase: str) -> None:
        uid = data.draw(st.sampled_from(sorted(self.model.pods)))
        mp = self.model.pods[uid]
        rec = self.run(self.store.get_pods([uid]))[uid]
        import msgspec

        updated = msgspec.structs.replace(rec.pod, status=msgspec.structs.replace(rec.pod.status, phase=phase))
        self.run(self.store.upsert_pods([updated]))
        mp.phase = phase
        if rec.pod.node_name:
            mp.node = rec.pod.node_name
        self.model.settle(uid)

    @precondition(lambda self: self.model.pods)
    @rule(data=st.data())
    def delete_pod(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.model.pods)))
        self.run(self.store.delete_pods([uid]))
        self.model.account(uid, "")
        del self.model.pods[uid]

    @precondition(lambda self: self.model.alloc)
    @rule(data=st.data())
    def set_owner(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model.alloc)))
        owner = data.draw(st.sampled_from(["", "s", "t"]))
        self.run(self.store.write([Own(name, owner)]))
        self.model.owner[name] = owner

    @precondition(lambda self: self.model.pods)
    @rule(data=st.data(), gang=st.booleans(), hard=st.booleans(), coarse=st.booleans())
    def commit(self, data: st.DataObject, gang: bool, hard: bool, coarse: bool) -> None:
        uids = data.draw(st.lists(st.sampled_from(sorted(self.model.pods)), min_size=1, max_size=4, unique=True))
        versions = {r.name: r.version for r in self.run(self.store.list_nodes())}
        placements, stale = [], []
        for uid in uids:
            target = data.draw(st.sampled_from(NODES))
            is_stale = data.draw(st.booleans())
            version = versions.get(target, 0) - (1 if is_stale else 0)
            placements.append(Placement(uid=uid, node=target, request=self.model.pods[uid].req, version=version))
            stale.append(is_stale or target not in versions)
        kind = VersionOnlyBinder if coarse else Binder
        binder = kind(self.client, self.keys, "s", sharding=ShardingMode.HARD if hard else ShardingMode.SOFT)
        results = self.run(binder.commit(placements, gang=gang))
        expected = self.predict(placements, stale, gang, hard, coarse)
        for p, r, e in zip(placements, results, expected):
            assert type(r) is type(e), (p, r, e)
            if isinstance(e, Rejected):
                assert r.reason is e.reason, (p, r, e)  # type: ignore[union-attr]
            if isinstance(e, Committed):
                assert r.resolved == e.resolved and r.idempotent == e.idempotent, (p, r, e)  # type: ignore[union-attr]
                assert (r.allocated, r.allocatable) == (e.allocated, e.allocatable), (p, r, e)  # type: ignore[union-attr]
            if isinstance(r, Conflict):
                assert (r.allocated, r.allocatable) == (e.allocated, e.allocatable), (p, r, e)  # type: ignore[union-attr]

    @precondition(lambda self: self.model.alloc and len(self.model.pods) >= 2)
    @rule(data=st.data())
    def commit_gang_on_one_node(self, data: st.DataObject) -> None:
        """Gang members sharing a node must fit together, not only one by one."""
        uids = data.draw(st.lists(st.sampled_from(sorted(self.model.pods)), min_size=2, max_size=4, unique=True))
        target = data.draw(st.sampled_from(sorted(self.model.alloc)))
        version = self.run(self.store.get_nodes([target]))[target].version
        placements = [Placement(uid=u, node=target, request=self.model.pods[u].req, version=version) for u in uids]
        expected = self.predict(placements, [False] * len(uids), True, False, False)
        results = self.run(Binder(self.client, self.keys, "s").commit(placements, gang=True))
        assert [type(r) for r in results] == [type(e) for e in expected], (results, expected)

    def predict(
        self, placements: list[Placement], stale: list[bool], gang: bool, hard: bool, coarse: bool
    ) -> list[object]:
        m = self.model
        extra: dict[str, Resources] = {}
        out: list[object] = []
        apply: list[bool] = []
        for p, is_stale in zip(placements, stale):
            mp = m.pods[p.uid]
            ok = False
            if mp.phase in TERMINAL:
                r: object = Rejected(reason=Reason.POD_FINISHED)
            elif mp.node == p.node:
                r = Committed(node=p.node, version=0, idempotent=True)
            elif mp.node:
                r = Rejected(reason=Reason.ALREADY_BOUND)
            elif p.node not in m.alloc:
                r = Rejected(reason=Reason.UNKNOWN_NODE)
            elif hard and m.owner[p.node] != "s":
                r = Rejected(reason=Reason.NOT_OWNER)
            elif is_stale and coarse:
                r = Conflict(
                    node=p.node, version=0, allocatable=m.alloc[p.node], allocated=m.used[p.node], unschedulable=False
                )
            elif m.fits(p.uid, p.node, extra.get(p.node, Resources()) if gang else Resources()):
                r, ok = Committed(node=p.node, version=0, resolved=is_stale), True
            elif is_stale:
                r = Conflict(
                    node=p.node, version=0, allocatable=m.alloc[p.node], allocated=m.used[p.node], unschedulable=False
                )
            elif m.unsched[p.node]:
                r = Rejected(reason=Reason.UNSCHEDULABLE)
            else:
                r = Rejected(reason=Reason.INSUFFICIENT)
            if ok and gang:
                extra[p.node] = extra.get(p.node, Resources()) + mp.req
            if ok and not gang:
                mp.node = p.node
                m.account(p.uid, p.node)
            out.append(r)
            apply.append(ok)
        if gang:
            all_ok = all(ok or isinstance(r, Committed) for ok, r in zip(apply, out))
            for i, (p, ok) in enumerate(zip(placements, apply)):
                if ok and all_ok:
                    m.pods[p.uid].node = p.node
                    m.account(p.uid, p.node)
                elif ok:
                    out[i] = Rejected(reason=Reason.GANG_MEMBER_FAILED)
        # A node that moved under the scheduler is described as the call leaves it.
        for i, (p, r) in enumerate(zip(placements, out)):
            if isinstance(r, Conflict) or isinstance(r, Committed) and r.resolved:
                out[i] = msgspec.structs.replace(r, allocatable=m.alloc[p.node], allocated=m.used[p.node])
        return out

    @precondition(lambda self: self.model.pods)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        uids = data.draw(st.lists(st.sampled_from(sorted(self.model.pods)), min_size=1, max_size=3, unique=True))
        changed = self.run(Binder(self.client, self.keys, "s").release(uids))
        for uid, c in zip(uids, changed):
            mp = self.model.pods[uid]
            expect = bool(mp.acct) or bool(mp.node and mp.phase not in TERMINAL)
            assert c == expect, (uid, c, expect)
            self.model.account(uid, "")
            if mp.phase not in TERMINAL:
                mp.node = ""

    @invariant()
    def store_matches_model(self) -> None:
        nodes = {r.name: r for r in self.run(self.store.list_nodes())}
        assert set(nodes) == set(self.model.alloc)
        for name, rec in nodes.items():
            assert rec.allocated == self.model.used[name], name
            assert rec.allocatable == self.model.alloc[name], name
        pods = {r.uid: r for r in self.run(self.store.list_pods())}
        assert set(pods) == set(self.model.pods)
        for uid, rec in pods.items():
            mp = self.model.pods[uid]
            assert (rec.node, rec.accounted) == (mp.node, mp.acct), uid
        for sched in ("s", "t"):
            pending = set(self.run(self.store.pending(sched)))
            assert pending == {
                u for u, p in self.model.pods.items() if p.scheduler == sched and not p.node and p.phase not in TERMINAL
            }
        over = {n for n in self.model.alloc if not self.model.used[n].fits_in(self.model.alloc[n])}
        problems = self.run(audit(self.store))
        assert all(" > allocatable " in line for line in problems), problems
        assert {line.split()[1].rstrip(":") for line in problems} == over


_ids = itertools.count()


def test_commit_release_sequences_match_the_model(redis_server: RedisServer) -> None:
    Machine.url = redis_server.url
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        ),
    )
