"""The authorizer's parts against Kubernetes' own test cases: request attributes (requestinfo_test.go),
rule matching (rbac_test.go TestRuleMatches) and rule resolution over bindings (TestAuthorizer), the
last over a real object store holding the Roles and bindings."""

from __future__ import annotations

import pytest

from tests.kubeapi.attributes import Attributes, User, request_attributes, service_account_user
from tests.kubeapi.objects import ObjectStore
from tests.kubeapi.rbac import RBACAuthorizer, Rule, rule_allows
from tests.kubeapi.resources import CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING, Obj, Resource

NOBODY = User("nobody")

# (method, url, verb, group, version, namespace, resource, subresource, name): requestinfo_test.go's cases
# (its namespace is the URL's, as the code it tests sets it), and the paths caldera's processes use.
RESOURCE_REQUESTS = [
    ("GET", "/api/v1/namespaces", "list", "", "v1", "", "namespaces", "", ""),
    ("GET", "/api/v1/namespaces/other", "get", "", "v1", "other", "namespaces", "", "other"),
    ("GET", "/api/v1/namespaces/other/pods", "list", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "", "foo"),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "", "foo"),
    ("GET", "/api/v1/pods", "list", "", "v1", "", "pods", "", ""),
    ("HEAD", "/api/v1/pods", "list", "", "v1", "", "pods", "", ""),
    ("PATCH", "/api/v1/namespaces/new-namespace", "patch", "", "v1", "new-namespace", "namespaces", "", "new-namespace"),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "", "v1", "other", "pods", "", "foo"),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "", "v1", "other", "pods", "", "foo"),
    ("GET", "/api/v1/watch/pods", "watch", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/pods?watch=true", "watch", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/pods?watch=false", "list", "", "v1", "", "pods", "", ""),
    ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "", "v1", "other", "pods", "", ""),
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "", "v1", "other", "pods", "status", "foo"),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "", "v1", "other", "pods", "proxy", "foo"),
    ("PUT", "/api/v1/namespaces/other/finalize", "update", "", "v1", "other", "namespaces", "finalize", "other"),
    ("PUT", "/api/v1/namespaces/other/status", "update", "", "v1", "other", "namespaces", "status", "other"),
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "", "v1", "other", "pods", "", "foo"),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "", "v1", "other", "pods", "", "foo"),
    ("POST", "/api/v1/namespaces/other/pods", "create", "", "v1", "other", "pods", "", ""),
    ("DELETE", "/api/v1/nodes", "deletecollection", "", "v1", "", "nodes", "", ""),
    ("DELETE", "/api/v1/namespaces", "deletecollection", "", "v1", "", "namespaces", "", ""),
    ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "", "v1", "other", "pods", "", ""),
    ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "extensions", "v1", "other", "pods", "", ""),
    ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "extensions", "v1", "other", "pods", "", ""),
    ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "extensions", "v1beta3", "other", "pods", "", ""),
    # TestFieldSelectorParsing
    ("GET", "/apis/group/version/resource", "list", "group", "version", "", "resource", "", ""),
    ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1", "list", "group", "version", "", "resource", "", "name1"),
    ("GET", "/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1", "watch", "group", "version", "", "resource", "", "name1"),
    ("GET", "/apis/group/version/resource?fieldSelector=foo=bar", "list", "group", "version", "", "resource", "", ""),
    ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo", "list", "group", "version", "", "resource", "", ""),
    ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true", "watch", "group", "version", "", "resource", "", ""),
    ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false", "list", "group", "version", "", "resource", "", ""),
    # caldera's own requests
    ("POST", "/api/v1/namespaces/work/pods/p/binding", "create", "", "v1", "work", "pods", "binding", "p"),
    ("POST", "/api/v1/namespaces/work/bindings", "create", "", "v1", "work", "bindings", "", ""),
    ("PATCH", "/api/v1/namespaces/work/pods/p/status", "patch", "", "v1", "work", "pods", "status", "p"),
    ("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/work/podgroups/g/status", "patch", "scheduling.volcano.sh", "v1beta1", "work", "podgroups", "status", "g"),
    ("GET", "/apis/scheduling.volcano.sh/v1beta1/podgroups?watch=True&timeoutSeconds=60", "watch", "scheduling.volcano.sh", "v1beta1", "", "podgroups", "", ""),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/caldera-system/leases/mirror", "update", "coordination.k8s.io", "v1", "caldera-system", "leases", "", "mirror"),
    ("PATCH", "/apis/shard.volcano.sh/v1alpha1/nodeshards/volcano/status", "patch", "shard.volcano.sh", "v1alpha1", "", "nodeshards", "status", "volcano"),
]  # fmt: skip


