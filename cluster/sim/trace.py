"""OpenB traces: nodes and pods of a production GPU cluster, read from its CSV files.

The format is that of Alibaba's ``cluster-trace-gpu-v2023`` (the OpenB trace of Weng et
al., "Beware of Fragmentation", USENIX ATC '23):

- nodes: ``sn,cpu_milli,memory_mib,gpu,model`` (``model`` empty on CPU-only nodes);
- pods: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and optionally ``gpu_spec,qos,
  pod_phase,creation_time,deletion_time,scheduled_time`` (seconds; ``gpu_spec`` is empty or
  GPU models separated by ``|``).

GPU sharing. A pod with ``num_gpu == 1`` and ``0 < gpu_milli < 1000`` shares one GPU. A
node offers ``caldera.io/gpu-milli`` (1000 per GPU) besides ``nvidia.com/gpu``; a sharing
pod requests only gpu-milli, a pod with whole GPUs requests both, so whole and shared use
count against the same per-node total — and, per card, the placement core takes a share's
thousandths on one card and whole GPUs as free cards (``cluster/nodeview/devices.py``), so
0.6 + 0.6 never lands on one GPU. :func:`task_of` gives the same per card for the
fragmentation replay (``caldera bench trace``).

GPU models are the node label ``caldera.io/gpu-model``; a pod's ``gpu_spec`` becomes
required node affinity ``caldera.io/gpu-model In [models]``.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import msgspec

from cluster.model import devices
from cluster.model.core import Node, Pod
from cluster.model.quantity import parse_amount
from cluster.model.resources import CPU, MEMORY
from cluster.model.resources import GPU as GPU
from cluster.nodeview.cards import Task
from cluster.sim.pods import make_pod
from cluster.sim.pools import make_node

GPU_MODEL_LABEL = devices.GPU_MODEL_LABEL
GPU_MILLI = devices.GPU_MILLI  # thousandths of a GPU; a node has 1000 per GPU
DEFAULT_MAPPING = "LS=agent-scheduler,*=volcano"

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_WHOLE = re.compile(r"[+-]?[0-9]+")
_MAPPING_FORM = "QOS=SCHEDULER pairs separated by commas, with * for every other qos, e.g. " + DEFAULT_MAPPING


class TracePod(msgspec.Struct, frozen=True, kw_only=True):
    """One pod of a trace: when it came and went (seconds), and what it asks for.

    ``requests`` are Kubernetes quantities; ``gpu_models`` the models it may run on (empty:
    any); ``qos`` and ``phase`` are '' when the trace has no such column.
    """

    name: str
    created: float
    deleted: float | None
    requests: dict[str, str]
    gpu_models: tuple[str, ...] = ()
    qos: str = ""
    phase: str = ""


# -- reading rows -------------------------------------------------------------------------


class _Row:
    """One data row, and where it is, for messages that name the bad value."""

    def __init__(self, where: str, line: int, values: dict[str, str]) -> None:
        self.where = where
        self.line = line
        self.values = values

    def error(self, column: str, problem: str) -> ValueError:
        return ValueError(f'{self.where} line {self.line}: {column} "{self.values[column]}" {problem}')

    def text(self, column: str) -> str:
        """The value, '' when the file has no such column."""
        return self.values.get(column, "")

    def name(self, column: str, seen: dict[str, int]) -> str:
        value = self.values[column]
        if not value:
            raise self.error(column, "is empty (expected a name)")
        if value in seen:
            raise self.error(column, f"repeats line {seen[value]} (expected each name once)")
        seen[value] = self.line
        return value

    def whole(self, column: str, *, most: int | None = None) -> int:
        accepted = "0 or more" if most is None else f"0 to {most}"
        value = self.values[column]
        if not _WHOLE.fullmatch(value):
            raise self.error(column, f"is not a whole number (expected {accepted})")
        number = int(value)
        if number < 0:
            raise self.error(column, f"is negative (expected {accepted})")
        if most is not None and number > most:
            raise self.error(column, f"is more than {most} (expected {accepted})")
        return number

    def seconds(self, column: str) -> float | None:
        """Seconds, None when empty."""
        value = self.values[column]
        if not value:
            return None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise self.error(column, "is not a number of seconds (expected 0 or more, e.g. 12.5)")
        if number < 0:
            raise self.error(column, "is negative (expected seconds, 0 or more)")
        return number


def _rows(path: str | Path, required: Sequence[str]) -> Iterator[_Row]:
    """The data rows of a CSV file whose header has every ``required`` column."""
    try:
        yield from _read_rows(path, required)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (expected an OpenB CSV)") from None


def _read_rows(path: str | Path, required: Sequence[str]) -> Iterator[_Row]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        if not header:
            return  # an empty file: no rows
        for column in required:
            if column not in header:
                raise ValueError(f'{path}: no column "{column}" (header found: {",".join(header)})')
        for fields in reader:
            if not fields:
                continue  # a blank line
            if len(fields) != len(header):
                raise ValueError(
                    f"{path} line {reader.line_num}: {len(fields)} values, but the header has "
                    f"{len(header)} columns (expected one value per column)"
                )
            yield _Row(str(path), reader.line_num, dict(zip(header, (v.strip() for v in fields))))


# -- nodes and pods -----------------------------------------------------------------------


def read_nodes(path: str | Path) -> list[Node]:
    """The nodes of a trace's node list, in file order, named by ``sn``."""
    nodes = []
    seen: dict[str, int] = {}
    for row in _rows(path, _NODE_COLUMNS):
        name = row.name("sn", seen)
        allocatable = {CPU: f"{row.whole('cpu_milli')}m", MEMORY: f"{row.whole('memory_mib')}Mi"}
        gpus = row.whole("gpu")
        if gpus:
            allocatable |= {GPU: str(gpus), GPU_MILLI: str(1000 * gpus)}
        model = row.text("model")
        nodes.append(make_node(name, allocatable=allocatable, labels={GPU_MODEL_LABEL: model} if model else {}))
    return nodes


