"""An authorizing test API server through the official client: bearer tokens (the admin's, ServiceAccount
tokens from the TokenRequest API), 401 and 403 answered as the real server words them, RBAC objects
loaded through the API and applied at once, and every decision on record."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.kubeapi import KubeAPIServer
from tests.kubeapi.clients import close

RBAC_GROUP = "rbac.authorization.k8s.io"


@pytest.fixture
def server() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(authorize=True) as s:
        yield s


@pytest.fixture
def connect(server: KubeAPIServer) -> Iterator[Callable[[str | None], client.ApiClient]]:
    """An ApiClient sending a given token (None: the admin's)."""
    made: list[client.ApiClient] = []

    def make(token: str | None = None) -> client.ApiClient:
        made.append(client.ApiClient(server.configuration(token)))
        return made[-1]

    yield make
    for api in made:
        close(api)


def core_api(api: client.ApiClient) -> Any:
    """The client's calls as untyped: they take dicts as bodies, which its annotations do not say."""
    return client.CoreV1Api(api)


def rbac_api(api: client.ApiClient) -> Any:
    return client.RbacAuthorizationV1Api(api)


def failure(e: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    assert e.value.body is not None
    body = json.loads(e.value.body)
    assert isinstance(body, dict)
    return body


def service_account(admin: client.ApiClient, namespace: str, name: str) -> str:
    """Create a ServiceAccount and return a token of it, as ``kubectl create token`` gets one."""
    core = core_api(admin)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token(name, namespace, request).status.token
    assert isinstance(token, str) and token
    return token


def cluster_role(admin: client.ApiClient, name: str, rules: list[dict[str, Any]]) -> None:
    rbac_api(admin).create_cluster_role({"metadata": {"name": name}, "rules": rules})


def bind(admin: client.ApiClient, kind: str, role: str, sa: tuple[str, str], namespace: str = "") -> None:
    """Bind ``role`` (a Role or ClusterRole) to the ServiceAccount ``sa``: in ``namespace``, or cluster-wide."""
    body = {
        "metadata": {"name": f"{role}-{sa[1]}"},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "namespace": sa[0], "name": sa[1]}],
    }
    rbac = rbac_api(admin)
    if namespace:
        rbac.create_namespaced_role_binding(namespace, body)
    else:
        rbac.create_cluster_role_binding(body)


UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


@pytest.mark.parametrize("header", [None, "Bearer not-a-token", "Basic YWRtaW46YWRtaW4=", "Bearer "])
def test_a_request_without_a_known_token_is_401(server: KubeAPIServer, header: str | None) -> None:
    api: Any = client.ApiClient(client.Configuration(host=server.url))
    if header is not None:
        api.set_default_header("Authorization", header)
    try:
        for call in (core_api(api).list_node, client.VersionApi(api).get_code):
            with pytest.raises(ApiException) as e:
                call()
            assert e.value.status == 401 and failure(e) == UNAUTHORIZED
    finally:
        close(api)
    assert server.auth is not None and server.auth.decisions == []  # nothing reached the authorizer


def test_a_service_account_token_is_its_user_until_the_account_is_deleted(
    server: KubeAPIServer, connect: Callable[..., client.ApiClient]
) -> None:
    admin = connect()
    token = service_account(admin, "caldera-system", "caldera-mirror")
    mirror = connect(token)
    assert client.VersionApi(mirror).get_code().git_version  # everyone may read the version
    with pytest.raises(ApiException) as e:
        core_api(mirror).list_node()
    assert e.value.status == 403
    assert server.auth is not None
    last = server.auth.decisions[-1].attributes.user
    assert last.name == "system:serviceaccount:caldera-system:caldera-mirror"
    assert last.groups == ("system:serviceaccounts", "system:serviceaccounts:caldera-system", "system:authenticated")
    core_api(admin).delete_namespaced_service_account("caldera-mirror", "caldera-system")
    with pytest.raises(ApiException) as e:
        client.VersionApi(mirror).get_code()
    assert e.value.status == 401
    core_api(admin).create_namespaced_service_account("caldera-system", {"metadata": {"name": "caldera-mirror"}})
    with pytest.raises(ApiException) as e:  # a new account of the same name is not the old one
        client.VersionApi(mirror).get_code()
    assert e.value.status == 401
    with pytest.raises(ApiException) as e:
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
        core_api(admin).create_namespaced_service_account_token("nobody", "caldera-system", request)
    assert e.value.status == 404 and failure(e)["message"] == 'serviceaccounts "nobody" not found'