@pytest.mark.parametrize("case", RESOURCE_REQUESTS, ids=lambda c: f"{c[0]} {c[1]}")
def test_a_resource_request_becomes_the_attributes_kubernetes_authorizes(case: tuple[str, ...]) -> None:
    method, url, verb, group, version, namespace, resource, subresource, name = case
    path, _, query = url.partition("?")
    params = dict(p.split("=", 1) for p in query.split("&")) if query else {}
    assert request_attributes(NOBODY, method, path, params) == Attributes(
        NOBODY, verb, True, group, version, namespace, resource, subresource, name, path
    )


@pytest.mark.parametrize(
    "path",
    ["/", "/api/version/", "/apis/group/version/", "/badprefix/version/resource", "/apis/version/resource", "/api",
     "/api/version", "/apis/extensions/v1beta1", "/version", "/healthz", ""],
)  # fmt: skip
def test_other_paths_are_non_resource_requests_with_the_method_as_verb(path: str) -> None:
    assert request_attributes(NOBODY, "GET", path, {}) == Attributes(NOBODY, "get", resource_request=False, path=path)


def resource(verb: str, group: str, res: str, sub: str = "", name: str = "") -> Attributes:
    return Attributes(NOBODY, verb, True, group, "v1", "", res, sub, name)


def url(verb: str, path: str) -> Attributes:
    return Attributes(NOBODY, verb, resource_request=False, path=path)


def expand(
    verbs: str, groups: str, resources: str, names: str, requested: dict[tuple[str, str, str], bool]
) -> list[tuple[Rule, Attributes, bool]]:
    rule = Rule(tuple(verbs.split(",")), tuple(groups.split(",")), tuple(resources.split(",")))
    if names:
        rule = Rule(rule.verbs, rule.api_groups, rule.resources, tuple(names.split(",")))
    return [(rule, resource(v, g, r), ok) for (v, g, r), ok in requested.items()]


