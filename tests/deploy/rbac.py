"""What each caldera process asks of the API server, read from its code, and deploy/rbac loaded into a test
API server as `kubectl apply -f deploy/rbac/` would.

:data:`NEEDS` is the one list of what each ServiceAccount needs, each entry naming the code that
makes the call: the least-privilege test (test_rbac.py) checks that deploy/rbac grants exactly
this, and the end-to-end test under RBAC (tests/caldera/test_kube_rbac_e2e.py) that the real
processes ask for nothing else and use each need but the ``rare`` ones (which test_rbac.py drives).
The processes read the cluster from the store (the mirror's); only the mirror lists and watches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.deploy.manifests import DEPLOY, NAMESPACE, Obj, load
from tests.kubeapi.attributes import Attributes
from tests.kubeapi.clients import Calls
from tests.kubeapi.resources import RESOURCES

RBAC_FILES = tuple(sorted((DEPLOY / "rbac").glob("*.yaml")))


@dataclass(frozen=True)
class Need:
    """Verbs on one resource (``pods`` or a subresource, ``pods/binding``) that a process's code calls."""

    group: str
    resource: str
    verbs: frozenset[str]
    why: str  # the code that makes the call
    namespace: str | None = None  # only in this namespace; None: in every one, and cluster-wide
    names: frozenset[str] | None = None  # only these objects; None: any
    rare: str = ""  # when the call is made, if only on a path the end-to-end run does not take (test_rbac.py does)

    def allows(self, a: Attributes) -> bool:
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return (
            a.resource_request
            and a.verb in self.verbs
            and (a.api_group, combined) == (self.group, self.resource)
            and (self.namespace is None or a.namespace == self.namespace)
            and (self.names is None or a.name in self.names)
        )


def need(group: str, resource: str, verbs: str, why: str, **kw: Any) -> Need:
    return Need(group, resource, frozenset(verbs.split()), why, **kw)


def leases(name: str) -> tuple[Need, ...]:
    """--leader-elect (cluster/kube/lease.py KubeLease): its own Lease, named after the process, in caldera-system."""
    return (
        need("coordination.k8s.io", "leases", "create", "KubeLease._try: create_namespaced_lease", namespace=NAMESPACE),
        need(
            "coordination.k8s.io",
            "leases",
            "get update",
            "KubeLease._try/_release: read_namespaced_lease, replace_namespaced_lease",
            namespace=NAMESPACE,
            names=frozenset({name}),
        ),
    )


VOLCANO, SHARD, TOPOLOGY = "scheduling.volcano.sh", "shard.volcano.sh", "topology.volcano.sh"
REFLECTOR = "cluster/kube/reflector.py kinds(): Reflector._list and ._watch"
WRITEBACK = "cluster/kube/writeback.py WriteBack"
BIND = "cluster/kube/bind.py KubeTarget"
REPORT = "cluster/kube/shards.py ShardStatusReporter.report: patch_cluster_custom_object_status"
ON_409 = "a binding answered 409: is the pod bound where this binding put it (an earlier try's)?"
EVICTING = "preempt or reclaim evicts a pod"

NEEDS: dict[str, tuple[Need, ...]] = {
    "caldera-mirror": (
        need("", "nodes", "list watch", f"{REFLECTOR}: list_node"),
        need("", "pods", "list watch", f"{REFLECTOR}: list_pod_for_all_namespaces"),
        need("", "namespaces", "list watch", f"{REFLECTOR}: list_namespace"),
        need(VOLCANO, "podgroups", "list watch", f"{REFLECTOR}: list_cluster_custom_object"),
        need(VOLCANO, "queues", "list watch", f"{REFLECTOR}: list_cluster_custom_object"),
        need("scheduling.k8s.io", "priorityclasses", "list watch", f"{REFLECTOR}: list_priority_class"),
        need(TOPOLOGY, "hypernodes", "list watch", f"{REFLECTOR}: list_cluster_custom_object"),
        need(VOLCANO, "podgroups/status", "patch", f"{WRITEBACK}._status: patch_namespaced_custom_object_status"),
        need(VOLCANO, "queues/status", "patch", f"{WRITEBACK}._status: patch_cluster_custom_object_status"),
        need(TOPOLOGY, "hypernodes/status", "patch", f"{WRITEBACK}._status: patch_cluster_custom_object_status"),
        need("", "events", "create", f"{WRITEBACK}._flush: POST events"),
        *leases("mirror"),
    ),
    "caldera-sharding": (
        need(
            SHARD,
            "nodeshards",
            "get create update",
            "cluster/kube/shards.py NodeShardPublisher._write: get_, create_, replace_cluster_custom_object",
        ),
        *leases("sharding"),
    ),
    "caldera-batch-scheduler": (
        need("", "pods/binding", "create", f"{BIND}.bind: create_namespaced_pod_binding"),
        need("", "pods", "patch", f"{BIND}.bind (a shared GPU's card annotations), .lift_gates: patch_namespaced_pod"),
        need("", "pods", "get", f"{BIND}._bound_to: read_namespaced_pod", rare=ON_409),
        need("", "pods/status", "patch", f"{BIND}.evict: patch_namespaced_pod_status", rare=EVICTING),
        need("", "pods", "delete", f"{BIND}.evict: delete_namespaced_pod", rare=EVICTING),
        need("", "events", "create", f"{BIND}.evict: create_namespaced_event (Preempted)", rare=EVICTING),
        need(SHARD, "nodeshards/status", "patch", REPORT),
        *leases("batch-scheduler"),
    ),
    "caldera-agent-scheduler": (
        need("", "pods/binding", "create", f"{BIND}.bind: create_namespaced_pod_binding"),
        need("", "pods", "patch", f"{BIND}.bind: patch_namespaced_pod (a shared GPU's card annotations)"),
        need("", "pods", "get", f"{BIND}._bound_to: read_namespaced_pod", rare=ON_409),
        need(SHARD, "nodeshards/status", "patch", REPORT),
        *leases("agent-scheduler"),
    ),
}


def rbac_objects(paths: tuple[Path, ...] = RBAC_FILES) -> list[Obj]:
    return [d for p in paths for d in load(p)]


def apply(api: client.ApiClient, objects: list[Obj]) -> None:
    """Create each object through the API with its kind's own call, as `kubectl apply` does on a new cluster."""
    kinds = {(r.api_version, r.kind): r for r in RESOURCES}
    for obj in objects:
        resource = kinds[obj["apiVersion"], obj["kind"]]
        Calls(api, resource, obj["metadata"].get("namespace", "")).create(obj)


def token(api: client.ApiClient, name: str, namespace: str = NAMESPACE) -> str:
    """A token of the ServiceAccount, from the TokenRequest API (what `kubectl create token` does)."""
    core: Any = client.CoreV1Api(api)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    value = core.create_namespaced_service_account_token(name, namespace, request).status.token
    assert isinstance(value, str) and value
    return value
