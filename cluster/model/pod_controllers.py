"""Kubernetes' workload controllers: Deployment, ReplicaSet, StatefulSet (``apps/v1``) and Job
(``batch/v1``), expanded into the pods they make.

As the controllers of kube-controller-manager do (read from Kubernetes' ``pkg/controller``:
deployment, replicaset, statefulset, job; written from that knowledge, not copied):

- Deployment: one ReplicaSet ``<deployment>-<pod-template-hash>`` of ``replicas`` (default 1)
  pods, the template labelled ``pod-template-hash`` and the Deployment's annotations on the
  ReplicaSet (where Volcano's podgroup controller reads them).
- ReplicaSet: ``replicas`` (default 1) pods ``<replicaset>-<5 characters>``.
- StatefulSet: pods ``<statefulset>-<ordinal>`` (ordinals from ``spec.ordinals.start``,
  default 0), labelled ``controller-revision-hash``, ``statefulset.kubernetes.io/pod-name``
  and ``apps.kubernetes.io/pod-index``; each volumeClaimTemplate a claim
  ``<template>-<pod>`` mounted in the pod. Every pod is made at once (the
  ``OrderedReady`` policy would make them one by one as each becomes Ready).
- Job: ``parallelism`` (default 1, at most ``completions``) pods ``<job>-<5 characters>``
  (Indexed: ``<job>-<index>-<5 characters>`` with the completion index); none while
  ``suspend``. The pods carry the labels the API server adds to a Job's template
  (``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name``,
  ``controller-uid``, ``job-name``).

Generated names and hashes are drawn from the objects (see :mod:`cluster.model.pod_template`),
so the same files give the same names; they are not the names a cluster would draw.
Pods whose scheduler is Volcano's and that name no PodGroup get the PodGroup Volcano's
podgroup controller makes for their owner (:mod:`cluster.model.podgroup_controller`).
"""

from __future__ import annotations

import msgspec

from cluster.model.core import ObjectMeta, Pod, RawObject, Volume
from cluster.model.pod_rules import LABEL_OPERATORS, LabelSelector
from cluster.model.pod_template import (
    FieldError,
    OwnerMeta,
    PodTemplate,
    controller_pod_name,
    name_or_generated,
    owner_uid,
    stamp_pod,
)
from cluster.model.podgroup_controller import Owner, group_pods
from cluster.model.volcano import PodGroup

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
# Annotations the Deployment controller does not copy to its ReplicaSets (deployment/util).
_NOT_COPIED = (
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
)
_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


class WorkloadError(FieldError):
    """A workload the API server would refuse: ``field: problem``."""


class DeploymentSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    strategy: RawObject | None = None
    min_ready_seconds: int = 0
    revision_history_limit: int | None = None
    paused: bool = False
    progress_deadline_seconds: int | None = None


class ReplicaSetSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    replicas: int | None = None
    min_ready_seconds: int = 0
    selector: LabelSelector | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)


