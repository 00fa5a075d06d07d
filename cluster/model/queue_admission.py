"""Volcano's queue admission (release-1.14 ``/queues/validate`` and ``/queues/mutate``), over a set of manifests.

Volcano checks a queue against the queues already created; here the queues of all the
files arrive together, so every rule is checked over the whole set and a refusal is put
on the queue where it shows (for sums over children: on the parent). The rules, which
keep the scheduler's picture of the queue tree sound:

- weight 1 to 65535 (0 is stored as 1); ``status.state`` empty, Open or Closed;
- quantities valid, non-negative, extended resources whole; every guaranteed resource has
  a deserved share at least as large; a deserved share at most the capability;
- the ``volcano.sh/hierarchy`` annotations: as many weights as levels, weights positive,
  no queue's path a prefix of another's;
- ``spec.parent``: not the queue itself, a queue of the files (``root`` and ``default``
  exist implicitly), no loop, at most five levels;
- over the tree: a capability at most the nearest ancestor's that states that resource;
  a parent's guarantee and deserved at least its children's together.

Not checked, since they need a live cluster: a parent that already runs pods, root
protection on update, deletion.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from fractions import Fraction

import msgspec

from cluster.model.admission import DEFAULT_QUEUE, ROOT, resource_list_problems
from cluster.model.core import ResourceList
from cluster.model.labels import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION
from cluster.model.quantity import (
    QuantityError,
    format_amount,
    parse_quantity,
    to_amount,
)
from cluster.model.schema import Problem, nearest
from cluster.model.volcano import Queue

MAX_WEIGHT = 65535
MAX_DEPTH = 5  # Volcano's --max-queue-depth default; root does not count
STATES = ("", "Open", "Closed")

Amounts = dict[str, Fraction]


def mutated(queue: Queue) -> Queue:
    """The queue as Volcano's mutating admission stores it: weight 0 becomes 1."""
    if queue.spec.weight != 0:
        return queue
    return msgspec.structs.replace(queue, spec=msgspec.structs.replace(queue.spec, weight=1))


def queue_problems(queues: Sequence[Queue]) -> dict[int, list[Problem]]:
    """Every refusal, by the queue's position in ``queues``; the tree's resources once the tree is sound."""
    by_name = {q.name: q for q in queues}
    out: dict[int, list[Problem]] = {}
    for i, q in enumerate(queues):
        problems = _single(q) + _parent(q, by_name) + _annotations(q, queues)
        if problems:
            out[i] = problems
    if not out:
        index = {q.name: i for i, q in enumerate(queues)}
        for name, problems in _tree(queues, by_name).items():
            out.setdefault(index[name], []).extend(problems)
    return out


# -- one queue ----------------------------------------------------------------------------


def _amounts(values: ResourceList) -> Amounts:
    """The exact values of the quantities that parse (the others are refused on their own)."""
    out: Amounts = {}
    for name, value in values.items():
        with contextlib.suppress(QuantityError):
            out[name] = parse_quantity(value, field=name)
    return out


def _show(name: str, q: Fraction) -> str:
    return format_amount(name, to_amount(name, q))


def _single(q: Queue) -> list[Problem]:
    spec = q.spec
    problems: list[Problem] = []
    if not 0 <= spec.weight <= MAX_WEIGHT:
        problems.append(
            Problem("spec.weight", f"{spec.weight} is out of range (expected 1 to {MAX_WEIGHT}; 0 means 1)")
        )
    if q.status.state not in STATES:
        problems.append(
            Problem("status.state", f"{q.status.state!r} is not a state a queue may be given (expected Open or Closed)")
        )
    problems += resource_list_problems(spec.capability, "spec.capability")
    problems += resource_list_problems(spec.deserved, "spec.deserved")
    problems += resource_list_problems(spec.guarantee.resource, "spec.guarantee.resource")
    capability, deserved = _amounts(spec.capability), _amounts(spec.deserved)
    for name, g in _amounts(spec.guarantee.resource).items():
        if name not in deserved:
            problems.append(
                Problem(
                    f"spec.deserved.{name}",
                    f"missing: the guarantee of {_show(name, g)} {name} needs a deserved share at least as large",
                )
            )
        elif deserved[name] < g:
            problems.append(
                Problem(
                    f"spec.deserved.{name}",
                    f"{spec.deserved[name]!r} is less than the guarantee "
                    f"{spec.guarantee.resource[name]!r} (the deserved share "
                    "must cover the guarantee)",
                )
            )
    for name, d in deserved.items():
        if name in capability and d > capability[name]:
            problems.append(
                Problem(
                    f"spec.deserved.{name}",
                    f"{spec.deserved[name]!r} is more than the capability "
                    f"{spec.capability[name]!r} (a queue cannot deserve more "
                    "than it may hold)",
                )
            )
    return problems