# TestRuleMatches of plugin/pkg/auth/authorizer/rbac/rbac_test.go, request by request.
V1, V2, G1, G2, R1, R2 = "verb1", "verb2", "group1", "group2", "resource1", "resource2"
RULE_CASES: list[tuple[Rule, Attributes, bool]] = [
    *expand("*", G1, R1, "", {(V1, G1, R1): True, (V1, G2, R1): False, (V1, G1, R2): False, (V1, G2, R2): False,
                              (V2, G1, R1): True, (V2, G2, R1): False, (V2, G1, R2): False, (V2, G2, R2): False}),
    *expand(V1, "*", R1, "", {(V1, G1, R1): True, (V1, G2, R1): True, (V1, G1, R2): False, (V1, G2, R2): False,
                              (V2, G1, R1): False, (V2, G2, R1): False, (V2, G1, R2): False, (V2, G2, R2): False}),
    *expand(V1, G1, "*", "", {(V1, G1, R1): True, (V1, G2, R1): False, (V1, G1, R2): True, (V1, G2, R2): False,
                              (V2, G1, R1): False, (V2, G2, R1): False, (V2, G1, R2): False, (V2, G2, R2): False}),
    *expand(f"{V1},{V2}", f"{G1},{G2}", f"{R1},{R2}", "",
            {(v, g, r): True for v in (V1, V2) for g in (G1, G2) for r in (R1, R2)}),
    *[(Rule(("*",), ("*",), ("resource1/subresource1",)), resource(v, g, r, s), ok) for v, g, r, s, ok in [
        (V1, G1, R1, "subresource1", True), (V1, G2, R1, "subresource2", False), (V1, G1, R2, "subresource1", False),
        (V1, G2, R2, "subresource1", False), (V2, G1, R1, "subresource1", True), (V2, G2, R1, "subresource2", False),
        (V2, G1, R2, "subresource1", False), (V2, G2, R2, "subresource1", False)]],
    *[(Rule((V1,), non_resource_urls=("*",)), url(v, u), v == V1)
      for v in (V1, V2) for u in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")],
    *[(Rule((V1,), non_resource_urls=("/foo/*",)), url(V1, u), ok) for u, ok in [
        ("/foo", False), ("/foo/bar", True), ("/foo/baz", True), ("/foo/bar/one", True), ("/foo/baz/one", True),
        ("/notfoo", False), ("/notfoo/bar", False), ("/notfoo/baz", False), ("/notfoo/bar/one", False)]],
    *[(Rule(("*",), non_resource_urls=("/foo", "/foo/bar/one")), url(v, u), ok) for v in (V1, V2) for u, ok in [
        ("/foo", True), ("/foo/bar", False), ("/foo/baz", False), ("/foo/bar/one", True), ("/foo/baz/one", False)]],
    # */subresource, and resourceNames (a request without a name, a create or a list, never matches them)
    (Rule(("get",), ("",), ("*/status",)), resource("get", "", "pods", "status"), True),
    (Rule(("get",), ("",), ("*/status",)), resource("get", "", "nodes", "status"), True),
    (Rule(("get",), ("",), ("*/status",)), resource("get", "", "pods"), False),
    (Rule(("get",), ("",), ("*/status",)), resource("get", "", "pods", "binding"), False),
    (Rule(("get",), ("",), ("*/scale",)), resource("get", "", "pods", "status"), False),
    (Rule(("get",), ("",), ("pods",)), resource("get", "", "pods", "status"), False),
    (Rule(("get",), ("",), ("pods/status",)), resource("get", "", "pods"), False),
    (Rule(("get", "update"), ("coordination.k8s.io",), ("leases",), ("mirror",)), resource("get", "coordination.k8s.io", "leases", name="mirror"), True),
    (Rule(("get", "update"), ("coordination.k8s.io",), ("leases",), ("mirror",)), resource("update", "coordination.k8s.io", "leases", name="sharding"), False),
    (Rule(("create",), ("coordination.k8s.io",), ("leases",), ("mirror",)), resource("create", "coordination.k8s.io", "leases"), False),
    (Rule(("list",), ("",), ("pods",), ("p",)), resource("list", "", "pods"), False),
    (Rule(("list",), ("",), ("pods",), ("p",)), resource("list", "", "pods", name="p"), True),
    (Rule(("get",), ("",), ("pods",)), url("get", "/api/v1/pods"), False),  # a resource rule grants no URL
    (Rule(("get",), non_resource_urls=("*",)), resource("get", "", "pods"), False),  # and a URL rule no resource
]  # fmt: skip


@pytest.mark.parametrize("rule,request_,allowed", RULE_CASES)
def test_a_rule_allows_what_kubernetes_rbac_allows(rule: Rule, request_: Attributes, allowed: bool) -> None:
    assert rule_allows(request_, rule) is allowed


def rules(*specs: tuple[str, str, str, str]) -> list[Obj]:
    """rbac_test.go's newRule(verbs, apiGroups, resources, nonResourceURLs), comma-separated."""
    return [
        {"verbs": v.split(","), "apiGroups": g.split(","), "resources": r.split(","), "nonResourceURLs": u.split(",")}
        for v, g, r, u in specs
    ]


def subjects(*names: str) -> list[Obj]:
    out: list[Obj] = []
    for s in names:
        kind, name = s.split(":", 1)
        if kind == "ServiceAccount":
            namespace, name = name.split("/") if "/" in name else ("", name)
            out.append({"kind": kind, "name": name} | ({"namespace": namespace} if namespace else {}))
        else:
            out.append({"kind": kind, "name": name, "apiGroup": "rbac.authorization.k8s.io"})
    return out


def seed(store: ObjectStore, *objects: tuple[Resource, Obj]) -> RBACAuthorizer:
    for resource_, obj in objects:
        store.create(resource_, obj)
    return RBACAuthorizer(store)


def cluster_role(name: str, *specs: tuple[str, str, str, str]) -> tuple[Resource, Obj]:
    return CLUSTER_ROLE, {"metadata": {"name": name}, "rules": rules(*specs)}


def role(namespace: str, name: str, *specs: tuple[str, str, str, str]) -> tuple[Resource, Obj]:
    return ROLE, {"metadata": {"name": name, "namespace": namespace}, "rules": rules(*specs)}


def binding(namespace: str, name: str, kind: str, role_name: str, *who: str) -> tuple[Resource, Obj]:
    """A RoleBinding in ``namespace``, or a ClusterRoleBinding when ``namespace`` is empty."""
    m: Obj = {"name": name} | ({"namespace": namespace} if namespace else {})
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name}
    return (ROLE_BINDING if namespace else CLUSTER_ROLE_BINDING), {
        "metadata": m,
        "roleRef": ref,
        "subjects": subjects(*who),
    }


