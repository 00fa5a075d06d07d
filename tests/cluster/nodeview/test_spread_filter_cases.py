"""kube-scheduler's PodTopologySpread Filter tables, judged by both schedulers.

From pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go: ``TestSingleConstraint``
and ``TestMultipleConstraints``. kube-scheduler's tables give a status code per node:
Unschedulable (the skew) and UnschedulableAndUnresolvable (the node lacks a constraint's label,
"... (missing required label)" in kube-scheduler) are both ``SPREAD`` in caldera. Some cases run
with kube-scheduler's NodeInclusionPolicyInPodTopologySpread gate off; caldera always applies the
policies, and those cases set none, so their defaults (node affinity honoured, taints ignored)
give what the gate-off plugin does.
"""

from __future__ import annotations

import pytest

from cluster.model.core import Node
from cluster.nodeview.pod_affinity import SPREAD
from tests.cluster.nodeview.rule_cases import PASS, RUNNERS, Case, MakePod, check, exists, node, params, pod

SKEW = SPREAD
NO_LABEL = SPREAD  # kube-scheduler: "node(s) didn't match pod topology spread constraints (missing required label)"
FOO = exists("foo")
BAR = exists("bar")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def zoned(*names: tuple[str, str]) -> list[Node]:
    """Nodes labelled with their zone and with ``node``: their own name."""
    return [node(name, zone=zone, node=name) for name, zone in names]


FOUR = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def foo_on(*nodes: str) -> list[MakePod]:
    """One pod labelled ``foo`` on each of ``nodes`` (a node named twice gets two)."""
    return [pod().label("foo").on(n) for n in nodes]


def want(a: str, b: str, x: str, y: str) -> dict[str, str]:
    return {"node-a": a, "node-b": b, "node-x": x, "node-y": y}


ALL_PASS = want(PASS, PASS, PASS, PASS)
FOO_ZONE = pod().label("foo").spread(1, "zone", FOO)
FOO_NODE = pod().label("foo").spread(1, "node", FOO)
FOO_NODES = [node("node-a", node="node-a", foo=""), node("node-b", node="node-b", foo="")]
WITH_FOO = [*FOO_NODES, node("node-x", node="node-x", foo=""), node("node-y", node="node-y")]
Y_TAINTED = [
    *FOO_NODES,
    node("node-x", node="node-x", foo=""),
    node("node-y", node="node-y", taints=[UNSCHEDULABLE_TAINT]),
]
TWO_TWO_ONE = [node(n, node=n) for n in ("node-a", "node-b", "node-c")]

