"""API errors as the real server reports them: an HTTP code and a ``Status`` object body.

The official clients turn these bodies into ``ApiException`` (``status``, ``reason``, ``body``);
in a watch stream the same ``Status`` travels as the object of an ``ERROR`` event.
"""

from __future__ import annotations

from .attributes import Attributes
from .resources import Obj, Resource


class APIError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def success(code: int) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _details(resource: Resource, name: str) -> Obj:
    details: Obj = {"name": name, "kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return details


def not_found(resource: Resource, name: str) -> APIError:
    return APIError(404, "NotFound", f'{resource.qualified} "{name}" not found', _details(resource, name))


def already_exists(resource: Resource, name: str) -> APIError:
    return APIError(409, "AlreadyExists", f'{resource.qualified} "{name}" already exists', _details(resource, name))


def conflict(resource: Resource, name: str, why: str, *, on: str | None = None) -> APIError:
    """409 Conflict; ``on`` names the collection when it is a subresource (``pods/binding``)."""
    details = _details(resource, name) | ({"kind": on} if on else {})
    return APIError(
        409, "Conflict", f'Operation cannot be fulfilled on {on or resource.qualified} "{name}": {why}', details
    )


def stale(resource: Resource, name: str) -> APIError:
    return conflict(
        resource, name, "the object has been modified; please apply your changes to the latest version and try again"
    )


def invalid(resource: Resource, name: str, field: str, why: str) -> APIError:
    details = _details(resource, name) | {
        "kind": resource.kind,
        "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}],
    }
    return APIError(422, "Invalid", f'{resource.kind} "{name}" is invalid: {field}: {why}', details)


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def expired(message: str) -> APIError:
    return APIError(410, "Expired", message)


def too_large_version(requested: int, current: int) -> APIError:
    """What a watch from a version the server has not reached gets (as from a restored etcd): 504, retry later."""
    return APIError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )


def unauthorized() -> APIError:
    """No credentials, or ones the server does not know (anonymous requests are off)."""
    return APIError(401, "Unauthorized", "Unauthorized")


def forbidden(a: Attributes, reason: str = "") -> APIError:
    """403 for a request the authorizer did not allow, worded as the real server's ``responsewriters.Forbidden``
    (``pods "p" is forbidden: User "u" cannot create resource "pods/binding" in API group "" in the namespace "ns"``)."""
    if not a.resource_request:
        why = f'User "{a.user.name}" cannot {a.verb} path "{a.path}"'
        return APIError(403, "Forbidden", f"forbidden: {why}" + (f": {reason}" if reason else ""), {})
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    why = f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" {where}'
    if reason:
        why += f": {reason}"
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    message = f'{qualified} "{a.name}" is forbidden: {why}' if a.name else f"{qualified} is forbidden: {why}"
    details: Obj = (
        {"kind": a.resource} | ({"name": a.name} if a.name else {}) | ({"group": a.api_group} if a.api_group else {})
    )
    return APIError(403, "Forbidden", message, details)