class StatefulSetOrdinals(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    start: int = 0


class VolumeClaimTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A PersistentVolumeClaim each pod gets its own copy of; only the name is read."""

    metadata: OwnerMeta = msgspec.field(default_factory=OwnerMeta)
    spec: RawObject = msgspec.field(default_factory=dict)


class StatefulSetSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    volume_claim_templates: list[VolumeClaimTemplate] = msgspec.field(default_factory=list)
    service_name: str = ""
    pod_management_policy: str = "OrderedReady"
    update_strategy: RawObject | None = None
    revision_history_limit: int | None = None
    min_ready_seconds: int = 0
    persistent_volume_claim_retention_policy: RawObject | None = None
    ordinals: StatefulSetOrdinals | None = None


class BatchJobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    ttl_seconds_after_finished: int | None = None
    completion_mode: str = "NonIndexed"
    suspend: bool = False
    pod_failure_policy: RawObject | None = None
    success_policy: RawObject | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None


class Deployment(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    metadata: OwnerMeta
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)


class ReplicaSet(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "apps/v1"
    kind: str = "ReplicaSet"
    metadata: OwnerMeta
    spec: ReplicaSetSpec = msgspec.field(default_factory=ReplicaSetSpec)


class StatefulSet(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    metadata: OwnerMeta
    spec: StatefulSetSpec = msgspec.field(default_factory=StatefulSetSpec)


class BatchJob(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Kubernetes ``batch/v1`` Job (not Volcano's ``batch.volcano.sh`` Job)."""

    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: OwnerMeta
    spec: BatchJobSpec = msgspec.field(default_factory=BatchJobSpec)


Workload = Deployment | ReplicaSet | StatefulSet | BatchJob


def expand_workload(workload: Workload, *, ordinal: int = 0) -> tuple[list[PodGroup], list[Pod]]:
    """The pods ``workload``'s controller makes, and the PodGroup Volcano's podgroup controller
    adds for those of them that need one (Volcano's scheduler, no group annotation).

    ``ordinal`` tells apart workloads sharing a ``generateName``. Raises
    :class:`WorkloadError` for a workload the API server refuses.
    """
    kind = f"{workload.api_version.rpartition('/')[0]}/{workload.kind}"
    try:
        meta = name_or_generated(workload.metadata, kind, ordinal)
    except FieldError as exc:
        raise WorkloadError(exc.field, exc.value, exc.problem) from exc
    if isinstance(workload, Deployment):
        owner, pods = _deployment(msgspec.structs.replace(workload, metadata=meta))
    elif isinstance(workload, ReplicaSet):
        owner, pods = _replica_set(msgspec.structs.replace(workload, metadata=meta))
    elif isinstance(workload, StatefulSet):
        owner, pods = _stateful_set(msgspec.structs.replace(workload, metadata=meta))
    else:
        owner, pods = batch_job_pods(msgspec.structs.replace(workload, metadata=meta))
    group, pods = group_pods(owner, pods)
    return ([group] if group is not None else []), pods


def _check_template(selector: LabelSelector | None, template: PodTemplate, replicas: int | None) -> None:
    if replicas is not None and replicas < 0:
        raise WorkloadError("spec.replicas", replicas, f"{replicas} is negative (expected 0 or more)")
    if selector is None:
        raise WorkloadError(
            "spec.selector", None, "missing (apps/v1 workloads need a selector matching the template's labels)"
        )
    if selector.empty:
        raise WorkloadError("spec.selector", {}, "empty (it would select every pod; expected the template's labels)")
    bad = selector.bad_operator()
    if bad is not None:
        raise WorkloadError(
            "spec.selector.matchExpressions",
            bad,
            f"{bad!r} is not an operator (expected {', '.join(LABEL_OPERATORS[:-1])} or {LABEL_OPERATORS[-1]})",
        )
    if not selector.matches(template.metadata.labels):
        raise WorkloadError(
            "spec.template.metadata.labels",
            template.metadata.labels,
            "do not match spec.selector (the controller would not own its own pods)",
        )
    _check_containers(template)


def _check_containers(template: PodTemplate) -> None:
    if not template.spec.containers:
        raise WorkloadError("spec.template.spec.containers", [], "no containers (expected at least one)")


def template_hash(template: PodTemplate, salt: str = "") -> str:
    """A short stable hash of ``template``, spelled as Kubernetes spells ``pod-template-hash``
    (FNV-32a, its decimal digits mapped onto the safe alphabet); not Kubernetes' own value."""
    value = 0x811C9DC5
    for byte in salt.encode() + msgspec.json.encode(template):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHANUMS[ord(c) % len(_SAFE_ALPHANUMS)] for c in str(value))


def _deployment(deployment: Deployment) -> tuple[Owner, list[Pod]]:
    spec, meta = deployment.spec, deployment.metadata
    _check_template(spec.selector, spec.template, spec.replicas)
    hash_ = template_hash(spec.template)
    labels = {**spec.template.metadata.labels, POD_TEMPLATE_HASH_LABEL: hash_}
    template = msgspec.structs.replace(
        spec.template, metadata=msgspec.structs.replace(spec.template.metadata, labels=labels)
    )
    annotations = {k: v for k, v in meta.annotations.items() if k not in _NOT_COPIED}
    rs_meta = OwnerMeta(
        name=f"{meta.name}-{hash_}",
        namespace=meta.namespace,
        labels=labels,
        annotations=annotations,
        creation_timestamp=meta.creation_timestamp,
    )
    selector = LabelSelector(
        match_labels={**(spec.selector.match_labels if spec.selector else {}), POD_TEMPLATE_HASH_LABEL: hash_},
        match_expressions=spec.selector.match_expressions if spec.selector else [],
    )
    replica_set = ReplicaSet(
        metadata=rs_meta,
        spec=ReplicaSetSpec(
            replicas=1 if spec.replicas is None else spec.replicas, selector=selector, template=template
        ),
    )
    return _replica_set(replica_set)


