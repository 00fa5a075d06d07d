"""Inter-pod affinity, anti-affinity and topology spread in the agent scheduler.

The loop (with an in-process worker, the one the Ray actors hold) against a real Redis: the
placed pods a batch's rules see travel with the batch, the pods of one batch count each
other, pods bound by other schedulers count, and a pod the rules keep out says so.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import msgspec

from agent_scheduler.core import CoreConfig, NoFit, Task, decide
from agent_scheduler.loop import AgentLoop, LoopConfig
from agent_scheduler.pod_context import PlacedRef, PodContext, placed_on
from agent_scheduler.worker import Worker, WorkerConfig
from binder.commit import Binder
from cluster.model.core import Affinity, Namespace, Pod
from cluster.model.pod_rules import TopologySpreadConstraint
from cluster.sim.cluster import SimBindTarget
from cluster.sim.pods import make_pod
from cluster.store.audit import audit
from cluster.store.store import Put, Store
from tests.builders import labelled_table, node

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _term(labels: dict[str, str], key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def ruled(
    pod: Pod,
    *,
    anti: dict[str, str] | None = None,
    together: dict[str, str] | None = None,
    key: str = HOST,
    spread: dict[str, Any] | None = None,
) -> Pod:
    body: dict[str, Any] = {}
    if anti is not None:
        body["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(anti, key)]}
    if together is not None:
        body["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(together, key)]}
    spec = pod.spec
    if body:
        spec = msgspec.structs.replace(spec, affinity=msgspec.convert(body, Affinity))
    if spread is not None:
        spec = msgspec.structs.replace(
            spec, topology_spread_constraints=[msgspec.convert(spread, TopologySpreadConstraint)]
        )
    return msgspec.structs.replace(pod, spec=spec)


def labelled(i: int) -> dict[str, str]:
    return {HOST: f"n{i}", ZONE: f"z{i % 2}"}


def apart(n: int) -> list[Pod]:
    """``n`` pods of app web, each refusing a node that holds another (required anti-affinity)."""
    return [
        ruled(
            make_pod(f"web{i}", requests={"cpu": "1"}, scheduler="agent-scheduler", labels={"app": "web"}),
            anti={"app": "web"},
        )
        for i in range(n)
    ]


async def _run(store: Store, pods: list[Pod], want: int, batch_size: int = 256) -> AgentLoop:
    worker = Worker(store, Binder(store.client, store.keys, "agent-scheduler"), SimBindTarget(store), WorkerConfig())
    await worker.start()
    worker.name = "w0"  # type: ignore[attr-defined]
    loop = AgentLoop(store, [worker], LoopConfig(batch_size=batch_size))  # type: ignore[list-item]
    stop = asyncio.Event()
    runner = asyncio.create_task(loop.run(stop))
    try:
        await store.upsert_pods(pods)
        deadline = time.monotonic() + 20
        while len(loop.bound) + loop.totals["unschedulable"] < want or len(loop.bound) < want - len(pods):
            assert time.monotonic() < deadline, (len(loop.bound), loop.totals)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # let any extra placement show
    finally:
        stop.set()
        await runner
        await worker.stop()
    return loop


async def test_required_anti_affinity_keeps_one_pod_per_node_within_one_batch(store: Store) -> None:
    await store.upsert_nodes([node(f"n{i}", cpu="16", labels=labelled(i)) for i in range(4)])
    web = apart(5)
    loop = await _run(store, web, want=5)
    records = await store.get_pods([p.uid for p in web])
    nodes = [r.node for r in records.values() if r.node]
    assert sorted(nodes) == ["n0", "n1", "n2", "n3"]  # one per node, though all five came in one batch
    [waiting] = [r for r in records.values() if not r.node]
    reasons = await store.reasons("agent-scheduler")
    assert "didn't match pod anti-affinity rules" in reasons[waiting.uid]
    assert loop.totals["unschedulable"] >= 1
    assert await audit(store) == []


async def test_pods_bound_by_other_schedulers_count_both_ways(store: Store) -> None:
    """A pod the default scheduler placed: its own anti-affinity keeps agent pods off its node
    (the symmetric check), and an agent pod's affinity to it draws the pod into its zone."""
    await store.upsert_nodes([node(f"n{i}", cpu="16", labels=labelled(i)) for i in range(4)])
    db = make_pod("db", requests={"cpu": "1"}, node="n1", phase="Running", labels={"app": "db"})
    loner = ruled(
        make_pod("loner", requests={"cpu": "1"}, node="n2", phase="Running", labels={"app": "loner"}),
        anti={"app": "batchy"},
    )
    await store.upsert_pods([db, loner])
    batchy = [
        make_pod(f"b{i}", requests={"cpu": "1"}, scheduler="agent-scheduler", labels={"app": "batchy"})
        for i in range(12)
    ]
    near = ruled(
        make_pod("near", requests={"cpu": "1"}, scheduler="agent-scheduler", labels={"app": "near"}),
        together={"app": "db"},
        key=ZONE,
    )
    await _run(store, [*batchy, near], want=13)
    records = await store.get_pods([p.uid for p in [*batchy, near]])
    assert all(records[p.uid].node not in ("", "n2") for p in batchy)
    assert records[near.uid].node in ("n1", "n3")  # zone z1, where db runs