def test_a_refusal_is_403_worded_as_the_real_server(
    server: KubeAPIServer, connect: Callable[..., client.ApiClient]
) -> None:
    admin = connect()
    user = "system:serviceaccount:caldera-system:caldera-mirror"
    core = core_api(connect(service_account(admin, "caldera-system", "caldera-mirror")))
    target = client.V1Binding(
        metadata=client.V1ObjectMeta(name="x"), target=client.V1ObjectReference(kind="Node", name="n")
    )
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("x", "work", target)
    assert e.value.status == 403
    assert failure(e) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods "x" is forbidden: User "{user}" cannot create resource "pods/binding" in API group "" '
        'in the namespace "work"',
        "reason": "Forbidden",
        "details": {"name": "x", "kind": "pods"},
        "code": 403,
    }
    with pytest.raises(ApiException) as e:
        client.CustomObjectsApi(core.api_client).list_cluster_custom_object(
            "shard.volcano.sh", "v1alpha1", "nodeshards"
        )
    assert failure(e)["message"] == (
        f'nodeshards.shard.volcano.sh is forbidden: User "{user}" cannot list resource "nodeshards" '
        'in API group "shard.volcano.sh" at the cluster scope'
    )
    assert failure(e)["details"] == {"kind": "nodeshards", "group": "shard.volcano.sh"}
    response = core.api_client.call_api(
        *core.api_client.param_serialize("GET", "/healthzz", auth_settings=["BearerToken"])
    )
    assert response.status == 403 and json.loads(response.read())["message"] == (
        f'forbidden: User "{user}" cannot get path "/healthzz"'
    )
    bind(admin, "ClusterRole", "gone", ("caldera-system", "caldera-mirror"))
    with pytest.raises(ApiException) as e:
        core.list_node()
    assert failure(e)["message"] == (
        f'nodes is forbidden: User "{user}" cannot list resource "nodes" in API group "" at the cluster scope: '
        'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'
    )


def test_roles_loaded_through_the_api_grant_at_once_and_only_where_bound(
    server: KubeAPIServer, connect: Callable[..., client.ApiClient]
) -> None:
    admin = connect()
    sa = ("caldera-system", "caldera-batch-scheduler")
    core = core_api(connect(service_account(admin, *sa)))
    core_api(admin).create_namespaced_pod("work", {"metadata": {"name": "p"}, "spec": {"containers": []}})
    core_api(admin).create_namespaced_pod("team", {"metadata": {"name": "p"}, "spec": {"containers": []}})

    def allowed(call: Callable[[], object]) -> bool:
        try:
            call()
        except ApiException as e:
            if e.status == 403:
                return False
            raise
        return True

    def get(namespace: str) -> Callable[[], object]:
        return lambda: core.read_namespaced_pod("p", namespace)

    assert not allowed(get("work"))
    cluster_role(admin, "pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    bind(admin, "ClusterRole", "pod-reader", sa, namespace="work")  # a RoleBinding to a ClusterRole
    assert allowed(get("work")) and not allowed(get("team"))
    assert allowed(lambda: core.list_namespaced_pod("work"))
    assert not allowed(lambda: core.list_pod_for_all_namespaces())  # all namespaces: cluster scope
    assert not allowed(lambda: core.list_namespaced_pod("work", watch=True, timeout_seconds=1))  # watch is not list
    assert not allowed(lambda: core.read_namespaced_pod_status("p", "work"))  # nor a subresource
    assert not allowed(lambda: core.delete_namespaced_pod("p", "work"))
    rbac = rbac_api(admin)
    rbac.create_namespaced_role(
        "team",
        {
            "metadata": {"name": "one-pod"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p"]}],
        },
    )
    bind(admin, "Role", "one-pod", sa, namespace="team")
    assert allowed(get("team")) and not allowed(lambda: core.list_namespaced_pod("team"))
    rbac.delete_namespaced_role("one-pod", "team")
    assert not allowed(get("team"))  # the binding now points at nothing
    bind(admin, "ClusterRole", "pod-reader", sa)  # a ClusterRoleBinding: everywhere
    assert allowed(get("team")) and allowed(lambda: core.list_pod_for_all_namespaces())
    assert server.auth is not None
    assert [d.attributes.describe() for d in server.auth.denied()][-1] == (
        "system:serviceaccount:caldera-system:caldera-batch-scheduler: get pods 'p' in team"
    )


def test_the_admin_may_do_anything_and_the_bootstrap_roles_are_served(connect: Callable[..., client.ApiClient]) -> None:
    rbac = rbac_api(connect())
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "system:public-info-viewer"} <= names
    binding = rbac.read_cluster_role_binding("cluster-admin")
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", "system:masters")]
    with pytest.raises(ApiException) as e:
        core_api(connect()).list_namespaced_secret("kube-system")
    assert e.value.status == 404  # not served here, but not refused


def test_a_token_request_answers_as_the_real_api_and_refuses_a_short_expiry(
    connect: Callable[..., client.ApiClient],
) -> None:
    core = core_api(connect())
    core.create_namespaced_service_account("caldera-system", {"metadata": {"name": "sa"}})
    spec = client.V1TokenRequestSpec(audiences=["caldera"], expiration_seconds=1200)
    answer = core.create_namespaced_service_account_token("sa", "caldera-system", {"spec": spec.to_dict()})
    assert answer.kind == "TokenRequest" and answer.spec.audiences == ["caldera"]
    assert (answer.status.expiration_timestamp - answer.metadata.creation_timestamp).total_seconds() == 1200
    with pytest.raises(ApiException) as e:
        core.create_namespaced_service_account_token("sa", "caldera-system", {"spec": {"expirationSeconds": 60}})
    assert e.value.status == 422 and failure(e)["message"] == (
        'TokenRequest.authentication.k8s.io "sa" is invalid: spec.expirationSeconds: Invalid value: 60: '
        "may not specify a duration less than 10 minutes"
    )
