"""Assume / forget / confirm-by-version: a placement stays counted on the table until a record counts it."""

from __future__ import annotations

from cluster.model.resources import Resources
from cluster.nodeview.assume import Assumed
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord, Update
from tests.builders import node

POD = Resources({"cpu": 1000, "pods": 1})


def record(name: str, used: int, version: int) -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable=Resources({"cpu": 8000, "pods": 110}),
        allocated=Resources({"cpu": used}),
        version=version,
        owner="",
        unschedulable=False,
        node=node(name),
    )


def cpu(table: NodeTable, name: str) -> int:
    return int(table.allocated[table.resource_index["cpu"], table.index[name]])


def test_an_assumed_placement_survives_refreshes_from_records_that_do_not_count_it() -> None:
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    token = held.assume("a", POD)
    assert cpu(table, "a") == 1000
    held.apply(Update(version=2, full=False, nodes={"a": record("a", 500, 2)}))  # someone else's pod, not ours
    assert cpu(table, "a") == 1500
    held.confirm(token, 3)  # committed: the node's version 3 counts it
    held.apply(Update(version=2, full=False, nodes={"a": record("a", 500, 2)}))  # the feed is still behind
    assert cpu(table, "a") == 1500
    held.apply(Update(version=3, full=False, nodes={"a": record("a", 1500, 3)}))  # caught up: counted once
    assert cpu(table, "a") == 1500 and len(held) == 0
    held.apply(Update(version=4, full=False, nodes={"a": record("a", 1500, 4)}))
    assert cpu(table, "a") == 1500


def test_forget_gives_the_request_back_and_ends_the_token() -> None:
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    token = held.assume("a", POD)
    held.forget(token)
    assert cpu(table, "a") == 0 and len(held) == 0
    held.forget(token)  # twice is harmless
    assert cpu(table, "a") == 0


def test_a_placement_the_decision_already_took_is_not_counted_twice() -> None:
    table = NodeTable([record("a", 0, 1)])
    table.take("a", POD)  # the agent core takes as it decides
    held = Assumed(table)
    held.assume("a", POD, taken=True)
    assert cpu(table, "a") == 1000


def test_confirm_after_the_feed_already_delivered_the_commit_drops_the_double_count() -> None:
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    token = held.assume("a", POD)
    held.apply(Update(version=5, full=False, nodes={"a": record("a", 1000, 5)}))  # counts it: now 2000 held
    assert cpu(table, "a") == 2000
    held.confirm(token, 5)
    assert cpu(table, "a") == 1000 and len(held) == 0


def test_binder_figures_at_the_confirmed_version_end_the_token() -> None:
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    token = held.assume("a", POD)
    held.confirm(token, 2)
    assert held.set_figures("a", Resources({"cpu": 8000, "pods": 110}), Resources({"cpu": 1000, "pods": 1}), 2, False)
    assert cpu(table, "a") == 1000 and len(held) == 0
    assert not held.set_figures("a", Resources({"cpu": 8000}), Resources(), 1, False)  # older figures: ignored


def test_a_feed_record_older_than_a_binder_answers_figures_leaves_them() -> None:
    """Two placements committed one after the other on a node (versions 2 and 3), the second's answer
    carrying the node's figures (version 3, both counted): a feed record of version 2 brought after
    it (the feed exactly at the first commit) leaves the figures at 3 — taken, the table would count
    one placement where the node holds two, and decide on room that is gone. Its spec still comes."""
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    first, second = held.assume("a", POD), held.assume("a", POD)
    held.confirm(first, 2)
    held.confirm(second, 3)
    assert held.set_figures("a", Resources({"cpu": 8000, "pods": 110}), Resources({"cpu": 2000, "pods": 2}), 3, False)
    assert cpu(table, "a") == 2000 and len(held) == 0
    labelled = record("a", 1000, 2)
    labelled = NodeRecord(
        **{f: getattr(labelled, f) for f in labelled.__struct_fields__} | {"node": node("a", labels={"k": "v"})}
    )
    held.apply(Update(version=2, full=False, nodes={"a": labelled}))
    assert cpu(table, "a") == 2000 and int(table.version[table.index["a"]]) == 3
    assert table.labels[table.index["a"]]["k"] == "v"
    held.apply(Update(version=3, full=False, nodes={"a": record("a", 2000, 3)}))
    assert cpu(table, "a") == 2000
    held.apply(Update(version=4, full=True, nodes={"a": record("a", 500, 2)}))  # a listing replaces: it alone
    assert cpu(table, "a") == 500


def test_a_removed_node_ends_its_tokens() -> None:
    table = NodeTable([record("a", 0, 1), record("b", 0, 1)])
    held = Assumed(table)
    held.assume("a", POD)
    held.assume("b", POD)
    held.apply(Update(version=2, full=False, nodes={"a": None}))
    assert len(held) == 1
    held.apply(Update(version=3, full=True, nodes={}))
    assert len(held) == 0 and len(table) == 0


def test_a_listing_of_a_new_store_ends_every_token() -> None:
    """Redis came back empty (or from an older copy): its versions start over, so a placement held
    until version 900 of the old store would be counted on top of the new listing for ever."""
    table = NodeTable([record("a", 0, 1)])
    held = Assumed(table)
    held.apply(Update(version=800, epoch="e1", full=True, nodes={"a": record("a", 0, 800)}))
    held.confirm(held.assume("a", POD), 900)  # committed; the feed has not brought version 900 yet
    held.apply(Update(version=3, epoch="e2", full=True, nodes={"a": record("a", 1000, 3)}))
    assert len(held) == 0 and cpu(table, "a") == 1000  # the listing counts it (or not): it alone
    # The same store listed again (a trimmed feed): a held placement stays held.
    held.confirm(held.assume("a", POD), 10)
    held.apply(Update(version=4, epoch="e2", full=True, nodes={"a": record("a", 1000, 4)}))
    assert len(held) == 1 and cpu(table, "a") == 2000
