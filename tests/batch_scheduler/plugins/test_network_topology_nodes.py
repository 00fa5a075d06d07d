"""network-topology-aware's node scores, ported from Volcano's ``network_topology_aware_test.go``
(master, ed72c7c): TestNetworkTopologyAwareNodeScore_Hard and _Soft (7 cases each, the same but
for the mode), TestBatchNodeOrderFn (5), Test_batchNodeOrderFnForNormalPods (1).

Each case opens a real session with the plugin alone in its tier, as the Go test does, and
compares ``placed_score`` of the case's pending pod with Volcano's ``BatchNodeOrderFn`` scores
(× 100 × weight, within the Go test's ``eps``). The Go tests hand the nodes to score to
``BatchNodeOrderFn``; here they are the ``candidates`` (what the tie between the best nodes is
counted over). Where Volcano's function returns no score (a job with nothing placed yet, the
normal-pod score switched off), caldera answers None.

The Go tests set the pod's ``JobAllocatedHyperNode`` from the PodGroup's annotation by hand;
caldera derives a job's domain from where its tasks run (Volcano's ``recoverAllocatedHyperNode``
after a restart does the same), and in every case but one that is the annotated HyperNode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from batch_scheduler.plugins.network_topology import NetworkTopologyPlugin
from batch_scheduler.session import Session
from cluster.model.core import Node, Pod
from cluster.model.topology import HyperNode, NetworkTopologySpec, SubGroupPolicy
from cluster.model.volcano import PodGroup
from cluster.nodeview.profile import Values
from tests.batch_scheduler.plugins.common import plugin
from tests.builders import hypernode
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    RUNNING,
    TASK_SPEC,
    build_node,
    build_pod,
    build_pod_group,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session

EPS = 1e-1  # the Go test's
NTA = "network-topology-aware"
SWITCHES = ("enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")
FOO = "example.com/foo"
PODS10 = scalar("pods", "10")


def _three_tiers(*, s0_holds_s2: bool = True) -> list[HyperNode]:
    """s0 (tier 3) over s1, s2 (tier 2), over s3, s4 and s5, s6 (tier 1), two nodes each."""
    leaves = [hypernode(s, 1, nodes=[f"{s}-n1", f"{s}-n2"]) for s in ("s3", "s4", "s5", "s6")]
    return [
        hypernode("s0", 3, children=["s1", "s2"] if s0_holds_s2 else ["s1"]),
        hypernode("s1", 2, children=["s3", "s4"]),
        hypernode("s2", 2, children=["s5", "s6"]),
        *leaves,
    ]


def _two_tiers() -> list[HyperNode]:
    return [
        hypernode("s0", 2, children=["s1", "s2"]),
        hypernode("s1", 1, nodes=["s1-n1", "s1-n2"]),
        hypernode("s2", 1, nodes=["s2-n1", "s2-n2"]),
    ]


def _one_tier() -> list[HyperNode]:
    return [hypernode("s1", 1, nodes=["s1-n1", "s1-n2"]), hypernode("s2", 1, nodes=["s2-n1", "s2-n2"])]


TREES = {
    "three": _three_tiers,
    "three, s0 without s2": lambda: _three_tiers(s0_holds_s2=False),
    "two": _two_tiers,
    "one": _one_tier,
}


def _nodes_of(topology: Sequence[HyperNode], alloc: Mapping[str, str]) -> list[Node]:
    """The nodes the HyperNodes name, in name order, each of ``alloc``."""
    exact = [m.selector.exact_match for h in topology for m in h.spec.members if m.type == "Node"]
    return [build_node(n, alloc) for n in sorted({e.name for e in exact if e is not None})]


def _session(
    *,
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    podgroups: Sequence[PodGroup],
    topology: Sequence[HyperNode],
    arguments: Mapping[str, Any],
    switches: tuple[str, ...] = SWITCHES,
) -> Session:
    case = Case(
        name="",
        nodes=nodes,
        pods=pods,
        podgroups=podgroups,
        queues=[build_queue("q1", 1, None)],
        hypernodes=topology,
    )
    return open_session(case, [[Plugin(NTA, switches, arguments)]], ["allocate"])


def _with_topology(group: PodGroup, mode: str, tier: int, policies: Sequence[SubGroupPolicy] = ()) -> PodGroup:
    """``util.BuildPodGroupWithNetWorkTopologies`` (its JobAllocatedHyperNode annotation aside),
    with ``policies``: ``util.BuildPodGroupWithSubGroupPolicy``."""
    topology = NetworkTopologySpec(mode=mode, highest_tier_allowed=tier)
    spec = msgspec.structs.replace(group.spec, network_topology=topology, sub_group_policy=list(policies))
    return msgspec.structs.replace(group, spec=spec)


def _scores(ssn: Session, pod: str, candidates: Sequence[str] | None) -> Values | None:
    """``placed_score`` of pod ``pod`` (namespace/name) over ``candidates`` (None: every node)."""
    p = plugin(ssn, NetworkTopologyPlugin)
    task = next(t for t in ssn.tasks.values() if f"{t.namespace}/{t.name}" == pod)
    if candidates is None:
        mask = np.ones(ssn.n, dtype=np.bool_)
    else:
        mask = np.zeros(ssn.n, dtype=np.bool_)
        mask[[ssn.columns.index[n] for n in candidates]] = True
    return p.placed_score(task, mask)


def _by_node(ssn: Session, score: Values | None) -> dict[str, float]:
    """Per node name, the score (0 everywhere when the plugin has none, as Volcano's empty map reads)."""
    values = np.zeros(ssn.n) if score is None else score
    return {ssn.columns.names[i]: float(v) for i, v in enumerate(values)}


# -- TestNetworkTopologyAwareNodeScore_Hard / _Soft --------------------------------------------------

# Per case: name, tree, the PodGroup's minMember, its pods (name, node or "" for the pending one,
# task-spec), the plugin's weight, the nodes scored, the expected scores. Nodes: 2 cpu / 4Gi; pods:
# 2 cpu / 4G (one fills a node).
JOB_CASES: list[tuple[str, str, int, list[tuple[str, str, str]], int, list[str], dict[str, float]]] = [
    (
        "Tasks in job first scheduler, score all nodes zero",
        "three",
        1,
        [("p4", "", "worker")],
        1,
        ["s3-n1", "s4-n1", "s5-n1"],
        {"s3-n1": 0.0, "s4-n1": 0.0, "s5-n1": 0.0},
    ),
    (
        "Tasks in job rescheduled, score zero when the hyperNode of node has empty LCA hyperNode with jobAllocatedHyperNode",
        "three, s0 without s2",
        1,
        [("p1", "s3-n1", "master"), ("p2", "s3-n2", "worker"), ("p3", "", "worker")],
        1,
        ["s5-n1", "s6-n1"],
        {"s5-n1": 0.0, "s6-n1": 0.0},
    ),
    (
        "Tasks in job rescheduled, score nodes according to node hypernode LCA hyperNode tier",
        "three",
        1,
        [("p1", "s3-n1", "master"), ("p2", "s3-n2", "worker"), ("p3", "", "worker")],
        1,
        ["s3-n1", "s4-n1", "s5-n1"],
        {"s3-n1": 100.0, "s4-n1": 66.6, "s5-n1": 33.3},
    ),
    (
        "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode when hyperNodesInfo has two tier",
        "two",
        1,
        [("p1", "s1-n1", "master"), ("p2", "", "worker")],
        1,
        ["s1-n1", "s2-n1"],
        {"s1-n1": 100.0, "s2-n1": 50.0},
    ),
    (
        "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode when hyperNodesInfo has one tier",
        "one",
        1,
        [("p1", "s1-n1", "master"), ("p2", "", "worker")],
        1,
        ["s1-n1", "s2-n1"],
        {"s1-n1": 100.0, "s2-n1": 0.0},
    ),
    (
        "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier of the hyperNode and jobAllocatedHyperNode with plugin weight 2",
        "three",
        1,
        [("p1", "s3-n1", "master"), ("p2", "s3-n2", "worker"), ("p3", "", "worker")],
        2,
        ["s3-n1", "s4-n1", "s5-n1"],
        {"s3-n1": 200.0, "s4-n1": 133.3, "s5-n1": 66.6},
    ),
    (
        "Tasks in job rescheduled, score hyperNodes according to node LCA hyperNode tier and task num of the hyperNode when there are at least two hyperNodes have max hyperNode tier score",
        "three",
        3,
        [("p1", "s3-n1", "master"), ("p2", "s3-n2", "worker"), ("p3", "s4-n1", "worker"), ("p4", "", "worker")],
        1,
        ["s3-n1", "s4-n1", "s5-n1"],
        {"s3-n1": 116.6, "s4-n1": 91.6, "s5-n1": 33.3},
    ),
]


def _job_case(
    mode: str, tree: str, min_member: int, pods: list[tuple[str, str, str]], weight: int
) -> tuple[Session, str]:
    topology = TREES[tree]()
    group = _with_topology(build_pod_group("pg1", "c1", "q1", min_member, None, PG_INQUEUE), mode, 0)
    built = [
        build_pod("c1", name, node, RUNNING if node else PENDING, rl("2", "4G"), "pg1", {TASK_SPEC: spec})
        for name, node, spec in pods
    ]
    ssn = _session(
        nodes=_nodes_of(topology, rl("2", "4Gi", PODS10)),
        pods=built,
        podgroups=[group],
        topology=topology,
        arguments={"weight": weight},
    )
    pending = next(name for name, node, _ in pods if not node)
    return ssn, f"c1/{pending}"


@pytest.mark.parametrize(
    ("name", "tree", "min_member", "pods", "weight", "scored", "expected"), JOB_CASES, ids=[c[0] for c in JOB_CASES]
)
@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_network_topology_aware_node_score(
    mode: str,
    name: str,
    tree: str,
    min_member: int,
    pods: list[tuple[str, str, str]],
    weight: int,
    scored: list[str],
    expected: dict[str, float],
) -> None:
    """TestNetworkTopologyAwareNodeScore_Hard (mode hard) and _Soft (mode soft)."""
    ssn, pod = _job_case(mode, tree, min_member, pods, weight)
    got = _by_node(ssn, _scores(ssn, pod, scored))
    assert {n: got[n] for n in expected} == pytest.approx(expected, abs=EPS)


def test_a_subgroups_domain_is_where_its_own_tasks_run() -> None:
    """TestBatchNodeOrderFn's subgroup case as caldera reads it (the Go case itself is skipped
    below), with a master of the job (another subgroup) running on s6-n1: the worker subgroup's
    one placed task is on s4-n1, so s4 is its domain, whatever the job's other subgroups hold —
    s4's nodes score 1 plus half the subgroup's tasks, s3's (under the same s1) 2/3, the rest 1/3."""
    master = build_pod("ns1", "p0", "s6-n1", RUNNING, rl("2", "4G"), "pg1", {TASK_SPEC: "master"})
    ssn = _session(
        nodes=_batch_nodes(foo=False),
        pods=[*_subgroup_pods(), master],
        podgroups=[_subgroup_group()],
        topology=_three_tiers(),
        arguments={},
        switches=("enableNodeOrder",),
    )
    got = _by_node(ssn, _scores(ssn, "ns1/p1", None))
    assert got == pytest.approx(
        {
            "s3-n1": 66.7,
            "s3-n2": 66.7,
            "s4-n1": 150.0,
            "s4-n2": 150.0,
            "s5-n1": 33.3,
            "s5-n2": 33.3,
            "s6-n1": 33.3,
            "s6-n2": 33.3,
        },
        abs=EPS,
    )


def test_a_node_in_no_hypernode_gets_no_share_of_the_tasks_beside_it() -> None:
    """caldera's: a soft job whose one running task is on x1, a node in no HyperNode, has the
    cluster for its domain; every node then scores 0 and ties, and the share of the job's tasks
    goes only to nodes in a HyperNode holding some (none here) — x2 is not drawn to x1 (in
    Volcano such a node has no HyperNode, so no tasks to count)."""
    topology = _two_tiers()
    pods = [
        build_pod("c1", "p1", "x1", RUNNING, rl("2", "4G"), "pg1", {TASK_SPEC: "master"}),
        build_pod("c1", "p2", "", PENDING, rl("2", "4G"), "pg1", {TASK_SPEC: "worker"}),
    ]
    ssn = _session(
        nodes=[
            *_nodes_of(topology, rl("2", "4Gi", PODS10)),
            *(build_node(x, rl("2", "4Gi", PODS10)) for x in ("x1", "x2")),
        ],
        pods=pods,
        podgroups=[_with_topology(build_pod_group("pg1", "c1", "q1", 1, None, PG_INQUEUE), "soft", 0)],
        topology=topology,
        arguments={},
    )
    got = _by_node(ssn, _scores(ssn, "c1/p2", ["s1-n1", "s2-n1", "x2"]))
    assert {n: got[n] for n in ("s1-n1", "s2-n1", "x2")} == {"s1-n1": 0.0, "s2-n1": 0.0, "x2": 0.0}


# -- TestBatchNodeOrderFn -------------------------------------------------------------------------

CUSTOM = {
    "weight": 10,
    "hypernode.binpack.cpu": 1,
    "hypernode.binpack.memory": 4,
    "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
    "hypernode.binpack.resources.nvidia.com/gpu": 2,
    "hypernode.binpack.resources.example.com/foo": 3,
    "hypernode.binpack.normal-pod.enable": True,
    "hypernode.binpack.normal-pod.fading": 0,
}


def _batch_nodes(*, foo: bool) -> list[Node]:
    """s3: 2 cpu / 4G, s4: 4 / 4G, s5: 2 / 8G, s6: 4 / 8G; with ``foo``, 8 foo on s3, s4 and 16 on s5, s6."""
    sizes = {"s3": ("2", "4G", "8"), "s4": ("4", "4G", "8"), "s5": ("2", "8G", "16"), "s6": ("4", "8G", "16")}
    out = []
    for s, (cpu, mem, foos) in sizes.items():
        extra = (PODS10, scalar(FOO, foos)) if foo else (PODS10,)
        out += [build_node(f"{s}-n{i}", rl(cpu, mem, *extra)) for i in (1, 2)]
    return out


def _subgroup_group() -> PodGroup:
    """``BuildPodGroupWithSubGroupPolicy(..., "hard", 2, [BuildSubGroupPolicy("task1", [task-spec], "hard", 2)])``."""
    policy = SubGroupPolicy(
        name="task1",
        sub_group_size=1,
        min_sub_groups=0,
        match_label_keys=[TASK_SPEC],
        network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=2),
    )
    return _with_topology(build_pod_group("pg1", "ns1", "q1", 2, None, PG_INQUEUE), "hard", 2, [policy])


