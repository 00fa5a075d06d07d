"""A node's GPUs as devices, and what a pod asks of them — the model per-device GPU sharing builds on.

A node's cards come from, in this order (the first that applies):

- **HAMi vGPU** — the annotation ``volcano.sh/node-vgpu-register``: cards separated by ``:``, each
  ``UUID,splitCount,memoryMiB,type,health,mode`` (mode ``hami-core`` or ``mig``), indexed by
  position; Volcano uses them only when the node also has ``volcano.sh/vgpu-number``,
  ``volcano.sh/vgpu-memory`` and ``volcano.sh/vgpu-cores`` allocatable, each above 0, and so does
  caldera;
- **Volcano gpushare** — allocatable ``volcano.sh/gpu-number`` N and ``volcano.sh/gpu-memory`` M:
  cards 0…N−1 of M // N MiB each, less those ``volcano.sh/gpu-unhealthy-ids`` (``"1,3"``) names;
- **whole cards** — allocatable ``nvidia.com/gpu`` N: cards 0…N−1, one pod each, memory unknown.

A malformed annotation is one :class:`~cluster.model.schema.Problem` naming the annotation, the
entry and what is accepted, and the node has no cards from it (nothing half-read).

What a pod asks (:func:`pod_gpu_demand`), as Volcano reads it: for **vGPU**, per container whose
*limits* name ``volcano.sh/vgpu-number`` or ``volcano.sh/vgpu-memory``, that many cards (1 with
only memory), each with ``vgpu-memory`` MiB (limits, else requests) or
``vgpu-memory-percentage`` of the card (the whole card when neither is given) and
``vgpu-cores`` percent of its cores; for **gpushare**, ``volcano.sh/gpu-memory`` MiB on one card
or ``volcano.sh/gpu-number`` idle cards (limits; containers summed, init containers' largest if
larger); for **whole cards**, ``nvidia.com/gpu``.

Per card, the store holds the card's room as resources of its node (:func:`card_resources`):
``gpu.caldera.io/<i>`` — memory for vGPU and gpushare cards, 1000 thousandths for a whole card
on a node that shares its cards in thousandths —
and, for vGPU, ``gpu.caldera.io/<i>.slots`` (its split count) and ``gpu.caldera.io/<i>.cores``
(100). A placement takes its cards' shares of them in the binder's one compare-and-set, so no
card is ever over-committed, and the pod holds them until it ends (:func:`pod_cards`: what a
pod's annotations say it holds, for pods observed bound).
"""

from __future__ import annotations

import enum

import msgspec

from cluster.model.core import Container, Node, Pod
from cluster.model.quantity import QuantityError, parse_amount
from cluster.model.resources import Resources
from cluster.model.schema import Problem

VGPU_REGISTER = "volcano.sh/node-vgpu-register"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_UNHEALTHY = "volcano.sh/gpu-unhealthy-ids"
WHOLE_GPU = "nvidia.com/gpu"
VGPU_MODES = ("hami-core", "mig")
GPU_INDEX = "volcano.sh/gpu-index"  # gpushare: the cards a pod was given, "0" or "1,3"
CARDS_ANNOTATION = "caldera.io/gpu-cards"  # what caldera committed: "3=460" or "1=8000,1.slots=1,1.cores=50"
CARD_PREFIX = "gpu.caldera.io/"
GPU_MILLI = "caldera.io/gpu-milli"  # a node's cards shared in thousandths (1000 per card)
GPU_MODEL_LABEL = "caldera.io/gpu-model"  # a node's GPU model (the OpenB traces' models)
WHOLE_CARD = 1000  # a whole card's room, in thousandths
FULL_CORES = 100


def is_card_resource(name: str) -> bool:
    """A card's room (the placement core's own), not a resource queues and shares count."""
    return name.startswith(CARD_PREFIX)


