"""Volcano's queue admission over a set of Queues: one queue's rules, the parent tree, the tree's resources."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.model.decode import from_builtins
from cluster.model.queue_admission import mutated, queue_problems
from cluster.model.volcano import Queue


def queue(
    name: str,
    parent: str = "",
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> Queue:
    return from_builtins(
        {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"parent": parent, **spec},
            "status": status or {},
        },
        Queue,
    )


def problems(*queues: Queue) -> dict[str, list[str]]:
    return {queues[i].name: [str(p) for p in found] for i, found in queue_problems(queues).items()}


@pytest.mark.parametrize(("q", "expected"), [
    (queue("q", weight=4, capability={"cpu": 8}, deserved={"cpu": 4}, guarantee={"resource": {"cpu": 2}}), []),
    (queue("q", weight=-1), ["spec.weight: -1 is out of range (expected 1 to 65535; 0 means 1)"]),
    (queue("q", weight=70000), ["spec.weight: 70000 is out of range (expected 1 to 65535; 0 means 1)"]),
    (queue("q", status={"state": "Closing"}),
     ["status.state: 'Closing' is not a state a queue may be given (expected Open or Closed)"]),
    (queue("q", capability={"nvidia.com/gpu": "0.5"}),
     ["spec.capability.nvidia.com/gpu: '0.5' is not a whole number (nvidia.com/gpu is an extended resource, counted in whole units)"]),
    (queue("q", guarantee={"resource": {"nvidia.com/gpu": 3}}),
     ["spec.deserved.nvidia.com/gpu: missing: the guarantee of 3 nvidia.com/gpu needs a deserved share at least as large"]),
    (queue("q", deserved={"cpu": "2"}, guarantee={"resource": {"cpu": "3"}}),
     ["spec.deserved.cpu: '2' is less than the guarantee '3' (the deserved share must cover the guarantee)"]),
    (queue("q", capability={"cpu": "4"}, deserved={"cpu": "6", "memory": "1Gi"}),
     ["spec.deserved.cpu: '6' is more than the capability '4' (a queue cannot deserve more than it may hold)"]),
    (queue("q", annotations={"volcano.sh/hierarchy": "root/a/b", "volcano.sh/hierarchy-weights": "1/2"}),
     ["metadata.annotations.volcano.sh/hierarchy: 'root/a/b' has 3 levels but volcano.sh/hierarchy-weights '1/2' has 2 "
      "weights (one weight per level)"]),
    (queue("q", annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/-2"}),
     ["metadata.annotations.volcano.sh/hierarchy-weights: '1/-2': '-2' is not a positive number"]),
    (queue("q", annotations={"volcano.sh/hierarchy": "a/b", "volcano.sh/hierarchy-weights": "2/3"}), []),  # root/ put in front
])  # fmt: skip
def test_one_queue(q: Queue, expected: list[str]) -> None:
    assert problems(q) == ({q.name: expected} if expected else {})


def test_weight_zero_is_stored_as_one() -> None:
    assert mutated(queue("q", weight=0)).spec.weight == 1
    assert mutated(queue("q", weight=3)).spec.weight == 3


def test_no_queue_path_leads_to_another() -> None:
    sci = queue("sci", annotations={"volcano.sh/hierarchy": "root/sci", "volcano.sh/hierarchy-weights": "1/2"})
    dev = queue("dev", annotations={"volcano.sh/hierarchy": "root/sci/dev", "volcano.sh/hierarchy-weights": "1/2/1"})
    scidev = queue("scidev", annotations={"volcano.sh/hierarchy": "root/scidev", "volcano.sh/hierarchy-weights": "1/1"})
    assert problems(sci, dev, scidev) == {
        "sci": [
            "metadata.annotations.volcano.sh/hierarchy: 'root/sci' is a prefix of the path 'root/sci/dev' of queue 'dev' "
            "(a queue's path may not lead on to another queue's)"
        ]
    }


@pytest.mark.parametrize(("queues", "expected"), [
    ([queue("a", parent="root"), queue("b", parent="a"), queue("c", parent="default")], {}),
    ([queue("a", parent="a")], {"a": ["spec.parent: 'a' is the queue itself"]}),
    ([queue("team"), queue("a", parent="teem")], {"a": ["spec.parent: 'teem' is not a Queue of the files (did you mean team?)"]}),
    ([queue("a", parent="x")], {"a": ["spec.parent: 'x' is not a Queue of the files (defined: a; built in: root)"]}),
    ([queue("a", parent="b"), queue("b", parent="a")],
     {"a": ["spec.parent: the queues' parents form a loop: a -> b -> a"],
      "b": ["spec.parent: the queues' parents form a loop: b -> a -> b"]}),
    ([queue("l1"), queue("l2", parent="l1"), queue("l3", parent="l2"), queue("l4", parent="l3"),
      queue("l5", parent="l4"), queue("l6", parent="l5")],
     {"l6": ["spec.parent: 'l6' is 6 levels below root (l1 -> l2 -> l3 -> l4 -> l5 -> l6; Volcano allows at most 5)"]}),
])  # fmt: skip
def test_the_parent_tree(queues: list[Queue], expected: dict[str, list[str]]) -> None:
    assert problems(*queues) == expected


def test_a_capability_is_at_most_the_nearest_ancestors() -> None:
    # AD-9: parent p has cpu 10, its child 20 → refused. The middle queue states no cpu, so the
    # grandchild is held to p's; memory is capped only below.
    p = queue("p", capability={"cpu": "10"})
    mid = queue("mid", parent="p", capability={"memory": "4Gi"})
    child = queue("child", parent="mid", capability={"cpu": "20", "memory": "2Gi"})
    big = queue("big", parent="p", capability={"cpu": "20"})
    assert problems(p, mid, child, big) == {
        "child": [
            "spec.capability.cpu: '20' is more than the capability of its ancestor 'p' (10; a queue may hold at "
            "most what its ancestors may)"
        ],
        "big": [
            "spec.capability.cpu: '20' is more than the capability of its ancestor 'p' (10; a queue may hold at "
            "most what its ancestors may)"
        ],
    }


def test_a_parent_covers_its_childrens_guarantee_and_deserved() -> None:
    # AD-9: two children whose deserved cpu sums to 12 under a parent that deserves 10.
    p = queue("p", deserved={"cpu": "10"}, guarantee={"resource": {"cpu": "2"}})
    a = queue("a", parent="p", deserved={"cpu": "6", "nvidia.com/gpu": 1}, guarantee={"resource": {"cpu": "1"}})
    b = queue("b", parent="p", deserved={"cpu": "6"}, guarantee={"resource": {"cpu": "1"}})
    assert problems(p, a, b) == {
        "p": [
            "spec.deserved.cpu: '10' is less than its children's together (12: a 6, b 6)",
            "spec.deserved.nvidia.com/gpu: missing, below its children's together (1: a 1)",
        ]
    }
    # under root, nothing to cover
    assert problems(queue("a", deserved={"cpu": "6"}), queue("b", parent="root", deserved={"cpu": "600"})) == {}
