"""Reading ordinary Kubernetes YAML (what ``kubectl apply -f`` takes) into model objects.

Kinds caldera does not model (Deployments, Services, ...) are skipped and reported, not
errors. Everything else is checked as it is loaded, quantities included, so a bad
manifest fails here with one line naming the document, the object, the field and the
problem. A Volcano Job loads as a Job (checked by expanding it); :func:`expand` turns it
into the PodGroup and pods Volcano's job controller would make.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec
import yaml

from cluster.model import Node, NodeShard, Pod, PodGroup, PriorityClass, Queue
from cluster.quantity import QuantityError
from cluster.kubeflow import expand_training_job
from cluster.kubeflow_api import MPIJob, PyTorchJob, TFJob
from cluster.pod_controllers import BatchJob, Deployment, ReplicaSet, StatefulSet, expand_workload
from cluster.pod_template import FieldError
from cluster.volcano_job import Job, JobError, admit_queue, expand_job

ClusterObject = Node | Pod | PodGroup | Queue | PriorityClass | NodeShard
"""What the cluster itself holds and the schedulers see."""
Workload = Job | PyTorchJob | TFJob | MPIJob | Deployment | ReplicaSet | StatefulSet | BatchJob
"""What controllers turn into pods (and PodGroups): :func:`expand` does."""
KubeObject = ClusterObject | Workload
"""What a manifest may hold: cluster objects, and Volcano Jobs that :func:`expand` turns into them."""
T = TypeVar("T")

KINDS: Mapping[tuple[str, str], type[KubeObject]] = MappingProxyType(
    {
        ("", "Node"): Node,
        ("", "Pod"): Pod,
        ("scheduling.volcano.sh", "PodGroup"): PodGroup,
        ("scheduling.volcano.sh", "Queue"): Queue,
        ("scheduling.k8s.io", "PriorityClass"): PriorityClass,
        ("shard.volcano.sh", "NodeShard"): NodeShard,
        ("batch.volcano.sh", "Job"): Job,
        ("kubeflow.org", "PyTorchJob"): PyTorchJob,
        ("kubeflow.org", "TFJob"): TFJob,
        ("kubeflow.org", "MPIJob"): MPIJob,  # v1 (training operator) and v2beta1 (MPI operator)
        ("apps", "Deployment"): Deployment,
        ("apps", "ReplicaSet"): ReplicaSet,
        ("apps", "StatefulSet"): StatefulSet,
        ("batch", "Job"): BatchJob,
    }
)
"""The modelled kinds, by (API group, kind); the core group is ''. Any version of a group is read."""


class ManifestError(ValueError):
    """A manifest that cannot be loaded; one line: ``document N (Kind name): field: problem``."""


def _normalise(obj: Any) -> Any:
    """Go's reading of builtins: a null field is absent; YAML timestamps become RFC 3339 text."""
    if isinstance(obj, dict):
        return {k: _normalise(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    if isinstance(obj, datetime.datetime):
        if obj.tzinfo is not None:
            obj = obj.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return obj.isoformat(timespec="microseconds" if obj.microsecond else "seconds") + "Z"
    if isinstance(obj, datetime.date):
        return obj.isoformat()
    return obj


def from_builtins(obj: object, type_: type[T]) -> T:
    """Decode parsed JSON/YAML (dicts, lists, scalars) into ``type_``, nulls meaning absent.

    Raises msgspec.ValidationError naming the path of a wrong field.
    """
    return msgspec.convert(_normalise(obj), type_)


def decode_json(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into ``type_``, nulls meaning absent (see :func:`from_builtins`)."""
    return from_builtins(msgspec.json.decode(data), type_)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _label(data: Mapping[object, object], kind: str) -> str:
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"{kind} {name if isinstance(name, str) and name else '<no name>'}"


def _validation_problem(exc: msgspec.ValidationError) -> tuple[str, str]:
    """Split msgspec's "problem - at `$.a.b[0]`" into (field path, problem)."""
    problem, sep, path = str(exc).rpartition(" - at `")
    if not sep:
        return "(object)", str(exc)
    path = path.rstrip("`").removeprefix("$").removeprefix(".")
    return path or "(object)", problem


def _check(obj: KubeObject) -> None:
    """Parse every quantity of ``obj`` once (expand a Job), so that bad ones fail at load time."""
    if isinstance(obj, Node):
        obj.allocatable_resources()
    elif isinstance(obj, Pod):
        obj.request()
    elif isinstance(obj, PodGroup):
        obj.min_resources_resources()
    elif isinstance(obj, Queue):
        obj.capability_resources()
        obj.guarantee_resources()
        obj.deserved_resources()
    elif isinstance(obj, Job):
        expand_job(obj)
    elif isinstance(obj, (PyTorchJob, TFJob, MPIJob)):
        expand_training_job(obj)
    elif isinstance(obj, (Deployment, ReplicaSet, StatefulSet, BatchJob)):
        expand_workload(obj)


def _decode(data: object, where: str) -> KubeObject | None:
    if not isinstance(data, dict):
        raise ManifestError(
            f"{where}: expected a Kubernetes object (a mapping with apiVersion and kind), got {type(data).__name__}"
        )
    kind, api_version = data.get("kind"), data.get("apiVersion")
    for field, value in (("kind", kind), ("apiVersion", api_version)):
        if not isinstance(value, str) or not value:
            raise ManifestError(f"{where}: {field}: missing or not a string (every object needs apiVersion and kind)")
    assert isinstance(kind, str) and isinstance(api_version, str)
    cls = KINDS.get((_group(api_version), kind))
    if cls is None:
        return None
    label = _label(data, kind)
    try:
        obj: KubeObject = from_builtins(data, cls)
        _check(obj)
    except msgspec.ValidationError as exc:
        path, problem = _validation_problem(exc)
        raise ManifestError(f"{where} ({label}): {path}: {problem}") from exc
    except (QuantityError, FieldError) as exc:
        raise ManifestError(f"{where} ({label}): {exc}") from exc
    return obj


def decode_object(data: object, *, index: int = 0) -> KubeObject | None:
    """Decode one parsed manifest; None when its kind is not one caldera models.

    ``index`` is the document's position in its file, for error messages.
    """
    return _decode(data, f"document {index}")


def _entries(document: object, index: int) -> Iterator[tuple[object, str]]:
    """The objects of one document: itself, or the items of a ``kind: List``."""
    if isinstance(document, dict) and document.get("kind") == "List":
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(f"document {index} (List): items: expected a list, got {type(items).__name__}")
        for j, item in enumerate(items):
            yield item, f"document {index} item {j}"
    else:
        yield document, f"document {index}"


def load_manifests(text: str) -> tuple[list[KubeObject], list[str]]:
    """Load multi-document YAML: the modelled objects, and the kind of each skipped object.

    Empty documents are ignored; a ``kind: List`` contributes its items. Documents are
    numbered from 0 in the order they appear in ``text``, empty ones included.
    """
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"invalid YAML: {' '.join(str(exc).split())}") from exc
    objects: list[KubeObject] = []
    skipped: list[str] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        for data, where in _entries(document, index):
            obj = _decode(data, where)
            if obj is not None:
                objects.append(obj)
            else:
                assert isinstance(data, dict)
                skipped.append(str(data["kind"]))
    return objects, skipped


def expand(objects: Iterable[KubeObject], *, queues: Mapping[str, Queue] | None = None) -> list[ClusterObject]:
    """``objects`` with each workload replaced by its PodGroup(s), then its pods; order kept.

    This is what the cluster holds once the workloads' controllers (Volcano's job and
    podgroup controllers, Kubeflow's operators, Kubernetes' own) have run. The
    PriorityClasses among ``objects`` order a job's tasks for its minResources. Given
    ``queues`` (by name), each Volcano Job's queue is admitted as Volcano's webhook does
    (:func:`cluster.volcano_job.admit_queue`); without, queues are not checked. Objects
    named by ``generateName`` are told apart by their order (see
    :mod:`cluster.pod_template`). Raises ManifestError for a refused queue, and ValueError
    (a FieldError or QuantityError) for a workload :func:`load_manifests` would have refused.
    """
    objects = list(objects)
    priorities = {o.name: o.value for o in objects if isinstance(o, PriorityClass)}
    generated: dict[tuple[str, str, str, str], int] = {}
    out: list[ClusterObject] = []
    for obj in objects:
        if isinstance(obj, ClusterObject):
            out.append(obj)
            continue
        meta = obj.metadata
        key = (obj.api_version.rpartition("/")[0], obj.kind, meta.namespace, meta.generate_name)
        ordinal = 0 if meta.name else generated.get(key, 0)
        if not meta.name:
            generated[key] = ordinal + 1
        if isinstance(obj, Job):
            group, pods = expand_job(obj, priority_classes=priorities, ordinal=ordinal)
            if queues is not None:
                try:
                    admit_queue(obj, queues)
                except JobError as exc:
                    raise ManifestError(f"Job {group.namespace}/{group.name}: {exc}") from exc
            out.append(group)
        elif isinstance(obj, (PyTorchJob, TFJob, MPIJob)):
            training_group, pods = expand_training_job(obj, priority_classes=priorities, ordinal=ordinal)
            out.extend([training_group] if training_group is not None else [])
        else:
            groups, pods = expand_workload(obj, ordinal=ordinal)
            out.extend(groups)
        out.extend(pods)
    return out
