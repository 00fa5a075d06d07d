"""Resource vectors: zero-free, immutable, hashable, and parsed from Kubernetes ResourceLists."""

from __future__ import annotations

import copy
import pickle

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.model.quantity import QuantityError
from cluster.model.resources import (
    CPU,
    GPU,
    MEMORY,
    PODS,
    STANDARD_RESOURCES,
    Resources,
)
from tests.builders import pod

GiB = 2**30


def res(cpu: int = 0, memory: int = 0, pods: int = 0, gpu: int = 0, extra: dict[str, int] | None = None) -> Resources:
    """Resources from keyword amounts: cpu in millicores, memory in bytes."""
    return Resources({CPU: cpu, MEMORY: memory, PODS: pods, GPU: gpu, **(extra or {})})


def test_zero_entries_are_dropped() -> None:
    assert Resources({"cpu": 0}) == Resources()
    assert len(Resources({"cpu": 0, "memory": 5})) == 1
    assert "cpu" not in Resources({"cpu": 0})
    assert Resources({"cpu": 0}).is_empty
    assert not res(cpu=1).is_empty
    assert hash(Resources({"cpu": 0})) == hash(Resources())


def test_equals_any_mapping_with_the_same_non_zero_items() -> None:
    r = res(cpu=1500, memory=4 * GiB)
    assert r == {"cpu": 1500, "memory": 4 * GiB}
    assert r == {"cpu": 1500, "memory": 4 * GiB, "pods": 0}
    assert {"cpu": 1500, "memory": 4 * GiB, "pods": 0} == r
    assert r != {"cpu": 1500}
    assert r != res(cpu=1500, memory=4 * GiB, pods=1)
    assert r != "cpu"
    assert {r: "x"}[res(memory=4 * GiB, cpu=1500)] == "x"


def test_immutable() -> None:
    r = res(cpu=1)
    with pytest.raises(AttributeError):
        r._items = {}
    with pytest.raises(TypeError):
        r["cpu"] = 2  # type: ignore[index]
    source = {"cpu": 1}
    r2 = Resources(source)
    source["cpu"] = 5
    assert r2["cpu"] == 1


def test_only_int_amounts() -> None:
    with pytest.raises(TypeError):
        Resources({"cpu": 1.5})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Resources({"cpu": True})


def test_arithmetic_keeps_negative_results() -> None:
    a = res(cpu=1000, memory=GiB)
    b = res(cpu=1500, gpu=1)
    assert a + b == {"cpu": 2500, "memory": GiB, GPU: 1}
    assert a - b == {"cpu": -500, "memory": GiB, GPU: -1}
    assert a - a == Resources()
    assert a + {"example.com/nic": 2} == {"cpu": 1000, "memory": GiB, "example.com/nic": 2}
    assert a.scaled(3) == {"cpu": 3000, "memory": 3 * GiB}
    assert a.scaled(0).is_empty
    assert a.max_with(b) == {"cpu": 1500, "memory": GiB, GPU: 1}
    assert (a - b).max_with({}) == {"memory": GiB}  # absent counts as zero


def test_fits_in_and_shortfall() -> None:
    capacity = {"cpu": 4000, "memory": 8 * GiB, "pods": 110}
    assert res(cpu=4000, memory=8 * GiB, pods=1).fits_in(capacity)
    assert not res(cpu=4001).fits_in(capacity)
    assert not res(gpu=1).fits_in(capacity)  # absent capacity is zero
    assert Resources().fits_in({})
    assert res(cpu=-5).fits_in({})
    need = Resources({"example.com/b": 1, "example.com/a": 1, GPU: 1, "cpu": 5000, "memory": 1})
    assert need.shortfall(capacity) == ("cpu", GPU, "example.com/a", "example.com/b")
    assert res(cpu=1).shortfall(capacity) == ()


def test_names_in_standard_order_then_sorted() -> None:
    r = Resources({"zeta.io/x": 1, GPU: 2, "alpha.io/y": 3, PODS: 1, MEMORY: 5, CPU: 7})
    assert r.names() == (*STANDARD_RESOURCES, "alpha.io/y", "zeta.io/x")
    assert list(r) == list(r.names())
    assert (Resources({"b": 1}) + {"a": 1, "cpu": 1}).names() == ("cpu", "a", "b")


def test_repr_is_readable() -> None:
    assert (
        repr(res(cpu=1500, memory=4 * GiB, gpu=8, pods=1))
        == "Resources(cpu=1500m, memory=4Gi, pods=1, nvidia.com/gpu=8)"
    )
    assert repr(Resources()) == "Resources()"


