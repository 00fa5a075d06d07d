"""Reading ordinary Kubernetes YAML (what ``kubectl apply -f`` takes) into model objects, strictly.

Each object is checked as ``kubectl apply --validate=strict`` and the admission behind it
would check it: against its kind's schema (an unknown field is refused by name, with the
nearest known one: cluster.model.schema), decoded into the model with its quantities parsed,
then Kubernetes' and Volcano's admission rules (cluster.model.admission, cluster.model.queue_admission),
the pods of its pod templates included. :func:`read_manifests` reads one file and returns
every refusal, one line each, naming the document, the object, the field and the problem;
:func:`admit` checks the objects of all the files against each other (the PriorityClasses
and Queues they name, the queue tree). Kinds caldera does not model (Services, ...) are
skipped and reported, not errors, after their schema's check when they have one. What
placement ignores is listed per object (``Manifest.unhonoured``), for warnings.

A Volcano Job loads as a Job (checked by expanding it); :func:`expand` turns it into the
PodGroup and pods Volcano's job controller would make. Objects from the API server (the
mirror) are decoded with :func:`decode_json`, leniently: the API server admitted them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import msgspec
import yaml

from cluster.model import yaml_input
from cluster.model.admission import (
    Registry,
    global_default_problems,
    node_problems,
    pod_problems,
    podgroup_problems,
    podgroup_queue_problem,
    priority_class_problems,
)
from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.decode import from_builtins, normalise
from cluster.model.devices import node_devices
from cluster.model.kinds import KINDS, ClusterObject, KubeObject
from cluster.model.kubeflow import expand_training_job
from cluster.model.kubeflow_api import MPIJob, PyTorchJob, TFJob
from cluster.model.pod_controllers import (
    BatchJob,
    Deployment,
    ReplicaSet,
    StatefulSet,
    expand_workload,
)
from cluster.model.queue_admission import mutated, queue_problems
from cluster.model.schema import Findings, Problem, Reference, Schemas, Template, join
from cluster.model.text import one_line
from cluster.model.topology import HyperNode, hypernode_problems
from cluster.model.unhonoured import unhonoured as _unhonoured
from cluster.model.volcano import PodGroup, Queue
from cluster.model.volcano_job import Job, JobError, admit_queue, expand_job


class ManifestError(ValueError):
    """A manifest that cannot be loaded; one line: ``document N (Kind name): field: problem``."""


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


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
        obj.min_resources_amounts()
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


# -- reading one object, strictly ------------------------------------------------------------


_CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "NodeShard", "HyperNode", "Namespace"})


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """One object of a manifest, read and checked: where it was, what it is, what the checks read from it."""

    source: str = ""  # the file, for messages
    where: str  # "document 2", or "document 2 item 1" inside a kind: List
    kind: str
    name: str
    namespace: str = ""  # "" for cluster-scoped kinds
    obj: KubeObject | None = None  # None: a kind caldera does not model (still checked when it has a schema)
    references: tuple[Reference, ...] = ()  # the other objects it names
    refused: bool = False  # the checks refused it (its name still counts as defined, for admit)
    unhonoured: tuple[str, ...] = ()  # set fields placement ignores (cluster.model.unhonoured)

    @property
    def label(self) -> str:
        """``Kind name``, as error lines name the object."""
        return f"{self.kind} {self.name or '<no name>'}"

    @property
    def title(self) -> str:
        """``Kind namespace/name`` (``Kind name`` when cluster-scoped), as warnings name the object."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else self.label

    def line(self, problem: Problem | str) -> str:
        """One error line: ``[source: ]document N (Kind name): path: problem``."""
        return f"{self.source + ': ' if self.source else ''}{self.where} ({self.label}): {problem}"


def _meta(data: Mapping[object, object], kind: str) -> tuple[str, str]:
    metadata = data.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    name = name if isinstance(name, str) else ""
    if kind in _CLUSTER_SCOPED:
        return name, ""
    return name, namespace if isinstance(namespace, str) and namespace else "default"


def _template_pod(template: Template) -> tuple[Pod | None, list[Problem]]:
    """The pod a template makes, as a model Pod (named after the template), or why it is not one."""
    meta = template.data.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault("name", "template")
    try:
        return from_builtins({"metadata": meta, "spec": template.data.get("spec", {})}, Pod), []
    except msgspec.ValidationError as exc:
        path, problem = _validation_problem(exc)
        return None, [Problem(join(template.path, path), problem)]


