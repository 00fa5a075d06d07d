"""deploy/rbac is least privilege: loaded into an authorizing API server, each process's ServiceAccount may
make exactly the calls its code makes (tests/deploy/rbac.py NEEDS) and is refused, with 403, every
other verb on every resource caldera knows or that a role names, in every namespace that matters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from cluster.kube.bind import KubeTarget
from cluster.kube.lease import KubeLease
from cluster.model.binding import Binding, Eviction, Failure, GateLift
from tests.deploy.manifests import NAMESPACE, Obj, label
from tests.deploy.rbac import NEEDS, Need, apply, rbac_objects, token
from tests.kubeapi.attributes import Attributes, User, service_account_user
from tests.kubeapi.clients import close
from tests.kubeapi.server import KubeAPIServer

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
NAMELESS = ("list", "watch", "create", "deletecollection")  # on a collection
OTHER_ACCOUNT = ("work", "default")  # a ServiceAccount deploy/rbac must grant nothing
WORK = "work"  # where users' pods live


@dataclass(frozen=True)
class Kind:
    """A REST collection: the ones caldera uses, and ones no caldera process may touch."""

    group: str
    version: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()


RBAC_GROUP = "rbac.authorization.k8s.io"
KNOWN = (
    Kind("", "v1", "pods", True, ("binding", "status", "eviction", "exec", "log")),
    Kind("", "v1", "bindings", True),
    Kind("", "v1", "nodes", False, ("status", "proxy")),
    Kind("", "v1", "namespaces", False, ("status", "finalize")),
    Kind("", "v1", "events", True),
    Kind("events.k8s.io", "v1", "events", True),
    Kind("", "v1", "secrets", True),
    Kind("", "v1", "configmaps", True),
    Kind("", "v1", "serviceaccounts", True, ("token",)),
    Kind("coordination.k8s.io", "v1", "leases", True),
    Kind("scheduling.k8s.io", "v1", "priorityclasses", False),
    Kind("scheduling.volcano.sh", "v1beta1", "podgroups", True, ("status",)),
    Kind("scheduling.volcano.sh", "v1beta1", "queues", False, ("status",)),
    Kind("batch.volcano.sh", "v1alpha1", "jobs", True, ("status",)),
    Kind("shard.volcano.sh", "v1alpha1", "nodeshards", False, ("status",)),
    Kind("topology.volcano.sh", "v1alpha1", "hypernodes", False, ("status",)),
    Kind(RBAC_GROUP, "v1", "roles", True),
    Kind(RBAC_GROUP, "v1", "rolebindings", True),
    Kind(RBAC_GROUP, "v1", "clusterroles", False),
    Kind(RBAC_GROUP, "v1", "clusterrolebindings", False),
)


def rules(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for obj in objects:
        for rule in obj.get("rules") or []:
            yield obj, rule


def kinds(objects: list[Obj]) -> list[Kind]:
    """The known kinds, and any other resource a role names (both scopes, since its scope is unknown here)."""
    known = {(k.group, k.plural): k for k in KNOWN}
    extra: dict[tuple[str, str], set[str]] = {}
    for _, rule in rules(objects):
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                plural, _, sub = resource.partition("/")
                if (group, plural) not in known:
                    extra.setdefault((group, plural), set()).update({sub} if sub else set())
    more = [Kind(g, "v1", p, ns, tuple(sorted(s))) for (g, p), s in extra.items() for ns in (True, False)]
    return list(KNOWN) + more


@dataclass(frozen=True)
class Probe:
    """One request: the attributes it must be judged by, and how it goes over HTTP."""

    attributes: Attributes
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()


METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH"}


def probe(user: User, kind: Kind, namespace: str, verb: str, name: str = "", sub: str = "") -> Probe:
    """``verb`` on the collection (no ``name``), an object, or one of its subresources, over its REST path."""
    prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    where = f"/namespaces/{namespace}" if namespace else ""
    path = "/".join(p for p in (f"{prefix}{where}/{kind.plural}", name, sub) if p)
    ns = name if kind.plural == "namespaces" and name else namespace  # a namespace is in itself
    method = "DELETE" if verb in ("delete", "deletecollection") else METHODS[verb]
    query = (("watch", "true"), ("timeoutSeconds", "1")) if verb == "watch" else ()
    return Probe(
        Attributes(user, verb, True, kind.group, kind.version, ns, kind.plural, sub, name, path), method, path, query
    )


def probes(user: User, objects: list[Obj]) -> Iterator[Probe]:
    """Every verb on every kind and subresource, in caldera-system, a user namespace, the namespaces the
    bindings name and cluster-wide, on any object and on each name a role or a need singles out."""
    names: dict[tuple[str, str], set[str]] = {}
    for _, rule in rules(objects):
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                names.setdefault((group, resource.partition("/")[0]), set()).update(rule.get("resourceNames") or [])
    for needs in NEEDS.values():
        for n in needs:
            names.setdefault((n.group, n.resource.partition("/")[0]), set()).update(n.names or ())
    namespaces = sorted({NAMESPACE, WORK} | {o["metadata"]["namespace"] for o in objects if o["kind"] == "RoleBinding"})
    for kind in kinds(objects):
        for namespace in [""] + (namespaces if kind.namespaced else []):
            for verb in NAMELESS:
                yield probe(user, kind, namespace, verb)
            if kind.namespaced and not namespace:
                continue  # a namespaced object is named in its namespace
            for name in sorted({"x"} | names.get((kind.group, kind.plural), set())):
                for verb in ("get", "update", "patch", "delete"):
                    yield probe(user, kind, namespace, verb, name)
                for sub in kind.subresources:
                    for verb in ("get", "create", "update", "patch", "delete"):
                        yield probe(user, kind, namespace, verb, name, sub)


def send(api: Any, probe: Probe) -> tuple[int, Obj]:
    """The probe through the official client's HTTP layer, with its bearer token; (status, Status body or {})."""
    body = {} if probe.method in ("POST", "PUT", "PATCH") else None
    headers = {"Content-Type": "application/merge-patch+json"} if probe.method == "PATCH" else {}
    request = api.param_serialize(
        probe.method,
        probe.path,
        query_params=list(probe.query),
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request, _request_timeout=10)
    if probe.attributes.verb == "watch" and response.status == 200:
        response.response.close()  # a stream: its status is all we want
        return 200, {}
    data = response.read()
    return int(response.status), (json.loads(data) if data and data.startswith(b"{") else {})


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[KubeAPIServer, dict[str, str]]]:
    """An authorizing server with deploy/rbac applied, and a token of each caldera ServiceAccount (and of one
    that deploy/rbac must not concern)."""
    with KubeAPIServer(authorize=True) as server:
        admin = kubernetes.client.ApiClient(server.configuration())
        apply(admin, rbac_objects())
        apply(
            admin, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": WORK, "name": "default"}}]
        )
        tokens = {name: token(admin, name) for name in NEEDS} | {"other": token(admin, OTHER_ACCOUNT[1], WORK)}
        close(admin)
        yield server, tokens


