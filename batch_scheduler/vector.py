"""Resource vectors with Volcano's arithmetic, for what jobs and queues hold, deserve and may use.

Node fit is numpy over the node columns (integer amounts); the share arithmetic of the
batch plugins — deserved shares, capabilities, guarantees, dominant shares — follows
Volcano's ``api.Resource`` exactly, because its quirks decide placements:

- cpu (millicores) and memory (bytes) are always present; other resources ("scalars")
  may be absent, which is not the same as zero: a queue's ``deserved: {nvidia.com/gpu: 0}``
  says "no GPUs", an absent GPU entry says nothing. Comparisons take a default for a scalar
  one side lacks: :data:`ZERO` or :data:`INFINITY`.
- scalars are counted in thousandths (Volcano's ``MilliValue``), except ``pods`` (a count);
  equality is within :data:`MIN_RESOURCE` (0.1 of those units).
- ``pods`` is never a share anyone is entitled to: emptiness ignores it.

Amounts are floats (shares divide them); :meth:`Vector.from_amounts` and
:meth:`Vector.to_amounts` convert from and to caldera's integer amounts.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterator, Mapping

from cluster.model.quantity import parse_quantity, to_amount
from cluster.model.resources import CPU, MEMORY, PODS, Resources

MIN_RESOURCE = 0.1
"""Volcano's ``minResource``: amounts closer than this are equal, and below it a resource is not held."""
INFINITE = math.inf


class Default(enum.Enum):
    """What a scalar absent from one side counts as in a comparison."""

    ZERO = 0
    INFINITY = -1


ZERO = Default.ZERO
INFINITY = Default.INFINITY


def _milli(name: str) -> int:
    """How many Volcano units one caldera amount of ``name`` is."""
    return 1 if name in (CPU, MEMORY, PODS) else 1000


@functools.lru_cache(maxsize=4096)
def _parsed(
    items: tuple[tuple[str, str | int | float], ...], field: str
) -> tuple[float, float, tuple[tuple[str, float], ...]]:
    """A spec's ResourceList in Volcano units (memoised: every session reads the same PodGroups and
    Queues again, and parsing quantities exactly is slow)."""
    cpu = memory = 0.0
    scalars: list[tuple[str, float]] = []
    for name, value in items:
        amount = to_amount(name, parse_quantity(value, field=f"{field}.{name}"))
        if name == CPU:
            cpu = float(amount)
        elif name == MEMORY:
            memory = float(amount)
        elif not name.startswith("count/"):
            scalars.append((name, float(amount * _milli(name))))
    return cpu, memory, tuple(scalars)


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


