"""The agent scheduler's pure core: filter, score, top-K draw, choices applied within a batch."""

from __future__ import annotations

import random
import zlib

import msgspec

from agent_scheduler.core import Choice, CoreConfig, NoFit, ScoreKind, Task, decide, partition_room, profile
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord
from tests.builders import gpu_node, node, node_table, pod


def columns(*specs: tuple[str, int, int, str]) -> NodeTable:
    """(name, cpu millicores allocatable, cpu used, owner)."""
    return NodeTable(
        NodeRecord(
            name=n,
            allocatable=Resources({"cpu": a, "memory": 2**36, "pods": 110}),
            allocated=Resources({"cpu": u}),
            version=7,
            owner=o,
            unschedulable=False,
            node=node(n),
        )
        for n, a, u, o in specs
    )


def task(name: str, cpu: str = "1") -> Task:
    p = pod(name, cpu=cpu, memory="1Gi")
    return Task(uid=p.uid, pod=p, request=p.request())


def test_binpack_fills_the_fullest_node_least_allocated_the_emptiest() -> None:
    cols = columns(("empty", 8000, 0, ""), ("half", 8000, 4000, ""), ("full", 8000, 6500, ""))
    one = CoreConfig(candidates=1, sharding=ShardingMode.NONE)
    [c] = decide(cols.snapshot(), [task("a")], one, random.Random(0))
    assert isinstance(c, Choice) and c.node == "full" and c.version == 7
    [c] = decide(
        cols.snapshot(), [task("a")], msgspec.structs.replace(one, score=ScoreKind.LEAST_ALLOCATED), random.Random(0)
    )
    assert isinstance(c, Choice) and c.node == "empty"


def test_choices_are_applied_before_the_next_pod() -> None:
    cols = columns(("a", 2000, 0, ""), ("b", 2000, 0, ""))
    out = decide(cols, [task(f"p{i}") for i in range(4)], CoreConfig(candidates=1), random.Random(0))
    nodes = [c.node for c in out if isinstance(c, Choice)]
    assert sorted(nodes) == ["a", "a", "b", "b"]
    [fifth] = decide(cols, [task("p5")], CoreConfig(), random.Random(0))
    assert isinstance(fifth, NoFit) and "Insufficient cpu" in fifth.reason and fifth.reason.startswith("0/2 nodes")


def test_top_k_draw_is_seeded_and_spreads_ties() -> None:
    """The draw is among the K best and every node tied with the K-th, as kube-scheduler draws among
    all the nodes tied for the best score: a cut through a tie handed every worker the same 5 of 10
    equal nodes (the first of a fresh pool), and their commits collided there."""
    cols = columns(*[(f"n{i}", 8000, 0, "") for i in range(10)])
    picks = {
        decide(cols.snapshot(), [task("x")], CoreConfig(candidates=5), random.Random(seed))[0].node
        for seed in range(60)
    }  # type: ignore[union-attr]
    assert len(picks) == 10
    graded = columns(*[(f"n{i}", 8000, 500 * i, "") for i in range(10)])  # n9 the fullest
    picks = {
        decide(graded.snapshot(), [task("x")], CoreConfig(candidates=5), random.Random(seed))[0].node
        for seed in range(60)
    }  # type: ignore[union-attr]
    assert picks == {"n5", "n6", "n7", "n8", "n9"}
    again = [decide(cols.snapshot(), [task("x")], CoreConfig(candidates=5), random.Random(3))[0] for _ in range(3)]
    assert again[0] == again[1] == again[2]


def test_sharding_modes() -> None:
    cols = columns(("mine", 8000, 0, "agent-scheduler"), ("free", 8000, 7000, ""), ("theirs", 8000, 7000, "volcano"))
    soft = CoreConfig(candidates=1)
    [c] = decide(cols.snapshot(), [task("a")], soft, random.Random(0))
    assert isinstance(c, Choice) and c.node == "mine"  # own shard first, though binpack prefers fuller nodes
    hard = CoreConfig(candidates=1, sharding=ShardingMode.HARD)
    out = decide(cols.snapshot(), [task(f"h{i}", cpu="4") for i in range(3)], hard, random.Random(0))
    assert [type(c).__name__ for c in out] == ["Choice", "Choice", "NoFit"]
    assert {c.node for c in out if isinstance(c, Choice)} == {"mine"}
    assert "another scheduler's shard" in out[2].reason  # type: ignore[union-attr]
    [c] = decide(cols.snapshot(), [task("n")], CoreConfig(candidates=1, sharding=ShardingMode.NONE), random.Random(0))
    assert isinstance(c, Choice) and c.node in {"free", "theirs"}