def _replica_set(replica_set: ReplicaSet) -> tuple[Owner, list[Pod]]:
    spec, meta = replica_set.spec, replica_set.metadata
    _check_template(spec.selector, spec.template, spec.replicas)
    count = 1 if spec.replicas is None else spec.replicas
    pods = [
        stamp_pod(
            spec.template,
            name=controller_pod_name(f"{meta.name}-", meta.namespace, i),
            namespace=meta.namespace,
            labels={},
            annotations={},
            creation_timestamp=meta.creation_timestamp,
        )
        for i in range(count)
    ]
    return _owner("apps/ReplicaSet", meta), pods


def _stateful_set(stateful_set: StatefulSet) -> tuple[Owner, list[Pod]]:
    spec, meta = stateful_set.spec, stateful_set.metadata
    _check_template(spec.selector, spec.template, spec.replicas)
    revision = f"{meta.name}-{template_hash(spec.template, salt='ControllerRevision')}"
    start = spec.ordinals.start if spec.ordinals is not None else 0
    pods = []
    for ordinal in range(start, start + (1 if spec.replicas is None else spec.replicas)):
        name = f"{meta.name}-{ordinal}"
        claims = [
            Volume(name=t.metadata.name, persistent_volume_claim={"claimName": f"{t.metadata.name}-{name}"})
            for t in spec.volume_claim_templates
        ]
        pod_spec = msgspec.structs.replace(
            spec.template.spec,
            volumes=[*[v for v in spec.template.spec.volumes if v.name not in {c.name for c in claims}], *claims],
        )
        labels = {
            CONTROLLER_REVISION_HASH_LABEL: revision,
            STATEFULSET_POD_NAME_LABEL: name,
            POD_INDEX_LABEL: str(ordinal),
        }
        pods.append(
            stamp_pod(
                spec.template,
                name=name,
                namespace=meta.namespace,
                labels=labels,
                annotations={},
                spec=pod_spec,
                creation_timestamp=meta.creation_timestamp,
            )
        )
    return _owner("apps/StatefulSet", meta), pods


def batch_job_pods(job: BatchJob) -> tuple[Owner, list[Pod]]:
    """The pods a ``batch/v1`` Job runs at first: ``parallelism`` of them, at most ``completions``."""
    spec, meta = job.spec, job.metadata
    for field, value in (("parallelism", spec.parallelism), ("completions", spec.completions)):
        if value is not None and value < 0:
            raise WorkloadError(f"spec.{field}", value, f"{value} is negative (expected 0 or more)")
    if spec.completion_mode not in ("NonIndexed", "Indexed"):
        raise WorkloadError(
            "spec.completionMode",
            spec.completion_mode,
            f"{spec.completion_mode!r} is not a completion mode (expected NonIndexed or Indexed)",
        )
    indexed = spec.completion_mode == "Indexed"
    if indexed and spec.completions is None:
        raise WorkloadError("spec.completions", None, "missing (an Indexed Job needs completions)")
    _check_containers(spec.template)
    owner = _owner("batch/Job", meta)
    labels = {
        JOB_CONTROLLER_UID_LABEL: owner.uid,
        JOB_NAME_LABEL: meta.name,
        LEGACY_CONTROLLER_UID_LABEL: owner.uid,
        LEGACY_JOB_NAME_LABEL: meta.name,
    }
    count = 1 if spec.parallelism is None else spec.parallelism
    if spec.completions is not None:
        count = min(count, spec.completions)
    if spec.suspend:
        count = 0
    pods = []
    for i in range(count):
        extra = {JOB_COMPLETION_INDEX_KEY: str(i)} if indexed else {}
        prefix = f"{meta.name}-{i}-" if indexed else f"{meta.name}-"
        pods.append(
            stamp_pod(
                spec.template,
                name=controller_pod_name(prefix, meta.namespace, i),
                namespace=meta.namespace,
                labels={**labels, **extra},
                annotations=extra,
                creation_timestamp=meta.creation_timestamp,
            )
        )
    return owner, pods


def _owner(kind: str, meta: OwnerMeta) -> Owner:
    return Owner(
        kind=kind,
        meta=ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            uid=owner_uid(kind, meta),
            labels=meta.labels,
            annotations=meta.annotations,
            creation_timestamp=meta.creation_timestamp,
        ),
    )