class Vector:
    """A resource vector (mutable: the in-place methods return ``self`` so calls chain)."""

    __slots__ = ("cpu", "memory", "scalars")

    def __init__(self, cpu: float = 0.0, memory: float = 0.0, scalars: Mapping[str, float] | None = None) -> None:
        self.cpu = float(cpu)
        self.memory = float(memory)
        self.scalars: dict[str, float] = dict(scalars or {})

    # -- conversion -----------------------------------------------------------------

    @classmethod
    def from_amounts(cls, amounts: Mapping[str, int]) -> Vector:
        """From caldera's integer amounts (cpu millicores, memory bytes, pods, other units)."""
        v = cls()
        for name, amount in amounts.items():
            if name == CPU:
                v.cpu += amount
            elif name == MEMORY:
                v.memory += amount
            elif not name.startswith("count/"):
                v.scalars[name] = v.scalars.get(name, 0.0) + amount * _milli(name)
        return v

    @classmethod
    def from_quantities(cls, values: Mapping[str, str | int | float] | None, *, field: str) -> Vector | None:
        """A ResourceList from a spec, keeping explicit zeros; None when not stated at all."""
        if values is None:
            return None
        cpu, memory, scalars = _parsed(tuple(values.items()), field)
        return cls(cpu, memory, dict(scalars))

    def to_amounts(self, *, pods: bool = True) -> Resources:
        """Caldera's integer amounts (rounded up), finite entries only; without ``pods`` when
        told (what a user reads as a job's or queue's allocation)."""
        out: dict[str, int] = {}
        for name, value in self.items():
            if name == PODS and not pods:
                continue
            if math.isfinite(value) and value > 0:
                out[name] = math.ceil(value / _milli(name) - 1e-9)
        return Resources(out)

    def get(self, name: str) -> float:
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        return self.scalars.get(name, 0.0)

    def items(self) -> Iterator[tuple[str, float]]:
        yield CPU, self.cpu
        yield MEMORY, self.memory
        yield from self.scalars.items()

    def copy(self) -> Vector:
        return Vector(self.cpu, self.memory, self.scalars)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k} {v:g}" for k, v in self.items())
        return f"Vector({inner})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vector):
            return NotImplemented
        return (self.cpu, self.memory, self.scalars) == (other.cpu, other.memory, other.scalars)

    __hash__ = None  # type: ignore[assignment]  # mutable

    # -- questions ------------------------------------------------------------------

    def resource_names(self) -> list[str]:
        """The resources held (at least :data:`MIN_RESOURCE`)."""
        names = [n for n, v in ((CPU, self.cpu), (MEMORY, self.memory)) if v >= MIN_RESOURCE]
        return names + [n for n, v in self.scalars.items() if v >= MIN_RESOURCE]

    def is_empty(self) -> bool:
        """Nothing held but (perhaps) pod slots."""
        if self.cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(v < MIN_RESOURCE for n, v in self.scalars.items() if n != PODS)

    def is_zero(self, name: str) -> bool:
        return self.get(name) < MIN_RESOURCE

    def less_equal(self, other: Vector, default: Default = ZERO) -> bool:
        """Every dimension at most ``other``'s (within :data:`MIN_RESOURCE`)."""
        return self.less_equal_names(other, default)[0] and (
            default is ZERO or all(n in self.scalars for n in other.scalars)
        )

    def less_equal_names(self, other: Vector, default: Default = ZERO) -> tuple[bool, list[str]]:
        """Volcano's ``LessEqualWithResourcesName``: whether every dimension of ``self`` (cpu,
        memory, and the scalars ``self`` has) is at most ``other``'s, and the ones that are not."""
        short = [n for n, a, b in ((CPU, self.cpu, other.cpu), (MEMORY, self.memory, other.memory)) if not _le(a, b)]
        for name, value in self.scalars.items():
            if name not in other.scalars:
                if default is INFINITY:
                    continue
                if not _le(value, 0.0):
                    short.append(name)
            elif not _le(value, other.scalars[name]):
                short.append(name)
        return not short, short

    def less_equal_in(self, other: Vector | None, req: Vector | None) -> tuple[bool, list[str]]:
        """Volcano's ``LessEqualWithDimensionAndResourcesName``: compare only the dimensions
        ``req`` asks for (> 0), strictly (no tolerance); ``pods`` is never compared."""
        if other is None:
            names = self.resource_names()
            return not names, names
        if req is None:
            return self.less_equal_names(other, ZERO)
        short = []
        if req.cpu > 0 and self.cpu > other.cpu:
            short.append(CPU)
        if req.memory > 0 and self.memory > other.memory:
            short.append(MEMORY)
        if self.scalars:
            for name, amount in req.scalars.items():
                if name != PODS and amount > 0 and self.scalars.get(name, 0.0) > other.scalars.get(name, 0.0):
                    short.append(name)
        return not short, short

    def less(self, other: Vector, default: Default = ZERO) -> bool:
        if not (self.cpu < other.cpu and self.memory < other.memory):
            return False
        if default is INFINITY and any(n not in self.scalars for n in other.scalars):
            return False
        for name, value in self.scalars.items():
            if name not in other.scalars:
                if default is INFINITY:
                    continue
                if not value < 0.0:
                    return False
            elif not value < other.scalars[name]:
                return False
        return True

    def less_equal_partly(self, other: Vector, default: Default = ZERO) -> bool:
        """Some dimension at most ``other``'s."""
        if _le(self.cpu, other.cpu) or _le(self.memory, other.memory):
            return True
        if default is ZERO and any(n not in self.scalars for n in other.scalars):
            return True
        for name, value in self.scalars.items():
            if name not in other.scalars:
                if default is INFINITY:
                    return True
                continue
            if _le(value, other.scalars[name]):
                return True
        return False

    def greater_in(self, other: Vector | None, req: Vector | None) -> tuple[bool, list[str]]:
        """Volcano's ``GreaterPartlyWithDimension``: some dimension ``req`` asks for (> 0) is
        strictly above ``other``'s; and which."""
        if req is None:
            return False, []
        other = other if other is not None else Vector()
        over = []
        if req.cpu > 0 and self.cpu > other.cpu:
            over.append(CPU)
        if req.memory > 0 and self.memory > other.memory:
            over.append(MEMORY)
        for name, amount in req.scalars.items():
            if name != PODS and amount > 0 and self.get(name) > other.get(name):
                over.append(name)
        return bool(over), over

    def greater_in_relevant(self, other: Vector | None, req: Vector | None) -> tuple[bool, list[str]]:
        """Volcano's ``GreaterPartlyWithRelevantDimensions``: as :meth:`greater_in`, but only in
        the dimensions ``other`` has (cpu and memory when at least :data:`MIN_RESOURCE`)."""
        if req is None:
            return False, []
        other = other if other is not None else Vector()
        filtered = Vector(
            req.cpu if other.cpu >= MIN_RESOURCE else 0.0,
            req.memory if other.memory >= MIN_RESOURCE else 0.0,
            {n: q for n, q in req.scalars.items() if q > 0 and n in other.scalars},
        )
        return self.greater_in(other, filtered)

    # -- arithmetic (in place) ------------------------------------------------------

    def add(self, other: Vector) -> Vector:
        self.cpu += other.cpu
        self.memory += other.memory
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + value
        return self

    def sub(self, other: Vector) -> Vector:
        """Subtract; scalars ``self`` lacks stay absent (as in Volcano)."""
        self.cpu -= other.cpu
        self.memory -= other.memory
        if self.scalars:
            for name, value in other.scalars.items():
                self.scalars[name] = self.scalars.get(name, 0.0) - value
        return self

    def multi(self, ratio: float) -> Vector:
        self.cpu *= ratio
        self.memory *= ratio
        for name in self.scalars:
            self.scalars[name] *= ratio
        return self

    def min_dimension(self, other: Vector, default: Default = ZERO) -> Vector:
        """Each dimension at most ``other``'s; a scalar ``other`` lacks becomes 0 (ZERO) or stays (INFINITY)."""
        self.cpu = min(self.cpu, other.cpu)
        self.memory = min(self.memory, other.memory)
        for name, value in self.scalars.items():
            if name in other.scalars:
                self.scalars[name] = min(value, other.scalars[name])
            elif default is ZERO:
                self.scalars[name] = 0.0
        return self

    def set_max(self, other: Vector) -> Vector:
        self.cpu = max(self.cpu, other.cpu)
        self.memory = max(self.memory, other.memory)
        for name, value in other.scalars.items():
            if name not in self.scalars or value > self.scalars[name]:
                self.scalars[name] = value
        return self

    def __add__(self, other: Vector) -> Vector:
        return self.copy().add(other)

    def __sub__(self, other: Vector) -> Vector:
        return self.copy().sub(other)

    def diff(self, other: Vector, default: Default = ZERO) -> tuple[Vector, Vector]:
        """(what ``self`` has more than ``other``, what it has less), per dimension; a scalar only
        one side has counts as ``default`` on the other (INFINITY: the difference is infinite)."""
        fill = 0.0 if default is ZERO else -1.0  # Volcano marks infinity as -1 here
        left, right = dict(self.scalars), dict(other.scalars)
        for name in list(left):
            right.setdefault(name, fill)
        for name in list(right):
            left.setdefault(name, fill)
        increased, decreased = Vector(), Vector()
        if self.cpu > other.cpu:
            increased.cpu = self.cpu - other.cpu
        else:
            decreased.cpu = other.cpu - self.cpu
        if self.memory > other.memory:
            increased.memory = self.memory - other.memory
        else:
            decreased.memory = other.memory - self.memory
        for name, lq in left.items():
            rq = right[name]
            if lq == -1.0 and default is INFINITY:
                increased.scalars[name] = lq
            elif rq == -1.0 and default is INFINITY:
                decreased.scalars[name] = rq
            elif lq > rq:
                increased.scalars[name] = lq - rq
            else:
                decreased.scalars[name] = rq - lq
        return increased, decreased