def card_resource(index: int, dim: str = "") -> str:
    """The node resource that is card ``index``'s room (``dim`` '' for memory or thousandths, or slots, cores)."""
    return f"{CARD_PREFIX}{index}{'.' + dim if dim else ''}"


def card_resources(node: Node) -> Resources:
    """The node's cards as resources (the module docstring); unhealthy vGPU cards have none.

    Whole ``nvidia.com/gpu`` cards are tracked one by one only on a node that shares them in
    thousandths (it offers ``caldera.io/gpu-milli``, as the OpenB traces' nodes do): on a node
    where every pod takes whole cards the count is the whole truth, and the device plugin picks
    which ones."""
    allocatable = node.status.allocatable
    if not (allocatable.keys() & _DEVICE_RESOURCES) and VGPU_REGISTER not in node.metadata.annotations:
        return NO_CARDS
    cards, _ = node_devices(node)
    out: dict[str, int] = {}
    shared_whole = GPU_MILLI in allocatable
    for card in cards:
        if card.sharing is Sharing.WHOLE:
            if shared_whole:
                out[card_resource(card.index)] = WHOLE_CARD
        elif card.healthy:
            out[card_resource(card.index)] = card.memory
            if card.sharing is Sharing.VGPU:
                out[card_resource(card.index, "slots")] = card.split or 1
                out[card_resource(card.index, "cores")] = FULL_CORES
    return Resources(out)


_DEVICE_RESOURCES = frozenset({GPU_NUMBER, GPU_MEMORY, VGPU_NUMBER, GPU_MILLI})
NO_CARDS = Resources()  # shared: a Resources is never changed in place
MAX_CARDS = 64  # a node's cards tracked one by one; a node claiming more is tracked by its totals


def node_allocatable(node: Node) -> Resources:
    """What the node offers as the store holds it: its allocatable and its cards' rooms."""
    return node.allocatable_resources() + card_resources(node)


def card_uuids(node: Node) -> tuple[str, ...]:
    """The UUIDs of the node's vGPU cards by index ('' for an index with none); () for other nodes."""
    if VGPU_REGISTER not in node.metadata.annotations:
        return ()
    cards, _ = node_devices(node)
    if not cards or cards[0].sharing is not Sharing.VGPU:
        return ()
    out = [""] * (max(c.index for c in cards) + 1)
    for c in cards:
        out[c.index] = c.uuid
    return tuple(out)


def card_annotations(pod: Pod, node: str, uuids: tuple[str, ...], cards: Resources, now: float) -> dict[str, str]:
    """What the pod's bind writes for the device plugins, once its cards are committed (nothing for
    whole ``nvidia.com/gpu`` cards, which the device plugin picks itself): caldera's
    ``caldera.io/gpu-cards``; for gpushare ``volcano.sh/gpu-index`` and ``predicate-time``; for vGPU
    HAMi's ``vgpu-ids-new``/``devices-to-allocate`` (per container ``UUID,NVIDIA,memory,cores:``,
    containers joined by ``;`` — each container's cards taken in index order), ``vgpu-node``,
    ``vgpu-time``, ``bind-phase: allocating`` and ``bind-time``. Empty without cards."""
    if not cards:
        return {}
    demand = pod_gpu_demand(pod)
    if demand is not None:
        whole = demand.sharing is Sharing.WHOLE
    else:
        whole = any(WHOLE_GPU in c.resources.requests for c in pod.spec.containers)
    if whole:
        return {}  # whole nvidia.com/gpu cards: the device plugin picks the devices; the store holds ours
    out = {CARDS_ANNOTATION: encode_cards(cards)}
    index = sorted({int(n[len(CARD_PREFIX) :].partition(".")[0]) for n in cards.names()})
    if demand is None:
        return out
    if demand.sharing is Sharing.GPUSHARE:
        out[GPU_INDEX] = ",".join(str(i) for i in index)
        out["volcano.sh/predicate-time"] = str(int(now * 1e9))
    elif demand.sharing is Sharing.VGPU:
        containers, pool = [], list(index)
        for ask in demand.cards:
            mine, pool = pool[: ask.count], pool[ask.count :]
            entries = []
            for i in mine:
                memory = ask.memory if ask.percentage is None else cards.get(card_resource(i), 0)
                uuid = uuids[i] if i < len(uuids) else ""
                entries.append(f"{uuid},NVIDIA,{memory},{ask.cores}:")
            containers.append("".join(entries))
        ids = ";".join(containers)
        stamp = str(int(now))
        out |= {
            VGPU_IDS: ids,
            "volcano.sh/devices-to-allocate": ids,
            "volcano.sh/vgpu-node": node,
            "volcano.sh/vgpu-time": stamp,
            "volcano.sh/bind-phase": "allocating",
            "volcano.sh/bind-time": stamp,
        }
    return out


