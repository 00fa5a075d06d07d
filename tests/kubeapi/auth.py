"""Authentication and authorization for the test API server: bearer tokens, then RBAC, as the real server.

Opt-in: ``KubeAPIServer(authorize=True)``; without it every request is served, as before. With it:

- **Authentication.** Each request must carry ``Authorization: Bearer <token>``, else it gets the
  real server's ``401 Unauthorized`` Status (anonymous requests are off, as with
  ``--anonymous-auth=false``). :attr:`Auth.admin_token` is ``kubernetes-admin`` in ``system:masters``,
  whom nothing is refused (the real server's privileged group): tests set things up with it. A
  ServiceAccount's token comes from the TokenRequest API (``POST .../serviceaccounts/{name}/token``,
  ``CoreV1Api.create_namespaced_service_account_token``, also :meth:`Auth.token_for`) and
  authenticates as ``system:serviceaccount:<ns>:<name>`` in the groups ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>`` and ``system:authenticated`` for as long as that ServiceAccount
  exists (deleting it revokes its tokens, as bound tokens are). Tokens do not expire.
- **Authorization.** The request's attributes (``attributes.py``) are judged by the RBAC authorizer
  (``rbac.py``) over the Roles and bindings stored in the server; a denial is the real server's
  ``403 Forbidden`` Status. The server starts with the bootstrap roles a request needs before anyone
  grants it anything: ``cluster-admin`` (bound to ``system:masters``) and ``system:public-info-viewer``
  (``GET /version``, ``/healthz``…, bound to every user).

Every decision is kept, in order, in :attr:`Auth.decisions` (:meth:`Auth.denied`: the refusals),
so a test can assert that a process never needed a permission it was not granted.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from aiohttp import web

from . import errors
from .attributes import Attributes, User, request_attributes, service_account_user
from .errors import APIError
from .objects import ObjectStore, meta
from .rbac import Decision, RBACAuthorizer
from .resources import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, SERVICE_ACCOUNT, Obj

ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
PRIVILEGED_GROUP = "system:masters"
TOKEN_PATH = "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    labels = {"kubernetes.io/bootstrapping": "rbac-defaults"}
    return {"metadata": {"name": name, "labels": labels}, "rules": rules}


def _binding(name: str, groups: list[str]) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups],
    }


BOOTSTRAP_ROLES = (
    _cluster_role(
        "cluster-admin",
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    ),
    _cluster_role(
        "system:public-info-viewer",
        [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
    ),
)
BOOTSTRAP_BINDINGS = (
    _binding("cluster-admin", ["system:masters"]),
    _binding("system:public-info-viewer", ["system:authenticated", "system:unauthenticated"]),
)


@dataclass(frozen=True)
class _ServiceAccountToken:
    namespace: str
    name: str
    uid: str


class Auth:
    """The server's authenticator and authorizer, and the record of what it decided."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.admin_token = secrets.token_urlsafe(24)
        self.authorizer = RBACAuthorizer(store)
        self.decisions: list[Decision] = []
        self._tokens: dict[str, _ServiceAccountToken] = {}
        self._lock = threading.Lock()

    def bootstrap(self) -> None:
        """Store the bootstrap roles and bindings the store lacks (a restarted server finds them there)."""
        for resource, objects in ((CLUSTER_ROLE, BOOTSTRAP_ROLES), (CLUSTER_ROLE_BINDING, BOOTSTRAP_BINDINGS)):
            present = {meta(o)["name"] for o in self.store.list(resource)[0]}
            for obj in objects:
                if obj["metadata"]["name"] not in present:
                    self.store.create(resource, {"apiVersion": resource.api_version, "kind": resource.kind} | obj)

    def token_for(self, namespace: str, name: str) -> str:
        """A token of an existing ServiceAccount (what the TokenRequest API returns); 404 if it does not exist."""
        uid = str(meta(self.store.get(SERVICE_ACCOUNT, namespace, name))["uid"])
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = _ServiceAccountToken(namespace, name, uid)
        return token

    def authenticate(self, header: str) -> User | None:
        """The user an ``Authorization`` header stands for; None when it names no one this server knows."""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        if secrets.compare_digest(token, self.admin_token):
            return ADMIN
        with self._lock:
            account = self._tokens.get(token)
        if account is None:
            return None
        try:
            current = meta(self.store.get(SERVICE_ACCOUNT, account.namespace, account.name))
        except APIError:
            return None  # the ServiceAccount is gone, and its tokens with it
        if current.get("uid") != account.uid:
            return None
        return service_account_user(account.namespace, account.name)

    def authorize(self, a: Attributes) -> Decision:
        """The privileged group first, then RBAC (the real server's authorizer chain); the decision is recorded."""
        if PRIVILEGED_GROUP in a.user.groups:
            decision = Decision(a, True, f'allowed by group "{PRIVILEGED_GROUP}"')
        else:
            decision = self.authorizer.authorize(a)
        with self._lock:
            self.decisions.append(decision)
        return decision

    def denied(self) -> list[Decision]:
        with self._lock:
            return [d for d in self.decisions if not d.allowed]

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Authenticate, then authorize, every request before it reaches a handler."""
        user = self.authenticate(request.headers.get("Authorization", ""))
        if user is None:
            return _status(errors.unauthorized())
        query = {k: request.query.getone(k) for k in request.query}
        decision = self.authorize(request_attributes(user, request.method, request.path, query))
        if not decision.allowed:
            return _status(errors.forbidden(decision.attributes, decision.reason))
        return await handler(request)

    async def token_request(self, request: web.Request) -> web.StreamResponse:
        """``POST .../serviceaccounts/{name}/token``: a TokenRequest answered with a token for that account."""
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as e:
            return _status(errors.bad_request(f"the request body is not JSON: {e}"))
        spec = body.get("spec") if isinstance(body, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        seconds = spec.get("expirationSeconds") or 3600
        if not isinstance(seconds, int) or seconds < 600:
            return _status(
                APIError(
                    422,
                    "Invalid",
                    f'TokenRequest.authentication.k8s.io "{name}" is invalid: spec.expirationSeconds: '
                    f"Invalid value: {seconds!r}: may not specify a duration less than 10 minutes",
                )
            )
        try:
            token = self.token_for(namespace, name)
        except APIError as e:
            return _status(e)
        now = self.store.clock()
        answer: Obj = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": _stamp(now)},
            "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"]}
            | {"expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": _stamp(now + timedelta(seconds=seconds))},
        }
        return web.json_response(answer, status=201)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(e: APIError) -> web.Response:
    return web.json_response(e.status(), status=e.code)