def _prefixed(prefix: str, problems: Iterable[Problem]) -> list[Problem]:
    return [Problem(join(prefix, p.path), p.problem) for p in problems]


def _object_problems(obj: KubeObject | None) -> list[Problem]:
    """Kubernetes' admission rules for one object (a Queue's are checked with all the queues: :func:`admit`)."""
    if isinstance(obj, Pod):
        return pod_problems(obj)
    if isinstance(obj, Node):
        return [*node_problems(obj), *node_devices(obj)[1]]  # its GPU cards' annotations and counts too
    if isinstance(obj, PriorityClass):
        return priority_class_problems(obj)
    if isinstance(obj, PodGroup):
        return podgroup_problems(obj)
    if isinstance(obj, HyperNode):
        return hypernode_problems(obj)
    return []


def _read(data: object, where: str, source: str, schemas: Schemas) -> tuple[Manifest | None, list[str]]:
    """One object, checked: its Manifest, and its error lines (every one the checks found; then it is refused).

    None for what is not an object at all.
    """
    at = f"{source}: {where}" if source else where
    if not isinstance(data, dict):
        return None, [
            f"{at}: expected a Kubernetes object (a mapping with apiVersion and kind), got {type(data).__name__}"
        ]
    kind, api_version = data.get("kind"), data.get("apiVersion")
    for field, value in (("kind", kind), ("apiVersion", api_version)):
        if not isinstance(value, str) or not value:
            return None, [f"{at}: {field}: missing or not a string (every object needs apiVersion and kind)"]
    assert isinstance(kind, str) and isinstance(api_version, str)
    name, namespace = _meta(data, kind)
    manifest = Manifest(source=source, where=where, kind=kind, name=name, namespace=namespace, refused=True)
    normal: dict[str, object] = normalise(data)
    schema = schemas.schema(api_version, kind)
    findings = schemas.check(normal, schema) if schema is not None else Findings()
    if findings.unknown:  # a misspelling explains whatever else looks wrong: say it alone
        return manifest, [manifest.line(p) for p in findings.unknown]
    obj: KubeObject | None = None
    cls = KINDS.get((_group(api_version), kind))
    if cls is not None:
        try:
            obj = msgspec.convert(normal, cls)
            _check(obj)
        except msgspec.ValidationError as exc:
            path, problem = _validation_problem(exc)
            return manifest, [manifest.line(Problem(path, problem))]
        except ValueError as exc:  # QuantityError, JobError and the like: "field: problem" already
            # Where the rules below cover what failed (a pod's quantities), they name every problem.
            found = _object_problems(obj)
            return manifest, [manifest.line(p) for p in found] or [manifest.line(str(exc))]
    problems = [*findings.invalid, *_object_problems(obj)]
    unhonoured = [*findings.unhonoured, *(_unhonoured(obj) if isinstance(obj, (Pod, PodGroup, Queue)) else [])]
    for template in findings.templates:
        pod, bad = _template_pod(template)
        problems += bad
        if pod is not None:
            problems += _prefixed(template.path, pod_problems(pod))
            unhonoured += [join(template.path, p) for p in _unhonoured(pod)]
    if problems:
        return manifest, [manifest.line(p) for p in problems]
    if isinstance(obj, Queue):
        obj = mutated(obj)
    manifest = msgspec.structs.replace(
        manifest,
        obj=obj,
        references=tuple(findings.references),
        unhonoured=tuple(dict.fromkeys(unhonoured)),
        refused=False,
    )
    return manifest, []


def _decode(data: object, where: str) -> KubeObject | None:
    manifest, errors = _read(data, where, "", Schemas.bundled())
    if errors:
        raise ManifestError(errors[0])
    assert manifest is not None
    return manifest.obj