def _parent(q: Queue, by_name: Mapping[str, Queue]) -> list[Problem]:
    parent = q.spec.parent
    if parent in ("", ROOT):
        return []
    if parent == q.name:
        return [Problem("spec.parent", f"{parent!r} is the queue itself")]
    if parent not in by_name and parent != DEFAULT_QUEUE:
        guess = nearest(parent, by_name)
        hint = f"did you mean {guess}?" if guess else f"defined: {', '.join(sorted(by_name))}; built in: {ROOT}"
        return [Problem("spec.parent", f"{parent!r} is not a Queue of the files ({hint})")]
    chain = [q.name]
    while parent not in ("", ROOT) and parent in by_name:
        if parent in chain:
            loop = " -> ".join([*chain[chain.index(parent) :], parent])
            return [Problem("spec.parent", f"the queues' parents form a loop: {loop}")]
        chain.append(parent)
        parent = by_name[parent].spec.parent
    if len(chain) > MAX_DEPTH:
        return [
            Problem(
                "spec.parent",
                f"{q.name!r} is {len(chain)} levels below root "
                f"({' -> '.join(reversed(chain))}; Volcano allows at most {MAX_DEPTH})",
            )
        ]
    return []


def _annotations(q: Queue, queues: Sequence[Queue]) -> list[Problem]:
    hierarchy, weights = _hierarchy(q)
    if not hierarchy and not weights:
        return []
    levels, parts = hierarchy.split("/"), weights.split("/")
    where = f"metadata.annotations.{HIERARCHY_ANNOTATION}"
    if len(levels) != len(parts):
        return [
            Problem(
                where,
                f"{hierarchy!r} has {len(levels)} levels but {HIERARCHY_WEIGHTS_ANNOTATION} {weights!r} has "
                f"{len(parts)} weights (one weight per level)",
            )
        ]
    for part in parts:
        try:
            positive = float(part) > 0
        except ValueError:
            positive = False
        if not positive:
            return [
                Problem(
                    f"metadata.annotations.{HIERARCHY_WEIGHTS_ANNOTATION}",
                    f"{weights!r}: {part!r} is not a positive number",
                )
            ]
    for other in queues:
        path, _ = _hierarchy(other)
        if other.name != q.name and path.startswith(hierarchy + "/"):
            return [
                Problem(
                    where,
                    f"{hierarchy!r} is a prefix of the path {path!r} of queue {other.name!r} "
                    "(a queue's path may not lead on to another queue's)",
                )
            ]
    return []


def _hierarchy(q: Queue) -> tuple[str, str]:
    """The hierarchy annotations as Volcano's mutation stores them (``root/`` and ``1/`` put in front)."""
    hierarchy = q.metadata.annotations.get(HIERARCHY_ANNOTATION, "")
    weights = q.metadata.annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, "")
    if hierarchy and weights and not hierarchy.startswith(ROOT):
        return f"{ROOT}/{hierarchy}", f"1/{weights}"
    return hierarchy, weights


# -- the tree -----------------------------------------------------------------------------


def _tree(queues: Sequence[Queue], by_name: Mapping[str, Queue]) -> dict[str, list[Problem]]:
    out: dict[str, list[Problem]] = {}
    for q in queues:
        for name, c in _amounts(q.spec.capability).items():
            found = _ancestor_capability(q, name, by_name)
            if found is not None and c > found[1]:
                ancestor, limit = found
                out.setdefault(q.name, []).append(
                    Problem(
                        f"spec.capability.{name}",
                        f"{q.spec.capability[name]!r} is more than the capability of its "
                        f"ancestor {ancestor!r} ({_show(name, limit)}; a queue may hold at "
                        "most what its ancestors may)",
                    )
                )
    children: dict[str, list[Queue]] = {}
    for q in queues:
        if q.spec.parent in by_name and q.spec.parent != ROOT:
            children.setdefault(q.spec.parent, []).append(q)
    for parent_name, kids in children.items():
        parent = by_name[parent_name]
        out.setdefault(parent_name, []).extend(
            _covers(
                "spec.guarantee.resource",
                parent.spec.guarantee.resource,
                [(k.name, k.spec.guarantee.resource) for k in kids],
            )
            + _covers("spec.deserved", parent.spec.deserved, [(k.name, k.spec.deserved) for k in kids])
        )
    return {name: problems for name, problems in out.items() if problems}


def _ancestor_capability(q: Queue, name: str, by_name: Mapping[str, Queue]) -> tuple[str, Fraction] | None:
    """The nearest ancestor below root that caps ``name`` (above zero), and its cap."""
    parent = q.spec.parent
    while parent not in ("", ROOT) and parent in by_name:
        found = _amounts(by_name[parent].spec.capability).get(name)
        if found:
            return parent, found
        parent = by_name[parent].spec.parent
    return None


def _covers(field: str, parent: ResourceList, children: Sequence[tuple[str, ResourceList]]) -> list[Problem]:
    """A parent's guarantee (or deserved) must be at least its children's together; absent is zero."""
    have = _amounts(parent)
    totals: Amounts = {}
    shares: dict[str, list[str]] = {}
    for child, values in children:
        for name, q in _amounts(values).items():
            if q:
                totals[name] = totals.get(name, Fraction(0)) + q
                shares.setdefault(name, []).append(f"{child} {_show(name, q)}")
    problems: list[Problem] = []
    for name, total in totals.items():
        if total > have.get(name, Fraction(0)):
            stated = f"{parent[name]!r} is less than" if name in parent else "missing, below"
            problems.append(
                Problem(
                    f"{field}.{name}",
                    f"{stated} its children's together ({_show(name, total)}: {', '.join(shares[name])})",
                )
            )
    return problems