def test_a_replica_kept_across_batches_follows_owner_label_and_node_changes() -> None:
    """What decide keeps from batch to batch (shard ranks, bonuses) is redone when the shard or the nodes change."""
    cols = columns(("a", 8000, 0, "agent-scheduler"), ("b", 8000, 0, "volcano"))
    hard = CoreConfig(candidates=1, sharding=ShardingMode.HARD)
    [c] = decide(cols, [task("p1")], hard, random.Random(0))
    assert isinstance(c, Choice) and c.node == "a"
    cols.set_owner("a", "volcano")
    cols.set_owner("b", "agent-scheduler")  # the sharding controller moved both nodes
    [c] = decide(cols, [task("p2")], hard, random.Random(0))
    assert isinstance(c, Choice) and c.node == "b"
    warm = NodeRecord(
        name="c",
        allocatable=Resources({"cpu": 8000, "memory": 2**36, "pods": 110}),
        allocated=Resources(),
        version=1,
        owner="agent-scheduler",
        unschedulable=False,
        node=node("c", labels={"node.volcano.sh/warmup": "true"}),
    )
    cols.upsert(warm)  # a new warmup node: both are empty-ish, the warmup bonus decides
    least = CoreConfig(candidates=1, sharding=ShardingMode.HARD, score=ScoreKind.LEAST_ALLOCATED)
    [c] = decide(cols, [task("p3")], least, random.Random(0))
    assert isinstance(c, Choice) and c.node == "c"
    cols.remove("c")
    [c] = decide(cols, [task("p4")], least, random.Random(0))
    assert isinstance(c, Choice) and c.node == "b"


def test_shares_of_a_card_go_card_by_card_and_never_past_a_card() -> None:
    """OpenB-style pods (gpu-milli without whole GPUs) on two nodes of two cards: each share takes
    one card; 600 + 600 never lands on one card though the node has 2000 thousandths."""
    from cluster.model.devices import card_resource
    from cluster.nodeview.devices import CardPolicy
    from cluster.sim.trace import GPU_MILLI

    nodes = [gpu_node(f"g{i}", allocatable={"nvidia.com/gpu": 2, GPU_MILLI: 2000}) for i in range(2)]
    cols = node_table(nodes)

    def share(name: str, milli: int) -> Task:
        p = pod(name, cpu="1", memory="1Gi")
        return Task(uid=p.uid, pod=p, request=p.request() + Resources({GPU_MILLI: milli}))

    config = CoreConfig(sharding=ShardingMode.NONE, gpu_policy=CardPolicy.BEST_FIT)
    out = decide(cols, [share(f"s{i}", 600) for i in range(5)], config, random.Random(0))
    chosen = [c for c in out if isinstance(c, Choice)]
    assert len(chosen) == 4 and isinstance(out[4], NoFit) and "GPU card" in out[4].reason
    assert all(len(c.cards) == 1 and sum(c.cards.values()) == 600 for c in chosen)
    for name in ("g0", "g1"):
        i = cols.index[name]
        assert [int(cols.allocated[cols.resource_index[card_resource(k)], i]) for k in range(2)] == [600, 600]
    # a 400 share still fits the 400 left on a card: best-fit takes that sliver
    [last] = decide(cols, [share("t", 400)], config, random.Random(0))
    assert isinstance(last, Choice) and sum(last.cards.values()) == 400


