"""Node columns: fit masks over all nodes, dense removal, growth, tentative placements."""

from __future__ import annotations

import numpy as np

from cluster.model.resources import Resources
from cluster.nodeview.fit import fitting
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord
from tests.builders import node


def record(
    name: str, *, cpu: int = 8000, used: int = 0, gpu: int = 0, version: int = 1, unsched: bool = False
) -> NodeRecord:
    alloc = {"cpu": cpu, "memory": 2**35, "pods": 110}
    if gpu:
        alloc["nvidia.com/gpu"] = gpu
    return NodeRecord(
        name=name,
        allocatable=Resources(alloc),
        allocated=Resources({"cpu": used}),
        version=version,
        owner="",
        unschedulable=unsched,
        node=node(name),
    )


def test_fits_checks_every_resource_and_schedulability() -> None:
    cols = NodeTable([record("a"), record("b", used=7500), record("c", gpu=4), record("d", unsched=True)])
    assert list(fitting(cols, Resources({"cpu": 1000, "pods": 1})) & ~cols.unschedulable[: len(cols)]) == [
        True,
        False,
        True,
        False,
    ]
    assert list(fitting(cols, Resources({"nvidia.com/gpu": 2, "pods": 1})) & ~cols.unschedulable[: len(cols)]) == [
        False,
        False,
        True,
        False,
    ]
    assert list(fitting(cols, Resources({"example.com/fpga": 1})) & ~cols.unschedulable[: len(cols)]) == [
        False,
        False,
        False,
        False,
    ]


def test_remove_keeps_rows_dense_and_growth_keeps_data() -> None:
    cols = NodeTable([record(f"n{i}", used=i) for i in range(100)], capacity=4)
    cols.remove("n3")
    assert len(cols) == 99 and "n3" not in cols.index
    for name, i in cols.index.items():
        assert cols.names[i] == name and cols.allocated[0, i] == int(name[1:])
    cols.take("n5", Resources({"cpu": 10}))
    assert cols.allocated[0, cols.index["n5"]] == 15


def test_copy_is_independent() -> None:
    cols = NodeTable([record("a")])
    snap = cols.snapshot()
    snap.take("a", Resources({"cpu": 500}))
    assert cols.allocated[0, 0] == 0 and snap.allocated[0, 0] == 500
    assert np.array_equal(cols.free()[1], snap.free()[1])


def test_stale_figures_do_not_overwrite_newer_ones() -> None:
    cols = NodeTable([record("a", version=5, used=100)])
    cols.set_figures("a", Resources({"cpu": 8000}), Resources({"cpu": 9}), 4, False)
    assert cols.allocated[0, 0] == 100
    cols.set_figures("a", Resources({"cpu": 8000}), Resources({"cpu": 9}), 6, False)
    assert cols.allocated[0, 0] == 9 and cols.version[0] == 6
