"""The test API server through the official client: CRUD of every kind, versions, conflicts, status
subresources, patches, selectors, the binding subresource and a pod's immutable node."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import kubernetes
import pytest
from kubernetes import client
from kubernetes.client import ApiException

from tests.kubeapi import KubeAPIServer
from tests.kubeapi.clients import NAMESPACE, Calls, pod, sample
from tests.kubeapi.resources import (
    LEASE,
    NODE,
    POD,
    POD_GROUP,
    QUEUE,
    RESOURCES,
    Resource,
)

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def status_of(e: ApiException) -> dict[str, Any]:
    assert e.body is not None
    body = json.loads(e.body)
    assert isinstance(body, dict)
    return body


def names(listing: dict[str, Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in listing["items"])


def version(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def bind(core: Any, name: str, node: str, namespace: str = NAMESPACE) -> int:
    """POST pods/binding as caldera does: without preloading the response, whose body is a Status."""
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)
    )
    response = core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    return int(response.status)


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_create_get_list_update_patch_delete(kube_client: client.ApiClient, resource: Resource) -> None:
    calls = Calls(kube_client, resource)
    created = calls.create(sample(resource, "a", {"team": "x"}))
    meta = created["metadata"]
    assert meta["name"] == "a" and meta["uid"] and version(created) > 0
    assert datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%S%z")
    assert calls.get("a") == created
    calls.create(sample(resource, "b"))
    listing = calls.list()
    assert names(listing) == ["a", "b"] and version(listing) >= version(created)

    changed = created | {"metadata": meta | {"labels": {"team": "y"}}}
    replaced = calls.replace("a", changed)
    assert replaced["metadata"]["labels"] == {"team": "y"} and version(replaced) > version(created)
    assert replaced["metadata"]["uid"] == meta["uid"]
    patched = calls.patch("a", {"metadata": {"labels": {"tier": "1"}}})
    assert patched["metadata"]["labels"] == {"team": "y", "tier": "1"} and version(patched) > version(replaced)

    deleted = calls.delete("a")
    if resource.delete_returns_object:
        assert deleted["metadata"]["name"] == "a" and version(deleted) > version(patched)
    else:
        assert deleted["status"] == "Success" and deleted["details"]["name"] == "a"
    with pytest.raises(ApiException) as e:
        calls.get("a")
    assert e.value.status == 404
    assert status_of(e.value) | {"details": None} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": "NotFound",
        "code": 404,
        "message": f'{resource.qualified} "a" not found',
        "details": None,
    }
    assert names(calls.list()) == ["b"]


def test_versions_increase_and_a_stale_update_is_a_conflict(kube_client: client.ApiClient) -> None:
    calls = Calls(kube_client, POD_GROUP)
    first = calls.create(sample(POD_GROUP, "g"))
    second = calls.patch("g", {"spec": {"minMember": 3}})
    other = Calls(kube_client, QUEUE).create(sample(QUEUE, "q"))
    assert version(first) < version(second) < version(other) <= version(calls.list())
    assert second["metadata"]["generation"] == 2

    with pytest.raises(ApiException) as e:
        calls.replace("g", first | {"spec": {"minMember": 5}})
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"
    with pytest.raises(ApiException) as e:  # a version in a patch is a precondition too
        calls.patch("g", {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}, "spec": {"x": 1}})
    assert e.value.status == 409
    assert calls.get("g") == second

    unversioned = second | {"metadata": {k: v for k, v in second["metadata"].items() if k != "resourceVersion"}}
    with pytest.raises(ApiException) as e:  # custom resources take no unconditional update
        calls.replace("g", unversioned)
    assert e.value.status == 422
    assert calls.replace("g", second) == second  # writing what is there changes nothing, not even the version


def test_of_two_replicas_renewing_one_lease_one_wins(kube_client: client.ApiClient) -> None:
    """What leader election relies on: an update from a read that is no longer current fails."""
    calls = Calls(kube_client, LEASE)
    calls.create(sample(LEASE, "caldera-binder"))
    read_by_a, read_by_b = calls.get("caldera-binder"), calls.get("caldera-binder")
    a = calls.replace("caldera-binder", read_by_a | {"spec": read_by_a["spec"] | {"holderIdentity": "a"}})
    with pytest.raises(ApiException) as e:
        calls.replace("caldera-binder", read_by_b | {"spec": read_by_b["spec"] | {"holderIdentity": "b"}})
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"
    assert calls.get("caldera-binder") == a and a["spec"]["holderIdentity"] == "a"


def test_namespaced_custom_resources_list_across_namespaces(kube_client: client.ApiClient) -> None:
    Calls(kube_client, POD_GROUP).create(sample(POD_GROUP, "g1"))
    other = sample(POD_GROUP, "g2")
    other["metadata"]["namespace"] = "team-b"
    Calls(kube_client, POD_GROUP, namespace="team-b").create(other)
    everywhere = Calls(kube_client, POD_GROUP).json(
        client.CustomObjectsApi(kube_client).list_cluster_custom_object(
            POD_GROUP.group, POD_GROUP.version, POD_GROUP.plural
        )
    )
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in everywhere["items"]) == [
        ("default", "g1"),
        ("team-b", "g2"),
    ]
    assert names(Calls(kube_client, POD_GROUP).list()) == ["g1"]


def test_duplicate_create_is_already_exists(kube_client: client.ApiClient) -> None:
    calls = Calls(kube_client, POD)
    calls.create(pod("p"))
    with pytest.raises(ApiException) as e:
        calls.create(pod("p"))
    assert e.value.status == 409 and status_of(e.value)["reason"] == "AlreadyExists"


def test_server_sets_uid_timestamp_and_pod_status_on_create(kube_client: client.ApiClient) -> None:
    calls = Calls(kube_client, POD)
    sent = pod("p") | {"status": {"phase": "Running"}}
    sent["metadata"] |= {"uid": "mine", "creationTimestamp": "2000-01-01T00:00:00Z"}
    created = calls.create(sent)
    assert created["metadata"]["uid"] != "mine" and not created["metadata"]["creationTimestamp"].startswith("2000")
    assert created["status"] == {"phase": "Pending"}
    named = calls.create(pod("") | {"metadata": {"generateName": "web-", "namespace": NAMESPACE}})
    assert named["metadata"]["name"].startswith("web-") and len(named["metadata"]["name"]) == 9


def test_delete_preconditions(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    created = Calls(kube_client, POD).create(pod("p"))
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_pod(
            "p", NAMESPACE, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="someone-else"))
        )
    assert e.value.status == 409
    core.delete_namespaced_pod(
        "p",
        NAMESPACE,
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=created["metadata"]["uid"])),
    )


@pytest.mark.parametrize(
    "resource, field, initial, new",
    [
        (POD_GROUP, "phase", None, "Running"),
        (QUEUE, "state", None, "Open"),
        (POD, "phase", "Pending", "Running"),  # a new pod is Pending whatever it says
        (NODE, "phase", "Sent", "Running"),  # a node is registered with its status
    ],
    ids=lambda v: v.kind if isinstance(v, Resource) else "",
)
def test_status_subresource(
    kube_client: client.ApiClient, resource: Resource, field: str, initial: str | None, new: str
) -> None:
    calls = Calls(kube_client, resource)
    created = calls.create(sample(resource, "a") | {"status": {field: "Sent"}})
    assert (created.get("status") or {}).get(field) == initial
    ignored = calls.patch("a", {"status": {field: new}, "metadata": {"labels": {"seen": "yes"}}})
    assert (ignored.get("status") or {}).get(field) == initial and ignored["metadata"]["labels"] == {"seen": "yes"}

    spec_before = created.get("spec")
    written = calls.patch(
        "a",
        {"status": {field: new}, "metadata": {"labels": {"lost": "yes"}}, "spec": {"x": 1}},
        status=True,
        content_type=MERGE,
    )
    assert written["status"][field] == new and written.get("spec") == spec_before
    assert written["metadata"]["labels"] == {"seen": "yes"} and version(written) > version(ignored)
    assert calls.get("a", status=True)["status"][field] == new

    replaced = calls.replace("a", written | {"status": written["status"] | {field: "Failed"}}, status=True)
    assert replaced["status"][field] == "Failed" and version(replaced) > version(written)


def test_strategic_merge_patch_merges_conditions_by_type(kube_client: client.ApiClient) -> None:
    calls = Calls(kube_client, NODE)
    node = sample(NODE, "n")
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    calls.create(node)
    both = calls.patch("n", {"status": {"conditions": [{"type": "DiskPressure", "status": "False"}]}}, status=True)
    assert both["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "DiskPressure", "status": "False"},
    ]
    assert both["status"]["capacity"] == {"cpu": "8", "memory": "32Gi"}
    flipped = calls.patch(
        "n",
        {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Down"}]}},
        status=True,
        content_type=SMP,
    )
    assert flipped["status"]["conditions"][0] == {"type": "Ready", "status": "False", "reason": "Down"}
    dropped = calls.patch("n", {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}, status=True)
    assert dropped["status"]["conditions"] == [{"type": "DiskPressure", "status": "False"}]
    annotated = calls.patch("n", {"metadata": {"annotations": {"a": "1"}}, "spec": {"unschedulable": True}})
    assert annotated["metadata"]["annotations"] == {"a": "1"} and annotated["spec"]["unschedulable"] is True

    replaced = calls.patch(
        "n", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, status=True, content_type=MERGE
    )  # a merge patch replaces the list
    assert replaced["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    with pytest.raises(ApiException) as e:  # custom resources take no strategic merge patch, like the real server
        Calls(kube_client, QUEUE).create(sample(QUEUE, "q"))
        Calls(kube_client, QUEUE).patch("q", {"spec": {"weight": 2}}, content_type=SMP)
    assert e.value.status == 415


LABELED = {"a": {"app": "web", "tier": "front"}, "b": {"app": "web", "tier": "back"}, "c": {"app": "db"}, "d": {}}


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier=back", ["b"]),
        ("app!=web", ["c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("tier in (front, middle)", ["a"]),
        ("app notin (web),!tier", ["c", "d"]),
        ("app in (web,db),tier notin (back)", ["a", "c"]),
    ],
)
def test_label_selectors(kube_client: client.ApiClient, selector: str, expected: list[str]) -> None:
    for resource in (POD, QUEUE):
        calls = Calls(kube_client, resource)
        for name, labels in LABELED.items():
            calls.create(sample(resource, name, labels))
        assert names(calls.list(label_selector=selector)) == expected, resource.kind


def test_field_selectors(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    calls = Calls(kube_client, POD)
    calls.create(pod("bound", node="n1"))
    calls.create(pod("pending"))
    calls.create(pod("other", scheduler="default-scheduler"))
    Calls(kube_client, POD, namespace="other").create(pod("elsewhere", namespace="other", node="n2"))
    calls.patch("bound", {"status": {"phase": "Running"}}, status=True)

    def listed(selector: str) -> list[str]:
        return names(calls.json(core.list_pod_for_all_namespaces(field_selector=selector)))

    assert listed("spec.nodeName=") == ["other", "pending"]
    assert listed("spec.nodeName!=") == ["bound", "elsewhere"]
    assert listed("spec.nodeName==n1") == ["bound"]
    assert listed("spec.schedulerName=caldera,spec.nodeName=") == ["pending"]
    assert listed("status.phase!=Pending") == ["bound"]
    assert listed("metadata.namespace=other") == ["elsewhere"]
    assert listed("metadata.name=pending,metadata.namespace=default") == ["pending"]
    assert names(calls.list(field_selector="spec.nodeName=n2")) == []  # in the namespace only
    with pytest.raises(ApiException) as e:
        listed("spec.priority=1")
    assert e.value.status == 400


def test_binding_sets_the_node_once(kube_client: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_client)
    before = Calls(kube_client, POD).create(pod("p"))
    assert bind(core, "p", "n1") == 201
    bound = Calls(kube_client, POD).get("p")
    assert bound["spec"]["nodeName"] == "n1" and version(bound) > version(before)
    assert [c["type"] for c in bound["status"]["conditions"]] == ["PodScheduled"]
    with pytest.raises(ApiException) as e:
        bind(core, "p", "n2")
    assert e.value.status == 409 and "already assigned" in status_of(e.value)["message"]
    with pytest.raises(ApiException) as e:
        bind(core, "missing", "n1")
    assert e.value.status == 404
    assert Calls(kube_client, POD).get("p")["spec"]["nodeName"] == "n1"


def test_binding_checks_the_pods_uid(kube_client: client.ApiClient) -> None:
    core: Any = client.CoreV1Api(kube_client)  # typed as returning a V1Binding, even without preloading
    Calls(kube_client, POD).create(pod("p"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p", uid="a-pod-of-the-same-name"),
        target=client.V1ObjectReference(kind="Node", name="n1"),
    )
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("p", NAMESPACE, body, _preload_content=False)
    assert e.value.status == 409


def test_the_bindings_collection_binds_the_pod_the_body_names(kube_client: client.ApiClient) -> None:
    core: Any = client.CoreV1Api(kube_client)
    Calls(kube_client, POD).create(pod("p"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(name="n1"))
    assert core.create_namespaced_binding(NAMESPACE, body, _preload_content=False).status == 201
    assert Calls(kube_client, POD).get("p")["spec"]["nodeName"] == "n1"
    with pytest.raises(ApiException) as e:
        core.create_namespaced_binding(NAMESPACE, body, _preload_content=False)
    assert e.value.status == 409


def test_a_pods_node_cannot_be_changed_but_by_binding(kube_client: client.ApiClient) -> None:
    calls = Calls(kube_client, POD)
    created = calls.create(pod("p", node="n1"))
    with pytest.raises(ApiException) as e:
        calls.patch("p", {"spec": {"nodeName": "n2"}})
    assert e.value.status == 422 and status_of(e.value)["reason"] == "Invalid"
    with pytest.raises(ApiException) as e:
        calls.replace("p", created | {"spec": created["spec"] | {"nodeName": "n2"}})
    assert e.value.status == 422
    unbound = calls.create(pod("q"))
    with pytest.raises(ApiException) as e:
        calls.patch("q", {"spec": {"nodeName": "n2"}}, content_type=MERGE)
    assert e.value.status == 422
    tolerating = calls.patch("q", {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}})
    assert tolerating["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert "nodeName" not in tolerating["spec"] and version(tolerating) > version(unbound)


def test_unknown_paths_and_version(kube_api: KubeAPIServer, kube_client: client.ApiClient) -> None:
    assert client.VersionApi(kube_client).get_code().git_version.startswith("v1.")
    with pytest.raises(ApiException) as e:
        client.AppsV1Api(kube_client).list_namespaced_deployment(NAMESPACE)
    assert e.value.status == 404 and status_of(e.value)["kind"] == "Status"
    assert isinstance(kube_api.configuration(), kubernetes.client.Configuration)
