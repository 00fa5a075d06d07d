"""Over-commits as the API server sees them: the pods bound to each node against its allocatable.

The store's audit (:mod:`cluster.store.audit`) checks caldera's own books; this one checks what
the cluster actually holds, whoever bound the pods: for every node, the requests of the pods
bound to it and not finished (Kubernetes' effective requests, plus one pod each) must fit its
allocatable, resource by resource — what the kubelet would refuse to admit. A pod bound to a
node the API server does not have is named too (its room is held nowhere).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import msgspec
from kubernetes import client as k8s

from cluster.model.core import Node, Pod
from cluster.model.decode import decode_json
from cluster.model.devices import node_allocatable
from cluster.model.resources import Resources
from cluster.store.records import TERMINAL_PHASES


class _Pods(msgspec.Struct):
    items: list[Pod] | None = None


class _Nodes(msgspec.Struct):
    items: list[Node] | None = None


def overcommits(nodes: Iterable[Node], pods: Iterable[Pod]) -> list[str]:
    """Every node whose bound, live pods ask more than it has (one line per node and resource),
    and every live pod bound to a node that does not exist; empty when the cluster is sound."""
    allocatable = {n.name: node_allocatable(n) for n in nodes}
    used: dict[str, Resources] = defaultdict(Resources)
    problems: list[str] = []
    for pod in pods:
        if not pod.node_name or pod.phase in TERMINAL_PHASES:
            continue
        if pod.node_name not in allocatable:
            problems.append(f"pod {pod.namespace}/{pod.name}: bound to {pod.node_name}, which does not exist")
            continue
        used[pod.node_name] += pod.request()
    for name in sorted(used):
        have = allocatable[name]
        for resource, amount in used[name].items():
            if amount > have.get(resource, 0):
                problems.append(
                    f"node {name}: {resource} requested by its pods {amount} > allocatable {have.get(resource, 0)}"
                )
    return problems


def _list(call: Any, type_: type[Any]) -> Any:
    response = call(_preload_content=False, _request_timeout=(5, 60))
    try:
        return decode_json(response.data, type_)
    finally:
        response.release_conn()


def api_audit(api: k8s.ApiClient) -> list[str]:
    """:func:`overcommits` over what the API server holds now (one listing of nodes, one of pods)."""
    core = k8s.CoreV1Api(api)
    nodes = _list(core.list_node, _Nodes).items or []
    pods = _list(core.list_pod_for_all_namespaces, _Pods).items or []
    return overcommits(nodes, pods)
