"""What the server does to an object before it is stored: the real API server's rules, for our kinds.

Create: the server sets uid, creationTimestamp and generation; a pod starts ``Pending`` whatever
status it was sent with, and a custom resource with a status subresource starts without one.
Update (PUT or PATCH): the URL names the object; a stale ``metadata.resourceVersion`` is a 409,
a missing one is an unconditional update for built-in kinds and a 422 for custom resources; a
``uid`` that is not the object's is a 409; on a kind with a status subresource, the main
resource ignores status and ``/status`` changes nothing but status; a pod's spec is immutable
but for tolerations, activeDeadlineSeconds and schedulingGates (so ``spec.nodeName`` only ever
changes through ``pods/binding``).
"""

from __future__ import annotations

import copy
import random
from datetime import datetime
from typing import Any

from . import errors
from .objects import meta
from .resources import POD, Obj, Resource

POD_SPEC_MUTABLE = frozenset({"tolerations", "activeDeadlineSeconds", "schedulingGates"})
_GENERATED = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generateName's suffix
_SERVER_SET = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp")


def drop_nulls(value: Any) -> Any:
    """The stored form: a ``null`` field is an absent one (the real server decodes into typed structs)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _check_kind(resource: Resource, body: Any) -> Obj:
    if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
        raise errors.bad_request(f"the body must be a {resource.kind} object")
    if body.get("kind") not in (None, "", resource.kind):
        raise errors.bad_request(
            f"the kind in the data ({body['kind']}) does not match the expected kind ({resource.kind})"
        )
    if body.get("apiVersion") not in (None, "", resource.api_version):
        raise errors.bad_request(
            f"the API version in the data ({body['apiVersion']}) does not match the expected "
            f"API version ({resource.api_version})"
        )
    obj: Obj = {k: drop_nulls(v) for k, v in body.items() if v is not None}
    obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
    meta(obj)
    return obj


def _check_namespace(resource: Resource, obj: Obj, namespace: str | None) -> None:
    m = meta(obj)
    if not resource.namespaced:
        m.pop("namespace", None)
    elif m.setdefault("namespace", namespace) != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def prepare_create(resource: Resource, body: Any, namespace: str | None, rng: random.Random) -> Obj:
    obj = _check_kind(resource, body)
    _check_namespace(resource, obj, namespace)
    m = meta(obj)
    if m.get("resourceVersion"):
        raise errors.bad_request("resourceVersion should not be set on objects to be created")
    if not m.get("name"):
        if not m.get("generateName"):
            raise errors.invalid(resource, "", "metadata.name", "Required value: name or generateName is required")
        m["name"] = m["generateName"] + "".join(rng.choice(_GENERATED) for _ in range(5))
    for field in _SERVER_SET:
        m.pop(field, None)
    m["generation"] = 1
    if resource == POD:
        obj["status"] = {"phase": "Pending"}
    elif resource.status_subresource and not resource.builtin:
        obj.pop("status", None)
    return obj


def _content(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def prepare_update(resource: Resource, old: Obj, body: Any, *, status: bool) -> Obj:
    """The object to store for a PUT or PATCH (already applied to ``old``) of ``old``'s URL."""
    new = _check_kind(resource, body)
    m, old_m = meta(new), meta(old)
    name = str(old_m["name"])
    if m.get("name") != name:
        raise errors.bad_request(
            f"the name of the object ({m.get('name')}) does not match the name on the URL ({name})"
        )
    _check_namespace(resource, new, old_m.get("namespace"))
    if m.get("uid") not in (None, "", old_m["uid"]):
        raise errors.conflict(
            resource, name, f"Precondition failed: UID in precondition: {m['uid']}, UID in object meta: {old_m['uid']}"
        )
    if not m.get("resourceVersion"):
        if not resource.builtin:
            raise errors.invalid(
                resource, name, "metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update"
            )
    elif m["resourceVersion"] != old_m["resourceVersion"]:
        raise errors.stale(resource, name)
    if status:
        result = copy.deepcopy(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        return result
    if resource.status_subresource:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    if resource == POD:
        _check_pod_spec(old, new)
    for field in _SERVER_SET:
        if field in old_m:
            m[field] = old_m[field]
        else:
            m.pop(field, None)
    if _content(new) != _content(old):
        m["generation"] = int(old_m.get("generation", 0)) + 1
    return new


def _check_pod_spec(old: Obj, new: Obj) -> None:
    def fixed(pod: Obj) -> Obj:
        return {k: v for k, v in (pod.get("spec") or {}).items() if k not in POD_SPEC_MUTABLE}

    if fixed(old) != fixed(new):
        changed = sorted(k for k in fixed(old).keys() | fixed(new).keys() if fixed(old).get(k) != fixed(new).get(k))
        raise errors.invalid(
            POD,
            str(meta(old)["name"]),
            "spec",
            f"Forbidden: pod updates may not change fields other than "
            f"`spec.tolerations` (only additions to existing tolerations), "
            f"`spec.activeDeadlineSeconds`, `spec.schedulingGates` (changed: "
            f"{', '.join('spec.' + k for k in changed)})",
        )


def same(old: Obj, new: Obj) -> bool:
    """A write that changes nothing: the real server stores nothing, so the version stays."""

    def strip(o: Obj) -> Obj:
        return o | {"metadata": {k: v for k, v in meta(o).items() if k not in ("resourceVersion", "managedFields")}}

    return strip(old) == strip(new)


def bind(pod: Obj, binding: Any, name: str, now: datetime) -> Obj:
    """The pod after a ``pods/binding`` POST: ``spec.nodeName`` set, PodScheduled true, the binding's
    annotations added. 409 if the pod is bound already or a uid/resourceVersion precondition fails."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the body must be a Binding object")
    bm = binding.get("metadata") or {}
    if bm.get("name") not in (None, "", name):
        raise errors.bad_request(f"name in URL does not match name in Binding object ({bm.get('name')} != {name})")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            POD, name, "target.kind", f"Invalid value: {target.get('kind')!r}: must be empty or 'Node'"
        )
    if not target.get("name"):
        raise errors.invalid(POD, name, "target.name", "Required value")
    m = meta(pod)
    if bm.get("uid") and bm["uid"] != m["uid"]:
        raise errors.conflict(
            POD,
            name,
            f"Precondition failed: UID in precondition: {bm['uid']}, UID in object meta: {m['uid']}",
            on="pods/binding",
        )
    if bm.get("resourceVersion") and bm["resourceVersion"] != m["resourceVersion"]:
        raise errors.stale(POD, name)
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        raise errors.conflict(POD, name, f'pod {name} is already assigned to node "{node}"', on="pods/binding")
    pod = copy.deepcopy(pod)
    pod.setdefault("spec", {})["nodeName"] = target["name"]
    if bm.get("annotations"):
        m = meta(pod)
        m["annotations"] = (m.get("annotations") or {}) | bm["annotations"]
    conditions = [c for c in pod.setdefault("status", {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    pod["status"]["conditions"] = conditions
    return pod
