"""What every workload controller shares: the pod template, its owner's metadata, generated names.

A workload (a Volcano Job, a Kubeflow training job, a Deployment, ...) is never scheduled
itself: its controller stamps pods out of a pod template. The modules that expand each
kind (:mod:`cluster.model.volcano_job`, :mod:`cluster.model.kubeflow`, :mod:`cluster.model.pod_controllers`)
build on what is here.

Generated names. Kubernetes names an object that has only ``metadata.generateName`` by
appending five random characters; the Deployment, ReplicaSet and Job controllers name
their pods the same way. Here the five characters are a hash of a seed that says which
object this is (its kind, namespace, prefix and how many objects with that prefix came
before it in the same input), so the same files always expand to the same names and a
dry run can be repeated. The alphabet and the length are Kubernetes' own, so the names
look like a cluster's; they are not the names a cluster would draw.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping

import msgspec

from cluster.model.core import ObjectMeta, Pod, PodSpec
from cluster.model.quantity import QuantityError
from cluster.model.resources import PODS, Resources

KUBE_DEFAULT_SCHEDULER = "default-scheduler"  # PodSpec's default: the template named no scheduler

# k8s.io/apimachinery/pkg/util/rand: consonants and digits that spell no words.
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX_LENGTH = 5
_MAX_GENERATED_PREFIX = 63 - GENERATED_SUFFIX_LENGTH  # the API server cuts a longer generateName
_UID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "caldera.workloads")

PriorityValues = Mapping[str, int]
"""PriorityClass name → value, for controllers that order tasks by priority."""


class FieldError(ValueError):
    """A workload its admission or controller would refuse: ``field: problem``, naming the value and what is accepted."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.value = value
        self.problem = problem


class OwnerMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The metadata of an object that owns pods. Unlike a pod's, its name may be left to
    ``generateName`` (see :func:`name_or_generated`)."""

    name: str = ""
    generate_name: str = ""
    namespace: str = "default"
    uid: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None


class TemplateMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod template's metadata; its name, if any, is not used (pods are named by their controller)."""

    name: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class PodTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


def generated_suffix(seed: str, *, length: int = GENERATED_SUFFIX_LENGTH, alphabet: str = _ALPHANUMS) -> str:
    """``length`` characters of ``alphabet`` (Kubernetes' generated-name one), the same for the same seed."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def generated_name(prefix: str, seed: str) -> str:
    """``prefix`` (cut to 58 characters, as the API server does) and a suffix drawn from ``seed``."""
    return prefix[:_MAX_GENERATED_PREFIX] + generated_suffix(seed)


def controller_pod_name(prefix: str, namespace: str, index: int) -> str:
    """The name a controller's ``generateName: prefix`` gives its ``index``-th pod (see the module)."""
    return generated_name(prefix, f"Pod/{namespace}/{prefix}/{index}")


def name_or_generated(meta: OwnerMeta, kind: str, ordinal: int) -> OwnerMeta:
    """``meta`` with a name: its own, else one generated from ``generateName``.

    ``ordinal`` tells apart objects of one kind sharing a namespace and a prefix (the
    n-th gets n). Raises :class:`FieldError` when neither name is given.
    """
    if meta.name:
        return meta
    if not meta.generate_name:
        raise FieldError(
            "metadata.name", "", "missing (give metadata.name, or metadata.generateName for a generated one)"
        )
    seed = f"{kind}/{meta.namespace}/{meta.generate_name}/{ordinal}"
    return msgspec.structs.replace(meta, name=generated_name(meta.generate_name, seed))


def owner_uid(kind: str, meta: OwnerMeta) -> str:
    """``metadata.uid``; when empty (a manifest, not an API server's object), one derived from kind/namespace/name."""
    return meta.uid or str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{meta.namespace}/{meta.name}"))


def scheduler_or(spec: PodSpec, default: str) -> str:
    """The template's scheduler, or ``default`` when it names none.

    The model cannot tell an absent ``schedulerName`` from an explicit
    ``default-scheduler``, so both count as none.
    """
    if spec.scheduler_name in ("", KUBE_DEFAULT_SCHEDULER):
        return default
    return spec.scheduler_name


def template_request(spec: PodSpec, field: str) -> Resources:
    """What one pod stamped from ``spec`` requests (Kubernetes' effective request), without ``pods``.

    ``field`` is the template's path (``spec.tasks[0].template``), prefixed to a bad quantity's.
    """
    probe = Pod(metadata=ObjectMeta(name="probe"), spec=spec)
    try:
        request = probe.request()
    except QuantityError as exc:
        raise QuantityError(f"{field}.{exc.field}", exc.value, exc.problem) from exc
    return Resources({name: amount for name, amount in request.items() if name != PODS})


def stamp_pod(
    template: PodTemplate,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: PodSpec | None = None,
    creation_timestamp: str | None = None,
) -> Pod:
    """A pod made from ``template``: its labels and annotations under the controller's (which win)."""
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            labels={**template.metadata.labels, **labels},
            annotations={**template.metadata.annotations, **annotations},
            creation_timestamp=creation_timestamp,  # created with its owner: it is ordered as the owner is
        ),
        spec=spec if spec is not None else template.spec,
    )