async def test_do_not_schedule_spread_keeps_the_zones_even() -> None:
    """decide() over a table: eight pods with maxSkew 1 over two zones go four and four, the
    pods already placed (sent as context) counted."""
    table = labelled_table({f"n{i}": labelled(i) for i in range(4)}, pods=110)
    context = [PlacedRef(uid="old", namespace="default", labels={"app": "s"}, node="n0")]
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(context), type=list[PlacedRef])
    placed = placed_on(table, wire)
    spread = {"maxSkew": 1, "topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "s"}}}
    tasks = []
    for i in range(7):
        pod = ruled(make_pod(f"s{i}", requests={"cpu": "1"}, labels={"app": "s"}), spread=spread)
        tasks.append(Task(uid=pod.uid, pod=pod, request=pod.request()))
    choices = decide(table, tasks, CoreConfig(), random.Random(1), placed=placed)
    assert not [c for c in choices if isinstance(c, NoFit)]
    zones = [table.labels[table.index[c.node]][ZONE] for c in choices if not isinstance(c, NoFit)]
    assert sorted(["z0", *zones]) == ["z0"] * 4 + ["z1"] * 4


async def test_pods_without_rules_carry_no_context() -> None:
    """Constraints cost only the pods that have them: with no placed pod that has terms, a batch
    of plain pods is sent with nothing; one pod with rules is sent with what its terms select."""
    ctx = PodContext()
    for i in range(50):
        ctx.bound(
            f"u{i}", make_pod(f"q{i}", requests={"cpu": "1"}, labels={"app": "web" if i % 2 else "x"}), f"n{i % 4}"
        )
    plain = [make_pod(f"p{i}", requests={"cpu": "1"}, labels={"app": "web"}) for i in range(10)]
    assert ctx.for_batch(plain) == []
    one = ruled(make_pod("r", requests={"cpu": "1"}, labels={"app": "web"}), anti={"app": "web"})
    sent = ctx.for_batch([*plain, one])
    assert len(sent) == 25 and {r.labels["app"] for r in sent} == {"web"}


def test_a_node_ruled_out_twice_counts_once_in_the_reason() -> None:
    """kube-scheduler's message: each node under the first check that rules it out, adding up."""
    table = labelled_table({"n0": {"zone": "a"}, "n1": {"zone": "a"}, "n2": {"zone": "b"}}, pods=110)
    placed = placed_on(
        table, [PlacedRef(uid=f"x{i}", namespace="default", labels={"app": "x"}, node=f"n{i}") for i in range(3)]
    )
    pod = ruled(make_pod("p", requests={"cpu": "1"}, node_selector={"zone": "a"}), anti={"app": "x"}, key="zone")
    [choice] = decide(
        table, [Task(uid=pod.uid, pod=pod, request=pod.request())], CoreConfig(), random.Random(1), placed=placed
    )
    assert isinstance(choice, NoFit)
    assert choice.reason.startswith("0/3 nodes are available: ")
    assert "2 node(s) didn't match pod anti-affinity rules" in choice.reason and "1 node(s)" in choice.reason


async def test_a_namespace_selector_reads_the_namespaces_labels(store: Store) -> None:
    """The loop follows Namespaces: an agent pod's anti-affinity for app=db in every namespace
    labelled team=b keeps it off the node where such a pod runs, and not off one in another team."""
    await store.upsert_nodes([node(f"n{i}", cpu="16", labels=labelled(i)) for i in range(3)])
    await store.write(
        [
            Put(msgspec.convert({"metadata": {"name": ns, "labels": {"team": team}}}, Namespace))
            for ns, team in (("b1", "b"), ("a1", "a"))
        ]
    )
    db_b = make_pod("db-b", requests={"cpu": "1"}, node="n0", phase="Running", labels={"app": "db"}, namespace="b1")
    db_a = make_pod("db-a", requests={"cpu": "1"}, node="n1", phase="Running", labels={"app": "db"}, namespace="a1")
    await store.upsert_pods([db_b, db_a])
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": HOST,
                    "namespaceSelector": {"matchLabels": {"team": "b"}},
                }
            ]
        }
    }
    pods = [
        msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, affinity=msgspec.convert(apart, Affinity)))
        for p in (make_pod(f"w{i}", requests={"cpu": "1"}, scheduler="agent-scheduler") for i in range(6))
    ]
    await _run(store, pods, want=6)
    records = await store.get_pods([p.uid for p in pods])
    assert {r.node for r in records.values()} <= {"n1", "n2"} and all(r.node for r in records.values())


async def test_pods_with_rules_in_small_batches_still_see_each_other(store: Store) -> None:
    """Batches of 2 with two batches in flight: pods that must stay apart are handed out one batch at
    a time, so a batch sees where the one before it placed (before, two batches in flight placed
    their pods side by side, neither seeing the other's)."""
    await store.upsert_nodes([node(f"n{i}", cpu="16", labels=labelled(i)) for i in range(6)])
    web = apart(8)
    await _run(store, web, want=8, batch_size=2)
    records = await store.get_pods([p.uid for p in web])
    nodes = sorted(r.node for r in records.values() if r.node)
    assert nodes == [f"n{i}" for i in range(6)], nodes  # one per node; the other two wait with a reason
