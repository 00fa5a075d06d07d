"""``caldera bench topology``: gangs on a tiered network — how often each lands in the lowest tier
it could, how many whole leaves stay free, and what the search costs a session.

The cluster: ``--nodes`` GPU nodes (8 GPUs each), ``--leaf`` nodes to a leaf switch,
``--spine`` leaves to a spine — HyperNodes of tier 1 and 2 in the store, the root above.
Another scheduler holds ``--busy`` of the nodes, picked at random, so leaves are partly
used. Gangs of 1–32 whole-node pods (8 GPUs each) arrive until they ask for ``--demand`` of
the free nodes; each asks ``networkTopology: soft`` (lowest tier that fits, else the whole
cluster). One batch session — the conf Volcano recommends for topology, with
network-topology-aware's HyperNode binpack — places them, through the store and the binder
as the batch-scheduler process does; a warm-up session first, so the HyperNode tree is
built (as it is once in a running scheduler).

The same workload without ``networkTopology`` runs beside it, rounds alternating. Reported:
``best_tier_share`` — of the placed gangs, those inside a domain of the lowest tier where,
replaying the placements in job order from the same start, some domain had room for the
gang then (the offline optimum of that order); ``free_leaf_share`` — leaves with every node
free after the session (beside the run without topology); ``session_ratio`` — session seconds
with topology ÷ without (medians).
"""

from __future__ import annotations

import argparse
import random
from typing import Annotated, Any

import msgspec
import numpy as np

from batch_scheduler.conf import parse_conf
from batch_scheduler.registry import default_registry
from caldera._store import client
from caldera.bench.batch import simulated
from caldera.bench.runner import MAX_NODES, figures, positive_int, run_bench
from caldera.flag_config import checked, from_flags, number, redis_url, whole
from cluster.model.core import ObjectMeta
from cluster.model.topology import ExactMatch, HyperNode, HyperNodeSpec, Member, MemberSelector, NetworkTopologySpec
from cluster.runtime.heap import HeapKeeper
from cluster.sim.pods import make_pod, make_podgroup
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.audit import audit
from cluster.store.keys import Keys
from cluster.store.store import Put, Store

BATCH = "volcano"
SIZES = (1, 2, 4, 8, 16, 32)
NODE: dict[str, str | int | float] = {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8, "pods": 110}
WHOLE: dict[str, str | int] = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8}
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}, {name: network-topology-aware}]
"""


class Run(msgspec.Struct):
    session_s: float
    gangs: int
    placed_gangs: int
    best_tier_share: float
    free_leaf_share: float
    audit: str


class Report(msgspec.Struct):
    nodes: int
    leaves: int
    spines: int
    gangs: int
    best_tier_share: float  # with topology
    free_leaf_share: float  # with topology
    free_leaf_share_without: float
    session_ratio: float  # session seconds with topology ÷ without (medians)
    session_s: float
    session_s_without: float
    rounds: list[Run]
    rounds_without: list[Run]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "topology", help="gangs on a tiered network: share in their best tier, free leaves, session cost"
    )
    p.add_argument("--nodes", type=positive_int, default=4096)
    p.add_argument("--leaf", type=positive_int, default=8, help="nodes per leaf switch (default: 8)")
    p.add_argument("--spine", type=positive_int, default=16, help="leaves per spine (default: 16)")
    p.add_argument("--busy", type=number, default=0.3, help="share of nodes another scheduler holds (default: 0.3)")
    p.add_argument(
        "--demand", type=number, default=0.5, help="share of the free nodes the gangs ask for (default: 0.5)"
    )
    p.add_argument("--rounds", type=positive_int, default=3, help="rounds of each variant, alternating (default: 3)")
    p.add_argument("--seed", type=whole, default=1)
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class TopologyBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench topology``'s flags, checked."""

    nodes: Annotated[int, msgspec.Meta(ge=1, le=MAX_NODES, description=f"1 to {MAX_NODES:,} nodes")] = 4096
    leaf: Annotated[int, msgspec.Meta(ge=1, le=10_000, description="1 to 10,000 nodes")] = 8
    spine: Annotated[int, msgspec.Meta(ge=1, le=10_000, description="1 to 10,000 leaves")] = 16
    busy: Annotated[float, msgspec.Meta(ge=0, lt=1, description="a share in [0, 1)")] = 0.3
    demand: Annotated[float, msgspec.Meta(ge=0, lt=1, description="a share in [0, 1)")] = 0.5
    rounds: Annotated[int, msgspec.Meta(ge=1, le=1000, description="1 to 1,000 rounds")] = 3
    seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1, description="a 64-bit integer")] = 1
    redis_url: str | None = None
    json: bool = False


