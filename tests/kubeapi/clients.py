"""The official client's calls for each kind, JSON in and JSON out, and a sample object of each kind.

The tests drive every kind the same way through this: the typed calls for built-in kinds
(``CoreV1Api.create_namespaced_pod`` with a ``V1Pod``…), the ``CustomObjectsApi`` calls for
custom resources — the calls caldera makes, not raw HTTP.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from .resources import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    EVENT,
    LEASE,
    NODE,
    NODE_SHARD,
    POD,
    POD_GROUP,
    PRIORITY_CLASS,
    QUEUE,
    ROLE,
    ROLE_BINDING,
    SERVICE_ACCOUNT,
    Obj,
    Resource,
)
from .resources import NAMESPACE as NAMESPACE_RESOURCE

NAMESPACE = "default"
_TYPED: dict[Resource, tuple[type[Any], str, str]] = {  # the API class, the calls' noun, the model
    POD: (client.CoreV1Api, "pod", "V1Pod"),
    NODE: (client.CoreV1Api, "node", "V1Node"),
    EVENT: (client.CoreV1Api, "event", "CoreV1Event"),
    LEASE: (client.CoordinationV1Api, "lease", "V1Lease"),
    PRIORITY_CLASS: (client.SchedulingV1Api, "priority_class", "V1PriorityClass"),
    NAMESPACE_RESOURCE: (client.CoreV1Api, "namespace", "V1Namespace"),
    SERVICE_ACCOUNT: (client.CoreV1Api, "service_account", "V1ServiceAccount"),
    CLUSTER_ROLE: (client.RbacAuthorizationV1Api, "cluster_role", "V1ClusterRole"),
    CLUSTER_ROLE_BINDING: (client.RbacAuthorizationV1Api, "cluster_role_binding", "V1ClusterRoleBinding"),
    ROLE: (client.RbacAuthorizationV1Api, "role", "V1Role"),
    ROLE_BINDING: (client.RbacAuthorizationV1Api, "role_binding", "V1RoleBinding"),
}


def pod(
    name: str,
    *,
    namespace: str = NAMESPACE,
    labels: dict[str, str] | None = None,
    node: str | None = None,
    scheduler: str = "caldera",
) -> Obj:
    spec: Obj = {"schedulerName": scheduler, "containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def sample(resource: Resource, name: str, labels: dict[str, str] | None = None) -> Obj:
    """A valid object of the kind."""
    metadata: Obj = {"name": name, "labels": labels or {}}
    if resource.namespaced:
        metadata["namespace"] = NAMESPACE
    body: Obj = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata}
    if resource == POD:
        return pod(name, labels=labels)
    if resource == NODE:
        body["spec"] = {"unschedulable": False}
        body["status"] = {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "8", "memory": "32Gi"}}
    elif resource == EVENT:
        body |= {
            "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": "p"},
            "reason": "Scheduled",
            "message": "bound",
            "type": "Normal",
        }
    elif resource == LEASE:
        body["spec"] = {"holderIdentity": "nobody", "leaseDurationSeconds": 15}
    elif resource == PRIORITY_CLASS:
        body["value"] = 1000
    elif resource == POD_GROUP:
        body["spec"] = {"minMember": 2, "queue": "default"}
    elif resource == QUEUE:
        body["spec"] = {"weight": 1}
    elif resource == NODE_SHARD:
        body["spec"] = {"nodesDesired": ["n1"]}
    elif resource in (CLUSTER_ROLE, ROLE):
        body["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    elif resource in (CLUSTER_ROLE_BINDING, ROLE_BINDING):
        body["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"}
        body["subjects"] = [{"kind": "ServiceAccount", "name": "sa", "namespace": NAMESPACE}]
    return body


class Calls:
    """create/get/list/replace/patch/delete (and the /status ones) of one kind, through the official client."""

    def __init__(self, api: client.ApiClient, resource: Resource, namespace: str = NAMESPACE) -> None:
        self.api = api
        self.resource = resource
        self.custom = resource not in _TYPED
        if self.custom:
            self._api: Any = client.CustomObjectsApi(api)
            self._noun = ("namespaced_" if resource.namespaced else "cluster_") + "custom_object"
            self._where: tuple[str, ...] = (
                (resource.group, resource.version) + ((namespace,) if resource.namespaced else ()) + (resource.plural,)
            )
        else:
            cls, noun, self._model = _TYPED[resource]
            self._api = cls(api)
            self._noun = ("namespaced_" if resource.namespaced else "") + noun
            self._where = (namespace,) if resource.namespaced else ()

    def json(self, value: Any) -> Obj:
        sanitize: Any = self.api.sanitize_for_serialization  # not annotated in the client
        out = sanitize(value)
        assert isinstance(out, dict)
        return out

    def _body(self, obj: Obj) -> Any:
        if self.custom:
            return obj
        model = getattr(client, self._model).from_dict(obj)
        assert model is not None
        return model

    def _call(self, verb: str, *args: Any, status: bool = False, **kwargs: Any) -> Obj:
        if self.custom:
            method = getattr(self._api, f"{'get' if verb == 'read' else verb}_{self._noun}{'_status' * status}")
            return self.json(method(*self._where, *args, **kwargs))
        method = getattr(self._api, f"{verb}_{self._noun}{'_status' * status}")
        # the typed calls take (name, namespace, body): the namespace after the name
        return self.json(method(*args[:1], *self._where, *args[1:], **kwargs))

    def create(self, obj: Obj) -> Obj:
        method = getattr(self._api, f"create_{self._noun}")
        return self.json(method(*self._where, self._body(obj)))

    def get(self, name: str, *, status: bool = False) -> Obj:
        return self._call("read", name, status=status)

    def list(self, **kwargs: Any) -> Obj:
        return self.json(getattr(self._api, f"list_{self._noun}")(*self._where, **kwargs))

    def replace(self, name: str, obj: Obj, *, status: bool = False) -> Obj:
        return self._call("replace", name, self._body(obj), status=status)

    def patch(self, name: str, patch: Obj, *, status: bool = False, content_type: str | None = None) -> Obj:
        kwargs: dict[str, Any] = {"_content_type": content_type} if content_type else {}
        return self._call("patch", name, patch, status=status, **kwargs)

    def delete(self, name: str) -> Obj:
        return self._call("delete", name)


def close(api: client.ApiClient | Any) -> None:
    """``ApiClient.close`` (not annotated in the client): its thread pool and connections."""
    closing: Any = api.close
    closing()
