"""The REST routes of the test API server, over an :class:`ObjectStore`.

Paths are the real ones: ``/api/v1/[namespaces/{ns}/]{plural}[/{name}[/status|/binding]]``
and ``/apis/{group}/{version}/…`` for the other groups and the custom resources, plus
``POST /api/v1/namespaces/{ns}/bindings`` and ``GET /version``. Errors are ``Status`` bodies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import errors
from .errors import APIError
from .faults import Faults
from .objects import ObjectStore, meta
from .patch import merge_patch, strategic_merge_patch
from .resources import POD, Obj, Resource, find
from .selectors import object_filter
from .strategy import bind, prepare_create, prepare_update, same
from .watch import Watches, WatchRequest, serve

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
log = logging.getLogger(__name__)
VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-caldera-test",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Target:
    """What a request path names: a collection (``name`` None), an object, or one of its subresources."""

    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_path(path: str, resources: tuple[Resource, ...]) -> Target | None:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    if (group, rest[0]) == ("", "bindings") and namespace is not None and len(rest) == 1:
        return Target(POD, namespace, None, "binding")  # POST namespaces/{ns}/bindings: the pod is the body's name
    resource = find(resources, group, version, rest[0])
    if resource is None or (namespace is not None and not resource.namespaced):
        return None
    if resource.namespaced and namespace is None and len(rest) > 1:
        return None
    name = rest[1] if len(rest) > 1 else None
    return Target(resource, namespace, name, rest[2] if len(rest) > 2 else None)


def _bool(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _version(value: str | None) -> int | None:
    """A request's resourceVersion: None for "" and "0" (any version: the server's latest)."""
    if not value or value == "0":
        return None
    if not value.isdigit():
        raise errors.bad_request(f"resourceVersion: Invalid value: {value!r}: the test server's versions are integers")
    return int(value)


def _seconds(value: str | None) -> int | None:
    if not value:
        return None
    if not value.isdigit():
        raise errors.bad_request(f"timeoutSeconds: Invalid value: {value!r}: expected a whole number of seconds")
    return int(value)


def _json(obj: Obj, status: int = 200) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(obj, separators=(",", ":")).encode(), content_type="application/json"
    )


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise errors.bad_request(f"the request body is not JSON: {e}") from None


class API:
    """The request handlers of one server."""

    def __init__(
        self,
        store: ObjectStore,
        resources: tuple[Resource, ...],
        *,
        bookmark_interval: float,
        watch_timeout: float,
        seed: int,
        faults: Faults | None = None,
    ) -> None:
        self.store = store
        self.resources = resources
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.rng = random.Random(seed)
        self.watches = Watches()
        self.faults = faults if faults is not None else Faults()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.faults.latency:
            await asyncio.sleep(self.faults.latency)
        try:
            if request.path.rstrip("/") == "/version" and request.method == "GET":
                return _json(VERSION)
            target = parse_path(request.path, self.resources)
            if target is None:
                raise APIError(404, "NotFound", "the server could not find the requested resource")
            return await self._dispatch(request, target)
        except APIError as e:
            return _json(e.status(), e.code)
        except Exception as e:  # a bug of the test server: say so to the client rather than drop the connection
            log.exception("kubeapi: %s %s", request.method, request.path)
            return _json(APIError(500, "InternalError", f"test server: {e!r}").status(), 500)

    async def _dispatch(self, request: web.Request, t: Target) -> web.StreamResponse:
        method, r, ns = request.method, t.resource, t.namespace or ""
        no_such_path = APIError(404, "NotFound", "the server could not find the requested resource")
        not_allowed = APIError(
            405,
            "MethodNotAllowed",
            f"the server does not allow this method on the requested resource ({method} {request.path})",
        )
        if t.subresource == "binding":
            if r != POD or t.namespace is None:
                raise no_such_path
            if method != "POST":
                raise not_allowed
            return await self._bind(request, t.namespace, t.name)
        if t.subresource not in (None, "status") or (t.subresource == "status" and not r.status_subresource):
            raise no_such_path
        if t.name is None:
            if method == "GET":
                return await self._list(request, t)
            if method == "POST" and (t.namespace is not None or not r.namespaced):
                return _json(self.store.create(r, prepare_create(r, await _body(request), t.namespace, self.rng)), 201)
            raise not_allowed
        status = t.subresource == "status"
        if method == "GET":
            return _json(self.store.get(r, ns, t.name))
        if method == "PUT":
            body = await _body(request)
            versioned = isinstance(body, dict) and bool((body.get("metadata") or {}).get("resourceVersion"))
            return _json(self._update(r, ns, t.name, lambda old: body, status=status, versioned=versioned))
        if method == "PATCH":
            patch = await _body(request)
            apply = self._patcher(r, request.content_type, patch)
            versioned = "resourceVersion" in (patch.get("metadata") or {})
            return _json(self._update(r, ns, t.name, apply, status=status, versioned=versioned))
        if method == "DELETE" and not status:
            return _json(self._delete(r, ns, t.name, await _body(request)))
        raise not_allowed

    async def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        if _bool(q.get("sendInitialEvents")):
            raise errors.bad_request("sendInitialEvents: the test server does not implement streaming lists")
        matches = object_filter(t.resource, t.namespace, q.get("labelSelector"), q.get("fieldSelector"))
        if _bool(q.get("watch")):
            timeout = _seconds(q.get("timeoutSeconds")) or self.watch_timeout
            watch = WatchRequest(
                t.resource, _version(q.get("resourceVersion")), timeout, _bool(q.get("allowWatchBookmarks")), matches
            )
            return await serve(request, self.store, watch, self.watches, self.bookmark_interval)
        _version(q.get("resourceVersion"))  # validated; a list is always of the latest state
        items, revision = self.store.list(t.resource, t.namespace)
        return _json(
            {
                "kind": f"{t.resource.kind}List",
                "apiVersion": t.resource.api_version,
                "metadata": {"resourceVersion": str(revision)},
                "items": [o for o in items if matches(o)],
            }
        )

    def _patcher(self, r: Resource, content_type: str, patch: Any) -> Callable[[Obj], Any]:
        accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_MERGE_PATCH] if r.builtin else [])
        if content_type not in accepted:
            raise APIError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - "
                f"accepted media types include: {', '.join(accepted)}",
            )
        if content_type == JSON_PATCH:
            if isinstance(patch, list):
                raise APIError(
                    415,
                    "UnsupportedMediaType",
                    f"{JSON_PATCH}: the test server does not implement JSON patch (RFC 6902); send a merge patch",
                )
            raise errors.bad_request("json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp")
        if not isinstance(patch, dict):
            raise errors.bad_request(f"{content_type}: the patch must be a JSON object")
        if content_type == MERGE_PATCH:
            return lambda old: merge_patch(old, patch)
        return lambda old: strategic_merge_patch(old, patch)

    def _update(
        self, r: Resource, ns: str, name: str, change: Callable[[Obj], Any], *, status: bool, versioned: bool
    ) -> Obj:
        """Read, change, store; read again if the object moved meanwhile, unless the request named a version."""
        while True:
            old = self.store.get(r, ns, name)
            new = prepare_update(r, old, change(old), status=status)
            if same(old, new):
                return old
            try:
                return self.store.replace(r, new, expected=meta(old)["resourceVersion"])
            except APIError as e:
                if e.code != 409 or versioned:
                    raise

    def _delete(self, r: Resource, ns: str, name: str, options: Any) -> Obj:
        pre = (options.get("preconditions") or {}) if isinstance(options, dict) else {}
        gone = self.store.delete(r, ns, name, uid=pre.get("uid"), version=pre.get("resourceVersion"))
        if r.delete_returns_object:
            return gone
        details = {"name": name, "kind": r.plural, "uid": meta(gone).get("uid")} | (
            {"group": r.group} if r.group else {}
        )
        return errors.success(200) | {"details": details}

    async def _bind(self, request: web.Request, ns: str, name: str | None) -> web.StreamResponse:
        binding = await _body(request)
        if self.faults.bind_status:
            status = self.faults.bind_status
            raise APIError(status, "Conflict" if status == 409 else "InternalError", "binding refused (fault injected)")
        if name is None:
            name = str(((binding or {}).get("metadata") or {}).get("name") or "") if isinstance(binding, dict) else ""
        while True:
            pod = self.store.get(POD, ns, name)
            bound = bind(pod, binding, name, self.store.clock())
            try:
                self.store.replace(POD, bound, expected=meta(pod)["resourceVersion"])
                self.faults.bound(str(meta(pod).get("uid", "")))
                return _json(errors.success(201), 201)
            except APIError as e:
                if e.code != 409 or (binding.get("metadata") or {}).get("resourceVersion"):
                    raise
