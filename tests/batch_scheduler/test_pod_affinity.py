"""Inter-pod rules in the batch scheduler: a gang's members count each other as they are placed;
other schedulers' pods count too; the reason names the rule."""

from __future__ import annotations

from typing import Any

from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import SCHEDULER, columns, conf, podgroup, task
from tests.builders import node

CONF = conf(["priority", "gang"], ["predicates", "nodeorder", "binpack"], actions="enqueue, allocate")
ONE_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def run(
    pods: list[PodRecord], nodes: int, *, others: list[PodRecord] = (), min_member: int = 3, **labels: Any
) -> Session:  # type: ignore[assignment]
    ns = [node(f"n{i}", cpu="8") for i in range(nodes)]
    inp = SessionInput(
        columns=columns(ns, [*pods, *others]),
        pods=pods,
        podgroups={"default/j": podgroup("j", min_member=min_member, phase="Inqueue")},
        queues={},
        others=others,
    )
    ssn = Session(CONF, SessionConfig(scheduler=SCHEDULER), inp)
    ssn.run()
    return ssn


def workers(count: int, **spec: Any) -> list[PodRecord]:
    return [task(f"w-{i}", cpu="1", group="j", labels={"app": "w"}, **spec) for i in range(count)]


def placed(ssn: Session) -> dict[str, str]:
    return {t.name: t.node for batch in ssn.commits for t in batch}


def test_a_gang_with_anti_affinity_gets_one_node_per_member() -> None:
    # binpack alone would put all three on one node (each has room for all)
    ssn = run(workers(3, affinity=ONE_PER_NODE), 3)
    assert sorted(placed(ssn).values()) == ["n0", "n1", "n2"]


def test_a_gang_the_rule_cannot_spread_waits_and_names_the_rule() -> None:
    ssn = run(workers(3, affinity=ONE_PER_NODE), 2)
    assert placed(ssn) == {}
    assert "didn't match pod anti-affinity rules" in ssn.jobs["default/j"].reason


def test_another_schedulers_pod_counts() -> None:
    other = task("agent-pod", cpu="1", node="n0", labels={"app": "w"})
    other = PodRecord(**{**{f: getattr(other, f) for f in other.__struct_fields__}, "scheduler": "agent-scheduler"})
    ssn = run(workers(2, affinity=ONE_PER_NODE), 3, others=[other], min_member=2)
    assert sorted(placed(ssn).values()) == ["n1", "n2"]


def test_topology_spread_puts_the_gang_across_zones() -> None:
    ns = [node(f"n{i}", cpu="8", labels={"zone": f"z{i % 2}"}) for i in range(4)]
    spread = [{"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "w"}}}]
    pods = workers(4, topologySpreadConstraints=spread)
    inp = SessionInput(
        columns=columns(ns, pods),
        pods=pods,
        podgroups={"default/j": podgroup("j", min_member=4, phase="Inqueue")},
        queues={},
    )
    ssn = Session(CONF, SessionConfig(scheduler=SCHEDULER), inp)
    ssn.run()
    zones = [int(n[1:]) % 2 for n in placed(ssn).values()]
    assert len(zones) == 4 and zones.count(0) == zones.count(1) == 2


# -- what only scores: preferred terms and ScheduleAnyway (nodeorder's podaffinity/podtopologyspread weights)

APART = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "w"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}


def packing(**weights: int) -> Any:
    """A conf that packs (binpack, nodeorder's spreading scores off), with these nodeorder weights too."""
    args = {"leastrequested.weight": 0, "balancedresource.weight": 0, **weights}
    return conf(
        ["priority", "gang"],
        ["predicates", {"name": "nodeorder", "arguments": args}, "binpack"],
        actions="enqueue, allocate",
    )


def zoned(pods: list[PodRecord], others: list[PodRecord] = (), *, scheduler_conf: Any = None) -> Session:  # type: ignore[assignment]
    ns = [node(f"n{i}", cpu="8", labels={"zone": f"z{i % 2}"}) for i in range(4)]
    inp = SessionInput(
        columns=columns(ns, [*pods, *others]),
        pods=pods,
        podgroups={"default/j": podgroup("j", min_member=len(pods), phase="Inqueue")},
        queues={},
        others=others,
    )
    ssn = Session(scheduler_conf or packing(), SessionConfig(scheduler=SCHEDULER), inp)
    ssn.run()
    return ssn


def other(name: str, node_name: str, labels: dict[str, str], **spec: Any) -> PodRecord:
    made = task(name, cpu="1", node=node_name, labels=labels, **spec)
    return PodRecord(**{**{f: getattr(made, f) for f in made.__struct_fields__}, "scheduler": "agent-scheduler"})


def test_preferred_anti_affinity_spreads_a_gang_binpack_would_pack() -> None:
    assert len(set(placed(zoned(workers(3))).values())) == 1  # binpack packs them
    assert len(set(placed(zoned(workers(3, affinity=APART))).values())) == 3
    off = packing(**{"podaffinity.weight": 0})
    assert len(set(placed(zoned(workers(3, affinity=APART), scheduler_conf=off)).values())) == 1


def test_preferred_affinity_draws_a_pod_to_the_zone_of_the_pods_it_likes() -> None:
    near = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"},
                }
            ]
        }
    }
    busy = [other(f"x{i}", "n0", {"app": "x"}) for i in range(4)]  # binpack's favourite is n0, in z0
    db = other("db", "n1", {"app": "db"})
    assert set(placed(zoned(workers(1), busy)).values()) == {"n0"}
    assert set(placed(zoned(workers(1, affinity=near), [*busy, db])).values()) <= {"n1", "n3"}


def test_an_existing_pods_preferred_anti_affinity_keeps_new_pods_off_its_domain() -> None:
    """The symmetric side: a placed pod that would rather not share a zone with app=w."""
    away = {
        "weight": 10,
        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "zone"},
    }
    loner = other(
        "loner",
        "n0",
        {"app": "loner"},
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [away]}},
    )
    assert {int(n[1:]) % 2 for n in placed(zoned(workers(2), [loner])).values()} == {1}


def test_schedule_anyway_spread_prefers_the_emptier_zone() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    already = [other(f"old{i}", "n0", {"app": "w"}) for i in range(2)]  # z0 holds two, and binpack likes n0
    assert {int(n[1:]) % 2 for n in placed(zoned(workers(2), already)).values()} == {0}
    assert {int(n[1:]) % 2 for n in placed(zoned(workers(2, topologySpreadConstraints=spread), already)).values()} == {
        1
    }


def test_match_label_keys_count_only_the_pods_of_the_same_revision() -> None:
    """A rolling update: old-revision pods fill n0–n2; the new revision's anti-affinity by hostname
    with ``matchLabelKeys: [rev]`` counts only new-revision pods, so one node each is still free."""
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "w"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "matchLabelKeys": ["rev"],
                }
            ]
        }
    }
    old = [other(f"old{i}", f"n{i}", {"app": "w", "rev": "1"}) for i in range(3)]
    new = [task(f"w-{i}", cpu="1", group="j", labels={"app": "w", "rev": "2"}, affinity=apart) for i in range(3)]
    ssn = run(new, 3, others=old)
    assert sorted(placed(ssn).values()) == ["n0", "n1", "n2"]
    without_keys = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}  # fmt: skip
    blocked = [
        task(f"w-{i}", cpu="1", group="j", labels={"app": "w", "rev": "2"}, affinity=without_keys) for i in range(3)
    ]
    assert placed(run(blocked, 3, others=old)) == {}  # every node holds an app=w pod