def decode_object(data: object, *, index: int = 0) -> KubeObject | None:
    """Decode one parsed manifest; None when its kind is not one caldera models.

    ``index`` is the document's position in its file, for error messages. Raises
    ManifestError with the first problem (see :func:`read_manifests` for all of them).
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


def read_manifests(text: str, *, source: str = "") -> tuple[list[Manifest], list[str]]:
    """Every object of multi-document YAML, checked one by one (refused ones marked); one error line per refusal.

    The checks: the kind's schema (unknown fields by name, with the nearest known one;
    types), decoding into the model, Kubernetes' rules for pods, nodes and PriorityClasses,
    and the pods of every pod template inside. Checks that need the other objects are
    :func:`admit`'s. An error line starts with ``source: `` when one is given. Empty
    documents are ignored; a ``kind: List`` contributes its items; documents are numbered
    from 0 in the order they appear in ``text``, empty ones included.
    """
    at = f"{source}: " if source else ""
    try:
        documents = yaml_input.load_all(text)
    except yaml.YAMLError as exc:
        return [], [f"{at}invalid YAML: {' '.join(str(exc).split())}"]
    schemas = Schemas.bundled()
    manifests: list[Manifest] = []
    errors: list[str] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        try:
            entries = list(_entries(document, index))
        except ManifestError as exc:
            errors.append(f"{at}{exc}")
            continue
        for data, where in entries:
            manifest, problems = _read(data, where, source, schemas)
            errors += problems
            if manifest is not None:
                manifests.append(manifest)
    return manifests, [one_line(e) for e in errors]  # a field name may hold a newline


def admit(manifests: Sequence[Manifest]) -> list[str]:
    """The error lines of the checks across all the files' objects.

    Every PriorityClass and Queue named must be one of the files (or built in); the Queues
    pass Volcano's queue admission together (cluster.model.queue_admission), and each Volcano
    Job's queue Volcano's job admission (cluster.model.volcano_job.admit_queue: it exists, is
    Open, is a leaf), each PodGroup's queue Volcano's PodGroup admission (it is Open); at
    most one PriorityClass is the global default.
    """
    classes = [(m, m.obj) for m in manifests if isinstance(m.obj, PriorityClass)]
    queues = [(m, m.obj) for m in manifests if isinstance(m.obj, Queue)]
    # A refused PriorityClass or Queue still counts as defined: its own error says what to fix.
    registry = Registry(
        [m.name for m in manifests if m.kind == "PriorityClass"], [m.name for m in manifests if m.kind == "Queue"]
    )
    errors: list[str] = []
    for m in manifests:
        for ref in m.references:
            missing = registry.problem(ref)
            if missing is not None:
                errors.append(m.line(Problem(ref.path, missing)))
    for i, problem in global_default_problems([pc for _, pc in classes]).items():
        errors.append(classes[i][0].line(problem))
    if not any(m.refused for m in manifests if m.kind == "Queue"):  # the tree is checked once it is whole
        for i, problems in queue_problems([q for _, q in queues]).items():
            errors += [queues[i][0].line(p) for p in problems]
        by_name = {q.name: q for _, q in queues}
        for m in manifests:
            if isinstance(m.obj, Job):
                try:
                    admit_queue(m.obj, by_name)
                except JobError as exc:
                    errors.append(m.line(str(exc)))
            elif isinstance(m.obj, PodGroup) and (closed := podgroup_queue_problem(m.obj, by_name)) is not None:
                errors.append(m.line(closed))
    return errors


def load_manifests(text: str) -> tuple[list[KubeObject], list[str]]:
    """Load multi-document YAML: the modelled objects, and the kind of each skipped object.

    Raises ManifestError with the first refusal of :func:`read_manifests` (the checks of
    one object; :func:`admit` checks objects against each other).
    """
    manifests, errors = read_manifests(text)
    if errors:
        raise ManifestError(errors[0])
    return [m.obj for m in manifests if m.obj is not None], [m.kind for m in manifests if m.obj is None]


class ManifestErrors(ValueError):
    """Manifests refused: one line per refusal (``lines``), across all the files read."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = [one_line(line) for line in lines]
        super().__init__("\n".join(self.lines))


def expand(objects: Iterable[KubeObject], *, queues: Mapping[str, Queue] | None = None) -> list[ClusterObject]:
    """``objects`` with each workload replaced by its PodGroup(s), then its pods; order kept.

    This is what the cluster holds once the workloads' controllers (Volcano's job and
    podgroup controllers, Kubeflow's operators, Kubernetes' own) have run. The
    PriorityClasses among ``objects`` order a job's tasks for its minResources. Given
    ``queues`` (by name), each Volcano Job's queue is admitted as Volcano's webhook does
    (:func:`cluster.model.volcano_job.admit_queue`); without, queues are not checked. Objects
    named by ``generateName`` are told apart by their order (see
    :mod:`cluster.model.pod_template`). Raises ManifestError for a refused queue, and ValueError
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
