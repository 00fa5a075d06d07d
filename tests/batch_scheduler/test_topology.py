"""Network topology in the batch scheduler: the acceptance scenarios of the spec (§1.8, NT-1 … NT-10),
through real sessions.

Common setup, as the spec's: plugins predicates, gang, network-topology-aware; actions enqueue,
allocate; PodGroups Inqueue in queue q1; nodes 4 cpu / 8Gi, pods 4 cpu / 8Gi (one fills a
node). Topology A: tier-1 hn0 = {n0..n3}, hn1 = {n4..n7}; tier-2 hn2 = {hn0, hn1}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batch_scheduler.reasons import PendingReason
from batch_scheduler.session import Session
from cluster.model.topology import HyperNode
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, priority_class, queue, session, task
from tests.builders import hypernode, node

CONF = conf(["predicates", "gang", "network-topology-aware"], actions="enqueue, allocate")
NODES8 = [f"n{i}" for i in range(8)]
TOPOLOGY_A = [
    hypernode("hn0", 1, nodes=NODES8[:4]),
    hypernode("hn1", 1, nodes=NODES8[4:]),
    hypernode("hn2", 2, children=["hn0", "hn1"]),
]
HN0, HN1 = set(NODES8[:4]), set(NODES8[4:])


def gang(name: str, count: int, *, cpu: str = "4", memory: str = "8Gi", **kw: Any) -> list[PodRecord]:
    return [task(f"{name}-{i}", cpu=cpu, memory=memory, group=name, **kw) for i in range(count)]


def run(
    pods: Sequence[PodRecord],
    topology: Mapping[str, Any] | None,
    *,
    min_member: int,
    sub_groups: Sequence[Mapping[str, Any]] = (),
    hypernodes: Sequence[HyperNode] = TOPOLOGY_A,
    nodes: Sequence[str] = NODES8,
    group: str = "j",
    extra_groups: Sequence[Any] = (),
    used: Mapping[str, Mapping[str, int]] | None = None,
    hypernode_labels: tuple[str, ...] = (),
    labels: Mapping[str, dict[str, str]] | None = None,
) -> Session:
    ssn = session(
        CONF,
        [node(n, cpu="4", memory="8Gi", labels=(labels or {}).get(n)) for n in nodes],
        pods,
        podgroups=[
            podgroup(
                group,
                min_member=min_member,
                queue="q1",
                phase="Inqueue",
                network_topology=topology,
                sub_group_policy=sub_groups,
            ),
            *extra_groups,
        ],
        queues=[queue("q1")],
        hypernodes=hypernodes,
        used=used,
        hypernode_labels=hypernode_labels,
    )
    ssn.run()
    return ssn


def placed(ssn: Session, prefix: str = "j-") -> dict[str, str]:
    return {t.name: t.node for batch in ssn.commits for t in batch if t.name.startswith(prefix)}


HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}


def test_nt1_hard_tier_1_places_a_partial_gang_inside_one_leaf() -> None:
    ssn = run(gang("j", 8), HARD1, min_member=4)
    nodes = set(placed(ssn).values())
    assert len(placed(ssn)) == 4 and (nodes <= HN0 or nodes <= HN1)


def test_nt1b_hard_tier_1_a_gang_bigger_than_any_leaf_is_not_placed_at_all() -> None:
    ssn = run(gang("j", 8), HARD1, min_member=8)
    assert placed(ssn) == {}
    job = ssn.jobs["default/j"]
    assert job.reason_kind is PendingReason.NETWORK_TOPOLOGY
    assert "no room for the gang in any HyperNode of tier 1 or lower (none has the free room" in job.reason


def test_nt2_hard_tier_2_places_the_whole_gang_one_per_node() -> None:
    ssn = run(gang("j", 8), HARD2, min_member=8)
    assert sorted(placed(ssn).values()) == NODES8


def test_nt3_hypernode_binpack_chooses_the_busier_leaf() -> None:
    running = task("other-0", cpu="2", memory="4Gi", node="n0")
    ssn = run([*gang("j", 2), running], HARD1, min_member=2)
    assert set(placed(ssn).values()) <= {"n1", "n2", "n3"}
    running = task("other-0", cpu="2", memory="4Gi", node="n4")
    ssn = run([*gang("j", 2), running], HARD1, min_member=2)
    assert set(placed(ssn).values()) <= {"n5", "n6", "n7"}


def test_nt6_tier_2_placement_fills_whole_leaves() -> None:
    # Volcano's TestHyperNodeBinpackWithNetWorkTopologies: [2, 2], never [2, 1, 1].
    nodes = ["s0-n1", "s0-n2", "s1-n3", "s1-n4", "s2-n5", "s2-n6"]
    topology = [
        hypernode("s0", 1, nodes=nodes[0:2]),
        hypernode("s1", 1, nodes=nodes[2:4]),
        hypernode("s2", 1, nodes=nodes[4:6]),
        hypernode("s3", 2, children=["s0", "s1", "s2"]),
    ]
    ssn = run(gang("j", 4), HARD2, min_member=4, hypernodes=topology, nodes=nodes)
    leaves = sorted(n.split("-")[0] for n in placed(ssn).values())
    assert len(leaves) == 4 and sorted({leaves.count(x) for x in set(leaves)}) == [2]


NT7_TOPOLOGY = [
    hypernode("hn1", 1, nodes=["node1", "node2"]),
    hypernode("hn2", 1, nodes=["node3", "node4"]),
    hypernode("hn3", 1, nodes=["node5", "node6"]),
]
NT7_NODES = [f"node{i}" for i in range(1, 7)]
NT7_FULL = {"node4": {"cpu": 4000, "memory": 8 * 2**30}, "node6": {"cpu": 4000, "memory": 8 * 2**30}}


def test_nt7_soft_mode_takes_the_lowest_tier_that_fits() -> None:
    ssn = run(gang("j", 2), {"mode": "soft"}, min_member=2, hypernodes=NT7_TOPOLOGY, nodes=NT7_NODES, used=NT7_FULL)
    assert sorted(placed(ssn).values()) == ["node1", "node2"]


def test_nt7b_soft_mode_falls_back_to_the_whole_cluster() -> None:
    ssn = run(gang("j", 3), {"mode": "soft"}, min_member=3, hypernodes=NT7_TOPOLOGY, nodes=NT7_NODES, used=NT7_FULL)
    assert len(placed(ssn)) == 3


def test_nt8_a_replacement_pod_stays_in_the_jobs_leaf() -> None:
    pods = [task(f"j-{i}", cpu="4", memory="8Gi", group="j", node=f"n{i}") for i in (0, 1, 3)]
    pods.append(task("j-2", cpu="4", memory="8Gi", group="j"))  # the replacement of the pod on n2
    ssn = run(pods, HARD1, min_member=4)
    assert placed(ssn) == {"j-2": "n2"}  # not n4, free too but outside hn0


def test_nt8_variant_the_replacement_waits_when_its_leaf_is_full() -> None:
    pods = [task(f"j-{i}", cpu="4", memory="8Gi", group="j", node=f"n{i}") for i in (0, 1, 3)]
    pods += [task("j-2", cpu="4", memory="8Gi", group="j"), task("other-0", cpu="4", memory="8Gi", node="n2")]
    ssn = run(pods, HARD1, min_member=4)
    assert placed(ssn) == {}
    assert "no room for the gang in the job's HyperNode hn0" in ssn.jobs["default/j"].reason


def test_nt10a_a_cycle_stops_only_the_jobs_that_need_the_bad_part() -> None:
    topology = [
        *TOPOLOGY_A,
        hypernode("x", 2, children=["y"], nodes=["n0"]),
        hypernode("y", 2, children=["x"]),
    ]
    # A tier-1 gang still fits a good leaf (Volcano would stop every topology job).
    assert len(placed(run(gang("j", 4), HARD1, min_member=4, hypernodes=topology))) == 4
    # A plain job on the same nodes is placed normally.
    plain = run([task("p-0", cpu="4", memory="8Gi")], None, min_member=1, hypernodes=topology)
    assert len(placed(plain, "p-")) == 1
    # A gang that only a tier-2 domain could hold waits, and says why.
    cyclic = [hypernode("x", 1, children=["y"], nodes=NODES8[:4]), hypernode("y", 1, children=["x"], nodes=NODES8[4:])]
    ssn = run(gang("j", 4), HARD1, min_member=4, hypernodes=cyclic)
    assert placed(ssn) == {}
    assert "left out of the tree: HyperNodes x -> y -> x form a cycle" in ssn.jobs["default/j"].reason


def test_nt10b_a_tier_name_means_its_tier() -> None:
    named = [
        hypernode("hn0", 1, nodes=NODES8[:4], tier_name="rack"),
        hypernode("hn1", 1, nodes=NODES8[4:], tier_name="rack"),
        hypernode("hn2", 2, children=["hn0", "hn1"], tier_name="zone"),
    ]
    ssn = run(gang("j", 8), {"mode": "hard", "highestTierName": "rack"}, min_member=4, hypernodes=named)
    nodes = set(placed(ssn).values())
    assert len(nodes) == 4 and (nodes <= HN0 or nodes <= HN1)
    assert placed(run(gang("j", 8), {"mode": "hard", "highestTierName": "rack"}, min_member=8, hypernodes=named)) == {}


def test_nt10c_an_unknown_tier_name_does_not_constrain_the_job() -> None:
    ssn = run(gang("j", 8), {"mode": "hard", "highestTierName": "nosuchname"}, min_member=8)
    assert len(placed(ssn)) == 8


def test_hard_mode_without_a_tier_does_not_constrain_the_job() -> None:
    assert len(placed(run(gang("j", 8), {"mode": "hard"}, min_member=8))) == 8


def test_no_hypernodes_tier_zero_never_fits_tier_one_is_the_whole_cluster() -> None:
    # The root's tier is 1 without HyperNodes: T = 1 spans everything, T = 0 nothing.
    assert len(placed(run(gang("j", 8), HARD1, min_member=8, hypernodes=[]))) == 8
    assert placed(run(gang("j", 8), {"mode": "hard", "highestTierAllowed": 0}, min_member=8, hypernodes=[])) == {}


def test_hypernodes_from_node_labels_constrain_like_objects() -> None:
    labels = {n: {"example.com/leaf": "a" if i < 4 else "b"} for i, n in enumerate(NODES8)}
    ssn = run(gang("j", 8), HARD1, min_member=4, hypernodes=[], hypernode_labels=("example.com/leaf",), labels=labels)
    nodes = set(placed(ssn).values())
    assert len(nodes) == 4 and (nodes <= HN0 or nodes <= HN1)


def partitioned(name: str, replicas: int, size: int) -> list[PodRecord]:
    """A Volcano Job task's pods as its controller labels them: task-spec, partition-id = index // size."""
    return [
        task(
            f"{name}-{i}",
            cpu="4",
            memory="8Gi",
            group="j",
            labels={"volcano.sh/task-spec": name, "volcano.sh/partition-id": str(i // size)},
        )
        for i in range(replicas)
    ]


def partition_policy(size: int, topology: Mapping[str, Any] | None, minimum: int = 0) -> dict[str, Any]:
    """The subGroupPolicy the Job controller makes of a partitionPolicy (Volcano's getSubGroupPolicy)."""
    policy: dict[str, Any] = {
        "name": "t0",
        "subGroupSize": size,
        "minSubGroups": minimum,
        "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "t0"}},
        "matchLabelKeys": ["volcano.sh/partition-id"],
    }
    if topology is not None:
        policy["networkTopology"] = dict(topology)
    return policy


def test_nt4_each_partition_inside_its_own_leaf_all_in_one_session() -> None:
    ssn = run(partitioned("t0", 8, 4), HARD2, min_member=4, sub_groups=[partition_policy(4, HARD1)])
    where = placed(ssn, "t0-")
    assert len(where) == 8, where
    first = {where[f"t0-{i}"] for i in range(4)}
    second = {where[f"t0-{i}"] for i in range(4, 8)}
    assert (first == HN0 and second == HN1) or (first == HN1 and second == HN0)


NT5_NODES = [f"{leaf}{i}" for leaf in "abc" for i in range(3)]
NT5_TOPOLOGY = [
    hypernode("a", 1, nodes=NT5_NODES[0:3]),
    hypernode("b", 1, nodes=NT5_NODES[3:6]),
    hypernode("c", 1, nodes=NT5_NODES[6:9]),
    hypernode("top", 2, children=["a", "b", "c"]),
]


def nt5(replicas: int, size: int) -> Session:
    """Replicas in partitions of ``size``, each inside one leaf (T = 1), the job inside the spine (T = 2)."""
    return run(
        partitioned("t0", replicas, size),
        HARD2,
        min_member=replicas,
        sub_groups=[partition_policy(size, HARD1)],
        hypernodes=NT5_TOPOLOGY,
        nodes=NT5_NODES,
    )


def test_nt5_a_partition_no_leaf_holds_leaves_the_whole_job_pending() -> None:
    ssn = nt5(8, 4)
    assert placed(ssn, "t0-") == {}
    assert ssn.columns.allocated[ssn.columns.resource_index["cpu"], :9].tolist() == [0] * 9  # nothing held


def test_nt5_variant_pairs_each_fit_a_leaf() -> None:
    # The spec's variant (8 pods in pairs) cannot be whole: a 3-node leaf holds one pair of
    # node-filling pods, so 3 leaves hold 3 pairs, and the job's minimum of 8 is not placed.
    assert placed(nt5(8, 2), "t0-") == {}
    # Three pairs: one in each leaf, all six bound in one gang batch.
    ssn = nt5(6, 2)
    where = placed(ssn, "t0-")
    assert len(where) == 6
    leaves = [{where[f"t0-{2 * pair}"][0], where[f"t0-{2 * pair + 1}"][0]} for pair in range(3)]
    assert all(len(leaf) == 1 for leaf in leaves) and len(set().union(*leaves)) == 3, where
    assert len(ssn.commits) == 1  # the job's minimum in one gang batch: one binder round trip


def test_min_sub_groups_needs_that_many_partitions_ready() -> None:
    # Three partitions of 4 on 8 nodes in two leaves: minSubGroups 2 is met (two leaves), 3 is not.
    pods = partitioned("t0", 12, 4)
    ssn = run(pods, HARD2, min_member=8, sub_groups=[partition_policy(4, HARD1, minimum=2)])
    assert len(placed(ssn, "t0-")) == 8
    pods = partitioned("t0", 12, 4)
    ssn = run(pods, HARD2, min_member=8, sub_groups=[partition_policy(4, HARD1, minimum=3)])
    assert placed(ssn, "t0-") == {}


def test_fewer_partitions_than_min_sub_groups_is_not_schedulable() -> None:
    ssn = run(partitioned("t0", 4, 4), None, min_member=4, sub_groups=[partition_policy(4, None, minimum=2)])
    assert placed(ssn, "t0-") == {}
    assert "1/2 subgroups of t0 exist" in ssn.jobs["default/j"].reason


def test_subgroups_without_topology_are_still_gangs() -> None:
    # Two partitions of 4 on 6 free nodes: the first fits, the second cannot be whole; minMember 4
    # lets the first go.
    ssn = run(
        partitioned("t0", 8, 4),
        None,
        min_member=4,
        sub_groups=[partition_policy(4, None)],
        nodes=NODES8[:6],
        hypernodes=[],
    )
    where = placed(ssn, "t0-")
    assert sorted(where) == [f"t0-{i}" for i in range(4)]


def preempt_session(topology: Mapping[str, Any] | None) -> Session:
    """A low-priority job on every node of topology A, its pods on n2 and n3 not preemptable; a
    high-priority gang of four whole-node pods. Node order alone would take n0, n1, n4, n5."""
    classes = [priority_class("low", 1), priority_class("high", 100)]
    keep = {"volcano.sh/preemptable": "false"}
    low = [
        task(f"low-{i}", cpu="4", memory="8Gi", group="low", node=n, annotations=keep if n in ("n2", "n3") else None)
        for i, n in enumerate(NODES8)
    ]
    high = gang("high", 4, priority_class="high")
    ssn = session(
        conf(
            ["priority", "gang", "conformance"],
            ["predicates", "network-topology-aware"],
            actions="enqueue, allocate, preempt",
        ),
        [node(n, cpu="4", memory="8Gi") for n in NODES8],
        [*low, *high],
        podgroups=[
            podgroup("low", min_member=1, queue="q1", priority_class="low", phase="Running"),
            podgroup(
                "high", min_member=4, queue="q1", priority_class="high", phase="Inqueue", network_topology=topology
            ),
        ],
        queues=[queue("q1")],
        priority_classes=classes,
        hypernodes=TOPOLOGY_A,
    )
    ssn.run()
    return ssn


def test_a_hard_topology_job_preempts_inside_one_domain() -> None:
    ssn = preempt_session(HARD1)
    victims = {t.node for t in ssn.evictions}
    waiting = {t.node for t in ssn.jobs["default/high"].tasks.values() if t.status.value == "Pipelined"}
    assert victims == HN1  # the one leaf where four can go; Volcano skips such jobs (volcano#4374)
    assert waiting == victims


def test_a_topology_job_that_no_domain_can_make_room_for_evicts_nothing() -> None:
    # Tier 0: no domain at all; nothing is evicted for it.
    ssn = preempt_session({"mode": "hard", "highestTierAllowed": 0})
    assert ssn.evictions == []


def test_a_hard_topology_job_reclaims_inside_one_domain() -> None:
    # Queue q1 holds every node (its pods on n2, n3 not preemptable); q2 deserves half and asks
    # for a gang of four inside one leaf: the victims are hn1's, not the first four in node order.
    keep = {"volcano.sh/preemptable": "false"}
    mine = [
        task(f"mine-{i}", cpu="4", memory="8Gi", group="mine", node=n, annotations=keep if n in ("n2", "n3") else None)
        for i, n in enumerate(NODES8)
    ]
    theirs = [task(f"theirs-{i}", cpu="4", memory="8Gi", group="theirs") for i in range(4)]
    reclaiming = podgroup("theirs", min_member=4, queue="q2", phase="Inqueue", network_topology=HARD1)
    ssn = session(
        conf(["priority", "gang", "conformance"], ["predicates", "proportion"], actions="enqueue, allocate, reclaim"),
        [node(n, cpu="4", memory="8Gi") for n in NODES8],
        [*mine, *theirs],
        podgroups=[podgroup("mine", min_member=1, queue="q1", phase="Running"), reclaiming],
        queues=[queue("q1"), queue("q2")],
        hypernodes=TOPOLOGY_A,
    )
    ssn.run()
    assert {t.node for t in ssn.evictions} == HN1