SINGLE_CONSTRAINT = [
    Case("no existing pods", FOO_ZONE, FOUR, ALL_PASS),
    Case(
        "no existing pods, incoming pod doesn't match itself",
        pod().label("foo").spread(1, "zone", BAR),
        FOUR,
        ALL_PASS,
    ),
    Case(
        "existing pods in a different namespace do not count",
        FOO_ZONE,
        FOUR,
        want(PASS, PASS, SKEW, SKEW),
        [
            pod().namespace("ns1").on("node-a").label("foo"),
            pod().namespace("ns2").on("node-a").label("foo"),
            *foo_on("node-x", "node-y"),
        ],
    ),
    Case(
        "existing pods do not match null selector",
        pod().label("foo").spread(1, "zone", None),
        FOUR,
        ALL_PASS,
        foo_on("node-x", "node-y"),
    ),
    Case(
        "pods spread across zones as 3/3, all nodes fit",
        FOO_ZONE,
        FOUR,
        ALL_PASS,
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
    ),
    Case(
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        FOO_ZONE,
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zon="zone1", node="node-b"),
            node("node-x", zone="zone2", node="node-x"),
            node("node-y", zone="zone2", node="node-y"),
        ],
        want(PASS, NO_LABEL, SKEW, SKEW),
        foo_on("node-a", "node-b", "node-x", "node-y"),
    ),
    Case(
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        pod().label("foo").spread(1, "rack", FOO),
        zoned(("node-a", "zone1"), ("node-x", "zone2")),
        {"node-a": NO_LABEL, "node-x": NO_LABEL},
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        FOO_NODE,
        FOUR,
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        pod().label("foo").spread(2, "node", FOO),
        FOUR,
        want(SKEW, PASS, PASS, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
    ),
    Case(
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        pod().label("bar").spread(1, "node", FOO),
        FOUR,
        want(SKEW, PASS, PASS, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
    ),
    Case(
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        pod().label("foo").node_affinity("node", "In", ["node-a", "node-y"]).spread(1, "node", FOO),
        FOUR,
        want(PASS, PASS, PASS, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
        elsewhere=frozenset({"node-b", "node-x"}),
    ),
    Case(
        "terminating Pods should be excluded",
        FOO_NODE,
        [node("node-a", node="node-a"), node("node-b", node="node-b")],
        {"node-a": PASS, "node-b": SKEW},
        [pod().on("node-a").label("foo").terminating(), pod().on("node-b").label("foo")],
    ),
    Case(
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        pod().label("foo").node_affinity("node", "NotIn", ["node-b"]).spread(1, "zone", FOO),
        FOUR,
        want(PASS, PASS, SKEW, SKEW),
        foo_on("node-b", "node-b", "node-y"),
        elsewhere=frozenset({"node-b"}),
    ),
    Case(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third "
        "node fits",
        pod().label("foo").spread(2, "node", FOO, min_domains=4),
        TWO_TWO_ONE,
        {"node-a": SKEW, "node-b": SKEW, "node-c": PASS},
        foo_on("node-a", "node-a", "node-b", "node-b", "node-c"),
    ),
    Case(
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all "
        "nodes fit",
        pod().label("foo").spread(2, "node", FOO, min_domains=2),
        TWO_TWO_ONE,
        {"node-a": PASS, "node-b": PASS, "node-c": PASS},
        foo_on("node-a", "node-a", "node-b", "node-b", "node-c"),
    ),
    Case(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and "
        "fourth nodes fit",
        pod().label("foo").spread(2, "zone", FOO, min_domains=3),
        FOUR,
        want(SKEW, SKEW, PASS, PASS),
        foo_on("node-a", "node-b", "node-y"),
    ),
    Case(
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
        pod().label("foo").spread(2, "zone", FOO, min_domains=1),
        FOUR,
        ALL_PASS,
        foo_on("node-a", "node-b", "node-y"),
    ),
    Case(
        "NodeAffinityPolicy honored with labelSelectors",
        pod().label("foo").node_selector({"foo": ""}).spread(1, "node", FOO),
        WITH_FOO,
        want(SKEW, SKEW, PASS, PASS),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "NodeAffinityPolicy ignored with labelSelectors",
        pod().label("foo").node_selector({"foo": ""}).spread(1, "node", FOO, node_affinity_policy="Ignore"),
        WITH_FOO,
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "NodeAffinityPolicy honored with nodeAffinity",
        pod().label("foo").node_affinity("foo", "In", [""]).spread(1, "node", FOO),
        WITH_FOO,
        want(SKEW, SKEW, PASS, PASS),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "NodeAffinityPolicy ignored with labelSelectors",  # kube-scheduler's name again; this one has nodeAffinity
        pod().label("foo").node_affinity("foo", "In", [""]).spread(1, "node", FOO, node_affinity_policy="Ignore"),
        WITH_FOO,
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "NodeTaintsPolicy honored",
        pod().label("foo").spread(1, "node", FOO, node_taints_policy="Honor"),
        Y_TAINTED,
        want(SKEW, SKEW, PASS, PASS),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "NodeTaintsPolicy ignored",
        FOO_NODE,
        Y_TAINTED,
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
]

FOO_ZONE_AND_NODE = pod().label("foo").spread(1, "zone", FOO).spread(1, "node", FOO)
FOO_ZONE_BAR_NODE = pod().label("foo").label("bar").spread(1, "zone", FOO).spread(1, "node", BAR)


def labelled_foo(*specs: tuple[str, str, bool]) -> list[Node]:
    """Nodes by (name, zone, whether labelled foo), each labelled with its name as ``node``."""
    return [node(n, zone=z, node=n, **({"foo": ""} if foo else {})) for n, z, foo in specs]


MULTIPLE_CONSTRAINTS = [
    Case(
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        FOO_ZONE_AND_NODE,
        FOUR,
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y"),
    ),
    Case(
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        FOO_ZONE_AND_NODE,
        FOUR,
        want(SKEW, SKEW, SKEW, SKEW),
        foo_on("node-a", "node-a", "node-b", "node-y", "node-y", "node-y", "node-y"),
    ),
    Case(
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        FOO_ZONE_BAR_NODE,
        FOUR,
        want(SKEW, SKEW, PASS, SKEW),
        [pod().on("node-a").label("foo"), pod().on("node-y").label("bar")],
    ),
    Case(
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        FOO_ZONE_BAR_NODE,
        FOUR,
        want(SKEW, SKEW, SKEW, SKEW),
        [pod().on("node-a").label("foo"), pod().on("node-x").label("bar"), pod().on("node-y").label("bar")],
    ),
    Case(
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        FOO_ZONE_BAR_NODE,
        FOUR,
        want(SKEW, PASS, SKEW, SKEW),
        [
            pod().on("node-a").label("foo"),
            pod().on("node-a").label("foo").label("bar"),
            pod().on("node-y").label("foo"),
            pod().on("node-y").label("foo").label("bar"),
            pod().on("node-y").label("foo"),
        ],
    ),
    Case(
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        pod().label("bar").spread(1, "zone", FOO).spread(1, "node", BAR),
        FOUR,
        want(PASS, PASS, SKEW, SKEW),
        [pod().on("node-a").label("foo"), pod().on("node-x").label("bar"), pod().on("node-y").label("bar")],
    ),
    Case(
        "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        FOO_ZONE_AND_NODE,
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zone="zone1", node="node-b"),
            node("node-x", zone="zone2"),
            node("node-y", zone="zone2", node="node-y"),
        ],
        want(SKEW, PASS, NO_LABEL, SKEW),
        foo_on("node-a", "node-y"),
    ),
    Case(
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        pod()
        .label("foo")
        .node_selector({"foo": ""})
        .spread(1, "zone", FOO)
        .spread(1, "node", FOO, node_affinity_policy="Ignore"),
        labelled_foo(
            ("node-a", "zone1", True), ("node-b", "zone1", True), ("node-x", "zone2", True), ("node-y", "zone2", False)
        ),
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        pod().label("foo").spread(1, "zone", FOO, node_taints_policy="Honor").spread(1, "node", FOO),
        [
            *labelled_foo(("node-a", "zone1", True), ("node-b", "zone1", True), ("node-x", "zone2", True)),
            node("node-y", zone="zone2", node="node-y", taints=[UNSCHEDULABLE_TAINT]),
        ],
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-y"}),
    ),
    Case(
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        pod().label("foo").node_selector({"foo": ""}).spread(1, "zone", FOO).spread(1, "node", FOO),
        [
            *labelled_foo(("node-a", "zone1", True), ("node-b", "zone1", False), ("node-x", "zone2", True)),
            node("node-y", zone="zone2", node="node-y", foo="", taints=[UNSCHEDULABLE_TAINT]),
        ],
        want(SKEW, PASS, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-b", "node-y"}),
    ),
    Case(
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        pod()
        .label("foo")
        .node_selector({"foo": ""})
        .spread(1, "zone", FOO, node_taints_policy="Honor")
        .spread(1, "node", FOO, node_affinity_policy="Ignore"),
        [
            *labelled_foo(("node-a", "zone1", True), ("node-b", "zone1", False), ("node-x", "zone2", True)),
            node("node-y", zone="zone2", node="node-y", foo="", taints=[UNSCHEDULABLE_TAINT]),
        ],
        want(SKEW, SKEW, PASS, SKEW),
        foo_on("node-a", "node-b", "node-y"),
        elsewhere=frozenset({"node-b", "node-y"}),
    ),
]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", params(SINGLE_CONSTRAINT))
def test_single_constraint(case: Case, runner: str) -> None:
    """filtering_test.go TestSingleConstraint."""
    check(runner, case)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", params(MULTIPLE_CONSTRAINTS))
def test_multiple_constraints(case: Case, runner: str) -> None:
    """filtering_test.go TestMultipleConstraints."""
    check(runner, case)
