"""JSON merge patch (RFC 7386) and the part of strategic merge patch that caldera's objects use.

Strategic merge patch differs from merge patch only in lists: a list with a patch merge key
is merged item by item on that key (``status.conditions`` on ``type``, containers on
``name``…; ``{"$patch": "delete", <key>: …}`` removes an item, a ``{"$patch": "replace"}``
item replaces the whole list), ``metadata.finalizers`` is merged as a set, and every other
list is replaced. The merge keys are those of the Kubernetes API types, by field path.
"""

from __future__ import annotations

import copy
from typing import Any

from .resources import Obj

MERGE_KEYS: dict[str, str] = {
    "metadata.ownerReferences": "uid",
    "spec.containers": "name",
    "spec.initContainers": "name",
    "spec.ephemeralContainers": "name",
    "spec.containers.env": "name",
    "spec.containers.ports": "containerPort",
    "spec.containers.volumeMounts": "mountPath",
    "spec.initContainers.env": "name",
    "spec.volumes": "name",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "status.conditions": "type",
    "status.addresses": "type",
    "status.podIPs": "ip",
}
SET_LISTS = frozenset({"metadata.finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def strategic_merge_patch(target: Obj, patch: Obj) -> Obj:
    result = _merge_map(target, patch, "")
    assert isinstance(result, dict)
    return result


def _merge_map(target: Any, patch: Obj, path: str) -> Any:
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue  # ordering and retain directives: the order and the keys we keep are good enough for tests
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            result[name] = [x for x in result.get(name) or [] if x not in v]
            continue
        field = f"{path}.{k}" if path else k
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            merged = _merge_map(result.get(k), v, field)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list) and field in MERGE_KEYS:
            result[k] = _merge_keyed(result.get(k), v, MERGE_KEYS[field], field)
        elif isinstance(v, list) and field in SET_LISTS:
            current = list(result.get(k) or [])
            result[k] = current + [x for x in v if x not in current]
        else:
            result[k] = copy.deepcopy(v)
    return result


def _merge_keyed(target: Any, patch: list[Any], key: str, path: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = list(target) if isinstance(target, list) else []
    for item in patch:
        at = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(item, dict) and isinstance(old, dict) and key in item and old.get(key) == item[key]
            ),
            None,
        )
        if isinstance(item, dict) and item.get("$patch") == "delete":
            if at is not None:
                del result[at]
        elif at is None:
            result.append(copy.deepcopy(item))
        else:
            result[at] = _merge_map(result[at], item, path)
    return result