def _subgroup_pods() -> list[Pod]:
    return [
        build_pod("ns1", "p1", "", PENDING, rl("2", "4G"), "pg1", {TASK_SPEC: "worker"}),
        build_pod("ns1", "p2", "s4-n1", RUNNING, rl("2", "4G"), "pg1", {TASK_SPEC: "worker"}),
    ]


def _plain_pods(*, foo: bool, placed: bool) -> list[Pod]:
    req = rl("2", "4G", scalar(FOO, "8")) if foo else rl("2", "4G")
    pods = [build_pod("ns1", "p1", "", PENDING, req, "pg1")]
    if placed:
        pods += [build_pod("ns1", p, n, RUNNING, req, "pg1") for p, n in (("p2", "s3-n1"), ("p3", "s3-n2"))]
    return pods


PLAIN = build_pod_group("pg1", "ns1", "q1", 1, None, PG_INQUEUE)


def _case(name: str, *values: Any) -> Any:
    """A case with its Go name as the test id."""
    return pytest.param(name, *values, id=name)


# Per case: name, foo resources on nodes and pods, pods of the job on s3's nodes, arguments, expected.
BATCH_CASES: list[Any] = [
    _case(
        "score empty nodes for single task with no network topology and no hypernode-level binpacking",
        False,
        False,
        {"hypernode.binpack.normal-pod.enable": False},
        {},
    ),
    _case(
        "score empty nodes for single task with no network topology and default plugin arguments",
        False,
        False,
        {},
        {
            "s3-n1": 25.8,
            "s3-n2": 25.8,
            "s4-n1": 21.6,
            "s4-n2": 21.6,
            "s5-n1": 19.9,
            "s5-n2": 19.9,
            "s6-n1": 15.7,
            "s6-n2": 15.7,
        },
    ),
    _case(
        "score empty nodes for single task with no network topology and customized plugin arguments",
        True,
        False,
        CUSTOM,
        {
            "s3-n1": 500.0,
            "s3-n2": 500.0,
            "s4-n1": 468.75,
            "s4-n2": 468.75,
            "s5-n1": 281.3,
            "s5-n2": 281.3,
            "s6-n1": 250.0,
            "s6-n2": 250.0,
        },
    ),
    _case(
        "score non-empty nodes for single task with no network topology and customized plugin arguments",
        True,
        True,
        CUSTOM,
        {
            "s3-n1": 0.0,
            "s3-n2": 0.0,
            "s4-n1": 468.8,
            "s4-n2": 468.8,
            "s5-n1": 281.3,
            "s5-n2": 281.3,
            "s6-n1": 250.0,
            "s6-n2": 250.0,
        },
    ),
    pytest.param(
        "score nodes for tasks with network topology",
        False,
        False,
        {},
        {},
        id="score nodes for tasks with network topology",
        marks=pytest.mark.skip(
            reason="the Go case hands the pod a JobAllocatedHyperNode of s1 (the PodGroup's annotation) while its "
            "subgroup's only placed task runs on s4-n1; caldera takes a subgroup's domain from its placed tasks "
            "(s4), so s4-n1 scores 100 + 50, not Volcano's 116.7 (see test_a_subgroups_domain_is_where_its_own_tasks_run)"
        ),
    ),
]


