"""Resource vectors: integer amounts per resource name (cpu in millicores, memory in bytes, ...)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, NoReturn

from cluster.model.quantity import MAX_INT64, QuantityError, format_amount, parse_amount

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
STANDARD_RESOURCES = (CPU, MEMORY, PODS, GPU)
DEFAULT_MAX_PODS = 110  # the kubelet's default --max-pods

EPHEMERAL_STORAGE = "ephemeral-storage"
CONTAINER_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)
"""The resources a container may name without a domain (besides ``hugepages-<size>``)."""

_RANK = {name: i for i, name in enumerate(STANDARD_RESOURCES)}


def is_native_resource(name: str) -> bool:
    """Kubernetes' own resources: no domain, or the ``kubernetes.io`` domain."""
    domain, slash, _ = name.partition("/")
    return not slash or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")


def is_extended_resource(name: str) -> bool:
    """A resource a device plugin or an operator adds (``nvidia.com/gpu``): counted in whole units only.

    Kubernetes requires such amounts to be integers and a container's request to equal its
    limit (they cannot be overcommitted).
    """
    return not is_native_resource(name) and not name.startswith("requests.")


def _order(name: str) -> tuple[int, str]:
    return (_RANK.get(name, len(STANDARD_RESOURCES)), name)


class Resources(Mapping[str, int]):
    """An immutable vector of resource amounts; absent means zero.

    Zero entries are dropped, so ``Resources({"cpu": 0}) == Resources()``; amounts may be
    negative (e.g. the result of a subtraction). It equals any mapping with the same
    non-zero items. Iteration follows :data:`STANDARD_RESOURCES`, then name order.
    """

    __slots__ = ("_items", "_hash")
    _items: dict[str, int]
    _hash: int | None

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] | None = None, /) -> None:
        items = dict(values or ())
        for name, amount in items.items():
            if not isinstance(name, str) or isinstance(amount, bool) or not isinstance(amount, int):
                raise TypeError(f"resource amounts are str -> int, got {name!r}: {amount!r}")
        object.__setattr__(self, "_items", _canonical(items))
        object.__setattr__(self, "_hash", None)

    @classmethod
    def _of(cls, items: dict[str, int]) -> Resources:
        """Wrap an already valid dict without checking it (arithmetic results)."""
        new = object.__new__(cls)
        object.__setattr__(new, "_items", _canonical(items))
        object.__setattr__(new, "_hash", None)
        return new

    def within_int64(self, *, field: str) -> Resources:
        """Self, when every amount fits the store's integer fields; else QuantityError naming
        ``field``, the resource and the limit (a sum of valid quantities can exceed int64)."""
        for name, amount in self._items.items():
            if abs(amount) > MAX_INT64:
                raise QuantityError(
                    f"{field}.{name}",
                    amount,
                    f"the total {amount} is too large (at most {MAX_INT64}{' millicores' if name == 'cpu' else ''})",
                )
        return self

    @classmethod
    def from_quantities(cls, values: Mapping[str, str | int | float] | None, *, field: str) -> Resources:
        """Parse a Kubernetes ResourceList ({"cpu": "500m", ...}); ``field`` prefixes error paths.

        Negative quantities are an error, as in Kubernetes' validation of requests, and so
        are amounts past int64 (the store keeps them in Redis integers).
        """
        items = {
            name: parse_amount(name, value, field=f"{field}.{name}", negative=False)
            for name, value in (values or {}).items()
        }
        return cls._of(items)

    # -- Mapping ----------------------------------------------------------------------

    def __getitem__(self, name: str) -> int:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    # The dict's own views and get: Mapping's generic ones go through __iter__ and
    # __getitem__ per item, and resources are read in every scheduler's inner loops.
    def get(self, name: str, default: Any = None) -> Any:
        return self._items.get(name, default)

    def items(self) -> ItemsView[str, int]:
        return self._items.items()

    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def values(self) -> ValuesView[int]:
        return self._items.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == {k: v for k, v in other.items() if v != 0}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._items.items())))
        assert self._hash is not None
        return self._hash

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("Resources is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Resources is immutable")

    def __reduce__(self) -> tuple[type[Resources], tuple[dict[str, int]]]:
        return (Resources, (dict(self._items),))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={format_amount(name, amount)}" for name, amount in self._items.items())
        return f"Resources({inner})"

    # -- arithmetic -------------------------------------------------------------------

    def __add__(self, other: Mapping[str, int]) -> Resources:
        if not isinstance(other, Mapping):
            return NotImplemented
        out = dict(self._items)
        for name, amount in other.items():
            out[name] = out.get(name, 0) + amount
        return Resources._of(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        if not isinstance(other, Mapping):
            return NotImplemented
        out = dict(self._items)
        for name, amount in other.items():
            out[name] = out.get(name, 0) - amount
        return Resources._of(out)

    def max_with(self, other: Mapping[str, int]) -> Resources:
        """Element-wise maximum (absent counts as zero)."""
        names = self._items.keys() | other.keys()
        return Resources._of({name: max(self._items.get(name, 0), other.get(name, 0)) for name in names})

    def scaled(self, k: int) -> Resources:
        """Every amount multiplied by ``k``."""
        return Resources._of({name: amount * k for name, amount in self._items.items()})

    # -- questions --------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        """True when every amount is zero."""
        return not self._items

    def fits_in(self, capacity: Mapping[str, int]) -> bool:
        """Whether every amount is at most the capacity's (absent capacity is zero)."""
        return all(amount <= capacity.get(name, 0) for name, amount in self._items.items())

    def shortfall(self, free: Mapping[str, int]) -> tuple[str, ...]:
        """Names whose amount exceeds ``free``, standard resources first."""
        return tuple(name for name, amount in self._items.items() if amount > free.get(name, 0))

    def names(self) -> tuple[str, ...]:
        """Resource names present, standard resources first, then by name."""
        return tuple(self._items)

    def to_quantities(self) -> dict[str, str]:
        """Kubernetes quantity strings ({"cpu": "1500m", "memory": "4Gi"})."""
        return {name: format_amount(name, amount) for name, amount in self._items.items()}


def _canonical(items: dict[str, int]) -> dict[str, int]:
    return {name: items[name] for name in sorted(items, key=_order) if items[name]}
