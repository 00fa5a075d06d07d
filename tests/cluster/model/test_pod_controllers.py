"""Kubernetes' workload controllers (Deployment, ReplicaSet, StatefulSet, batch Job) expanded into their pods, and
the PodGroup Volcano's podgroup controller adds for pods that Volcano schedules (release-1.14)."""

from __future__ import annotations

import pytest

from cluster.model.core import Pod
from cluster.model.labels import GROUP_NAME_ANNOTATION
from cluster.model.manifests import ManifestError, expand, load_manifests
from cluster.model.pod_controllers import BatchJob, Deployment, expand_workload
from cluster.model.volcano import PodGroup

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, annotations: {volcano.sh/team: a, other: x}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {scheduling.volcano.sh/queue-name: frontend, volcano.sh/preemptable: "false"}
    spec:
      schedulerName: volcano
      priorityClassName: low
      containers: [{name: nginx, image: nginx, resources: {requests: {cpu: 300m, memory: 64Mi}}}]
"""


def expanded(text: str) -> tuple[list[PodGroup], list[Pod]]:
    objects, skipped = load_manifests(text)
    assert skipped == []
    out = expand(objects)
    return [o for o in out if isinstance(o, PodGroup)], [o for o in out if isinstance(o, Pod)]


def test_deployment_makes_one_pod_through_a_replicaset_and_volcano_groups_it() -> None:
    [group], [pod] = expanded(DEPLOYMENT)  # replicas default to 1
    hash_ = pod.labels["pod-template-hash"]
    assert pod.name.startswith(f"web-{hash_}-") and len(pod.name) == len(f"web-{hash_}-") + 5
    assert pod.labels["app"] == "web" and pod.namespace == "shop"
    # One PodGroup per owning ReplicaSet: podgroup-<its uid>; the pods name it.
    assert group.name.startswith("podgroup-") and pod.group_name == group.name
    assert (group.spec.min_member, group.spec.queue, group.spec.priority_class_name) == (1, "frontend", "low")
    assert group.spec.min_resources == {"cpu": "300m", "memory": "64Mi"}
    # The owner's volcano.sh/ annotations (through the ReplicaSet), then the pod's preemptable.
    assert group.metadata.annotations == {"volcano.sh/team": "a", "volcano.sh/preemptable": "false"}
    assert expanded(DEPLOYMENT) == ([group], [pod])  # the same names every run


def test_replicas_share_their_owners_podgroup_and_group_min_member_gangs_them() -> None:
    text = DEPLOYMENT.replace("spec:\n  selector", "spec:\n  replicas: 3\n  selector").replace(
        "volcano.sh/team: a,", "volcano.sh/team: a, scheduling.volcano.sh/group-min-member: '3',"
    )
    [group], pods = expanded(text)
    assert len({p.name for p in pods}) == 3 and {p.group_name for p in pods} == {group.name}
    assert group.spec.min_member == 3 and group.spec.min_resources == {"cpu": "900m", "memory": "192Mi"}


def test_the_queue_comes_from_the_pods_annotation_not_the_owners() -> None:
    text = DEPLOYMENT.replace("annotations: {scheduling.volcano.sh/queue-name: frontend, ", "annotations: {").replace(
        "other: x", "scheduling.volcano.sh/queue-name: frontend"
    )
    [group], _ = expanded(text)
    assert group.spec.queue == "default"


def test_pods_for_another_scheduler_or_already_grouped_get_no_podgroup() -> None:
    groups, pods = expanded(DEPLOYMENT.replace("schedulerName: volcano", "schedulerName: agent-scheduler"))
    assert groups == [] and pods[0].group_name == ""
    text = DEPLOYMENT.replace('volcano.sh/preemptable: "false"', "scheduling.k8s.io/group-name: mine")
    groups, pods = expanded(text)
    assert groups == [] and pods[0].group_name == "mine"


def test_zero_replicas_make_nothing() -> None:
    assert expanded(DEPLOYMENT.replace("spec:\n  selector", "spec:\n  replicas: 0\n  selector")) == ([], [])


def test_replicaset_pods_are_named_after_it() -> None:
    text = DEPLOYMENT.replace("kind: Deployment", "kind: ReplicaSet").replace(
        "spec:\n  selector", "spec:\n  replicas: 2\n  selector"
    )
    [group], pods = expanded(text)
    assert all(p.name.startswith("web-") and len(p.name) == len("web-") + 5 for p in pods)
    assert len({p.name for p in pods}) == 2 and "pod-template-hash" not in pods[0].labels
    assert group.metadata.annotations["volcano.sh/team"] == "a"  # a ReplicaSet's own annotations


STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: pg, image: postgres, resources: {requests: {cpu: "1"}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def test_statefulset_pods_are_numbered_and_claim_their_own_volume() -> None:
    groups, pods = expanded(STATEFULSET)
    assert groups == []  # default-scheduler: not Volcano's
    assert [p.name for p in pods] == ["db-0", "db-1"]
    assert pods[1].labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pods[1].labels["apps.kubernetes.io/pod-index"] == "1"
    assert pods[0].labels["controller-revision-hash"] == pods[1].labels["controller-revision-hash"]
    assert pods[0].labels["controller-revision-hash"].startswith("db-")
    assert [(v.name, v.persistent_volume_claim) for v in pods[1].spec.volumes] == [("data", {"claimName": "data-db-1"})]


def test_statefulset_ordinals_start_where_stated() -> None:
    _, pods = expanded(STATEFULSET.replace("  serviceName: db\n", "  serviceName: db\n  ordinals: {start: 5}\n"))
    assert [p.name for p in pods] == ["db-5", "db-6"]


BATCH_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: etl, annotations: {scheduling.volcano.sh/group-min-member: "2"}}
spec:
  parallelism: 3
  completions: 2
  template:
    spec:
      schedulerName: volcano
      restartPolicy: Never
      containers: [{name: step, image: busybox, resources: {requests: {cpu: 500m}}}]
"""


