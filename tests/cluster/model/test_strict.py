"""Manifests are read strictly: every refusal one line naming document, object and field; checks across files."""

from __future__ import annotations

import textwrap

from cluster.model.core import Pod
from cluster.model.manifests import admit, load_manifests, read_manifests
from cluster.model.volcano import Queue

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 8, nvidia.com/gpu: 8}}\n"


def read(text: str, source: str = "") -> tuple[list[str], list[str]]:
    """(error lines, warnings as 'title: path') of one file, checks across objects included."""
    manifests, errors = read_manifests(textwrap.dedent(text), source=source)
    errors += admit(manifests)
    return errors, [f"{m.title}: {p}" for m in manifests for p in m.unhonoured]


def test_every_refusal_is_one_line_with_source_document_object_and_field() -> None:
    errors, _ = read(
        """\
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: j1}
        spec:
          minAvaliable: 1
          tasks:
          - name: w
            replicas: 1
            template:
              spec:
                containers: [{name: c, resources: {requets: {cpu: 1}}}]
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: g}
        spec: {minMembers: 2}
        """,
        source="jobs.yaml",
    )
    assert errors == [
        "jobs.yaml: document 0 (Job j1): spec.minAvaliable: unknown field (did you mean minAvailable?)",
        "jobs.yaml: document 0 (Job j1): spec.tasks[0].template.spec.containers[0].resources.requets: unknown field "
        "(did you mean requests?)",
        "jobs.yaml: document 1 (PodGroup g): spec.minMembers: unknown field (did you mean minMember?)",
    ]


def test_a_misspelling_is_said_alone_before_what_it_causes() -> None:
    # "nmae" leaves metadata without a name: the misspelling is the line, not "missing required field".
    errors, _ = read("apiVersion: v1\nkind: Pod\nmetadata: {nmae: p}\n")
    assert errors == ["document 0 (Pod <no name>): metadata.nmae: unknown field (did you mean name?)"]


def test_pod_templates_are_checked_as_pods_in_every_kind() -> None:
    errors, _ = read("""\
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: db}
        spec:
          serviceName: db
          selector: {matchLabels: {app: db}}
          template:
            metadata: {labels: {app: db}}
            spec:
              containers:
              - name: c
                resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2, cpu: 1e16}}
        """)
    assert errors == [
        "document 0 (StatefulSet db): spec.template.spec.containers[0].resources.limits.cpu: quantity '1e16' is too large "
        "(at most 9223372036854775807 millicores)",
        "document 0 (StatefulSet db): spec.template.spec.containers[0].resources.requests.nvidia.com/gpu: 1 differs from "
        "the limit 2 (nvidia.com/gpu cannot be overcommitted: give a request equal to the limit, or the limit alone)",
    ]


def test_references_are_checked_across_the_files() -> None:
    classes = read_manifests(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 10\n"
        "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: research}\n",
        source="a.yaml",
    )[0]
    workload, errors = read_manifests(
        textwrap.dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec: {priorityClassName: hgh, containers: [{name: c}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: ok}
        spec: {priorityClassName: system-node-critical, containers: [{name: c}]}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: g}
        spec: {queue: prod, priorityClassName: high}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: d}
        spec: {queue: default}
        """),
        source="b.yaml",
    )
    assert errors == []
    assert admit([*classes, *workload]) == [
        "b.yaml: document 0 (Pod p): spec.priorityClassName: 'hgh' is not a PriorityClass of the files (did you mean high?)",
        "b.yaml: document 2 (PodGroup g): spec.queue: 'prod' is not a Queue of the files (defined: research; built in: "
        "default, root)",
    ]


def test_a_refused_object_still_counts_as_defined() -> None:
    errors, _ = read("""\
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: high}
        valeu: 10
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec: {priorityClassName: high, containers: [{name: c}]}
        """)
    assert errors == ["document 0 (PriorityClass high): valeu: unknown field (did you mean value?)"]


def test_queue_admission_runs_over_all_the_queues() -> None:
    errors, _ = read(
        """\
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: team}
        spec: {capability: {cpu: 10}}
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: a}
        spec: {parent: teem, weight: -2}
        """,
        source="q.yaml",
    )
    assert errors == [
        "q.yaml: document 1 (Queue a): spec.weight: -2 is out of range (expected 1 to 65535; 0 means 1)",
        "q.yaml: document 1 (Queue a): spec.parent: 'teem' is not a Queue of the files (did you mean team?)",
    ]


def test_weight_zero_is_stored_as_one() -> None:
    (queue,), _ = load_manifests(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 0}\n"
    )
    assert isinstance(queue, Queue) and queue.spec.weight == 1


def test_what_placement_ignores_is_listed_per_object_and_field() -> None:
    errors, warnings = read("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: ns}
        spec:
          schedulerName: agent-scheduler
          containers: [{name: c}]
          affinity:
            podAntiAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
              - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: a}}}
          schedulingGates: [{name: wait}]
        ---
        apiVersion: batch.volcano.sh/v1alpha1
        kind: Job
        metadata: {name: j1, namespace: ml}
        spec:
          networkTopology: {mode: hard, highestTierAllowed: 1}
          tasks:
          - name: w
            replicas: 2
            topologyPolicy: single-numa-node
            template:
              spec:
                topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]
                containers: [{name: c, resources: {requests: {cpu: 1}}, ports: [{containerPort: 80, hostPort: 80}]}]
        ---
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: q}
        spec: {affinity: {nodeGroupAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [g1]}}}
        ---
        apiVersion: topology.volcano.sh/v1alpha1
        kind: HyperNode
        metadata: {name: s0}
        spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}
        """)
    assert errors == []
    assert warnings == [
        # the agent pod's anti-affinity and its schedulingGates are honoured
        "Job ml/j1: spec.tasks[0].topologyPolicy",  # in the order the manifest gives them (the spread is honoured)
        "Job ml/j1: spec.tasks[0].template.spec.containers[0].ports[0].hostPort",
        "Queue q: spec.affinity",
    ]


def test_load_manifests_keeps_its_contract() -> None:
    objects, skipped = load_manifests(
        NODE + "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
        "---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {x: 1}\n"
    )
    assert [o.metadata.name for o in objects] == ["n1"] and skipped == ["Service", "Widget"]
    pods, _ = load_manifests("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n")
    assert isinstance(pods[0], Pod)
