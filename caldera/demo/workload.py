"""The demo's workload description (YAML) and the driver that submits it.

A workload names the cluster (node pools), the Volcano queues and PriorityClasses, the
training job classes for the batch scheduler and the agent pod classes for the agent
scheduler, how the load rises over the run, and the sharding controller's bands. The
default ships in the package (``caldera/demo/workloads/default.yaml``, documented there and in
the README); ``caldera demo --workload FILE`` takes another. A bad file is one line naming
the file, the field, the value and what is accepted; nothing starts. It is held to what the
API server and Volcano would refuse in the objects it becomes: a misspelled key is refused
by name with the nearest known one, quantities are checked as a pod's, a node's and a
queue's (whole extended resources, names a container may request), weights and priorities
kept in Volcano's and Kubernetes' ranges.

Arrivals are Poisson with the class's mean gap ``every_s``, its rate scaled by the ramp:
at time ``t`` of the run, jobs and bursts arrive ``ramp(t)`` times as often, and
``rate`` (``caldera demo --rate``) times more again.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated

import msgspec
import yaml

from caldera.demo.resources import WARMUP_SHARE
from caldera.demo.tracker import Tracker
from cluster.model import yaml_input
from cluster.model.admission import (
    priority_class_problems,
    request_problems,
    resource_list_problems,
)
from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.queue_admission import MAX_WEIGHT
from cluster.model.resources import Resources
from cluster.model.schema import Problem, struct_unknown_fields
from cluster.model.text import one_line
from cluster.model.topology import MODES, NetworkTopologySpec
from cluster.model.volcano import PodGroup, Queue
from cluster.sim.pods import make_pod, make_podgroup
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.keys import Kind
from cluster.store.pause import pause
from cluster.store.store import Delete, Put, Store, Write

AGENT = "agent-scheduler"
VOLCANO = "volcano"
Positive = Annotated[float, msgspec.Meta(gt=0)]
Quantities = dict[str, str | int | float]


class TolerationSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def __post_init__(self) -> None:
        if self.operator not in ("Equal", "Exists"):
            raise ValueError(f"tolerations: operator {self.operator!r} (expected Equal or Exists)")


def _refuse(problems: list[Problem]) -> None:
    """Raise the first problem as the one line a bad workload gets."""
    if problems:
        raise ValueError(str(problems[0]))


class QueueSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    weight: Annotated[int, msgspec.Meta(ge=1, le=MAX_WEIGHT)] = 1
    capability: Quantities = {}

    def __post_init__(self) -> None:
        Resources.from_quantities(self.capability, field=f"queues[{self.name}].capability")
        _refuse(resource_list_problems(self.capability, f"queues[{self.name}].capability"))


class PriorityClassSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    value: int


MAX_GANG = 10_000  # pods in one training job
MAX_BURST = 100_000  # agent pods in one burst


class PodShape(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a class's pods look like; shared by training and agent classes."""

    name: str
    every_s: Annotated[float, msgspec.Meta(ge=0.001)]  # at most 1,000 arrivals a second per class
    duration_s: tuple[Positive, Positive]
    tolerations: list[TolerationSpec] = []
    node_selector: dict[str, str] = {}
    priority_class: str = ""

    def check_shape(self, kind: str) -> None:
        low, high = self.duration_s
        if low > high:
            raise ValueError(f"{kind}[{self.name}].duration_s: [{low}, {high}] (expected [low, high] with low <= high)")


