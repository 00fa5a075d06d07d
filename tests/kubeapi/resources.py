"""The kinds the test API server serves, and what differs between them.

A :class:`Resource` is one REST collection: its group/version/plural, whether it lives in
a namespace, whether it has a ``/status`` subresource, whether it is built in (built-in
kinds take strategic merge patches and unconditional updates; custom resources do not), and
whether a DELETE answers with the deleted object (pods, service accounts, custom resources) or a
``Status``. The RBAC kinds are served like any other; with ``KubeAPIServer(authorize=True)`` they
are also what the server authorizes requests by (``rbac.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
"""A Kubernetes object as its JSON: the test server stores and serves exactly this."""


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool
    builtin: bool
    delete_returns_object: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How error messages name the collection, like the real server: ``pods``, ``leases.coordination.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


POD = Resource(
    "", "v1", "pods", "Pod", namespaced=True, status_subresource=True, builtin=True, delete_returns_object=True
)
NODE = Resource("", "v1", "nodes", "Node", namespaced=False, status_subresource=True, builtin=True)
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True, builtin=True)
EVENT = Resource("", "v1", "events", "Event", namespaced=True, status_subresource=False, builtin=True)
LEASE = Resource(
    "coordination.k8s.io", "v1", "leases", "Lease", namespaced=True, status_subresource=False, builtin=True
)
PRIORITY_CLASS = Resource(
    "scheduling.k8s.io",
    "v1",
    "priorityclasses",
    "PriorityClass",
    namespaced=False,
    status_subresource=False,
    builtin=True,
)
POD_GROUP = Resource(
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    status_subresource=True,
    builtin=False,
    delete_returns_object=True,
)
QUEUE = Resource(
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    "Queue",
    namespaced=False,
    status_subresource=True,
    builtin=False,
    delete_returns_object=True,
)
NODE_SHARD = Resource(
    "shard.volcano.sh",
    "v1alpha1",
    "nodeshards",
    "NodeShard",
    namespaced=False,
    status_subresource=True,
    builtin=False,
    delete_returns_object=True,
)

HYPER_NODE = Resource(
    "topology.volcano.sh",
    "v1alpha1",
    "hypernodes",
    "HyperNode",
    namespaced=False,
    status_subresource=True,
    builtin=False,
    delete_returns_object=True,
)

SERVICE_ACCOUNT = Resource(
    "",
    "v1",
    "serviceaccounts",
    "ServiceAccount",
    namespaced=True,
    status_subresource=False,
    builtin=True,
    delete_returns_object=True,
)
RBAC = ("rbac.authorization.k8s.io", "v1")
CLUSTER_ROLE = Resource(*RBAC, "clusterroles", "ClusterRole", namespaced=False, status_subresource=False, builtin=True)
CLUSTER_ROLE_BINDING = Resource(
    *RBAC, "clusterrolebindings", "ClusterRoleBinding", namespaced=False, status_subresource=False, builtin=True
)
ROLE = Resource(*RBAC, "roles", "Role", namespaced=True, status_subresource=False, builtin=True)
ROLE_BINDING = Resource(*RBAC, "rolebindings", "RoleBinding", namespaced=True, status_subresource=False, builtin=True)

RESOURCES: tuple[Resource, ...] = (
    POD,
    NODE,
    EVENT,
    LEASE,
    PRIORITY_CLASS,
    POD_GROUP,
    QUEUE,
    NODE_SHARD,
    HYPER_NODE,
    NAMESPACE,
    SERVICE_ACCOUNT,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    ROLE,
    ROLE_BINDING,
)


def find(resources: tuple[Resource, ...], group: str, version: str, plural: str) -> Resource | None:
    for r in resources:
        if (r.group, r.version, r.plural) == (group, version, plural):
            return r
    return None