def test_pickles_and_copies() -> None:
    r = res(cpu=1, memory=2, extra={"example.com/x": 3})
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.deepcopy(r) == r and copy.copy(r) == r


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"cpu": "500m", "memory": "4Gi"}, {"cpu": 500, "memory": 4 * GiB}),
        ({"cpu": 2, "nvidia.com/gpu": 8, "pods": "110"}, {"cpu": 2000, GPU: 8, "pods": 110}),
        ({"cpu": "0", "memory": 0}, {}),
        ({"cpu": 0.5}, {"cpu": 500}),
        (None, {}),
        ({}, {}),
    ],
)
def test_from_quantities(values: dict[str, str | int | float] | None, expected: dict[str, int]) -> None:
    assert Resources.from_quantities(values, field="spec.x") == expected


def test_from_quantities_names_the_field() -> None:
    with pytest.raises(QuantityError, match=r"^status\.allocatable\.memory: invalid quantity '4GB' "):
        Resources.from_quantities({"cpu": "1", "memory": "4GB"}, field="status.allocatable")


@pytest.mark.parametrize("value", ["-1", -1, "-0.0001", "-1Gi"])
def test_negative_quantities_are_refused(value: str | int) -> None:
    with pytest.raises(QuantityError) as err:
        Resources.from_quantities({"memory": value}, field="spec.overhead")
    assert str(err.value) == f"spec.overhead.memory: quantity {value!r} must not be negative"


@pytest.mark.parametrize(("values", "message"), [
    ({"cpu": "1e16"}, "spec.x.cpu: quantity '1e16' is too large (at most 9223372036854775807 millicores)"),
    ({"cpu": "9223372036854776"}, "spec.x.cpu: quantity '9223372036854776' is too large (at most 9223372036854775807 millicores)"),
])  # fmt: skip
def test_amounts_past_int64_are_refused(values: dict[str, str | int | float], message: str) -> None:
    """The store keeps amounts in Redis integers (HINCRBY): 1e16 cores is 1e19 millicores, past int64."""
    with pytest.raises(QuantityError) as err:
        Resources.from_quantities(values, field="spec.x")
    assert str(err.value) == message


def test_the_largest_amounts_are_kept() -> None:
    assert Resources.from_quantities({"cpu": "9223372036854775m", "memory": str(2**63 - 1)}, field="spec.x") == {
        "cpu": 9223372036854775,
        "memory": 2**63 - 1,
    }


def test_to_quantities_round_trips() -> None:
    r = res(cpu=1500, memory=512 * 2**20, gpu=8, pods=3, extra={"example.com/x": 7})
    q = r.to_quantities()
    assert q == {"cpu": "1500m", "memory": "512Mi", "pods": "3", GPU: "8", "example.com/x": "7"}
    assert Resources.from_quantities(q, field="x") == r


names = st.sampled_from([CPU, MEMORY, PODS, GPU, "example.com/a", "ephemeral-storage"])
vectors = st.dictionaries(names, st.integers(min_value=-(10**12), max_value=10**12)).map(Resources)


@given(a=vectors, b=vectors)
def test_algebra(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a
    assert a + b == b + a
    assert a.max_with(b) == b.max_with(a)
    assert a.fits_in(a.max_with(b))
    assert (a - b).fits_in({}) == all(v <= 0 for v in (a - b).values())
    assert set(a.shortfall(b)) == {n for n in a if a[n] > b.get(n, 0)}
    assert 0 not in (a - b).values()


@given(a=vectors.filter(lambda r: all(v >= 0 for v in r.values())))
def test_quantities_round_trip(a: Resources) -> None:
    assert Resources.from_quantities(a.to_quantities(), field="x") == a


def test_a_pod_whose_containers_sum_past_int64_is_refused_by_name() -> None:
    """Each quantity is within int64, their sum is not: the store's integer fields could not hold it."""
    big = pod("big", cpu="9e15")
    spec = msgspec.structs.replace(big.spec, containers=[big.spec.containers[0], big.spec.containers[0]])
    with pytest.raises(
        QuantityError,
        match=r"^spec \(the pod's effective request\)\.cpu: the total 18000000000000000000 "
        r"is too large \(at most 9223372036854775807 millicores\)$",
    ):
        msgspec.structs.replace(big, spec=spec).request()
