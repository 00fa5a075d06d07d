"""Who asks for what: a request turned into the attributes an authorizer judges, as Kubernetes does.

The real API server's ``RequestInfoFactory.NewRequestInfo`` (k8s.io/apiserver, endpoints/request)
reads everything from the method and the URL, before it knows whether the resource exists:
``/api/v1/...`` and ``/apis/{group}/{version}/...`` are resource requests, anything else (``/version``)
a non-resource one whose verb is the lower-cased method. The verb is ``create`` (POST), ``get``
(GET, HEAD), ``update`` (PUT), ``patch`` (PATCH) or ``delete`` (DELETE); a GET without a name is a
``list``, or a ``watch`` when ``watch`` is set to anything but ``false``/``0`` (or the path starts
with the old ``watch/`` prefix); a DELETE without a name is a ``deletecollection``; a list or watch
whose field selector pins ``metadata.name`` names that object. Path parts after the namespace are
``resource/name/subresource``, so ``POST .../pods/p/binding`` is ``create`` of ``pods/binding`` named
``p`` while ``POST .../namespaces/ns/bindings`` is ``create`` of ``bindings`` with no name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
API_PREFIXES = ("api", "apis")
_SPECIAL_VERBS = ("proxy", "watch")  # verbs named by a path prefix (deprecated, still parsed)
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class User:
    """An authenticated user: a name and the groups it is in (Kubernetes' ``user.Info``)."""

    name: str
    groups: tuple[str, ...] = ()


def service_account_user(namespace: str, name: str) -> User:
    """The user a ServiceAccount's token authenticates as, with the groups the real server gives it."""
    return User(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Attributes:
    """One request as an authorizer sees it (Kubernetes' ``authorizer.Attributes``)."""

    user: User
    verb: str
    resource_request: bool = True
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    def describe(self) -> str:
        """One line for logs and assertion messages: who, which verb, on what, where."""
        if not self.resource_request:
            return f"{self.user.name}: {self.verb} {self.path}"
        what = self.resource + (f".{self.api_group}" if self.api_group else "")
        what += f"/{self.subresource}" if self.subresource else ""
        where = f" in {self.namespace}" if self.namespace else " (cluster)"
        return f"{self.user.name}: {self.verb} {what}{' ' + repr(self.name) if self.name else ''}{where}"


def _field_selector_name(selector: str) -> str:
    """The name a field selector requires ``metadata.name`` to equal, if it parses and requires one."""
    name = ""
    for term in selector.split(","):
        for op in ("!=", "==", "="):
            if op in term:
                key, value = term.split(op, 1)
                if key.strip() == "metadata.name" and op != "!=" and not name:
                    name = value.strip()
                break
        else:
            if term.strip():
                return ""  # not a selector: the real server ignores it here, and refuses it later
    if name in (".", "..") or "/" in name or "%" in name:
        return ""
    return name


def request_attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of ``method path?query`` sent by ``user`` (``query``: each parameter's first value)."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    plain = Attributes(user, method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return plain
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return plain
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    from_prefix = rest[0] in _SPECIAL_VERBS and len(rest) >= 2
    if from_prefix:
        verb, rest = rest[0], rest[1:]
    else:
        verb = _VERBS.get(method.upper(), "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0") else "list"
        name = _field_selector_name(query.get("fieldSelector") or "")
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, True, group, version, namespace, resource, subresource, name, path)
