"""kube-scheduler's InterPodAffinity Filter tables, judged by both schedulers.

From pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go:
``TestRequiredAffinitySingleNode`` (one node ``node1``, region r1, zone z11) and
``TestRequiredAffinityMultipleNodes``. kube-scheduler's reasons map to caldera's: pod affinity
rules → ``AFFINITY``; the pod's anti-affinity rules and existing pods' anti-affinity rules (the
symmetric check, "node(s) didn't satisfy existing pods anti-affinity rules" in kube-scheduler)
→ ``ANTI_AFFINITY``. Where kube-scheduler's pods carry no namespace, these are in ``default``.
"""

from __future__ import annotations

import pytest

from cluster.model.core import Node
from cluster.nodeview.pod_affinity import AFFINITY, ANTI_AFFINITY
from tests.cluster.nodeview.rule_cases import PASS, RUNNERS, Case, MakePod, check, expr, node, params, pod, term

EXISTING_ANTI = ANTI_AFFINITY  # kube-scheduler: "node(s) didn't satisfy existing pods anti-affinity rules"
SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
NODE1 = [node("node1", region="r1", zone="z11")]
TEAM1 = {"matchExpressions": [expr("team", "In", ["team1"])]}
NO_LABEL_VALIDATION = "caldera does not validate label values in selectors (the API server rejects such a pod)"


def existing_scan() -> MakePod:
    return pod().labels(SCAN).on("node1")


def single(name: str, incoming: MakePod, want: str, existing: tuple[MakePod, ...] = (), gap: str = "") -> Case:
    return Case(name, incoming, NODE1, {"node1": want}, existing, gap=gap)


def two_terms(wanted: str) -> MakePod:
    return (
        pod()
        .labels(S1)
        .affinity(
            term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
            term(expr("service", "In", [wanted]), expr("service", "NotIn", ["WrongValue"]), topology="region"),
        )
    )


