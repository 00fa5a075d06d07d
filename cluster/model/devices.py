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

Not wired into placement yet: the store, the binder's per-card accounting and the policies build
on this model.
"""

from __future__ import annotations

import enum

import msgspec

from cluster.model.core import Node
from cluster.model.quantity import QuantityError, parse_amount
from cluster.model.schema import Problem

VGPU_REGISTER = "volcano.sh/node-vgpu-register"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_UNHEALTHY = "volcano.sh/gpu-unhealthy-ids"
WHOLE_GPU = "nvidia.com/gpu"
VGPU_MODES = ("hami-core", "mig")


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
        return _gpushare(number, memory, annotations.get(GPU_UNHEALTHY, ""))
    whole = _count(allocatable.get(WHOLE_GPU), WHOLE_GPU)
    return [GpuDevice(index=i, sharing=Sharing.WHOLE) for i in range(whole)], []


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
        uuid, split, memory, kind, health, mode = (p.strip() for p in parts)
        if not split.isdigit() or not memory.isdigit() or int(split) < 1:
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
    if not all(s.isdigit() for s in ids):
        field = f"metadata.annotations.{GPU_UNHEALTHY}"
        return [], [Problem(field, f'{unhealthy!r} (expected card indexes separated by commas, e.g. "1,3")')]
    bad = {int(s) for s in ids}
    per = memory // number
    cards = [
        GpuDevice(index=i, sharing=Sharing.GPUSHARE, memory=per, split=None) for i in range(number) if i not in bad
    ]
    return cards, []