def test_deploy_rbac_has_no_wildcards_and_only_verbs_the_api_serves() -> None:
    """Nothing the matrix below could miss: no `*`, no `bind`/`escalate`/`impersonate`, no URLs."""
    for obj, rule in rules(rbac_objects()):
        where = f"{label(obj)}: {rule}"
        assert not any("*" in v for key in ("apiGroups", "resources", "verbs") for v in rule.get(key, [])), where
        assert set(rule["verbs"]) <= set(VERBS) and "nonResourceURLs" not in rule, where
    subjects = {s["name"] for o in rbac_objects() for s in o.get("subjects") or []}
    assert subjects == set(NEEDS)
    assert all(s["kind"] == "ServiceAccount" for o in rbac_objects() for s in o.get("subjects") or [])


@pytest.mark.parametrize("account", [*NEEDS, "other"])
def test_each_account_may_make_exactly_the_calls_its_process_makes(
    cluster: tuple[KubeAPIServer, dict[str, str]], account: str
) -> None:
    server, tokens = cluster
    assert server.auth is not None
    user = service_account_user(*OTHER_ACCOUNT) if account == "other" else service_account_user(NAMESPACE, account)
    needs: tuple[Need, ...] = NEEDS.get(account, ())
    api = kubernetes.client.ApiClient(server.configuration(tokens[account]))
    wrong: list[str] = []
    used: set[Need] = set()
    checked = 0
    try:
        for probe in probes(user, rbac_objects()):
            expected = [n for n in needs if n.allows(probe.attributes)]
            status, body = send(api, probe)
            judged = server.auth.decisions[-1].attributes
            assert judged == probe.attributes, f"{probe.method} {probe.path}: the server judged {judged}"
            checked += 1
            if expected and status in (401, 403):
                wrong.append(f"refused, but {expected[0].why} needs it: {probe.attributes.describe()}")
            elif not expected and (status != 403 or body.get("reason") != "Forbidden"):
                wrong.append(f"allowed ({status}) though no code needs it: {probe.attributes.describe()}")
            used.update(expected)
    finally:
        close(api)
    assert wrong == []
    assert used == set(needs)  # every need was probed: the matrix covers the whole list
    assert checked > 300