class TrainingClass(PodShape, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Training jobs: a PodGroup of ``pods`` (drawn from the list) that starts with ``min_available`` of them."""

    queue: str
    pods: list[Annotated[int, msgspec.Meta(ge=1, le=MAX_GANG)]]
    min_available: Annotated[float, msgspec.Meta(gt=0, le=1)] = 1.0
    requests: Quantities
    # Each job's PodGroup networkTopology (mode, highestTierAllowed or highestTierName): its gang
    # inside one leaf switch (tier 1) or spine (tier 2) of the pools' switches.
    network_topology: NetworkTopologySpec | None = None

    def __post_init__(self) -> None:
        self.check_shape("training")
        if not self.pods:
            raise ValueError(f"training[{self.name}].pods: [] (expected at least one gang size)")
        t = self.network_topology
        if t is not None and t.mode not in MODES:
            raise ValueError(f"training[{self.name}].network_topology.mode: {t.mode!r} (expected {' or '.join(MODES)})")
        Resources.from_quantities(self.requests, field=f"training[{self.name}].requests")
        _refuse(request_problems(self.requests, f"training[{self.name}].requests"))


class AgentClass(PodShape, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Agent pods: a burst of ``burst`` pods (low to high) every ``every_s``, each with one of ``requests``."""

    burst: tuple[Annotated[int, msgspec.Meta(ge=1, le=MAX_BURST)], Annotated[int, msgspec.Meta(ge=1, le=MAX_BURST)]]
    requests: list[Quantities]

    def __post_init__(self) -> None:
        self.check_shape("agents")
        if not self.requests:
            raise ValueError(f"agents[{self.name}].requests: [] (expected at least one pod size)")
        if self.burst[0] > self.burst[1]:
            raise ValueError(f"agents[{self.name}].burst: {list(self.burst)} (expected [low, high] with low <= high)")
        for i, r in enumerate(self.requests):
            Resources.from_quantities(r, field=f"agents[{self.name}].requests[{i}]")
            _refuse(request_problems(r, f"agents[{self.name}].requests[{i}]"))


class Ramp(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Load goes from ``start`` to ``end`` times the classes' rates over the first ``over`` of the run."""

    start: Annotated[float, msgspec.Meta(ge=0)] = 1.0
    end: Annotated[float, msgspec.Meta(ge=0)] = 1.0
    over: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0

    def at(self, share: float) -> float:
        if self.over <= 0 or share >= self.over:
            return self.end
        return self.start + (self.end - self.start) * share / self.over


class Workload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pools: list[NodePool]
    queues: list[QueueSpec] = []
    priority_classes: list[PriorityClassSpec] = []
    training: list[TrainingClass] = []
    agents: list[AgentClass] = []
    ramp: Ramp = Ramp()
    sharding: str = "volcano:volcano:0.0:0.6:false:2:1000,agent-scheduler:agent:0.6:1.0:true:2:1000"

    def __post_init__(self) -> None:
        queues = {q.name for q in self.queues}
        classes = {p.name for p in self.priority_classes}
        for c in self.training:
            if c.queue not in queues:
                raise ValueError(
                    f"training[{c.name}].queue: {c.queue!r} is not a queue of the workload (expected one of {sorted(queues)})"
                )
        shapes: list[PodShape] = [*self.training, *self.agents]
        for shape in shapes:
            if shape.priority_class and shape.priority_class not in classes:
                raise ValueError(
                    f"{shape.name}.priority_class: {shape.priority_class!r} is not declared in priority_classes "
                    f"(expected one of {sorted(classes)})"
                )
        if not any(p.count for p in self.pools):
            raise ValueError("pools: no nodes (expected at least one pool with count > 0)")
        for pool in self.pools:
            _refuse(resource_list_problems(pool.resources, f"pools[{pool.name}].resources"))
        for spec, pc in zip(self.priority_classes, self.priority_class_objects()):
            _refuse(
                [Problem(f"priority_classes[{spec.name}].{p.path}", p.problem) for p in priority_class_problems(pc)]
            )

    def nodes(self) -> list[Node]:
        return [n for pool in self.pools for n in pool_nodes(pool)]

    def queue_objects(self) -> list[Queue]:
        return [
            msgspec.convert(
                {
                    "metadata": {"name": q.name},
                    "spec": {"weight": q.weight, "capability": {k: str(v) for k, v in q.capability.items()}},
                },
                Queue,
            )
            for q in self.queues
        ]

    def priority_class_objects(self) -> list[PriorityClass]:
        return [
            msgspec.convert({"metadata": {"name": p.name}, "value": p.value}, PriorityClass)
            for p in self.priority_classes
        ]

    def describe(self) -> str:
        return f"{sum(p.count for p in self.pools):,} nodes ({', '.join(f'{p.count} {p.name}' for p in self.pools)})"


DEFAULT = "default.yaml"


def load(path: str | None) -> Workload:
    """The workload in ``path``, or the packaged default; ValueError with one line when it is malformed."""
    name = path or f"caldera/demo/workloads/{DEFAULT}"
    try:
        text = (
            Path(path).read_text(encoding="utf-8")
            if path
            else resources.files("caldera.demo").joinpath("workloads", DEFAULT).read_text(encoding="utf-8")
        )
    except OSError as e:
        raise ValueError(f"workload {name}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"workload {name}: not UTF-8 text (byte {e.start}; expected a workload YAML)") from None
    try:
        raw = yaml_input.load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"workload {name}: not YAML: {str(e).splitlines()[0]}") from None
    unknown = struct_unknown_fields(raw, Workload)  # every Struct, also those that let unknown keys pass
    if unknown:  # a field's name may hold a line break: escaped, so the refusal stays one line
        raise ValueError(one_line(f"workload {name}: {unknown[0]}"))
    try:
        return msgspec.convert(raw, Workload)
    except (msgspec.ValidationError, ValueError) as e:
        raise ValueError(one_line(f"workload {name}: {e}")) from None


def arrivals(rng: random.Random, every_s: float, ramp: Ramp, duration: float, step: float = 0.05) -> Iterator[float]:
    """Arrival times (seconds into the run) of a Poisson stream whose rate follows the ramp.

    Non-homogeneous: each gap is a unit exponential spent against the rate integrated over
    time in ``step``-long pieces, so a rate that rises mid-gap shortens it.
    """
    t = 0.0
    while True:
        need = rng.expovariate(1.0)
        while need > 0:
            rate = (ramp.at(t / duration) if duration > 0 else ramp.end) / every_s
            if rate * step >= need:
                t += need / rate
                need = 0.0
            else:
                need -= rate * step
                t += step
        yield t


class WorkloadDriver:
    """Submits a workload's jobs and bursts at their arrival times, and tells the tracker."""

    def __init__(
        self, workload: Workload, store: Store, tracker: Tracker, *, seed: int, duration: float, rate: float = 1.0
    ) -> None:
        self.workload, self.store, self.tracker = workload, store, tracker
        self.sharding = workload.sharding
        ramp = workload.ramp
        self.steady_after = max(WARMUP_SHARE, ramp.over if ramp.end > ramp.start else 0.0)
        self.serial = 0
        # Each class draws from random streams of its own (its arrivals; its jobs' or bursts' sizes,
        # durations, requests): the same seed is the same workload, whichever classes come due in the
        # same round. With one stream for all, the draws interleaved as the rounds' timing fell, and two
        # runs of one seed submitted 9,400 to 13,000 agent pods in 30 s.
        self._classes: list[PodShape] = [*workload.training, *workload.agents]
        self._arrivals = [
            # ``rate``: times every class's arrival rate (``caldera demo --rate``)
            arrivals(random.Random(f"{seed}/{i}/arrivals"), c.every_s / rate, ramp, duration)
            for i, c in enumerate(self._classes)
        ]
        self._draws = [random.Random(f"{seed}/{i}/draws") for i in range(len(self._classes))]
        self._due = [next(a) for a in self._arrivals]

    def describe(self) -> str:
        return self.workload.describe()

    def queues(self) -> list[str]:
        return [q.name for q in self.workload.queues]

    async def prepare(self) -> None:
        w = self.workload
        nodes = w.nodes()
        for i in range(0, len(nodes), 1000):
            await self.store.upsert_nodes(nodes[i : i + 1000])
        await self.store.write([Put(q) for q in w.queue_objects()] + [Put(p) for p in w.priority_class_objects()])

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: every 100 ms, submit what arrived since the last round."""
        started = time.monotonic()
        while not stop.is_set():
            groups, pods = self.arrived(time.monotonic() - started)
            # A finished job's PodGroup goes, as a Job's does when it is cleaned up: kept, they piled up in the
            # store and in the batch scheduler's cache, and every session went through them all.
            writes: list[Write] = [Put(g) for g in groups]
            writes += [Delete(Kind.PODGROUP, f"default/{name}") for name in self.tracker.take_finished()]
            if writes:
                await self.store.write(writes)
            if pods:
                # Before the write: its time counts in the pods' latency, and the watch may read a pod bound
                # before the write's answer is back.
                self.tracker.submitted(pods)
                await self.store.upsert_pods(pods)
            await pause(stop, 0.1)

    def arrived(self, now: float) -> tuple[list[PodGroup], list[Pod]]:
        """The jobs' PodGroups and the pods that arrived since the last call, up to ``now`` seconds
        into the run (each job told to the tracker)."""
        groups: list[PodGroup] = []
        pods: list[Pod] = []
        for i, c in enumerate(self._classes):
            while self._due[i] <= now:
                self._due[i] = next(self._arrivals[i])
                if isinstance(c, TrainingClass):
                    group, gang = self.job(c, self._draws[i])
                    groups.append(group)
                    pods += gang
                elif isinstance(c, AgentClass):
                    pods += self.burst(c, self._draws[i])
        return groups, pods

    def _name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def _pod(
        self, c: PodShape, name: str, scheduler: str, requests: Quantities, duration: float, group: str = ""
    ) -> Pod:
        return make_pod(
            name,
            scheduler=scheduler,
            duration=duration,
            group=group,
            requests=requests,
            tolerations=[msgspec.to_builtins(t) for t in c.tolerations],
            node_selector=c.node_selector,
            priority_class=c.priority_class,
        )

    def job(self, c: TrainingClass, rng: random.Random) -> tuple[PodGroup, list[Pod]]:
        name = self._name(c.name)
        size = rng.choice(c.pods)
        need = max(1, round(size * c.min_available))
        group = make_podgroup(name, min_member=need, queue=c.queue, priority_class=c.priority_class)
        if c.network_topology is not None:
            group = msgspec.structs.replace(
                group, spec=msgspec.structs.replace(group.spec, network_topology=c.network_topology)
            )
        duration = rng.uniform(*c.duration_s)  # a job's pods run together, so they end together
        pods = [self._pod(c, f"{name}-{i}", VOLCANO, c.requests, duration, group=name) for i in range(size)]
        self.tracker.job(name, c.queue, [p.uid for p in pods], need)
        return group, pods

    def burst(self, c: AgentClass, rng: random.Random) -> list[Pod]:
        return [
            self._pod(c, self._name(c.name), AGENT, rng.choice(c.requests), rng.uniform(*c.duration_s))
            for _ in range(rng.randint(*c.burst))
        ]