def exceeded_part(left: Vector, right: Vector | None) -> Vector:
    """What ``left`` has beyond ``right``, per dimension (Volcano's ``ExceededPart``)."""
    if right is None:
        return left.copy()
    return left.diff(right, ZERO)[0]


def vmax(a: Vector, b: Vector) -> Vector:
    """Per dimension the larger (Volcano's ``helpers.Max``): the scalars of either side, negative ones dropped."""
    out = Vector(max(a.cpu, b.cpu), max(a.memory, b.memory))
    for name, value in a.scalars.items():
        if value >= 0:
            out.scalars[name] = value
    for name, value in b.scalars.items():
        if value >= 0:
            out.scalars[name] = max(value, out.scalars.get(name, 0.0))
    return out


def vmin(a: Vector, b: Vector) -> Vector:
    """Per dimension the smaller (Volcano's ``helpers.Min``): scalars only when both sides have some."""
    out = Vector(min(a.cpu, b.cpu), min(a.memory, b.memory))
    if a.scalars and b.scalars:
        out.scalars = {name: min(value, b.scalars.get(name, 0.0)) for name, value in a.scalars.items()}
    return out


def share(allocated: float, total: float) -> float:
    """Volcano's ``helpers.Share``: allocated ÷ total, 1 when total is 0 but something is held."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def amount_text(name: str, value: float, *, down: bool = False) -> str:
    """A Volcano-unit amount of ``name`` as a Kubernetes quantity ("unlimited" when infinite);
    rounded up to a whole caldera amount, or down with ``down`` (room, not need)."""
    if not math.isfinite(value):
        return "unlimited"
    if down:
        value = math.floor(value / _milli(name) + 1e-9) * _milli(name)
    v = Vector()
    if name == CPU:
        v.cpu = value
    elif name == MEMORY:
        v.memory = value
    else:
        v.scalars[name] = value
    return v.to_amounts().to_quantities().get(name, "0")