def encode_cards(cards: Resources) -> str:
    """The ``caldera.io/gpu-cards`` annotation for cards taken as card resources."""
    return ",".join(f"{name[len(CARD_PREFIX) :]}={amount}" for name, amount in cards.items())


VGPU_IDS = "volcano.sh/vgpu-ids-new"  # HAMi's assignment: per container ``UUID,type,memory,cores:``…, joined by ``;``


def pod_cards(pod: Pod, uuids: tuple[str, ...] = ()) -> Resources:
    """The card shares a bound pod's annotations say it holds: caldera's own annotation, else
    gpushare's ``volcano.sh/gpu-index`` (its gpu-memory on that card, or — gpu-number — 1 on each
    card, enough to make them not idle, as Volcano counts them), else — given the node's vGPU
    UUIDs by index (:func:`card_uuids`) — HAMi's ``volcano.sh/vgpu-ids-new``: memory, a slot and
    cores on each card it names (a pod another vGPU scheduler placed). Malformed: none."""
    annotations = pod.metadata.annotations
    text = annotations.get(CARDS_ANNOTATION)
    if text:
        out: dict[str, int] = {}
        for item in text.split(","):
            key, _, amount = item.strip().partition("=")
            card, _, dim = key.partition(".")
            if not _whole_number(card) or dim not in ("", "slots", "cores") or not _whole_number(amount):
                return Resources()
            out[card_resource(int(card), dim)] = out.get(card_resource(int(card), dim), 0) + int(amount)
        return Resources(out)
    if GPU_INDEX not in annotations and uuids and VGPU_IDS in annotations:
        return _vgpu_cards(annotations[VGPU_IDS], uuids)
    index = annotations.get(GPU_INDEX, "")
    ids = [s.strip() for s in index.split(",") if s.strip()]
    if not ids or not all(_whole_number(s) for s in ids):
        return Resources()
    memory = _limit(pod, GPU_MEMORY)
    if memory and len(ids) == 1:
        return Resources({card_resource(int(ids[0])): memory})
    return Resources({card_resource(int(i)): 1 for i in ids})


def _vgpu_cards(text: str, uuids: tuple[str, ...]) -> Resources:
    at = {u: i for i, u in enumerate(uuids) if u}
    out: dict[str, int] = {}
    for entry in (e for container in text.split(";") for e in container.split(":")):
        if not entry.strip():
            continue
        parts = entry.split(",")
        if len(parts) != 4 or parts[0] not in at or not all(_whole_number(x) for x in parts[2:]):
            return Resources()  # a card this node does not have, or not HAMi's format: none
        i = at[parts[0]]
        for name, amount in ((card_resource(i), int(parts[2])), (card_resource(i, "slots"), 1)):
            out[name] = out.get(name, 0) + amount
        if int(parts[3]):
            out[card_resource(i, "cores")] = out.get(card_resource(i, "cores"), 0) + int(parts[3])
    return Resources(out)


