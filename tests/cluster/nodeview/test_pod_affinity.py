"""Inter-pod affinity and anti-affinity, and topology spread, as filters over the node table.

The first table is kube-scheduler's ``TestRequiredAffinitySingleNode``
(pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go): one node ``machine1``
(region r1, zone z11), the pods already there, the pod to place, and whether the node passes
(with the reason when it does not).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from cluster.model.core import Pod
from cluster.nodeview.pod_affinity import AFFINITY, ANTI_AFFINITY, SPREAD, PlacedPods, pod_rules
from cluster.nodeview.table import NodeTable
from tests.builders import labelled_table

SECURITY_SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}


def table(*nodes: tuple[str, dict[str, str]]) -> NodeTable:
    return labelled_table({n: labels for n, labels in nodes})


def term(key: str, op: str, values: list[str] | None = None, topology: str = "", **extra: Any) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        expression["values"] = values
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology, **extra}


def pod(
    labels: dict[str, str],
    affinity: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    namespace: str = "",
    spread: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "c"}], **spec}
    aff: dict[str, Any] = {}
    if affinity is not None:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti is not None:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if aff:
        body["affinity"] = aff
    if spread is not None:
        body["topologySpreadConstraints"] = spread
    return msgspec.convert({"metadata": {"name": "p", "namespace": namespace, "labels": labels}, "spec": body}, Pod)


# The Namespaces kube-scheduler's interpodaffinity tests create (and a namespaceSelector reads).
KUBE_NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}


def placed(t: NodeTable, *pods: tuple[str, Pod]) -> PlacedPods:
    index = PlacedPods(namespace_labels=KUBE_NAMESPACES)
    for i, (name, p) in enumerate(pods):
        if name in t.index:
            index.add(f"uid-{i}", p, t.index[name])
    return index


def two_terms(wanted: str) -> Pod:
    """Two required affinity terms, their expressions ANDed: Exists/DoesNotExist, then In ``wanted``/NotIn."""
    first = [{"key": "service", "operator": "Exists"}, {"key": "wrongkey", "operator": "DoesNotExist"}]
    second = [
        {"key": "service", "operator": "In", "values": [wanted]},
        {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
    ]
    return pod(S1, [{"labelSelector": {"matchExpressions": e}, "topologyKey": "region"} for e in (first, second)])


IN_SCAN = term("service", "In", ["securityscan", "value2"], "region")
ANTI_VIRUS_NODE = term("service", "In", ["antivirusscan", "value2"], "node")

# (name, pod, existing pods as (node, pod), passes, reason)
SINGLE_NODE: list[tuple[str, Pod, list[tuple[str, Pod]], bool, str]] = [
    ("a pod without rules on a node without pods", pod({}), [], True, ""),
    ("affinity In matches the existing pod", pod(S1, [IN_SCAN]), [("machine1", pod(SECURITY_SCAN))], True, ""),
    (
        "affinity NotIn matches the existing pod",
        pod(S1, [term("service", "NotIn", ["securityscan3", "value3"], "region")]),
        [("machine1", pod(SECURITY_SCAN))],
        True,
        "",
    ),
    (
        "affinity not met: the existing pod is in another namespace",
        pod(S1, [term("service", "In", ["securityscan", "value2"], namespaces=["DiffNameSpace"])]),
        [("machine1", pod(SECURITY_SCAN, namespace="ns"))],
        False,
        AFFINITY,
    ),
    (
        "affinity not met: the selector matches no pod",
        pod(SECURITY_SCAN, [term("service", "In", ["antivirusscan", "value2"])]),
        [("machine1", pod(SECURITY_SCAN))],
        False,
        AFFINITY,
    ),
    (
        "affinity with operators in several terms, all met",
        two_terms("securityscan"),
        [("machine1", pod(SECURITY_SCAN))],
        True,
        "",
    ),
    (
        "the expressions of a selector are ANDed: one does not match",
        two_terms("securityscan2"),
        [("machine1", pod(SECURITY_SCAN))],
        False,
        AFFINITY,
    ),
    (
        "affinity and anti-affinity both met",
        pod(S1, [IN_SCAN], [ANTI_VIRUS_NODE]),
        [("machine1", pod(SECURITY_SCAN))],
        True,
        "",
    ),
    (
        "affinity, anti-affinity and the existing pod's anti-affinity all met",
        pod(S1, [IN_SCAN], [ANTI_VIRUS_NODE]),
        [("machine1", pod(SECURITY_SCAN, anti=[ANTI_VIRUS_NODE]))],
        True,
        "",
    ),
    (
        "affinity met, anti-affinity not",
        pod(S1, [IN_SCAN], [term("service", "In", ["securityscan", "value2"], "zone")]),
        [("machine1", pod(SECURITY_SCAN))],
        False,
        ANTI_AFFINITY,
    ),
    (
        "the existing pod's anti-affinity selects the pod (symmetry)",
        pod(SECURITY_SCAN, [IN_SCAN], [ANTI_VIRUS_NODE]),
        [("machine1", pod(SECURITY_SCAN, anti=[term("service", "In", ["securityscan", "value2"], "zone")]))],
        False,
        ANTI_AFFINITY,
    ),
    (
        "the pod matches its own affinity term, but the matching pod is on an unknown node",
        pod(SECURITY_SCAN, [term("service", "NotIn", ["securityscan", "value2"], "region")]),
        [("machine2", pod(SECURITY_SCAN))],
        False,
        AFFINITY,
    ),
    (
        "a pod without rules is kept off by the existing pod's anti-affinity",
        pod(SECURITY_SCAN),
        [("machine1", pod(SECURITY_SCAN, anti=[term("service", "In", ["securityscan", "value2"], "zone")]))],
        False,
        ANTI_AFFINITY,
    ),
    (
        "a pod without rules, the existing pod's anti-affinity does not select it",
        pod(SECURITY_SCAN),
        [("machine1", pod(SECURITY_SCAN, anti=[term("service", "NotIn", ["securityscan", "value2"], "zone")]))],
        True,
        "",
    ),
]


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "passes", "reason"), SINGLE_NODE, ids=[c[0] for c in SINGLE_NODE]
)
def test_required_affinity_single_node(
    name: str, incoming: Pod, existing: list[tuple[str, Pod]], passes: bool, reason: str
) -> None:
    """filtering_test.go TestRequiredAffinitySingleNode."""
    t = table(("machine1", {"region": "r1", "zone": "z11"}))
    verdict = pod_rules(t, incoming, placed(t, *existing))
    assert bool(verdict.mask[0]) is passes
    assert verdict.failed == ({} if passes else {reason: 1})


def test_the_first_pod_of_a_group_that_wants_to_be_together_may_go_anywhere_with_the_key() -> None:
    t = table(("a", {"zone": "z1"}), ("b", {"zone": "z2"}), ("c", {}))
    together = pod({"app": "db"}, [term("app", "In", ["db"], "zone")])
    assert pod_rules(t, together, PlacedPods()).mask.tolist() == [True, True, False]
    assert pod_rules(t, together, placed(t, ("b", pod({"app": "db"})))).mask.tolist() == [False, True, False]


def test_anti_affinity_by_hostname_keeps_one_per_node_and_counts_what_was_just_placed() -> None:
    t = table(*((f"n{i}", {"kubernetes.io/hostname": f"n{i}"}) for i in range(3)))
    worker = pod({"app": "w"}, anti=[term("app", "In", ["w"], "kubernetes.io/hostname")])
    index = PlacedPods()
    rows = []
    for i in range(3):
        verdict = pod_rules(t, worker, index)
        row = int(np.flatnonzero(verdict.mask)[0])
        rows.append(row)
        index.add(f"w-{i}", worker, row)
    assert sorted(rows) == [0, 1, 2]
    full = pod_rules(t, worker, index)
    assert not full.mask.any() and full.failed == {ANTI_AFFINITY: 3}


def test_topology_spread_keeps_the_skew_and_honours_min_domains() -> None:
    t = table(("a1", {"zone": "a"}), ("a2", {"zone": "a"}), ("b1", {"zone": "b"}), ("none", {}))
    spread = [{"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "w"}}}]
    w = pod({"app": "w"}, spread=spread)
    index = placed(t, ("a1", pod({"app": "w"})))
    verdict = pod_rules(t, w, index)
    assert verdict.mask.tolist() == [False, False, True, False] and verdict.failed == {SPREAD: 3}
    # minDomains 3 with two zones: the smallest count is taken as 0, so zone b (0 + 1) passes, a (1 + 1) does not
    three = [{**spread[0], "minDomains": 3}]
    index = placed(t, ("a1", pod({"app": "w"})), ("b1", pod({"app": "w"})))
    assert pod_rules(t, pod({"app": "w"}, spread=three), index).mask.tolist() == [False, False, False, False]
    assert pod_rules(t, w, index).mask.tolist() == [True, True, True, False]
    anyway = [{**spread[0], "whenUnsatisfiable": "ScheduleAnyway"}]
    assert pod_rules(t, pod({"app": "w"}, spread=anyway), index).mask.all()  # a score only: no filter