SINGLE_NODE = [
    single(
        "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
        pod(),
        PASS,
    ),
    single(
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that "
        "matches the existing pod",
        pod().labels(S1).affinity_in("service", "region", ["securityscan", "value2"]),
        PASS,
        (existing_scan(),),
    ),
    single(
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in "
        "operator in labelSelector that matches the existing pod",
        pod().labels(S1).affinity_not_in("service", "region", ["securityscan3", "value3"]),
        PASS,
        (existing_scan(),),
    ),
    single(
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        pod()
        .labels(S1)
        .affinity(term(expr("service", "In", ["securityscan", "value2"]), namespaces=["DiffNameSpace"])),
        AFFINITY,
        (pod().namespace("ns").label("service", "securityscan").on("node1"),),
    ),
    single(
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        pod().labels(SCAN).affinity_in("service", "", ["antivirusscan", "value2"]),
        AFFINITY,
        (existing_scan(),),
    ),
    single(
        "satisfies the PodAffinity with different label Operators in multiple "
        "RequiredDuringSchedulingIgnoredDuringExecution ",
        two_terms("securityscan"),
        PASS,
        (existing_scan(),),
    ),
    single(
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the "
        "node because one of the matchExpression item don't match.",
        two_terms("securityscan2"),
        AFFINITY,
        (existing_scan(),),
    ),
    single(
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        pod()
        .labels(S1)
        .affinity_in("service", "region", ["securityscan", "value2"])
        .anti_in("service", "node", ["antivirusscan", "value2"]),
        PASS,
        (existing_scan(),),
    ),
    single(
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        pod()
        .labels(S1)
        .affinity_in("service", "region", ["securityscan", "value2"])
        .anti_in("service", "node", ["antivirusscan", "value2"]),
        PASS,
        (pod().on("node1").labels(SCAN).anti_in("service", "node", ["antivirusscan", "value2"]),),
    ),
    single(
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        pod()
        .labels(S1)
        .affinity_in("service", "region", ["securityscan", "value2"])
        .anti_in("service", "zone", ["securityscan", "value2"]),
        ANTI_AFFINITY,
        (existing_scan(),),
    ),
    single(
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the "
        "existing pod",
        pod()
        .labels(SCAN)
        .affinity_in("service", "region", ["securityscan", "value2"])
        .anti_in("service", "node", ["antivirusscan", "value2"]),
        EXISTING_ANTI,
        (pod().labels(SCAN).on("node1").anti_in("service", "zone", ["securityscan", "value2"]),),
    ),
    single(
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        pod().labels(SCAN).affinity_not_in("service", "region", ["securityscan", "value2"]),
        AFFINITY,
        (pod().label("service", "securityscan").on("node2"),),
    ),
    single(
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        pod().labels(SCAN),
        EXISTING_ANTI,
        (pod().on("node1").labels(SCAN).anti_in("service", "zone", ["securityscan", "value2"]),),
    ),
    single(
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "satisfy PodAntiAffinity symmetry with the existing pod",
        pod().labels(SCAN),
        PASS,
        (pod().on("node1").labels(SCAN).anti_not_in("service", "zone", ["securityscan", "value2"]),),
    ),
    single(
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with "
        "incoming pod",
        pod().labels(SCAN).anti_exists("service", "region").anti_exists("security", "region"),
        ANTI_AFFINITY,
        (pod().on("node1").labels(S1).anti_exists("security", "zone"),),
    ),
    single(
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        pod().labels(SCAN).anti_exists("service", "zone").anti_exists("security", "zone"),
        ANTI_AFFINITY,
        (pod().on("node1").labels(S1).anti_exists("security", "zone"),),
    ),
    single(
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        pod().labels(S1).anti_exists("security", "zone"),
        EXISTING_ANTI,
        (pod().on("node1").labels(SCAN).anti_exists("service", "zone").anti_exists("security", "zone"),),
    ),
    single(
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        pod().labels({"abc": "", "xyz": ""}).anti_exists("abc", "zone").anti_exists("def", "zone"),
        ANTI_AFFINITY,
        (pod().on("node1").labels({"def": "", "xyz": ""}).anti_exists("abc", "zone").anti_exists("def", "zone"),),
    ),
    single(
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        pod().labels({"def": "", "xyz": ""}).anti_exists("abc", "zone").anti_exists("def", "zone"),
        ANTI_AFFINITY,
        (pod().on("node1").labels({"abc": "", "xyz": ""}).anti_exists("abc", "zone").anti_exists("def", "zone"),),
    ),
    single(
        "PodAffinity fails PreFilter with an invalid affinity label syntax",
        pod()
        .labels(SCAN)
        .affinity_in("service", "region", ["{{.bad-value.}}"])
        .affinity_in("service", "node", ["antivirusscan", "value2"]),
        AFFINITY,
        gap=NO_LABEL_VALIDATION,
    ),
    single(
        "PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax",
        pod()
        .labels(SCAN)
        .affinity_in("service", "region", ["foo"])
        .affinity_in("service", "node", ["{{.bad-value.}}"]),
        AFFINITY,
        gap=NO_LABEL_VALIDATION,
    ),
    single(
        "affinity with NamespaceSelector",
        pod()
        .labels(S1)
        .affinity(term(expr("service", "In", ["securityscan", "value2"]), topology="region", namespace_selector=TEAM1)),
        PASS,
        (pod().namespace("subteam1.team1").labels(SCAN).on("node1"),),
    ),
    single(
        "affinity with non-matching NamespaceSelector",
        pod()
        .labels(S1)
        .affinity(term(expr("service", "In", ["securityscan", "value2"]), topology="region", namespace_selector=TEAM1)),
        AFFINITY,
        (pod().namespace("subteam1.team2").labels(SCAN).on("node1"),),
    ),
    single(
        "anti-affinity with matching NamespaceSelector",
        pod()
        .namespace("subteam1.team1")
        .labels(S1)
        .anti(term(expr("service", "In", ["securityscan", "value2"]), topology="zone", namespace_selector=TEAM1)),
        ANTI_AFFINITY,
        (pod().namespace("subteam2.team1").labels(SCAN).on("node1"),),
    ),
    single(
        "anti-affinity with matching all NamespaceSelector",
        pod()
        .namespace("subteam1.team1")
        .labels(S1)
        .anti(term(expr("service", "In", ["securityscan", "value2"]), topology="zone", namespace_selector={})),
        ANTI_AFFINITY,
        (pod().namespace("subteam2.team1").labels(SCAN).on("node1"),),
    ),
    single(
        "anti-affinity with non-matching NamespaceSelector",
        pod()
        .namespace("subteam1.team1")
        .labels(S1)
        .anti(term(expr("service", "In", ["securityscan", "value2"]), topology="zone", namespace_selector=TEAM1)),
        PASS,
        (pod().namespace("subteam1.team2").labels(SCAN).on("node1"),),
    ),
]

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def rzh(name: str, zone: str, region: str = "r1") -> Node:
    return node(name, region=region, zone=zone, hostname=name)