async def test_the_schedulers_bind_with_card_annotations_and_only_the_batch_scheduler_lifts_gates_and_evicts(
    cluster: tuple[KubeAPIServer, dict[str, str]],
) -> None:
    """KubeTarget's calls, made by the real code under each scheduler's token, the rare ones included:
    a binding retried after it landed, and evictions."""
    server, tokens = cluster
    admin = kubernetes.client.ApiClient(server.configuration())
    core: Any = kubernetes.client.CoreV1Api(admin)
    gate = "scheduling.volcano.sh/queue-allocation"
    uids: dict[str, str] = {}
    for name in ("b1", "b2", "a1", "a2"):
        spec = {
            "containers": [{"name": "c", "image": "x"}],
            "schedulingGates": [{"name": gate}] if name == "b1" else [],
        }
        uids[name] = core.create_namespaced_pod(WORK, {"metadata": {"name": name}, "spec": spec}).metadata.uid
    cards = {"volcano.sh/gpu-index": "0"}  # a gpushare card: written on the pod before it is bound
    for account, pods in (("caldera-batch-scheduler", ("b1", "b2")), ("caldera-agent-scheduler", ("a1", "a2"))):
        target = KubeTarget(kubernetes.client.ApiClient(server.configuration(tokens[account])), backoff=0.01)
        try:
            if account == "caldera-batch-scheduler":
                assert await target.lift_gates([GateLift(uid="u", namespace=WORK, name=pods[0], gate=gate)]) == [None]
            binding = Binding(uid=uids[pods[0]], namespace=WORK, name=pods[0], node="n1", annotations=cards)
            bound = await target.bind([binding])
            # again (a retry after a lost answer): 409, then the pod is read and found bound there
            again = await target.bind([binding])
            evicted = await target.evict([Eviction(uid="u", namespace=WORK, name=pods[1], node="n1", reason="x")])
        finally:
            target.close()
        pod = core.read_namespaced_pod(pods[0], WORK)
        assert bound == again == [None] and pod.spec.node_name == "n1" and pod.metadata.annotations == cards
        assert not pod.spec.scheduling_gates
        remaining = {p.metadata.name for p in core.list_namespaced_pod(WORK).items}
        if account == "caldera-batch-scheduler":
            assert evicted == [None] and pods[1] not in remaining
            [event] = core.list_namespaced_event(WORK).items
            assert (event.involved_object.name, event.reason) == (pods[1], "Preempted")
        else:  # the agent scheduler never evicts: it may not
            assert evicted == [Failure(reason="API server answered 403 4 times")] and pods[1] in remaining
    close(admin)
    assert server.auth is not None
    agent = "system:serviceaccount:caldera-system:caldera-agent-scheduler"
    assert {d.attributes.describe() for d in server.auth.denied() if d.attributes.name == "a2"} == {
        f"{agent}: patch pods/status 'a2' in work",
        f"{agent}: delete pods 'a2' in work",
    }


async def test_a_process_can_hold_its_own_lease_and_not_another_ones(
    cluster: tuple[KubeAPIServer, dict[str, str]],
) -> None:
    server, tokens = cluster
    api = kubernetes.client.ApiClient(server.configuration(tokens["caldera-mirror"]))
    times = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}
    own = KubeLease(api, "mirror", NAMESPACE, "m-1", **times)
    other = KubeLease(api, "batch-scheduler", NAMESPACE, "m-1", **times)
    for _ in range(2):  # create, then renew
        assert await own.try_acquire() and own.leading
    assert not await other.try_acquire() and not other.leading
    stop = asyncio.Event()
    stop.set()
    await own.run(stop)  # releases it: a get and an update
    await other.run(stop)
    close(api)
