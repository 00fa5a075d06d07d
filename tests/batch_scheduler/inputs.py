"""Fluent builders for batch-scheduler tests: pods, PodGroups, Queues, confs, and a Session built from them.

A test names nodes with :func:`tests.builders.node` and pods with :func:`task`; bound
pods (``node=...``) are counted in their node's allocated figures, as the store does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import yaml

from batch_scheduler.conf import SchedulerConf, load_conf, parse_conf
from batch_scheduler.registry import default_registry
from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig, SessionInput
from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.devices import pod_cards
from cluster.model.resources import Resources
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.nodeview.table import NodeTable
from cluster.store.records import PodRecord
from tests.builders import node_table

SCHEDULER = "volcano"
REGISTRY = default_registry()


def parse(text: str) -> SchedulerConf:
    """A conf's text, loaded against caldera's registry."""
    return parse_conf(text, REGISTRY)


def load(path: str | None) -> SchedulerConf:
    return load_conf(path, REGISTRY)


def task(
    name: str,
    *,
    cpu: str | int = "1",
    memory: str | int = "1Gi",
    gpu: int = 0,
    group: str = "",
    node: str = "",
    phase: str = "",
    namespace: str = "default",
    priority: int | None = None,
    priority_class: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    **spec: Any,
) -> PodRecord:
    """A pod of this scheduler as the store holds it; ``spec`` takes extra camelCase spec fields
    (``nodeSelector``, ``tolerations``, ``affinity``)."""
    requests: dict[str, str] = {"cpu": str(cpu), "memory": str(memory)}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    body: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "nodeName": node,
        "priorityClassName": priority_class,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
        **spec,
    }
    if priority is not None:
        body["priority"] = priority
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if created is not None:
        meta["creationTimestamp"] = created
    phase = phase or ("Running" if node else "Pending")
    pod = msgspec.convert({"metadata": meta, "spec": body, "status": {"phase": phase}}, Pod)
    return record(pod, group=f"{namespace}/{group}" if group else "")


def record(pod: Pod, *, group: str = "") -> PodRecord:
    """A pod as the store holds it (a bound one holding the GPU cards its annotations name)."""
    phase = pod.phase or ("Running" if pod.node_name else "Pending")
    node = pod.node_name
    return PodRecord(
        uid=pod.uid,
        pod=pod,
        cards=pod_cards(pod) if node else Resources(),
        request=pod.request(),
        scheduler=SCHEDULER,
        group=group,
        priority=pod.priority,
        node=node,
        accounted=node,
        phase=phase,
        version=1,
    )


def podgroup(
    name: str,
    *,
    min_member: int = 1,
    queue: str = "default",
    namespace: str = "default",
    min_resources: Mapping[str, str | int] | None = None,
    min_task_member: Mapping[str, int] | None = None,
    priority_class: str = "",
    phase: str = "Pending",
    created: str | None = None,
    network_topology: Mapping[str, Any] | None = None,
    sub_group_policy: Sequence[Mapping[str, Any]] = (),
) -> PodGroup:
    spec: dict[str, Any] = {
        "minMember": min_member,
        "queue": queue,
        "priorityClassName": priority_class,
        "minTaskMember": dict(min_task_member or {}),
    }
    if network_topology is not None:
        spec["networkTopology"] = dict(network_topology)
    if sub_group_policy:
        spec["subGroupPolicy"] = [dict(p) for p in sub_group_policy]
    if min_resources is not None:
        spec["minResources"] = {k: str(v) for k, v in min_resources.items()}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created is not None:
        meta["creationTimestamp"] = created
    return msgspec.convert({"metadata": meta, "spec": spec, "status": {"phase": phase}}, PodGroup)


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, str | int] | None = None,
    guarantee: Mapping[str, str | int] | None = None,
    deserved: Mapping[str, str | int] | None = None,
    parent: str = "",
    reclaimable: bool = True,
    state: str = "Open",
) -> Queue:
    def quantities(values: Mapping[str, str | int] | None) -> dict[str, str]:
        return {k: str(v) for k, v in (values or {}).items()}

    return msgspec.convert(
        {
            "metadata": {"name": name},
            "spec": {
                "weight": weight,
                "capability": quantities(capability),
                "deserved": quantities(deserved),
                "guarantee": {"resource": quantities(guarantee)},
                "parent": parent,
                "reclaimable": reclaimable,
            },
            "status": {"state": state},
        },
        Queue,
    )


def priority_class(name: str, value: int, *, global_default: bool = False) -> PriorityClass:
    return msgspec.convert({"metadata": {"name": name}, "value": value, "globalDefault": global_default}, PriorityClass)


def columns(
    nodes: Iterable[Node], pods: Iterable[PodRecord] = (), used: Mapping[str, Mapping[str, int]] | None = None
) -> NodeTable:
    """Columns over ``nodes``; a node's allocated figure is its bound pods' requests plus ``used[node]``
    (what other schedulers placed there)."""
    allocated: dict[str, Resources] = {name: Resources(extra) for name, extra in (used or {}).items()}
    for p in pods:
        if p.node and p.phase not in ("Succeeded", "Failed"):
            allocated[p.node] = allocated.get(p.node, Resources()) + p.request + p.cards
    return node_table(list(nodes), allocated)


def conf(*tiers: Sequence[str | Mapping[str, Any]], actions: str = "enqueue, allocate, backfill") -> SchedulerConf:
    """A conf from tiers of plugin names or plugin entries (``{"name": "gang", "enablePreemptable": False}``)."""
    raw = {
        "actions": actions,
        "tiers": [{"plugins": [{"name": p} if isinstance(p, str) else dict(p) for p in tier]} for tier in tiers],
    }
    return parse(yaml.safe_dump(raw))


def session(
    scheduler_conf: SchedulerConf,
    nodes: Iterable[Node],
    pods: Sequence[PodRecord] = (),
    *,
    podgroups: Iterable[PodGroup] = (),
    queues: Iterable[Queue] = (),
    priority_classes: Iterable[PriorityClass] = (),
    used: Mapping[str, Mapping[str, int]] | None = None,
    phases: Mapping[str, str] | None = None,
    default_queue: str = "default",
    hypernodes: Iterable[HyperNode] = (),
    hypernode_labels: tuple[str, ...] = (),
) -> Session:
    inp = SessionInput(
        columns=columns(nodes, pods, used),
        pods=list(pods),
        podgroups={f"{pg.namespace}/{pg.name}": pg for pg in podgroups},
        queues={q.name: q for q in queues},
        priority_classes={pc.name: pc for pc in priority_classes},
        phases=dict(phases or {}),
        hypernodes={hn.name: hn for hn in hypernodes},
    )
    config = SessionConfig(scheduler=SCHEDULER, default_queue=default_queue, hypernode_labels=hypernode_labels)
    return Session(scheduler_conf, config, inp)
