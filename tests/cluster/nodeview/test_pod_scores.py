"""Preferred inter-pod affinity and ScheduleAnyway topology spread as node scores.

The tables are kube-scheduler's own score tests, each case under kube's name (a repeated name
gets Go's ``#01`` suffix):

- ``TestPreferredAffinity`` and ``TestPreferredAffinityWithHardPodAffinitySymmetricWeight``
  (pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go);
- ``TestPreScoreSkip`` and ``TestPodTopologySpreadScore``
  (pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go).

A case gives the nodes (for spread also the nodes the filters ruled out: they hold pods but are
not scored), the pods on them, the pod to place and kube's normalised score per scored node —
None where kube's PreScore returns Skip. Cases that rely on what caldera does not model are
listed too, skipped, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.model.core import Node, Pod
from cluster.model.resources import Resources
from cluster.nodeview.pod_affinity import PlacedPods
from cluster.nodeview.pod_scores import affinity_score, spread_score
from cluster.nodeview.table import Mask, NodeTable
from cluster.store.records import NodeRecord
from tests.cluster.nodeview.test_pod_affinity import placed

HOST = "kubernetes.io/hostname"
Existing = list[tuple[str, Pod]]  # (node name, pod)

# -- why a case is skipped ------------------------------------------------------------------

IGNORE_PREFERRED = "caldera has no ignorePreferredTermsOfExistingPods option: placed pods' preferred terms always count"
INVALID_SELECTOR = (
    "caldera does not validate label values in selectors: where kube's PreScore fails on "
    "'{{.bad-value.}}', caldera's selector matches no pod and the term bears on nothing"
)
DEFAULT_CONSTRAINTS = (
    "default spread constraints (system defaults from the Services/ReplicaSets selecting the pod, or "
    "the plugin's defaultConstraints): caldera applies none, a pod without constraints gets no spread score"
)


GATE_ON = "caldera always applies matchLabelKeys (kube-scheduler's MatchLabelKeysInPodTopologySpread, on by default)"


def case(name: str, *values: object, skip: str = "") -> Any:
    return pytest.param(*values, id=name, marks=[pytest.mark.skip(reason=skip)] if skip else [])


# -- nodes, pods and terms --------------------------------------------------------------------


def node(name: str, labels: Mapping[str, str] | None = None, *, taints: Sequence[dict[str, str]] = ()) -> Node:
    """A node with exactly these labels (no hostname label unless given)."""
    body = {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": {"taints": list(taints)}}
    return msgspec.convert(body, Node)


def host(name: str, taints: Sequence[dict[str, str]] = (), **labels: str) -> Node:
    """A node labelled with its hostname, and ``labels``."""
    return node(name, {**labels, HOST: name}, taints=taints)


def table(nodes: Sequence[Node]) -> NodeTable:
    return NodeTable(
        NodeRecord(
            name=n.name,
            allocatable=Resources({"cpu": 8000}),
            allocated=Resources(),
            version=1,
            owner="",
            unschedulable=False,
            node=n,
        )
        for n in nodes
    )


def pod(
    labels: Mapping[str, str] | None = None,
    *,
    namespace: str = "",
    affinity: dict[str, Any] | None = None,
    spread: Sequence[dict[str, Any]] = (),
    **spec: Any,
) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "c"}], "topologySpreadConstraints": list(spread), **spec}
    if affinity is not None:
        body["affinity"] = affinity
    meta = {"name": "p", "namespace": namespace, "labels": dict(labels or {})}
    return msgspec.convert({"metadata": meta, "spec": body}, Pod)


def term(topology: str, *expressions: tuple[str, str] | tuple[str, str, list[str]], **extra: Any) -> dict[str, Any]:
    """A pod affinity term whose selector ANDs ``expressions`` (key, operator[, values])."""
    exprs = [dict(zip(("key", "operator", "values"), e, strict=False)) for e in expressions]
    return {"labelSelector": {"matchExpressions": exprs}, "topologyKey": topology, **extra}


def prefer(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(
    together: Sequence[dict[str, Any]] = (),
    apart: Sequence[dict[str, Any]] = (),
    required: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """podAffinity (preferred ``together``, ``required``) and podAntiAffinity (preferred ``apart``)."""
    out: dict[str, Any] = {}
    if together or required:
        out["podAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": list(together),
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
        }
    if apart:
        out["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": list(apart)}
    return out


def scored(nodes: Sequence[Node], failed: Sequence[Node] = ()) -> tuple[NodeTable, Mask]:
    """The table of ``nodes`` then ``failed``, and the mask of ``nodes`` (the candidates)."""
    t = table([*nodes, *failed])
    candidates = np.zeros(len(t), dtype=np.bool_)
    candidates[: len(nodes)] = True
    return t, candidates


# -- interpodaffinity/scoring_test.go -----------------------------------------------------------

S1, S2 = {"security": "S1"}, {"security": "S2"}
CHINA, INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}
CHINA_AZ1 = {**CHINA, **AZ1}

S1_IN_REGION = term("region", ("security", "In", ["S1"]))
S1_IN_AZ = term("az", ("security", "In", ["S1"]))
S2_IN_AZ = term("az", ("security", "In", ["S2"]))
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}
S1_IN_TEAMS = term("region", ("security", "In", ["S1"]), namespaces=["subteam2.team2"], namespaceSelector=TEAM1)

STAY_WITH_S1_IN_REGION = affinity(together=[prefer(5, S1_IN_REGION)])
STAY_WITH_S2_IN_REGION = affinity(together=[prefer(6, term("region", ("security", "In", ["S2"])))])
AFFINITY3 = affinity(
    together=[
        prefer(8, term("region", ("security", "NotIn", ["S1"]), ("security", "In", ["S2"]))),
        prefer(2, term("region", ("security", "Exists"), ("wrongkey", "DoesNotExist"))),
    ]
)
HARD_AFFINITY = affinity(
    required=[
        term("region", ("security", "In", ["S1", "value2"])),
        term("region", ("security", "Exists"), ("wrongkey", "DoesNotExist")),
    ]
)
AWAY_FROM_S1_IN_AZ = affinity(apart=[prefer(5, S1_IN_AZ)])
AWAY_FROM_S2_IN_AZ = affinity(apart=[prefer(5, S2_IN_AZ)])
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = affinity(together=[prefer(8, S1_IN_REGION)], apart=[prefer(5, S2_IN_AZ)])
AFFINITY_NAMESPACE_SELECTOR = affinity(together=[prefer(5, S1_IN_TEAMS)])
ANTI_AFFINITY_NAMESPACE_SELECTOR = affinity(apart=[prefer(5, S1_IN_TEAMS)])
INVALID_AFFINITY_LABELS = affinity(together=[prefer(8, term("region", ("security", "In", ["{{.bad-value.}}"])))])
INVALID_ANTI_AFFINITY_LABELS = affinity(apart=[prefer(5, term("az", ("security", "In", ["{{.bad-value.}}"])))])

CHINA_INDIA_AZ1 = [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)]
CHINA_INDIA = [node("node1", CHINA), node("node2", INDIA)]
TWO_IN_CHINA = [node("node1", CHINA), node("node2", CHINA)]
# Pods in subteam1.team1 and subteam2.team1 (team1, the namespaceSelector's), subteam1.team2 (neither)
# and subteam2.team2 (the term's `namespaces`).
IN_TEAMS: Existing = [
    ("node1", pod(S1, namespace="subteam1.team1")),
    ("node1", pod(S1, namespace="subteam1.team1")),
    ("node1", pod(S1, namespace="subteam1.team2")),
    ("node2", pod(S1, namespace="subteam2.team1")),
]
IN_TEAMS_AND_NAMESPACES: Existing = [*IN_TEAMS[:2], ("node1", pod(S1, namespace="subteam2.team2")), IN_TEAMS[3]]

# (pod, existing pods, nodes, scores per node or None for Skip)
PREFERRED_AFFINITY = [
    case("all nodes are same priority as Affinity is nil", pod(S1), [], CHINA_INDIA_AZ1, None),
    case(
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to others"
        "which doesn't match either pods in nodes or in topology key",
        pod(S1, affinity=STAY_WITH_S1_IN_REGION),
        [("node1", pod(S1)), ("node2", pod(S2)), ("node3", pod(S1))],
        CHINA_INDIA_AZ1,
        [100, 0, 0],
    ),
    case(
        "All the nodes that have the same topology key & label value with one of them has an existing pod "
        "that match the affinity rules, have the same score",
        pod(affinity=STAY_WITH_S1_IN_REGION),
        [("node1", pod(S1))],
        [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
        [100, 100, 0],
    ),
    case(
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region "
        "which has more matches will get high score",
        pod(S1, affinity=STAY_WITH_S2_IN_REGION),
        [("node1", pod(S2)), ("node1", pod(S2)), *((n, pod(S2)) for n in ("node2", "node3", "node4", "node5"))],
        [node("node1", CHINA), node("node2", INDIA), node("node3", CHINA), node("node4", CHINA), node("node5", INDIA)],
        [100, 0, 100, 100, 0],
    ),
    case(
        "Affinity: different Label operators and values for pod affinity scheduling preference, "
        "including some match failures ",
        pod(S1, affinity=AFFINITY3),
        [("node1", pod(S1)), ("node2", pod(S2)), ("node3", pod(S1))],
        CHINA_INDIA_AZ1,
        [20, 100, 0],
    ),
    case(
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod "
        "affinity symmetry",
        pod(S2),
        [("node1", pod(S1, affinity=STAY_WITH_S1_IN_REGION)), ("node2", pod(S2, affinity=STAY_WITH_S2_IN_REGION))],
        CHINA_INDIA_AZ1,
        [0, 100, 0],
    ),
    case(
        "Affinity symmetry with namespace selector",
        pod(S1, namespace="subteam1.team1"),
        [
            ("node1", pod(S1, affinity=AFFINITY_NAMESPACE_SELECTOR)),
            ("node2", pod(S2, affinity=STAY_WITH_S2_IN_REGION)),
        ],
        CHINA_INDIA_AZ1,
        [100, 0, 0],
    ),
    case(
        "AntiAffinity symmetry with namespace selector",
        pod(S1, namespace="subteam1.team1"),
        [
            ("node1", pod(S1, affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR)),
            ("node2", pod(S2, affinity=STAY_WITH_S2_IN_REGION)),
        ],
        CHINA_INDIA_AZ1,
        [0, 100, 100],
    ),
    case(
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        pod(S1),
        [("node1", pod(S1, affinity=HARD_AFFINITY)), ("node2", pod(S2, affinity=HARD_AFFINITY))],
        CHINA_INDIA_AZ1,
        [100, 100, 0],
    ),
    case(
        "Anti Affinity: pod that does not match existing pods in node will get high score ",
        pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
        [("node1", pod(S1)), ("node2", pod(S2))],
        [node("node1", AZ1), node("node2", CHINA)],
        [0, 100],
    ),
    case(
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score "
        "comparing to others ",
        pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
        [("node1", pod(S1)), ("node2", pod(S1))],
        [node("node1", AZ1), node("node2", CHINA)],
        [0, 100],
    ),
    case(
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more "
        "unmatches will get high score",
        pod(S1, affinity=AWAY_FROM_S1_IN_AZ),
        [("node1", pod(S1)), ("node1", pod(S1)), ("node2", pod(S2))],
        [node("node1", AZ1), node("node2", INDIA)],
        [0, 100],
    ),
    case(
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        pod(S2),
        [("node1", pod(S1, affinity=AWAY_FROM_S2_IN_AZ)), ("node2", pod(S2, affinity=AWAY_FROM_S1_IN_AZ))],
        [node("node1", AZ1), node("node2", AZ2)],
        [0, 100],
    ),
    case(
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both "
        "pod affinity & anti affinity",
        pod(S1, affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [("node1", pod(S1)), ("node2", pod(S1))],
        [node("node1", CHINA), node("node2", AZ1)],
        [100, 0],
    ),
    case(
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and "
        "existing pods have the same labels",
        pod(S1, affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [(n, pod(S1)) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")],
        [
            node("node1", CHINA_AZ1),
            node("node2", INDIA),
            node("node3", CHINA),
            node("node4", CHINA),
            node("node5", INDIA),
        ],
        [100, 0, 100, 100, 0],
    ),
    case(
        "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution "
        "in both pod affinity & anti affinity & symmetry",
        pod(S1, affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [
            ("node1", pod(S1)),
            ("node2", pod(S2)),
            ("node3", pod(affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)),
            ("node4", pod(affinity=AWAY_FROM_S1_IN_AZ)),
        ],
        [node("node1", CHINA), node("node2", AZ1), node("node3", INDIA), node("node4", AZ2)],
        [100, 0, 100, 0],
    ),
    case(
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        pod(S1),
        [("node1", pod(S1)), ("node2", pod(affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ))],
        TWO_IN_CHINA,
        [0, 0],
    ),
    case(
        "invalid Affinity fails PreScore",
        pod(affinity=INVALID_AFFINITY_LABELS),
        [],
        TWO_IN_CHINA,
        None,
        skip=INVALID_SELECTOR,
    ),
    case(
        "invalid AntiAffinity fails PreScore",
        pod(affinity=INVALID_ANTI_AFFINITY_LABELS),
        [],
        TWO_IN_CHINA,
        None,
        skip=INVALID_SELECTOR,
    ),
    case(
        "Affinity with pods matching NamespaceSelector",
        pod(S1, namespace="subteam1.team1", affinity=AFFINITY_NAMESPACE_SELECTOR),
        IN_TEAMS,
        CHINA_INDIA,
        [100, 0],
    ),
    # caldera counts only the pod in the term's `namespaces` (kube also the two its namespaceSelector
    # picks on node1 and the one on node2): the same scores.
    case(
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        pod(S1, namespace="subteam1.team1", affinity=AFFINITY_NAMESPACE_SELECTOR),
        IN_TEAMS_AND_NAMESPACES,
        CHINA_INDIA,
        [100, 0],
    ),
    case(
        "Affinity with pods matching NamespaceSelector#01",
        pod(S1, namespace="subteam1.team1", affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
        IN_TEAMS,
        CHINA_INDIA,
        [0, 100],
    ),
    case(
        "Affinity with pods matching both NamespaceSelector and Namespaces fields#01",
        pod(S1, namespace="subteam1.team1", affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
        IN_TEAMS_AND_NAMESPACES,
        CHINA_INDIA,
        [0, 100],
    ),
    case(
        "Ignore preferred terms of existing pods",
        pod(S2),
        [
            ("node1", pod(S1, affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)),
            ("node2", pod(S2, affinity=STAY_WITH_S2_IN_REGION)),
        ],
        CHINA_INDIA,
        None,
        skip=IGNORE_PREFERRED,
    ),
    case(
        "Do not ignore preferred terms of existing pods",
        pod(S2),
        [
            ("node1", pod(S1, affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)),
            ("node2", pod(S2, affinity=STAY_WITH_S2_IN_REGION)),
        ],
        CHINA_INDIA,
        [0, 100],
    ),
    case("No nodes to score", pod(S2), [], [], None),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "want"), PREFERRED_AFFINITY)
def test_preferred_affinity(incoming: Pod, existing: Existing, nodes: list[Node], want: list[int] | None) -> None:
    """scoring_test.go TestPreferredAffinity (hardPodAffinityWeight 1)."""
    t, candidates = scored(nodes)
    got = affinity_score(t, incoming, placed(t, *existing), candidates)
    assert (got if got is None else got.tolist()) == want


SERVICE_S1 = {"service": "S1"}
HARD_POD_AFFINITY = affinity(
    required=[
        term("region", ("service", "In", ["S1"]), namespaces=["", "subteam2.team2"], namespaceSelector=TEAM1),
    ]
)
WITH_HARD_AFFINITY: Existing = [("node1", pod(affinity=HARD_POD_AFFINITY)), ("node2", pod(affinity=HARD_POD_AFFINITY))]

# (pod, hardPodAffinityWeight, scores per node or None for Skip); the pods and nodes are shared
HARD_WEIGHT = [
    case("with default weight", pod(SERVICE_S1), 1, [100, 100, 0]),
    case("with zero weight", pod(SERVICE_S1), 0, None),
    case("with no matching namespace", pod(SERVICE_S1, namespace="subteam1.team2"), 1, None),
    case(
        "with matching NamespaceSelector",
        pod(SERVICE_S1, namespace="subteam1.team1"),
        1,
        [100, 100, 0],
    ),
    case("with matching Namespaces", pod(SERVICE_S1, namespace="subteam2.team2"), 1, [100, 100, 0]),
]


@pytest.mark.parametrize(("incoming", "weight", "want"), HARD_WEIGHT)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    incoming: Pod, weight: int, want: list[int] | None
) -> None:
    """scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight: a placed pod's required
    affinity for the pod weighs ``hardPodAffinityWeight``, and nothing at 0."""
    t, candidates = scored(CHINA_INDIA_AZ1)
    got = affinity_score(t, incoming, placed(t, *WITH_HARD_AFFINITY), candidates, hard_weight=weight)
    assert (got if got is None else got.tolist()) == want


# -- podtopologyspread/scoring_test.go ----------------------------------------------------------

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHEDULABLE = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
FOO_NODE_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]
        }
    }
}


def soft(max_skew: int, key: str, selector: dict[str, Any] | None = FOO, **extra: Any) -> dict[str, Any]:
    """A ScheduleAnyway constraint."""
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def terminating(p: Pod) -> Pod:
    """``p`` being deleted (kube leaves it out of spread counts)."""
    return msgspec.structs.replace(
        p, metadata=msgspec.structs.replace(p.metadata, deletion_timestamp="2026-01-01T00:00:00Z")
    )


def on(counts: Mapping[str, int], labels: Mapping[str, str] | None = None, namespace: str = "") -> Existing:
    """``counts[node]`` pods with ``labels`` (foo by default) on each node."""
    p = pod({"foo": ""} if labels is None else labels, namespace=namespace)
    return [(n, p) for n, k in counts.items() for _ in range(k)]


FOO_POD = {"foo": ""}
BAR_POD = {"bar": ""}
FOO_BAR = {"foo": "", "bar": ""}
FOUR_HOSTS = [host(n) for n in ("node-a", "node-b", "node-c", "node-d")]
HOSTS_ABX = [host("node-a"), host("node-b"), host("node-x")]
ZONES_ABXY = [
    host("node-a", zone="zone1"),
    host("node-b", zone="zone1"),
    host("node-x", zone="zone2"),
    host("node-y", zone="zone2"),
]
FOO_ON_NODE_A_B = [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""})]
FOO_ABC = [*FOO_ON_NODE_A_B, node("node-c", {"node": "node-c"})]
TAINTED_C = [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})]
TAINTED_C += [node("node-c", {"node": "node-c"}, taints=UNSCHEDULABLE)]
ZONES_ABCD = [host("node-a", zone="zone1"), host("node-b", zone="zone1")]
ZONES_ABCD += [host("node-c", zone="zone2"), host("node-d", zone="zone2")]
SPREAD_2_1_0_3 = on({"node-a": 2, "node-b": 1, "node-d": 3})
SPREAD_4_3_2_1 = on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1})
SPREAD_4_2_1_3 = on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
SPREAD_2_1_1 = on({"node-a": 2, "node-b": 1, "node-c": 1})
# Two constraints: zone over foo, hostname over bar (matchLabelKeys cases: node-c holds p-y1, p-y2).
DIFFERENT_SELECTORS = [*on({"node-a": 1}), *on({"node-b": 1}, FOO_BAR), *on({"node-y": 1}), *on({"node-y": 1}, BAR_POD)]
DIFFERENT_SELECTORS_ON_C = [(n.replace("node-y", "node-c"), p) for n, p in DIFFERENT_SELECTORS]
FOO_ZONE_BAR_HOST = [soft(1, "zone"), soft(1, HOST, BAR)]

# (pod, existing pods, candidate nodes, nodes filtered out, scores per candidate)
SPREAD_SCORE = [
    case(
        "one constraint on node, no existing pods",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        [],
        [host("node-a"), host("node-b")],
        [],
        [100, 100],
    ),
    case(
        "one constraint on node, only one node is candidate",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        on({"node-a": 2, "node-b": 1}),
        [host("node-a")],
        [host("node-b")],
        [100],
    ),
    case(
        "one constraint on node, all nodes have the same number of matching pods",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        on({"node-a": 1, "node-b": 1}),
        [host("node-a"), host("node-b")],
        [],
        [100, 100],
    ),
    case(
        "one constraint on node, all 4 nodes are candidates",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        SPREAD_2_1_0_3,
        FOUR_HOSTS,
        [],
        [20, 60, 100, 0],
    ),
    case(
        "one constraint on node, null selector",
        pod(FOO_POD, spread=[soft(1, HOST, None)]),
        SPREAD_2_1_0_3,
        FOUR_HOSTS,
        [],
        [100, 100, 100, 100],
    ),
    case(
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        pod(FOO_POD, spread=[soft(2, HOST)]),
        SPREAD_2_1_0_3,
        FOUR_HOSTS,
        [],
        [33, 66, 100, 16],
    ),
    case(
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        pod(FOO_POD, spread=[soft(3, HOST)]),
        SPREAD_4_3_2_1,
        FOUR_HOSTS,
        [],
        [44, 66, 77, 100],
    ),
    case(
        "system defaulting, nodes don't have zone, pods match service",
        pod(FOO_POD),
        SPREAD_4_3_2_1,
        FOUR_HOSTS,
        [],
        [44, 66, 77, 100],
        skip=DEFAULT_CONSTRAINTS,
    ),
    case(
        "one constraint on node, 3 out of 4 nodes are candidates",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        SPREAD_4_2_1_3,
        HOSTS_ABX,
        [host("node-y")],
        [33, 83, 100],
    ),
    case(
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        SPREAD_4_2_1_3,
        [host("node-a"), node("node-b", {"n": "node-b"}), host("node-x")],
        [host("node-y")],
        [16, 0, 100],
    ),
    case(
        "one constraint on zone, 3 out of 4 nodes are candidates",
        pod(FOO_POD, spread=[soft(1, "zone")]),
        SPREAD_4_2_1_3,
        ZONES_ABXY[:3],
        ZONES_ABXY[3:],
        [75, 75, 100],
    ),
    case(
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        pod(FOO_POD, spread=[soft(1, "zone"), soft(1, HOST)]),
        on({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
        [ZONES_ABXY[0], ZONES_ABXY[2]],
        [ZONES_ABXY[1], ZONES_ABXY[3]],
        [100, 63],
    ),
    case(
        "two Constraints on zone and node, with different labelSelectors",
        pod(FOO_BAR, spread=FOO_ZONE_BAR_HOST),
        DIFFERENT_SELECTORS,
        ZONES_ABXY,
        [],
        [60, 20, 100, 60],
    ),
    case(
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        pod(FOO_BAR, spread=FOO_ZONE_BAR_HOST),
        [*on({"node-b": 1}, BAR_POD), *on({"node-x": 1}), *on({"node-y": 1}, FOO_BAR)],
        ZONES_ABXY,
        [],
        [100, 60, 40, 0],
    ),
    case(
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        pod(FOO_BAR, spread=FOO_ZONE_BAR_HOST),
        DIFFERENT_SELECTORS,
        ZONES_ABXY[:3],
        ZONES_ABXY[3:],
        [50, 25, 100],
    ),
    case(
        "existing pods in a different namespace do not count",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        [*on({"node-a": 1}, namespace="ns1"), *on({"node-a": 1, "node-b": 2})],
        [host("node-a"), host("node-b")],
        [],
        [100, 33],
    ),
    case(
        "terminating Pods should be excluded",
        pod(FOO_POD, spread=[soft(1, HOST)]),
        [("node-a", terminating(pod(FOO_POD))), ("node-b", pod(FOO_POD))],  # the one on node-a is terminating
        [host("node-a"), host("node-b")],
        [],
        [100, 0],
    ),
    case(
        "minDomains has no effect when ScheduleAnyway",
        pod(FOO_POD, spread=[soft(2, "node", minDomains=10)]),
        on({"node-a": 2, "node-b": 2, "node-c": 1}),
        [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        [],
        [75, 75, 100],
    ),
    case(
        "NodeAffinityPolicy honoed with labelSelectors",
        pod(FOO_POD, spread=[soft(1, "node")], nodeSelector={"foo": ""}),
        SPREAD_2_1_1,
        FOO_ABC,
        [],
        [0, 33, 100],
    ),
    case(
        "NodeAffinityPolicy ignored with labelSelectors",
        pod(FOO_POD, spread=[soft(1, "node", nodeAffinityPolicy="Ignore")], nodeSelector={"foo": ""}),
        SPREAD_2_1_1,
        FOO_ABC,
        [],
        [66, 100, 100],
    ),
    case(
        "NodeAffinityPolicy honoed with nodeAffinity",
        pod(FOO_POD, spread=[soft(1, "node")], affinity=FOO_NODE_AFFINITY),
        SPREAD_2_1_1,
        FOO_ABC,
        [],
        [0, 33, 100],
    ),
    case(
        "NodeAffinityPolicy ignored with nodeAffinity",
        pod(FOO_POD, spread=[soft(1, "node", nodeAffinityPolicy="Ignore")], affinity=FOO_NODE_AFFINITY),
        SPREAD_2_1_1,
        FOO_ABC,
        [],
        [66, 100, 100],
    ),
    case(
        "NodeTaintsPolicy honored",
        pod(FOO_POD, spread=[soft(1, "node", nodeTaintsPolicy="Honor")]),
        SPREAD_2_1_1,
        TAINTED_C,
        [],
        [0, 33, 100],
    ),
    case(
        "NodeTaintsPolicy ignored",
        pod(FOO_POD, spread=[soft(1, "node")]),
        SPREAD_2_1_1,
        TAINTED_C,
        [],
        [66, 100, 100],
    ),
    # caldera never applies matchLabelKeys: kube's answer with the feature gate off.
    case(
        "matchLabelKeys ignored when feature gate disabled",
        pod(
            {**FOO_BAR, "baz": ""},
            spread=[soft(1, "zone", matchLabelKeys=["baz"]), soft(1, HOST, BAR, matchLabelKeys=["baz"])],
        ),
        DIFFERENT_SELECTORS_ON_C,
        ZONES_ABCD,
        [],
        [60, 20, 60, 100],
        skip=GATE_ON,
    ),
    case(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        pod(FOO_BAR, spread=[soft(1, "zone", {}, matchLabelKeys=["foo"]), soft(1, HOST, {}, matchLabelKeys=["bar"])]),
        DIFFERENT_SELECTORS_ON_C,
        ZONES_ABCD,
        [],
        [60, 20, 60, 100],
    ),
    case(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        pod({**FOO_BAR, "baz": ""}, spread=[soft(1, "zone"), soft(1, HOST, BAR, matchLabelKeys=["baz"])]),
        [
            *on({"node-a": 1, "node-c": 1}),
            *on({"node-b": 1}, {**FOO_BAR, "baz": ""}),
            *on({"node-c": 1}, BAR_POD),
            *on({"node-c": 1}, {"bar": "", "baz": ""}),
        ],
        ZONES_ABCD,
        [],
        [60, 20, 60, 100],
    ),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "failed", "want"), SPREAD_SCORE)
def test_pod_topology_spread_score(
    incoming: Pod, existing: Existing, nodes: list[Node], failed: list[Node], want: list[int]
) -> None:
    """scoring_test.go TestPodTopologySpreadScore: scores over the candidates; pods on the nodes the
    filters ruled out still count towards their domains."""
    t, candidates = scored(nodes, failed)
    got = spread_score(t, incoming, placed(t, *existing), candidates)
    assert got is not None
    assert got[: len(nodes)].tolist() == want


SPREAD_SKIP = [
    case(
        "the pod doesn't have soft topology spread Constraints",
        pod(namespace="default"),
        [host("node-a"), host("node-b")],
    ),
    case(
        "default constraints and a replicaset that doesn't match",
        pod({"foo": "bar", "baz": "sup"}, namespace="default"),
        [node("node-a", {"planet": "mars"})],
        skip=DEFAULT_CONSTRAINTS,
    ),
]


@pytest.mark.parametrize(("incoming", "nodes"), SPREAD_SKIP)
def test_pre_score_skip(incoming: Pod, nodes: list[Node]) -> None:
    """scoring_test.go TestPreScoreSkip: no ScheduleAnyway constraint, no spread score."""
    t, candidates = scored(nodes)
    assert spread_score(t, incoming, PlacedPods(), candidates) is None


# -- what users rely on -------------------------------------------------------------------------


def test_a_placed_pods_preferred_anti_affinity_for_the_pod_lowers_its_node() -> None:
    """The pod has no terms of its own; the placed pod's preferred anti-affinity selecting it keeps
    it off that node (and not off the others)."""
    t, candidates = scored([host("a"), host("b"), host("c")])
    loner = pod({"app": "db"}, affinity=affinity(apart=[prefer(10, term(HOST, ("app", "In", ["web"])))]))
    web = pod({"app": "web"})
    got = affinity_score(t, web, placed(t, ("a", loner)), candidates)
    assert got is not None and got.tolist() == [0, 100, 100]
    assert affinity_score(t, pod({"app": "batch"}), placed(t, ("a", loner)), candidates) is None


def test_schedule_anyway_places_one_pod_after_another_in_the_emptier_zone() -> None:
    t, candidates = scored([host("a1", zone="z1"), host("a2", zone="z1"), host("b1", zone="z2")])
    web = pod({"app": "web"}, spread=[soft(1, "zone", {"matchLabels": {"app": "web"}})])
    index = PlacedPods()
    zones = []
    for i in range(6):
        got = spread_score(t, web, index, candidates)
        assert got is not None
        row = int(np.argmax(got))
        index.add(f"web-{i}", web, row)
        zones.append(t.labels[row]["zone"])
    # z1 has twice the nodes, not twice the pods: the zones never differ by more than one pod.
    assert all(abs(zones[:k].count("z1") - zones[:k].count("z2")) <= 1 for k in range(1, 7))
    assert zones.count("z1") == zones.count("z2") == 3


LABELS = st.fixed_dictionaries({}, optional={"app": st.sampled_from(["web", "db"]), "tier": st.just("x")})
SELECTOR = st.builds(lambda app: {"matchLabels": {"app": app}}, st.sampled_from(["web", "db"]))
KEYS = st.sampled_from(["zone", HOST, "rack"])
PREFERRED = st.lists(
    st.builds(
        lambda w, s, k: {"weight": w, "podAffinityTerm": {"labelSelector": s, "topologyKey": k}},
        st.integers(1, 100),
        SELECTOR,
        KEYS,
    ),
    max_size=2,
)
PODS = st.builds(
    lambda labels, together, apart, constraints: pod(
        labels,
        affinity=affinity(together=together, apart=apart),
        spread=[soft(skew, key, sel) for skew, key, sel in constraints],
    ),
    LABELS,
    PREFERRED,
    PREFERRED,
    st.lists(st.tuples(st.integers(1, 3), KEYS, SELECTOR), max_size=2),
)
NODES = st.lists(
    st.tuples(st.sampled_from(["z1", "z2", None]), st.sampled_from(["r1", None]), st.booleans()), min_size=1, max_size=6
)


@settings(max_examples=150, deadline=None)
@given(NODES, st.lists(st.tuples(st.integers(0, 5), PODS), max_size=8), PODS, st.data())
def test_scores_are_whole_numbers_in_0_100_and_0_off_the_candidates(
    shapes: list[tuple[str | None, str | None, bool]],
    existing: list[tuple[int, Pod]],
    incoming: Pod,
    data: st.DataObject,
) -> None:
    """Like kube-scheduler's, the scores are whole numbers 0..100 over the candidates, for any
    cluster, placed pods and pod (nodes without some topology labels, no candidates at all)."""
    nodes = []
    for i, (zone, rack, named) in enumerate(shapes):
        labels = {k: v for k, v in (("zone", zone), ("rack", rack), (HOST, f"n{i}" if named else None)) if v}
        nodes.append(node(f"n{i}", labels))
    t = table(nodes)
    candidates = np.array(data.draw(st.lists(st.booleans(), min_size=len(t), max_size=len(t))), dtype=np.bool_)
    index = placed(t, *((f"n{row % len(t)}", p) for row, p in existing))
    for got in (affinity_score(t, incoming, index, candidates), spread_score(t, incoming, index, candidates)):
        if got is None:
            continue
        assert got.shape == (len(t),)
        assert ((got >= 0) & (got <= 100) & (got == np.floor(got))).all()
        assert (got[~candidates] == 0).all()
