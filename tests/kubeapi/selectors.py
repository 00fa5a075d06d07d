"""Label and field selectors, parsed from the query string into predicates on objects.

Label selectors: ``a=b``, ``a==b``, ``a!=b`` (true when ``a`` is absent), ``a``, ``!a``,
``a in (x,y)``, ``a notin (x,y)`` (true when absent), ANDed with commas. Field selectors:
``field=value``, ``==``, ``!=`` on the fields the real server indexes for each kind; a missing
field reads as ``""`` (so ``spec.nodeName=`` selects unbound pods); another field is a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import errors
from .resources import EVENT, NODE, POD, Obj, Resource

Predicate = Callable[[Obj], bool]

_KEY = r"[A-Za-z0-9][A-Za-z0-9._/-]*"
_VALUE = r"[A-Za-z0-9._-]*"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_NOT_EXISTS = re.compile(rf"^!\s*({_KEY})$")
_COMPARE = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS = re.compile(rf"^({_KEY})$")

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_FIELDS: dict[Resource, tuple[str, ...]] = {
    POD: (
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    NODE: ("spec.unschedulable",),
    EVENT: (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
}
_FIELD_PATHS = {"source": "source.component"}  # Event's "source" selects on the component


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.op:
            case "exists":
                return present
            case "!":
                return not present
            case "=" | "in":
                return present and value in self.values
            case _:  # "!=" | "notin"
                return not present or value not in self.values


def _split(selector: str) -> list[str]:
    """Split on the commas that are not inside a ``(…)`` set."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return [p.strip() for p in parts if p.strip()]


def _requirement(text: str) -> _Requirement:
    if m := _SET.match(text):
        values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
        return _Requirement(m.group(1), m.group(2), values)
    if m := _NOT_EXISTS.match(text):
        return _Requirement(m.group(1), "!", frozenset())
    if m := _COMPARE.match(text):
        return _Requirement(m.group(1), "!=" if m.group(2) == "!=" else "=", frozenset({m.group(3)}))
    if m := _EXISTS.match(text):
        return _Requirement(m.group(1), "exists", frozenset())
    raise errors.bad_request(
        f"unable to parse requirement: {text!r} (the test server takes =, ==, !=, in, notin, key and !key)"
    )


def label_selector(selector: str) -> Predicate:
    requirements = [_requirement(p) for p in _split(selector)]

    def matches(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return matches


def field_value(obj: Obj, field: str) -> str:
    value: object = obj
    for part in _FIELD_PATHS.get(field, field).split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "false" if field in ("spec.hostNetwork", "spec.unschedulable") else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_selector(resource: Resource, selector: str) -> Predicate:
    allowed = _COMMON_FIELDS + _FIELDS.get(resource, ())
    terms: list[tuple[str, bool, str]] = []  # (field, equal, value)
    for part in _split(selector):
        m = re.match(r"^([A-Za-z.]+)\s*(==|=|!=)\s*(.*)$", part)
        if m is None:
            raise errors.bad_request(f"invalid selector: {part!r}; expected field=value, field==value or field!=value")
        field, op, value = m.groups()
        if field not in allowed:
            raise errors.bad_request(f"field label not supported: {field}")
        terms.append((field, op != "!=", value))

    def matches(obj: Obj) -> bool:
        return all((field_value(obj, f) == v) == equal for f, equal, v in terms)

    return matches


def object_filter(resource: Resource, namespace: str | None, labels: str | None, fields: str | None) -> Predicate:
    """One predicate for a list or watch request: namespace, labelSelector and fieldSelector together."""
    tests: list[Predicate] = []
    if namespace is not None:
        tests.append(lambda o: (o.get("metadata") or {}).get("namespace") == namespace)
    if labels:
        tests.append(label_selector(labels))
    if fields:
        tests.append(field_selector(resource, fields))
    return lambda o: all(t(o) for t in tests)