def ask(user: str, groups: str, verb: str, res: str, sub: str, namespace: str) -> Attributes:
    """rbac_test.go's defaultAttributes: user, groups, verb, resource, subresource, namespace (API group "")."""
    who = User(user, tuple(g for g in groups.split(",") if g))
    return Attributes(who, verb, True, "", "", namespace, res, sub)


def test_a_role_binding_to_a_cluster_role_grants_it_in_its_namespace_only() -> None:
    authorizer = seed(
        ObjectStore(),
        cluster_role("admin", ("*", "*", "*", "*")),
        binding("ns1", "b", "ClusterRole", "admin", "User:admin", "Group:admins"),
    )
    for a in (ask("admin", "", "get", "Pods", "", "ns1"), ask("admin", "", "watch", "Pods", "", "ns1"),
              ask("admin", "group1", "watch", "Foobar", "", "ns1"), ask("joe", "admins", "watch", "Foobar", "", "ns1"),
              ask("joe", "group1,admins", "watch", "Foobar", "", "ns1")):  # fmt: skip
        assert authorizer.authorize(a).allowed, a
    for a in (ask("admin", "", "GET", "Pods", "", "ns2"), ask("admin", "", "GET", "Nodes", "", ""),
              ask("admin", "admins", "GET", "Pods", "", "ns2"), ask("admin", "admins", "GET", "Nodes", "", "")):  # fmt: skip
        assert not authorizer.authorize(a).allowed, a


def test_subresources_are_granted_apart_from_their_resource() -> None:
    for granted, allowed, refused in (("pods", "", "status"), ("pods/status", "status", "")):
        authorizer = seed(
            ObjectStore(),
            cluster_role("admin", ("*", "*", granted, "*")),
            binding("ns1", "b", "ClusterRole", "admin", "User:admin"),
        )
        assert authorizer.authorize(ask("admin", "", "get", "pods", allowed, "ns1")).allowed
        assert not authorizer.authorize(ask("admin", "", "get", "pods", refused, "ns1")).allowed