def config(args: argparse.Namespace) -> TopologyBench:
    """The flags checked (ValueError naming the flag); nothing started."""
    return from_flags(TopologyBench, args, redis_url=redis_url("--redis-url", args.redis_url))


def hypernodes(names: list[str], leaf: int, spine: int) -> list[HyperNode]:
    """Leaf switches of ``leaf`` consecutive nodes (tier 1), spines of ``spine`` leaves (tier 2)."""

    def member(kind: str, name: str) -> Member:
        return Member(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))

    leaves = [names[i : i + leaf] for i in range(0, len(names), leaf)]
    out = [
        HyperNode(
            metadata=ObjectMeta(name=f"leaf-{i}"),
            spec=HyperNodeSpec(tier=1, tier_name="leaf", members=[member("Node", n) for n in nodes]),
        )
        for i, nodes in enumerate(leaves)
    ]
    out += [
        HyperNode(
            metadata=ObjectMeta(name=f"spine-{j}"),
            spec=HyperNodeSpec(
                tier=2,
                tier_name="spine",
                members=[member("HyperNode", f"leaf-{i}") for i in range(j * spine, min((j + 1) * spine, len(leaves)))],
            ),
        )
        for j in range((len(leaves) + spine - 1) // spine)
    ]
    return out


def workload(args: TopologyBench) -> tuple[set[int], list[int]]:
    """The busy nodes, and the gang sizes in job order (the same for both variants)."""
    rng = random.Random(args.seed)
    busy = set(rng.sample(range(args.nodes), round(args.busy * args.nodes)))
    want = round(args.demand * (args.nodes - len(busy)))
    sizes: list[int] = []
    while sum(sizes) < want:
        sizes.append(min(rng.choice(SIZES), want - sum(sizes)))
    return busy, sizes


def tiers_of(rows: list[int], args: TopologyBench) -> int:
    """The lowest tier holding every one of the nodes: 1 one leaf, 2 one spine, 3 the root."""
    if len({r // args.leaf for r in rows}) == 1:
        return 1
    return 2 if len({r // (args.leaf * args.spine) for r in rows}) == 1 else 3


def score(placements: list[list[int]], busy: set[int], args: TopologyBench) -> tuple[float, float]:
    """(best-tier share, free-leaf share), replaying the placements in job order from the start."""
    free = np.ones(args.nodes, dtype=np.bool_)
    free[list(busy)] = False
    best = 0
    for rows in placements:
        need = len(rows)
        leaf_free = np.add.reduceat(free, np.arange(0, args.nodes, args.leaf))
        spine_free = np.add.reduceat(free, np.arange(0, args.nodes, args.leaf * args.spine))
        optimum = 1 if leaf_free.max() >= need else 2 if spine_free.max() >= need else 3
        best += tiers_of(rows, args) == optimum
        free[rows] = False
    leaves = np.add.reduceat(free, np.arange(0, args.nodes, args.leaf))
    sizes = np.diff(np.append(np.arange(0, args.nodes, args.leaf), args.nodes))
    placed = len(placements)
    return (round(best / placed, 4) if placed else 0.0), round(float(np.mean(leaves == sizes)), 4)


async def one_run(url: str, args: TopologyBench, name: str, topology: bool) -> Run:
    async with client(url) as c:
        store = Store(c, Keys(f"bench-topology-{name}"))
        nodes = pool_nodes(NodePool(name="gpu", count=args.nodes, resources=NODE))
        names = [n.name for n in nodes]
        for i in range(0, len(nodes), 2000):
            await store.upsert_nodes(nodes[i : i + 2000])
        await store.write([Put(hn) for hn in hypernodes(names, args.leaf, args.spine)])
        busy, sizes = workload(args)
        held = [
            make_pod(f"other-{names[i]}", scheduler="other", node=names[i], phase="Running", requests=WHOLE)
            for i in sorted(busy)
        ]
        for i in range(0, len(held), 2000):
            await store.upsert_pods(held[i : i + 2000])
        heap = HeapKeeper()  # as the batch-scheduler process runs it
        scheduler, informer = simulated(store, parse_conf(CONF, default_registry()), heap)
        updates = informer.updates()

        async def catch_up() -> None:
            target = await store.version()
            while scheduler.version < target:
                scheduler.apply(await anext(updates))

        await catch_up()
        await scheduler.run_session()  # warm-up: the HyperNode tree is built once, as in a running scheduler
        soft = NetworkTopologySpec(mode="soft")
        groups, pods = [], []
        for j, size in enumerate(sizes):
            group = make_podgroup(f"gang-{j:05d}", min_member=size)
            if topology:
                group = msgspec.structs.replace(group, spec=msgspec.structs.replace(group.spec, network_topology=soft))
            groups.append(group)
            pods += [
                make_pod(f"gang-{j:05d}-{i}", requests=WHOLE, scheduler=BATCH, group=group.name) for i in range(size)
            ]
        await store.write([Put(g) for g in groups])
        for i in range(0, len(pods), 2000):
            await store.upsert_pods(pods[i : i + 2000])
        await catch_up()
        report = await scheduler.run_session()
        await catch_up()
        index = {n: i for i, n in enumerate(names)}
        by_gang: dict[str, list[int]] = {}
        for record in scheduler.pods.values():
            if record.node and record.group:
                by_gang.setdefault(record.group, []).append(index[record.node])
        placements = [by_gang[k] for k in sorted(by_gang)]  # job order: one queue, names in creation order
        best, free_leaves = score(placements, busy, args)
        informer.stop()
        heap.release()
        problems = await audit(store)
        await c.delete(*[k async for k in c.scan_iter(match=store.keys.prefix + "*")])
        return Run(
            session_s=round(report.seconds, 3),
            gangs=len(sizes),
            placed_gangs=len(placements),
            best_tier_share=best,
            free_leaf_share=free_leaves,
            audit="ok" if not problems else f"{len(problems)} violations",
        )


async def measure(url: str, args: TopologyBench) -> Report:
    with_topology: list[Run] = []
    without: list[Run] = []
    for r in range(args.rounds):
        with_topology.append(await one_run(url, args, f"with-{r}", True))
        without.append(await one_run(url, args, f"without-{r}", False))
    t = float(np.median([r.session_s for r in with_topology]))
    w = float(np.median([r.session_s for r in without]))
    last = with_topology[-1]
    return Report(
        nodes=args.nodes,
        leaves=(args.nodes + args.leaf - 1) // args.leaf,
        spines=(args.nodes + args.leaf * args.spine - 1) // (args.leaf * args.spine),
        gangs=last.gangs,
        best_tier_share=last.best_tier_share,
        free_leaf_share=last.free_leaf_share,
        free_leaf_share_without=without[-1].free_leaf_share,
        session_ratio=round(t / w, 3) if w > 0 else 0.0,
        session_s=round(t, 3),
        session_s_without=round(w, 3),
        rounds=with_topology,
        rounds_without=without,
    )


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench topology", args, config)
    if bench is None:
        return 2
    return run_bench(
        bench,
        lambda url: measure(url, bench),
        figures(24),
        ok=lambda report: all(r.audit == "ok" for r in [*report.rounds, *report.rounds_without]),
    )