def foreign_vgpu(pod: Pod) -> bool:
    """A bound pod whose vGPU cards only HAMi's annotation names (placed by another scheduler)."""
    a = pod.metadata.annotations
    return bool(pod.node_name) and VGPU_IDS in a and CARDS_ANNOTATION not in a and GPU_INDEX not in a


class Sharing(enum.StrEnum):
    VGPU = "vgpu"  # HAMi: split count, memory and cores per card
    GPUSHARE = "gpushare"  # Volcano's legacy memory sharing
    WHOLE = "whole"  # one pod per card


class GpuDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One card: its index on the node, what it holds, and how it is shared."""

    index: int
    sharing: Sharing
    memory: int = 0  # MiB; 0: unknown (whole cards)
    split: int | None = 1  # pods that may share it (None: as many as its memory holds)
    uuid: str = ""
    type: str = ""
    healthy: bool = True
    mode: str = ""  # hami-core or mig (vGPU)


class CardRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What one container asks of each of its ``count`` cards (vGPU)."""

    count: int
    memory: int = 0  # MiB; 0 with a percentage
    percentage: int | None = None  # of the card's memory; 100: the whole card
    cores: int = 0  # percent of the card's cores


class GpuDemand(msgspec.Struct, frozen=True, kw_only=True):
    """A pod's GPU demand: vGPU cards per container, gpushare memory or card count, or whole cards."""

    sharing: Sharing
    cards: list[CardRequest] = msgspec.field(default_factory=list)  # vGPU, per container
    memory: int = 0  # gpushare: MiB on one card
    count: int = 0  # gpushare: whole idle cards; whole: cards


_DEMAND_LIMITS = frozenset({VGPU_NUMBER, VGPU_MEMORY, GPU_MEMORY, GPU_NUMBER, WHOLE_GPU})


def pod_gpu_demand(pod: Pod) -> GpuDemand | None:
    """The pod's GPU demand (the module docstring), None when it asks for no GPU."""
    containers = pod.spec.containers
    if not any(k in _DEMAND_LIMITS for c in (*containers, *pod.spec.init_containers) for k in c.resources.limits):
        return None
    cards = [c for c in (_card_request(x) for x in containers) if c is not None]
    if cards:
        return GpuDemand(sharing=Sharing.VGPU, cards=cards)
    memory, number = _limit(pod, GPU_MEMORY), _limit(pod, GPU_NUMBER)
    if memory or number:
        return GpuDemand(sharing=Sharing.GPUSHARE, memory=memory, count=number)
    whole = _limit(pod, WHOLE_GPU)
    return GpuDemand(sharing=Sharing.WHOLE, count=whole) if whole else None


def _card_request(c: Container) -> CardRequest | None:
    limits, requests = c.resources.limits, c.resources.requests
    if VGPU_NUMBER not in limits and VGPU_MEMORY not in limits:
        return None
    count = _count(limits.get(VGPU_NUMBER), VGPU_NUMBER) if VGPU_NUMBER in limits else 1
    memory = _count(limits.get(VGPU_MEMORY, requests.get(VGPU_MEMORY)), VGPU_MEMORY)
    percentage = (
        _count(limits.get(VGPU_PERCENTAGE, requests.get(VGPU_PERCENTAGE)), VGPU_PERCENTAGE)
        if VGPU_PERCENTAGE in limits or VGPU_PERCENTAGE in requests
        else None
    )
    if not memory and percentage is None:
        percentage = 100  # neither: the whole card's memory
    cores = _count(limits.get(VGPU_CORES, requests.get(VGPU_CORES)), VGPU_CORES)
    return CardRequest(count=count, memory=memory, percentage=percentage, cores=cores)


def _limit(pod: Pod, resource: str) -> int:
    """The pod's limit of ``resource``: its containers' summed, or its init containers' largest if larger."""
    run = sum(_count(c.resources.limits.get(resource), resource) for c in pod.spec.containers)
    init = max((_count(c.resources.limits.get(resource), resource) for c in pod.spec.init_containers), default=0)
    return max(run, init)