def test_non_resource_urls_by_cluster_role_binding() -> None:
    authorizer = seed(
        ObjectStore(),
        cluster_role("getter", ("get", "", "", "/apis")),
        cluster_role("any", ("*", "", "", "/apis")),
        cluster_role("prefix", ("get", "", "", "/apis/*")),
        binding("", "getter", "ClusterRole", "getter", "User:foo", "Group:bar"),
        binding("", "any", "ClusterRole", "any", "User:admin", "Group:admin"),
        binding("", "prefix", "ClusterRole", "prefix", "User:prefixed", "Group:prefixed"),
    )

    def path(user: str, group: str, verb: str, where: str) -> bool:
        a = Attributes(User(user, (group,) if group else ()), verb, resource_request=False, path=where)
        return authorizer.authorize(a).allowed

    for user, group in (("foo", ""), ("", "bar"), ("admin", ""), ("", "admin")):
        assert path(user, group, "get", "/apis") and not path(user, group, "get", "/api/v1")
    assert path("admin", "", "watch", "/apis") and path("", "admin", "watch", "/apis")
    assert not path("foo", "", "watch", "/apis") and not path("", "bar", "watch", "/apis")
    for user, group in (("prefixed", ""), ("", "prefixed")):
        assert path(user, group, "get", "/apis/v1") and path(user, group, "get", "/apis/v1/foobar")
        assert not path(user, group, "get", "/api/v1")


def test_service_account_subjects_and_roles_in_the_binding_namespace() -> None:
    mirror = service_account_user("caldera-system", "caldera-mirror")
    authorizer = seed(
        ObjectStore(),
        role("caldera-system", "leases", ("get", "coordination.k8s.io", "leases", "")),
        role("other", "leases", ("*", "*", "*", "")),  # the same name elsewhere grants nothing here
        binding("caldera-system", "local", "Role", "leases", "ServiceAccount:caldera-mirror"),  # namespace defaulted
        cluster_role("reader", ("list", "", "nodes", "")),
        binding("", "nameless", "ClusterRole", "reader", "ServiceAccount:caldera-mirror"),  # no namespace: no one
        binding("", "all-sas", "ClusterRole", "reader", "Group:system:serviceaccounts:caldera-system"),
    )
    lease = Attributes(mirror, "get", True, "coordination.k8s.io", "v1", "caldera-system", "leases", "", "mirror")
    assert authorizer.authorize(lease).reason == (
        'RBAC: allowed by RoleBinding "local/caldera-system" of Role "leases" to '
        'ServiceAccount "caldera-mirror/caldera-system"'
    )
    assert not authorizer.authorize(
        Attributes(mirror, "update", True, "coordination.k8s.io", "v1", "caldera-system", "leases")
    ).allowed
    assert not authorizer.authorize(
        Attributes(mirror, "get", True, "coordination.k8s.io", "v1", "other", "leases")
    ).allowed
    nodes = Attributes(mirror, "list", True, "", "v1", "", "nodes")
    assert authorizer.authorize(nodes).reason.endswith('to Group "system:serviceaccounts:caldera-system"')
    other = service_account_user("work", "default")
    assert not authorizer.authorize(Attributes(other, "list", True, "", "v1", "", "nodes")).allowed


def test_a_binding_to_a_missing_role_denies_and_says_why() -> None:
    user = User("u")
    authorizer = seed(
        ObjectStore(),
        binding("", "a", "ClusterRole", "gone", "User:u"),
        binding("ns", "b", "Role", "also-gone", "User:u"),
        binding("ns", "c", "Thing", "x", "User:u"),
    )
    assert authorizer.authorize(Attributes(user, "get", True, "", "v1", "", "nodes", "", "n")).reason == (
        'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'
    )
    assert authorizer.authorize(Attributes(user, "get", True, "", "v1", "ns", "pods", "", "p")).reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
        'role.rbac.authorization.k8s.io "also-gone" not found, unsupported role reference kind: "Thing"]'
    )