def read_pods(path: str | Path) -> list[TracePod]:
    """The pods of a trace's pod list, by creation time then name (all created at 0 without ``creation_time``)."""
    pods = []
    seen: dict[str, int] = {}
    for row in _rows(path, _POD_COLUMNS):
        name = row.name("name", seen)
        created = row.seconds("creation_time") if "creation_time" in row.values else 0.0
        if created is None:
            raise row.error("creation_time", "is empty (expected seconds, 0 or more)")
        deleted = row.seconds("deletion_time") if "deletion_time" in row.values else None
        if deleted is not None and deleted < created:
            since = row.values["creation_time"]
            raise row.error("deletion_time", f'is before creation_time "{since}" (expected empty or no earlier)')
        pods.append(
            TracePod(
                name=name,
                created=created,
                deleted=deleted,
                requests=_requests(row),
                gpu_models=_gpu_models(row),
                qos=row.text("qos"),
                phase=row.text("pod_phase"),
            )
        )
    pods.sort(key=lambda p: (p.created, p.name))
    return pods


def _requests(row: _Row) -> dict[str, str]:
    requests = {CPU: f"{row.whole('cpu_milli')}m", MEMORY: f"{row.whole('memory_mib')}Mi"}
    gpus = row.whole("num_gpu")
    milli = row.whole("gpu_milli", most=1000)
    if gpus == 1 and 0 < milli < 1000:
        requests[GPU_MILLI] = str(milli)  # a share of one GPU
    elif gpus:
        requests |= {GPU: str(gpus), GPU_MILLI: str(1000 * gpus)}
    return requests


def _gpu_models(row: _Row) -> tuple[str, ...]:
    spec = row.text("gpu_spec")
    if not spec:
        return ()
    models = tuple(m.strip() for m in spec.split("|"))
    if not all(models):
        raise row.error("gpu_spec", "has an empty model (expected GPU models separated by |, e.g. V100M16|V100M32)")
    return models


def task_of(tp: TracePod) -> Task:
    """What the trace pod asks, per card: cpu milli, memory MiB, whole cards or one card's share, GPU models."""
    r = tp.requests
    cpu = parse_amount(CPU, r[CPU], field="cpu_milli")
    memory = parse_amount(MEMORY, r[MEMORY], field="memory_mib") // 2**20
    gpus = int(r.get(GPU, "1" if GPU_MILLI in r else "0"))
    milli = int(r[GPU_MILLI]) // gpus if gpus else 0
    return Task(cpu=cpu, memory=memory, gpus=gpus, milli=milli, models=frozenset(tp.gpu_models))


def to_pod(tp: TracePod, scheduler: str, *, duration: float | None = None, uid: str | None = None) -> Pod:
    """The trace pod as a pending Pod for ``scheduler``, tied to its GPU models by required node affinity."""
    affinity = {GPU_MODEL_LABEL: tp.gpu_models} if tp.gpu_models else None
    return make_pod(
        tp.name, requests=tp.requests, scheduler=scheduler, duration=duration, uid=uid, node_affinity=affinity
    )


# -- which scheduler ----------------------------------------------------------------------


def parse_mapping(text: str) -> dict[str, str]:
    """Scheduler per qos class from ``LS=agent-scheduler,*=volcano``; ``*`` takes every other class."""
    mapping: dict[str, str] = {}
    for item in text.split(","):
        qos, equals, scheduler = (part.strip() for part in item.partition("="))
        if not (qos and equals and scheduler):
            raise _bad_mapping(text, f'"{item.strip()}" is not QOS=SCHEDULER')
        if qos in mapping:
            raise _bad_mapping(text, f"{qos} is given twice")
        mapping[qos] = scheduler
    if "*" not in mapping:
        raise _bad_mapping(text, "no *=SCHEDULER for the other qos classes (every pod must go to some scheduler)")
    return mapping


def _bad_mapping(text: str, problem: str) -> ValueError:
    return ValueError(f'scheduler mapping "{text}": {problem} (expected {_MAPPING_FORM})')


def scheduler_for(pod: TracePod, mapping: Mapping[str, str]) -> str:
    """The scheduler a ``parse_mapping`` mapping sends the pod to."""
    return mapping.get(pod.qos) or mapping["*"]