def node_devices(node: Node) -> tuple[list[GpuDevice], list[Problem]]:
    """The node's cards (see the module docstring) and what was malformed."""
    annotations = node.metadata.annotations
    allocatable = node.status.allocatable
    if VGPU_REGISTER in annotations and all(
        _count(allocatable.get(r), r) > 0 for r in (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)
    ):
        return _vgpu(annotations[VGPU_REGISTER])
    number, memory = _count(allocatable.get(GPU_NUMBER), GPU_NUMBER), _count(allocatable.get(GPU_MEMORY), GPU_MEMORY)
    if number > 0 and memory > 0:
        if number > MAX_CARDS:
            return [], [_too_many(GPU_NUMBER, number)]
        return _gpushare(number, memory, annotations.get(GPU_UNHEALTHY, ""))
    whole = _count(allocatable.get(WHOLE_GPU), WHOLE_GPU)
    if whole > MAX_CARDS:
        return [], [_too_many(WHOLE_GPU, whole)] if GPU_MILLI in allocatable else []
    return [GpuDevice(index=i, sharing=Sharing.WHOLE) for i in range(whole)], []


def _too_many(resource: str, count: int) -> Problem:
    return Problem(
        f"status.allocatable.{resource}",
        f"{count} cards (at most {MAX_CARDS} are tracked one by one; this node's are not, its totals count)",
    )


def _whole_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 18


def _count(value: str | int | float | None, resource: str) -> int:
    if value is None:
        return 0
    try:
        return parse_amount(resource, value, field=f"status.allocatable.{resource}", negative=False)
    except QuantityError:
        return 0  # the node's own decode names a bad quantity; here it only means no cards


def _vgpu(register: str) -> tuple[list[GpuDevice], list[Problem]]:
    field = f"metadata.annotations.{VGPU_REGISTER}"
    cards: list[GpuDevice] = []
    for i, entry in enumerate(e for e in register.split(":") if e.strip()):
        parts = entry.split(",")
        expected = "UUID,splitCount,memoryMiB,type,health,mode"
        if len(parts) != 6:
            return [], [Problem(field, f"card {i} {entry!r} has {len(parts)} fields (expected {expected})")]
        if i >= MAX_CARDS:
            return [], [Problem(field, f"more than {MAX_CARDS} cards (at most {MAX_CARDS} are tracked one by one)")]
        uuid, split, memory, kind, health, mode = (p.strip() for p in parts)
        if not _whole_number(split) or not _whole_number(memory) or int(split) < 1:
            return [], [
                Problem(
                    field, f"card {i} {entry!r}: splitCount and memoryMiB must be whole numbers, splitCount at least 1"
                )
            ]
        if health.lower() not in ("true", "false") or mode not in VGPU_MODES:
            return [], [
                Problem(field, f"card {i} {entry!r}: health is true or false, mode one of {', '.join(VGPU_MODES)}")
            ]
        cards.append(
            GpuDevice(
                index=i,
                sharing=Sharing.VGPU,
                memory=int(memory),
                split=int(split),
                uuid=uuid,
                type=kind,
                healthy=health.lower() == "true",
                mode=mode,
            )
        )
    return cards, []


def _gpushare(number: int, memory: int, unhealthy: str) -> tuple[list[GpuDevice], list[Problem]]:
    ids = [s.strip() for s in unhealthy.split(",") if s.strip()]
    if not all(_whole_number(s) for s in ids):
        field = f"metadata.annotations.{GPU_UNHEALTHY}"
        return [], [Problem(field, f'{unhealthy!r} (expected card indexes separated by commas, e.g. "1,3")')]
    bad = {int(s) for s in ids}
    per = memory // number
    cards = [
        GpuDevice(index=i, sharing=Sharing.GPUSHARE, memory=per, split=None) for i in range(number) if i not in bad
    ]
    return cards, []