MULTIPLE_NODES = [
    Case(
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them "
        "has an existing pod that matches the affinity rules",
        pod().affinity_in("foo", "region", ["bar"]),
        [node("node1", **CHINA), node("node2", **CHINA_AZ1), node("node3", **INDIA)],
        {"node1": PASS, "node2": PASS, "node3": AFFINITY},
        [pod().on("node1").label("foo", "bar")],
    ),
    Case(
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the "
        "collection should not be blocked from being scheduled onto any node, even there's no existing pod that "
        "matches the rule anywhere.",
        pod()
        .labels({"foo": "bar", "service": "securityscan"})
        .affinity_in("foo", "zone", ["bar"])
        .affinity_in("service", "zone", ["securityscan"]),
        [node("nodeA", zone="az1", hostname="h1"), node("nodeB", zone="az2", hostname="h2")],
        {"nodeA": PASS, "nodeB": PASS},
        [pod().on("nodeA").label("foo", "bar")],
    ),
    Case(
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        pod()
        .labels({"foo": "bar", "service": "securityscan"})
        .affinity_in("foo", "zone", ["bar"])
        .affinity_in("service", "zone", ["securityscan"]),
        [node("nodeA", zoneLabel="az1", hostname="h1"), node("nodeB", zoneLabel="az2", hostname="h2")],
        {"nodeA": AFFINITY, "nodeB": AFFINITY},
        [pod().on("nodeA").label("foo", "bar")],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        pod().anti_in("foo", "region", ["abc"]),
        [node("nodeA", region="r1", hostname="nodeA"), node("nodeB", region="r1", hostname="nodeB")],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY},
        [pod().on("nodeA").label("foo", "abc")],
    ),
    Case(
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        pod().anti_in("foo", "region", ["abc"]).anti_in("service", "zone", ["securityscan"]),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY},
        [pod().on("nodeA").labels({"foo": "abc", "service": "securityscan"})],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        pod().anti_in("foo", "region", ["abc"]),
        [node("nodeA", **CHINA), node("nodeB", **CHINA_AZ1), node("nodeC", **INDIA)],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY, "nodeC": PASS},
        [pod().on("nodeA").label("foo", "abc")],
    ),
    Case(
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has "
        "an existing pod that match the inter pod affinity rule but in different namespace)",
        pod().namespace("NS1").label("foo", "123").anti_in("foo", "region", ["bar"]),
        [node("nodeA", **CHINA), node("nodeB", **CHINA_AZ1), node("nodeC", **INDIA)],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY, "nodeC": PASS},
        [
            pod().on("nodeA").namespace("NS1").label("foo", "bar"),
            pod().on("nodeC").namespace("NS2").anti_in("foo", "region", ["123"]),
        ],
    ),
    Case(
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of "
        "the term is firstly checked, and then topologyKey of the term is also checked",
        pod().label("foo"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z1")],
        {"nodeA": PASS, "nodeB": PASS},
        [pod().on("nodeA").anti_exists("foo", "invalid-node-label")],
    ),
    Case(
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        pod().anti_exists("foo", "invalid-node-label"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z1")],
        {"nodeA": PASS, "nodeB": PASS},
        [pod().on("nodeA").label("foo")],
    ),
    Case(
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
        pod().label("foo").label("bar"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": EXISTING_ANTI, "nodeB": EXISTING_ANTI},
        [pod().on("nodeA").anti_exists("foo", "zone"), pod().on("nodeA").anti_exists("bar", "region")],
    ),
    Case(
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one "
        "anti-affinity rule of existingPod",
        pod().anti_exists("foo", "zone").anti_exists("bar", "region"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY},
        [pod().on("nodeA").label("foo"), pod().on("nodeB").label("bar")],
    ),
    Case(
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        pod().label("foo").label("bar"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": EXISTING_ANTI, "nodeB": PASS},
        [pod().on("nodeA").anti_exists("foo", "invalid-node-label").anti_exists("bar", "zone")],
    ),
    Case(
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        pod().anti_exists("foo", "invalid-node-label").anti_exists("bar", "zone"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": ANTI_AFFINITY, "nodeB": PASS},
        [pod().on("nodeA").label("foo").label("bar")],
    ),
    Case(
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
        pod().label("foo").label("bar"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": EXISTING_ANTI, "nodeB": EXISTING_ANTI},
        [pod().on("nodeA").anti_exists("foo", "region").anti_exists("bar", "zone")],
    ),
    Case(
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
        pod().anti_exists("foo", "region").anti_exists("bar", "zone"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": ANTI_AFFINITY, "nodeB": ANTI_AFFINITY},
        [pod().on("nodeA").label("foo").label("bar")],
    ),
    Case(
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term "
        "matches incoming pod, so incoming pod can only be scheduled to nodeC",
        pod().label("foo").label("bar"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2"), rzh("nodeC", "z3")],
        {"nodeA": EXISTING_ANTI, "nodeB": EXISTING_ANTI, "nodeC": PASS},
        [
            pod().on("nodeA").anti_exists("foo", "zone").anti_exists("labelA", "zone"),
            pod().on("nodeB").anti_exists("bar", "zone").anti_exists("labelB", "zone"),
        ],
    ),
    Case(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match",
        pod().affinity_exists("foo", "region").affinity_exists("bar", "zone"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z1")],
        {"nodeA": PASS, "nodeB": PASS},
        [pod().labels({"foo": "", "bar": ""}).on("nodeA")],
    ),
    Case(
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match, and the match logic should be satisfied on the same pod",
        pod().affinity_exists("foo", "region").affinity_exists("bar", "zone"),
        [rzh("nodeA", "z1"), rzh("nodeB", "z2")],
        {"nodeA": AFFINITY, "nodeB": AFFINITY},
        [pod().on("nodeA").label("foo"), pod().on("nodeB").label("bar")],
    ),
]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", params(SINGLE_NODE))
def test_required_affinity_single_node(case: Case, runner: str) -> None:
    """filtering_test.go TestRequiredAffinitySingleNode."""
    check(runner, case)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", params(MULTIPLE_NODES))
def test_required_affinity_multiple_nodes(case: Case, runner: str) -> None:
    """filtering_test.go TestRequiredAffinityMultipleNodes."""
    check(runner, case)


BOTH_RULES = Case(
    "a node that fails both affinity and anti-affinity counts under affinity",
    pod().affinity_in("app", "zone", ["db"]).anti_in("app", "zone", ["web"]),
    [node("nodeA", zone="z1"), node("nodeB", zone="z2")],
    {"nodeA": PASS, "nodeB": AFFINITY},
    [pod().on("nodeA").label("app", "db"), pod().on("nodeB").label("app", "web")],
)


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_node_failing_several_rules_counts_under_the_first_kube_scheduler_asks(runner: str) -> None:
    """kube-scheduler's InterPodAffinity filter asks affinity, then anti-affinity, then the existing
    pods' anti-affinity, and names the first that fails."""
    check(runner, BOTH_RULES)
