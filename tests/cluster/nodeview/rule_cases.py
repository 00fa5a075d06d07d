"""Filter cases for inter-pod rules, and the two ways a case is judged: by the batch scheduler's
session and by the agent scheduler's profile.

A :class:`Case` is a row of one of kube-scheduler's Filter tables: nodes (with labels and
taints), the pods already on them, the pod to place, and per node whether the plugin lets it
through (``PASS``) or the reason it gives. kube-scheduler's tables run the plugin alone, so a
node other filters would rule out (node affinity, taints) may still pass there; such nodes are
the case's ``elsewhere``.

:func:`judge` places the pod both ways:

- ``batch``: a :class:`~batch_scheduler.session.Session` whose nodes are the case's, whose other
  schedulers' pods are the existing ones, and whose one pending task (a one-member PodGroup) is
  the pod; the rules are ``Session.pod_rules``, the other filters ``Session.feasible`` free
  resources aside;
- ``agent``: a :class:`~agent_scheduler.pod_context.PodContext` fed the existing pods, the refs it
  hands a worker for a batch of that one pod indexed over the node table (``placed_on``), and the
  agent's profile with the pod rules (``with_pod_rules``), shards aside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pytest

from agent_scheduler.core import CoreConfig, profile, with_pod_rules
from agent_scheduler.pod_context import PodContext, placed_on
from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from cluster.model.core import Node, Pod
from cluster.model.resources import Resources
from cluster.model.sharding import ShardingMode
from cluster.nodeview.plugins import PodRules
from cluster.nodeview.pod_affinity import pod_rules
from cluster.nodeview.profile import Placing
from cluster.nodeview.table import Mask
from cluster.sim.pools import TaintSpec
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import SCHEDULER, columns, conf, podgroup
from tests.builders import node as built_node
from tests.cluster.nodeview.test_pod_affinity import KUBE_NAMESPACES

PASS = ""
RUNNERS = ("batch", "agent")
CONF = conf(["priority", "gang"], ["predicates", "nodeorder"], actions="enqueue, allocate")


def node(name: str, /, *, taints: Sequence[str] = (), **labels: str) -> Node:
    """A node with these labels (besides the hostname label every node has) and NoSchedule taints by key."""
    return built_node(name, labels=dict(labels), taints=[TaintSpec(key=k) for k in taints])


def expr(key: str, op: str, values: Sequence[str] = ()) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def term(
    *expressions: dict[str, Any],
    topology: str = "",
    namespaces: Sequence[str] = (),
    namespace_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A required pod (anti-)affinity term whose label selector ANDs ``expressions``."""
    made: dict[str, Any] = {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology}
    if namespaces:
        made["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        made["namespaceSelector"] = namespace_selector
    return made


def exists(key: str) -> dict[str, Any]:
    """A label selector: the label ``key`` is there (kube's ``MakeLabelSelector().Exists(key)``)."""
    return {"matchExpressions": [expr(key, "Exists")]}


class MakePod:
    """A pod, built a call at a time as kube-scheduler's tables build theirs (``st.MakePod()``);
    namespace ``default`` unless told (kube's tables leave it empty)."""

    def __init__(self) -> None:
        self._meta: dict[str, Any] = {"name": "p", "namespace": "default", "labels": {}}
        self._spec: dict[str, Any] = {"containers": [{"name": "c"}]}
        self._terms: dict[str, list[dict[str, Any]]] = {"podAffinity": [], "podAntiAffinity": []}
        self._spread: list[dict[str, Any]] = []
        self.node = ""  # where an existing pod runs

    def namespace(self, ns: str) -> MakePod:
        self._meta["namespace"] = ns
        return self

    def label(self, key: str, value: str = "") -> MakePod:
        self._meta["labels"][key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> MakePod:
        self._meta["labels"].update(labels)
        return self

    def on(self, node_name: str) -> MakePod:
        self.node = node_name
        return self

    def terminating(self) -> MakePod:
        self._meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return self

    def affinity(self, *terms: dict[str, Any]) -> MakePod:
        self._terms["podAffinity"].extend(terms)
        return self

    def anti(self, *terms: dict[str, Any]) -> MakePod:
        self._terms["podAntiAffinity"].extend(terms)
        return self

    def affinity_in(self, key: str, topology: str, values: Sequence[str]) -> MakePod:
        return self.affinity(term(expr(key, "In", values), topology=topology))

    def affinity_not_in(self, key: str, topology: str, values: Sequence[str]) -> MakePod:
        return self.affinity(term(expr(key, "NotIn", values), topology=topology))

    def affinity_exists(self, key: str, topology: str) -> MakePod:
        return self.affinity(term(expr(key, "Exists"), topology=topology))

    def anti_in(self, key: str, topology: str, values: Sequence[str]) -> MakePod:
        return self.anti(term(expr(key, "In", values), topology=topology))

    def anti_not_in(self, key: str, topology: str, values: Sequence[str]) -> MakePod:
        return self.anti(term(expr(key, "NotIn", values), topology=topology))

    def anti_exists(self, key: str, topology: str) -> MakePod:
        return self.anti(term(expr(key, "Exists"), topology=topology))

    def spread(
        self,
        max_skew: int,
        key: str,
        selector: dict[str, Any] | None,
        *,
        when: str = "DoNotSchedule",
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
    ) -> MakePod:
        c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
        if selector is not None:
            c["labelSelector"] = selector
        if min_domains is not None:
            c["minDomains"] = min_domains
        if node_affinity_policy is not None:
            c["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy is not None:
            c["nodeTaintsPolicy"] = node_taints_policy
        self._spread.append(c)
        return self

    def node_selector(self, labels: Mapping[str, str]) -> MakePod:
        self._spec["nodeSelector"] = dict(labels)
        return self

    def node_affinity(self, key: str, op: str, values: Sequence[str]) -> MakePod:
        required = {"nodeSelectorTerms": [{"matchExpressions": [expr(key, op, values)]}]}
        self._spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
        return self

    def obj(self, uid: str = "p") -> Pod:
        spec = dict(self._spec)
        affinity = dict(spec.get("affinity", {}))
        for kind, terms in self._terms.items():
            if terms:
                affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        if affinity:
            spec["affinity"] = affinity
        if self._spread:
            spec["topologySpreadConstraints"] = self._spread
        spec["schedulerName"] = SCHEDULER
        meta = {**self._meta, "name": uid, "uid": uid}
        return msgspec.convert({"metadata": meta, "spec": spec}, Pod)


def pod() -> MakePod:
    return MakePod()


@dataclass(frozen=True)
class Case:
    """``want``: per node, PASS or the reason kube-scheduler's plugin gives, in caldera's words;
    ``elsewhere``: the nodes other filters rule out for the pod; ``gap``: why caldera cannot
    express the case (it is skipped)."""

    name: str
    pod: MakePod
    nodes: Sequence[Node]
    want: Mapping[str, str]
    existing: Sequence[MakePod] = ()
    elsewhere: frozenset[str] = field(default_factory=frozenset)
    gap: str = ""


def params(cases: Sequence[Case]) -> list[Any]:
    """The cases as pytest parameters: kube-scheduler's name as the id, a gap as a skip."""
    return [pytest.param(c, id=c.name, marks=[pytest.mark.skip(reason=c.gap)] if c.gap else []) for c in cases]


@dataclass(frozen=True)
class Judged:
    """How a scheduler judged a case: the nodes its other filters let through (``base``), those the
    rules let through on their own, those it may place the pod on, and the rules' reasons counted
    over ``base`` (as the message of a pod that fits nowhere counts them)."""

    names: Sequence[str]
    base: Mask
    rules: Mask
    placeable: Mask
    failed: Mapping[str, int]


def _existing(case: Case) -> list[tuple[str, Pod, str]]:
    return [(f"existing-{i}", p.obj(f"existing-{i}"), p.node) for i, p in enumerate(case.existing)]


def judge_batch(case: Case) -> Judged:
    incoming = case.pod.obj("incoming")
    ns = incoming.metadata.namespace
    task_record = PodRecord(
        uid="incoming",
        pod=incoming,
        request=incoming.request(),
        scheduler=SCHEDULER,
        group=f"{ns}/j",
        priority=0,
        node="",
        accounted="",
        phase="Pending",
        version=1,
    )
    others = [
        PodRecord(
            uid=uid,
            pod=p,
            request=p.request(),
            scheduler="default-scheduler",
            group="",
            priority=0,
            node=on,
            accounted=on,
            phase="Running",
            version=1,
        )
        for uid, p, on in _existing(case)
    ]
    inp = SessionInput(
        columns=columns(case.nodes, others),
        pods=[task_record],
        podgroups={f"{ns}/j": podgroup("j", namespace=ns, phase="Inqueue")},
        queues={},
        others=others,
        namespaces=KUBE_NAMESPACES,
    )
    ssn = Session(CONF, SessionConfig(scheduler=SCHEDULER), inp)
    task = ssn.tasks["incoming"]
    base = ssn.feasible(task, ignore_resources=True).mask
    verdict = ssn.pod_rules(task)
    rules = np.ones(ssn.n, dtype=np.bool_) if verdict is None else verdict.mask
    failed = {} if verdict is None else pod_rules(ssn.columns, task.pod, ssn.placed, start=base).failed
    return Judged(ssn.columns.names[: ssn.n], base, rules, base & rules, failed)


def judge_agent(case: Case) -> Judged:
    incoming = case.pod.obj("incoming")
    table = columns(case.nodes)
    context = PodContext()
    for name, labels in KUBE_NAMESPACES.items():
        context.namespace_seen(name, labels)
    for uid, p, on in _existing(case):
        context.bound(uid, p, on)
    refs = context.for_batch([incoming])
    placed = placed_on(table, refs, context.namespace_labels([incoming], refs))  # what the loop sends
    chosen = profile(CoreConfig(sharding=ShardingMode.NONE))
    placing = Placing(incoming, Resources())
    base = chosen.feasible(table, placing).mask
    placeable = with_pod_rules(chosen, placed).feasible(table, placing).mask
    rules = PodRules(placed)
    return Judged(
        table.names[: len(table)],
        base,
        rules.filter(table, placing, None).mask,
        placeable,
        rules.filter(table, placing, base).failed,
    )


def judge(runner: str, case: Case) -> Judged:
    return judge_batch(case) if runner == "batch" else judge_agent(case)


def check(runner: str, case: Case) -> None:
    """The rules judge every node as kube-scheduler's plugin does; the pod may go where they and
    the other filters let it; a pod that fits nowhere gives kube-scheduler's reasons."""
    judged = judge(runner, case)
    names = list(judged.names)
    assert names == [n.name for n in case.nodes]
    rules = {n: PASS if bool(judged.rules[i]) else "fails" for i, n in enumerate(names)}
    kube = {n: PASS if r == PASS else "fails" for n, r in case.want.items()}
    assert rules == kube, f"the rules: {rules}, kube-scheduler's plugin: {kube}"
    ruled_out = {n for i, n in enumerate(names) if not judged.base[i]}
    assert ruled_out == case.elsewhere, f"other filters rule out {ruled_out}"
    placeable = {n for i, n in enumerate(names) if judged.placeable[i]}
    assert placeable == {n for n, r in case.want.items() if r == PASS} - case.elsewhere, placeable
    reasons: dict[str, int] = {}
    for n, r in case.want.items():
        if r != PASS and n not in case.elsewhere:
            reasons[r] = reasons.get(r, 0) + 1
    assert dict(judged.failed) == reasons, f"reasons {dict(judged.failed)}, want {reasons}"