def test_with_the_fgd_policy_a_share_goes_where_whole_gpus_stay_whole() -> None:
    """The spec's FGD-2 through the agent core: typical pods learned from the batch (a half and a
    whole GPU); node a has [500, 500] left, b [1000, 0]: the half goes to a's card 0, keeping b's
    whole card whole for the whole-GPU pod."""
    from cluster.model.devices import card_resource
    from cluster.nodeview.devices import CardPolicy
    from cluster.sim.trace import GPU_MILLI

    used = {"a": {0: 500, 1: 500}, "b": {1: 1000}}
    nodes = [gpu_node(name, allocatable={"nvidia.com/gpu": 2, GPU_MILLI: 2000}) for name in used]
    taken = {
        name: Resources({card_resource(k): v for k, v in u.items()} | {GPU_MILLI: sum(u.values())})
        for name, u in used.items()
    }
    cols = node_table(nodes, taken)

    def gpu_task(name: str, milli: int) -> Task:
        p = pod(name, cpu="1", memory="1Gi", gpu=1 if milli == 1000 else 0)
        return Task(uid=p.uid, pod=p, request=p.request() + Resources({GPU_MILLI: milli}))

    config = CoreConfig(sharding=ShardingMode.NONE, gpu_policy=CardPolicy.FGD, candidates=1)
    half, whole = decide(cols, [gpu_task("half", 500), gpu_task("whole", 1000)], config, random.Random(0))
    assert isinstance(half, Choice) and (half.node, dict(half.cards)) == ("a", {card_resource(0): 500})
    assert isinstance(whole, Choice) and (whole.node, dict(whole.cards)) == ("b", {card_resource(0): 1000})


def test_fgd_scores_against_the_typical_pods_given_and_learns_none() -> None:
    """--fgd-typical-pods: the agent's FGD takes the operator's workload as it is; the pods it places
    do not change it."""
    from cluster.nodeview.devices import CardPolicy
    from cluster.nodeview.fgd_score import FgdConfig, FgdScore, parse_typical_pods

    given = parse_typical_pods("cpu=4,gpus=1,milli=500,share=3; cpu=8,gpus=8,share=1", "--fgd-typical-pods")
    assert [(t.task.gpus, t.task.milli, t.task.cpu, t.share) for t in given] == [
        (1, 500, 4000, 0.75),
        (8, 1000, 8000, 0.25),
    ]
    config = CoreConfig(sharding=ShardingMode.NONE, gpu_policy=CardPolicy.FGD, fgd=FgdConfig(typical=given))
    fgd = next(s for s in profile(config).scores if isinstance(s, FgdScore))
    p = pod("cpu-only", cpu="1", memory="1Gi")
    fgd.observe([(p, p.request())] * 200)
    assert fgd.typical() == given


def test_a_worker_out_of_room_takes_from_the_next_partition_the_end_its_owner_comes_to_last() -> None:
    """Four workers on one view. Worker 0's partition is full: it takes room in worker 1's partition
    (not 2's or 3's, where workers 3 and 2 would go) and there the emptiest node, while worker 1
    binpacks its fullest: the two do not commit to the same node. Names are hashed as the table does."""
    part = {p: [] for p in range(4)}  # type: dict[int, list[str]]
    i = 0
    while min(len(v) for v in part.values()) < 3:
        name = f"n{i}"
        part[zlib.crc32(name.encode()) % 4].append(name)
        i += 1
    specs = [(n, 8000, 8000, "") for n in part[0][:3]]  # worker 0's partition: no room
    for p in (1, 2, 3):
        specs += [(n, 8000, used, "") for n, used in zip(part[p][:3], (0, 3000, 6000))]
    cols = columns(*specs)
    out = {}
    for w in range(4):
        config = CoreConfig(candidates=1, sharding=ShardingMode.NONE, worker=w, workers=4)
        [c] = decide(cols.snapshot(), [task("x")], config, random.Random(0))
        assert isinstance(c, Choice)
        out[w] = c.node
    assert out[0] == part[1][0]  # the next partition's emptiest
    assert out[1] == part[1][2]  # its owner's fullest
    assert (out[2], out[3]) == (part[2][2], part[3][2])