@pytest.mark.parametrize(("name", "foo", "placed", "arguments", "expected"), BATCH_CASES)
def test_batch_node_order_fn(
    name: str, foo: bool, placed: bool, arguments: Mapping[str, Any], expected: dict[str, float]
) -> None:
    """TestBatchNodeOrderFn: a pod of a job without a network topology, HyperNode binpack per tier."""
    ssn = _session(
        nodes=_batch_nodes(foo=foo),
        pods=_plain_pods(foo=foo, placed=placed),
        podgroups=[PLAIN],
        topology=_three_tiers(),
        arguments=arguments,
        switches=("enableNodeOrder",),
    )
    score = _scores(ssn, "ns1/p1", None)
    if not expected:  # Volcano: an empty map
        assert score is None
        return
    assert score is not None
    assert _by_node(ssn, score) == pytest.approx(expected, abs=EPS)


# -- Test_batchNodeOrderFnForNormalPods -------------------------------------------------------------


def test_batch_node_order_fn_for_normal_pods_in_large_scale() -> None:
    """Test_batchNodeOrderFnForNormalPods "evaluate the time efficiency of the
    batchNodeOrderFnForNormalPods function in large scale": 2000 nodes half used, HyperNodes of
    tiers 1–4 (200, 40, 5, 1 of them) taking the nodes round-robin, fading 1; every node scores
    0.515375 unscaled (the mean over the tiers of 0.55, 0.51, 0.50125, 0.50025). The Go test sets
    the tiers 1–4 by hand; a session also counts the cluster's root (tier 5, 0.50025 again), which
    gives 0.5124 — within the Go test's eps."""
    counts = [200, 40, 5, 1]
    n = 2000
    names = [f"node-{i}" for i in range(n)]
    topology = [
        hypernode(f"hypernode-tier-{tier}-index-{k}", tier, nodes=names[k::count])
        for tier, count in enumerate(counts, start=1)
        for k in range(count)
    ]
    half = rl("50", "4000", scalar(FOO, "5"))
    nodes = [build_node(name, rl("100", "8000", PODS10, scalar(FOO, "10"))) for name in names]
    pods = [build_pod("ns1", f"used-{i}", name, RUNNING, half, "used") for i, name in enumerate(names)]
    pods.append(build_pod("ns1", "task-without-network-topology", "", PENDING, half, "pg1"))
    arguments = {
        "weight": 10,
        "hypernode.binpack.cpu": 5,
        "hypernode.binpack.memory": 5,
        "hypernode.binpack.resources": "example.com/foo",
        "hypernode.binpack.resources.example.com/foo": 5,
        "hypernode.binpack.normal-pod.enable": True,
        "hypernode.binpack.normal-pod.fading": 1,
    }
    ssn = _session(
        nodes=nodes,
        pods=pods,
        podgroups=[PLAIN, build_pod_group("used", "ns1", "q1", 1, None, "Running")],
        topology=topology,
        arguments=arguments,
        switches=("enableNodeOrder",),
    )
    score = _scores(ssn, "ns1/task-without-network-topology", None)
    assert score is not None
    unscaled = score / (100 * 10)
    assert unscaled == pytest.approx(np.full(n, 0.515375), abs=EPS)
    assert unscaled == pytest.approx(np.full(n, (0.55 + 0.51 + 0.50125 + 0.50025 * 2) / 5))
