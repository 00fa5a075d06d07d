"""Pods alike placed by :class:`Alike` land exactly where the full way puts them, draw for draw."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_scheduler.core import CoreConfig, ScoreKind, Task, decide, profile
from cluster.model.core import Pod
from cluster.model.sharding import ShardingMode
from cluster.nodeview.alike import POOL, Alike
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.table import NodeTable
from cluster.sim.pods import make_pod
from cluster.sim.pools import TaintSpec
from cluster.store.records import NodeRecord
from cluster.store.store import node_allocatable
from tests.builders import node

SCHEDULER = "agent-scheduler"

node_specs = st.tuples(
    st.sampled_from(["2", "4", "8", "16"]),  # cpu
    st.sampled_from(["4Gi", "8Gi", "32Gi"]),  # memory
    st.integers(0, 6000),  # cpu already allocated, millicores
    st.sampled_from(["", SCHEDULER, "batch-scheduler"]),  # owner: the shard ranks
    st.booleans(),  # tainted
    st.sampled_from(["a", "b"]),  # zone label
    st.integers(0, 9).map(lambda x: x == 0),  # unschedulable, now and then
)
kinds = st.tuples(
    st.sampled_from(["100m", "250m", "500m", "1", "3"]),
    st.sampled_from(["128Mi", "1Gi", "3Gi"]),
    st.booleans(),  # tolerates the taint
    st.sampled_from([None, "a", "b"]),  # zone selector
)


def _table(specs: list[tuple[str, str, int, str, bool, str, bool]]) -> NodeTable:
    records = []
    for i, (cpu, memory, used, owner, tainted, zone, unschedulable) in enumerate(specs):
        n = node(
            f"n{i:03d}",
            cpu=cpu,
            memory=memory,
            labels={"zone": zone},
            taints=[TaintSpec(key="dedicated", value="x")] if tainted else [],
            unschedulable=unschedulable,
        )
        allocatable = node_allocatable(n)
        used_cpu = min(used, allocatable["cpu"])
        records.append(
            NodeRecord(
                name=n.name,
                allocatable=allocatable,
                allocated=allocatable.__class__({"cpu": used_cpu}),
                version=1,
                owner=owner,
                unschedulable=unschedulable,
                node=n,
            )
        )
    return NodeTable(records)


def _pod(i: int, kind: tuple[str, str, bool, str | None]) -> Pod:
    cpu, memory, tolerates, zone = kind
    return make_pod(
        f"p{i}",
        requests={"cpu": cpu, "memory": memory},
        scheduler=SCHEDULER,
        uid=f"u{i}",
        node_selector={"zone": zone} if zone else None,
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
        if tolerates
        else (),
    )


def _placed(table: NodeTable, pods: list[Pod], config: CoreConfig, seed: int, *, alike: bool) -> list[int | str]:
    """Each pod's row (taken on the table) or the reason it fits nowhere: placed by :class:`Alike`,
    or the full way (``Profile.place``)."""
    chosen, rng, out = profile(config), random.Random(seed), []
    placer = Alike(chosen) if alike else chosen
    for p in pods:
        row = placer.place(table, p, p.request(), rng)
        if isinstance(row, Filtered):
            out.append(row.reason())
            continue
        table.take(table.names[row], p.request())
        if isinstance(placer, Alike):
            placer.taken(row)
        out.append(row)
    return out


def _full_way(table: NodeTable, pods: list[Pod], config: CoreConfig, seed: int) -> list[int | str]:
    return _placed(table, pods, config, seed, alike=False)


def _alike(table: NodeTable, pods: list[Pod], config: CoreConfig, seed: int) -> list[int | str]:
    return _placed(table, pods, config, seed, alike=True)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(node_specs, min_size=1, max_size=3 * POOL),
    st.lists(kinds, min_size=1, max_size=4),
    st.lists(st.integers(0, 3), min_size=1, max_size=120),
    st.integers(1, 5),
    st.sampled_from(list(ScoreKind)),
    st.sampled_from([(0, 1), (0, 2), (1, 3)]),
    st.sampled_from([ShardingMode.SOFT, ShardingMode.HARD, ShardingMode.NONE]),
    st.integers(0, 2**16),
)
def test_alike_places_every_pod_where_the_full_way_does(
    specs: list[tuple[str, str, int, str, bool, str, bool]],
    kind_list: list[tuple[str, str, bool, str | None]],
    order: list[int],
    candidates: int,
    score: ScoreKind,
    worker: tuple[int, int],
    sharding: ShardingMode,
    seed: int,
) -> None:
    config = CoreConfig(candidates=candidates, score=score, worker=worker[0], workers=worker[1], sharding=sharding)
    pods = [_pod(i, kind_list[k % len(kind_list)]) for i, k in enumerate(order)]
    assert _alike(_table(specs), pods, config, seed) == _full_way(_table(specs), pods, config, seed)


def test_a_large_shard_filled_by_three_kinds_lands_as_the_full_way() -> None:
    """Hundreds of nodes, ties broken by earlier takes, kinds filling their ranks: node for node the same."""
    rng = random.Random(7)
    specs = [
        (rng.choice(["4", "8"]), "32Gi", rng.choice([0, 0, 500, 2000]), rng.choice(["", SCHEDULER]), False, "a", False)
        for _ in range(300)
    ]
    kind_list = [("500m", "1Gi", False, None), ("1", "128Mi", False, None), ("250m", "3Gi", False, "a")]
    pods = [_pod(i, kind_list[i % 3]) for i in range(4000)]
    config = CoreConfig(candidates=3, worker=1, workers=2)
    alike = _alike(_table(specs), pods, config, 11)
    assert alike == _full_way(_table(specs), pods, config, 11)
    placed = [r for r in alike if isinstance(r, int)]
    assert 2000 < len(placed) < 4000  # the shard filled: some pods fit nowhere, and said why
    assert any(isinstance(r, str) and "Insufficient cpu" in r for r in alike)


def test_decide_uses_it_and_places_as_before_for_pods_it_does_not_take() -> None:
    """A batch mixing plain pods and a GPU pod: decide takes the plain ones alike, the GPU one the full way,
    and the choices are those of the full way."""
    specs = [("8", "32Gi", 0, SCHEDULER, False, "a", False)] * 40
    plain = [_pod(i, ("500m", "1Gi", False, None)) for i in range(30)]
    table = _table(specs)
    config = CoreConfig(candidates=3)
    tasks = [Task(uid=p.uid, pod=p, request=p.request()) for p in plain]
    got = [c.node for c in decide(table, tasks, config, random.Random(5))]  # type: ignore[union-attr]
    want = _full_way(_table(specs), plain, config, 5)
    assert got == [f"n{r:03d}" for r in want]  # type: ignore[str-format]


def test_kinds_differ_by_what_the_filters_read() -> None:
    from cluster.nodeview.alike import kind_of

    a, b = _pod(0, ("1", "1Gi", False, "a")), _pod(1, ("1", "1Gi", False, "a"))
    assert kind_of(a, a.request()) == kind_of(b, b.request())  # names and uids aside
    c = _pod(2, ("1", "1Gi", True, "a"))
    d = _pod(3, ("1", "1Gi", False, "b"))
    e = _pod(4, ("2", "1Gi", False, "a"))
    assert len({kind_of(p, p.request()) for p in (a, c, d, e)}) == 4
    f = make_pod(
        "f", requests={"cpu": "1", "memory": "1Gi"}, node_selector={"zone": "a"}, node_affinity={"zone": ["a"]}
    )
    assert kind_of(f, f.request()) != kind_of(a, a.request())  # required node affinity too