def test_among_nodes_alike_an_owner_starts_at_one_end_of_its_partition_a_worker_out_of_room_at_the_other() -> None:
    """Two workers, a fresh pool of alike nodes. Worker 1's own partition is full, so it takes room in
    worker 0's: there, drawing among the nodes alike, the two start at opposite ends of one order (the
    names' hash) and pick disjoint nodes until the pool is nearly gone. Without the order both draw
    among every empty node of the partition, and two in-flight batches meet anywhere."""
    part: dict[int, list[str]] = {0: [], 1: []}
    i = 0
    while len(part[0]) < 20 or len(part[1]) < 3:
        name = f"n{i}"
        part[zlib.crc32(name.encode()) % 2].append(name)
        i += 1
    specs = [(n, 8000, 0, "") for n in part[0][:20]] + [(n, 8000, 8000, "") for n in part[1][:3]]
    cols = columns(*specs)
    picked = {}
    for w in (0, 1):
        config = CoreConfig(candidates=3, sharding=ShardingMode.NONE, worker=w, workers=2)
        batch = [task(f"w{w}-{k}", cpu="8") for k in range(6)]  # one pod fills a node
        picked[w] = {c.node for c in decide(cols.snapshot(), batch, config, random.Random(w)) if isinstance(c, Choice)}
    assert len(picked[0]) == len(picked[1]) == 6
    assert not picked[0] & picked[1]
    order = sorted(part[0][:20], key=lambda n: zlib.crc32(n.encode()))
    assert picked[0] <= set(order[:8]) and picked[1] <= set(order[-8:])


def test_partition_room_counts_pods_like_the_batch_on_the_workers_own_nodes() -> None:
    """Room: on the nodes of the worker's partition (name hash mod workers) within its best shard
    rank, schedulable, how many more pods of the batch's mean request fit, node by node."""
    names = [f"n{i}" for i in range(12)]
    part = {n: zlib.crc32(n.encode()) % 2 for n in names}
    mine = [n for n in names if part[n] == 0]
    theirs = [n for n in names if part[n] == 1]
    assert len(mine) >= 3 and theirs
    # mine[0]: 8 cpu, 5 used (3 pods of 1 cpu); mine[1]: full; mine[2:]: another scheduler's;
    # theirs: empty (the other worker's partition: not counted).
    specs = [(mine[0], 8000, 5000, "agent"), (mine[1], 8000, 8000, "agent")]
    specs += [(n, 8000, 0, "batch") for n in mine[2:]] + [(n, 8000, 0, "agent") for n in theirs]
    cols = columns(*specs)
    config = CoreConfig(scheduler="agent", worker=0, workers=2)
    one_cpu = [task("a").request, task("b").request]
    assert partition_room(cols, one_cpu, config) == 3
    # a mean of 1.5 cpu (1 and 2): two more on mine[0]'s 3 cpu; a mean of 1.6, one
    assert partition_room(cols, [Resources({"cpu": 1000}), Resources({"cpu": 2000})], config) == 2
    assert partition_room(cols, [Resources({"cpu": 1200}), Resources({"cpu": 2000})], config) == 1
    # the other worker: its whole partition, 8 a node
    assert partition_room(cols, one_cpu, CoreConfig(scheduler="agent", worker=1, workers=2)) == 8 * len(theirs)
    # no partitions with one worker; none left when the worker's own nodes are cordoned (the
    # other scheduler's nodes in its partition come after the other worker's own ones)
    assert partition_room(cols, one_cpu, CoreConfig(scheduler="agent")) is None
    cordoned = columns(*specs)
    for n in mine[:2]:
        cordoned.unschedulable[cordoned.index[n]] = True
    assert partition_room(cordoned, one_cpu, config) == 0
    # every node of its own shard full: the unowned ones come next, its partition of them first
    spill = [(n, 8000, 8000, "agent") for n in names[:6]] + [(n, 8000, 6000, "") for n in names[6:]]
    assert partition_room(columns(*spill), one_cpu, config) == 2 * sum(1 for n in names[6:] if part[n] == 0)
    # an unknown resource: nothing fits
    assert partition_room(cols, [Resources({"example.com/fpga": 1})], config) == 0
