"""Kubernetes' RBAC authorizer over the server's own Role, ClusterRole and binding objects.

A port of ``plugin/pkg/auth/authorizer/rbac/rbac.go`` (``RuleAllows``), the matching helpers of
``pkg/apis/rbac/v1/evaluation_helpers.go`` and the rule resolver of
``pkg/registry/rbac/validation/rule.go``. A request is allowed when one rule of one role bound to its
user allows it; rules only ever add. ClusterRoleBindings apply everywhere, RoleBindings only in their
own namespace (and so never to a cluster-scoped or all-namespaces request), and a RoleBinding may
point at a ClusterRole, whose rules then hold in that namespace only. A rule matches a verb, an API
group, a resource (``*``, exact, ``pods/status`` for a subresource, or ``*/status`` for that
subresource of anything) and, when it lists ``resourceNames``, the request's name, which a ``create``
or a ``list`` does not have. A binding whose role is missing grants nothing, and a denial then says
why ("RBAC: clusterrole.rbac.authorization.k8s.io "x" not found"), as the real server's does.
The objects are read from the store on every request, so a change applies at once.

Not ported: aggregated ClusterRoles (``aggregationRule``), the escalation checks on writes of roles
and bindings (only an admin writes them here), and authorization by label or field selector.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .attributes import SERVICE_ACCOUNT_PREFIX, Attributes, User
from .errors import APIError
from .objects import ObjectStore, meta
from .resources import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING, Obj

ALL = "*"


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


@dataclass(frozen=True)
class Rule:
    """A ``PolicyRule``: verbs on resources (with their groups and, optionally, names) or on URLs."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Obj) -> Rule:
        return cls(
            _strings(rule.get("verbs")),
            _strings(rule.get("apiGroups")),
            _strings(rule.get("resources")),
            _strings(rule.get("resourceNames")),
            _strings(rule.get("nonResourceURLs")),
        )


def verb_matches(rule: Rule, verb: str) -> bool:
    return ALL in rule.verbs or verb in rule.verbs


def api_group_matches(rule: Rule, group: str) -> bool:
    return ALL in rule.api_groups or group in rule.api_groups


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    """``combined`` is ``resource`` or ``resource/subresource``; ``*/sub`` matches that subresource of any."""
    for r in rule.resources:
        if r in (ALL, combined):
            return True
        if subresource and len(r) == len(subresource) + 2 and r.startswith("*/") and r.endswith(subresource):
            return True
    return False


def resource_name_matches(rule: Rule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def non_resource_url_matches(rule: Rule, url: str) -> bool:
    return any(u in (ALL, url) or (u.endswith("*") and url.startswith(u.rstrip("*"))) for u in rule.non_resource_urls)


def rule_allows(a: Attributes, rule: Rule) -> bool:
    if a.resource_request:
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return (
            verb_matches(rule, a.verb)
            and api_group_matches(rule, a.api_group)
            and resource_matches(rule, combined, a.subresource)
            and resource_name_matches(rule, a.name)
        )
    return verb_matches(rule, a.verb) and non_resource_url_matches(rule, a.path)


def applies_to(user: User, subject: Obj, namespace: str) -> bool:
    """Whether a binding's subject is ``user``; a ServiceAccount subject without a namespace is in the
    binding's (``namespace``, empty for a ClusterRoleBinding: then it is no one)."""
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = str(subject.get("namespace") or namespace)
        return bool(sa_namespace) and user.name == f"{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}"
    return False


def _describe(subject: Obj, namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass(frozen=True)
class Decision:
    """The authorizer's answer: allowed or not, and why (the binding that allowed it, or resolution errors)."""

    attributes: Attributes
    allowed: bool
    reason: str = ""


def _aggregate(errors: list[str]) -> str:
    """Errors joined as Kubernetes' ``utilerrors.NewAggregate`` prints them: one alone, several in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class RBACAuthorizer:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def _role_rules(self, ref: Obj, namespace: str) -> list[Rule]:
        """The rules a binding's ``roleRef`` points at; ValueError with the real server's message if it cannot."""
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        try:
            if kind == "Role":
                role = self.store.get(ROLE, namespace, name)
            elif kind == "ClusterRole":
                role = self.store.get(CLUSTER_ROLE, "", name)
            else:
                raise ValueError(f'unsupported role reference kind: "{kind}"')
        except APIError:
            raise ValueError(f'{str(kind).lower()}.rbac.authorization.k8s.io "{name}" not found') from None
        return [Rule.of(r) for r in role.get("rules") or [] if isinstance(r, dict)]

    def _bindings(self, namespace: str) -> Iterator[tuple[Obj, str, str]]:
        """(binding, its namespace ("" for a ClusterRoleBinding), how to name it) for a request in ``namespace``."""
        for b in self.store.list(CLUSTER_ROLE_BINDING)[0]:
            yield b, "", f'ClusterRoleBinding "{meta(b).get("name")}"'
        if namespace:
            for b in self.store.list(ROLE_BINDING, namespace)[0]:
                yield b, namespace, f'RoleBinding "{meta(b).get("name")}/{namespace}"'

    def authorize(self, a: Attributes) -> Decision:
        errors: list[str] = []
        for binding, namespace, named in self._bindings(a.namespace):
            subject = next((s for s in binding.get("subjects") or [] if applies_to(a.user, s, namespace)), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            try:
                rules = self._role_rules(ref, namespace)
            except ValueError as e:
                errors.append(str(e))
                continue
            if any(rule_allows(a, rule) for rule in rules):
                source = f'{named} of {ref.get("kind")} "{ref.get("name")}" to {_describe(subject, namespace)}'
                return Decision(a, True, f"RBAC: allowed by {source}")
        return Decision(a, False, f"RBAC: {_aggregate(errors)}" if errors else "")