def test_batch_job_runs_parallelism_pods_at_most_completions() -> None:
    [group], pods = expanded(BATCH_JOB)
    assert len(pods) == 2 and all(p.name.startswith("etl-") and len(p.name) == len("etl-") + 5 for p in pods)
    uid = pods[0].labels["batch.kubernetes.io/controller-uid"]
    assert pods[0].labels == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "etl",
        "controller-uid": uid,
        "job-name": "etl",
    }
    assert group.name == f"podgroup-{uid}" and group.spec.min_member == 2  # the Job's own annotation
    assert all(p.metadata.annotations[GROUP_NAME_ANNOTATION] == group.name for p in pods)


def test_batch_job_defaults_and_indexed_and_suspended() -> None:
    _, pods = expanded(BATCH_JOB.replace("  parallelism: 3\n  completions: 2\n", ""))
    assert len(pods) == 1  # parallelism 1
    _, pods = expanded(BATCH_JOB.replace("  completions: 2\n", "  completions: 4\n  completionMode: Indexed\n"))
    assert [p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0", "1", "2"]
    assert [p.name[: len("etl-0-")] for p in pods] == ["etl-0-", "etl-1-", "etl-2-"]
    assert expanded(BATCH_JOB.replace("  parallelism: 3\n", "  parallelism: 3\n  suspend: true\n")) == ([], [])


def test_a_kubernetes_job_is_not_a_volcano_job() -> None:
    objects, _ = load_manifests(BATCH_JOB)
    assert isinstance(objects[0], BatchJob)


@pytest.mark.parametrize(
    ("text", "replace", "by", "message"),
    [
        (DEPLOYMENT, "  selector: {matchLabels: {app: web}}\n", "", "spec.selector: missing"),
        (DEPLOYMENT, "matchLabels: {app: web}", "matchLabels: {app: shop}", "spec.template.metadata.labels: do not match spec.selector"),
        (DEPLOYMENT, "spec:\n  selector", "spec:\n  replicas: -1\n  selector", "spec.replicas: -1 is negative"),
        (STATEFULSET, "matchLabels: {app: db}", "matchExpressions: [{key: app, operator: Like}]", "'Like' is not an operator"),
        (BATCH_JOB, "  completions: 2\n", "  completionMode: Indexed\n", "spec.completions: missing (an Indexed Job needs completions)"),
    ],
)  # fmt: skip
def test_the_api_server_refuses(text: str, replace: str, by: str, message: str) -> None:
    assert replace in text
    with pytest.raises(ManifestError) as err:
        load_manifests(text.replace(replace, by, 1))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_selector_expressions_select_the_template() -> None:
    text = STATEFULSET.replace(
        "matchLabels: {app: db}", "matchExpressions: [{key: app, operator: In, values: [db, cache]}]"
    )
    assert len(expanded(text)[1]) == 2


def test_generate_name_gives_distinct_stable_names() -> None:
    text = DEPLOYMENT.replace("name: web,", "generateName: web-,")
    objects, _ = load_manifests(text + "---\n" + text)
    deployments = [o for o in objects if isinstance(o, Deployment)]
    first = [expand_workload(d, ordinal=i)[1][0].name for i, d in enumerate(deployments)]
    assert first[0] != first[1] and all(n.startswith("web-") for n in first)
    assert [p.name for p in expand(objects) if isinstance(p, Pod)] == first
