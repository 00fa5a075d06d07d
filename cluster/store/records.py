"""What the store holds, decoded: node and pod records, and the request wire format."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from cluster.model import devices
from cluster.model.core import Node, Pod
from cluster.model.resources import Resources
from cluster.store.keys import Kind

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
NO_CARDS = devices.NO_CARDS


def encode_request(request: Resources) -> str:
    """The canonical text of a request as the Lua scripts read it: ``name amount ...``.

    Canonical (fixed resource order, no zero entries) so that the binder can compare a
    placement's request with the stored one by string equality.
    """
    if (known := _ENCODED.get(request)) is not None:
        return known
    text = " ".join(f"{name} {request[name]}" for name in request.names())
    if len(_ENCODED) < _DECODED_MAX:
        _ENCODED[request] = text
    return text


_ENCODED: dict[Resources, str] = {}
"""Requests already encoded (a binder encodes every placement's; a cluster's pods repeat a few). Bounded
as :data:`_DECODED`."""


_DECODED: dict[str | bytes, Resources] = {}
"""Requests already decoded (Resources are immutable; a cluster's pods repeat a few requests, and each
record read decodes one). Bounded: once full, only looked in."""
_DECODED_MAX = 65_536


def decode_request(text: str | bytes) -> Resources:
    if (known := _DECODED.get(text)) is not None:
        return known
    parts = (text.decode() if isinstance(text, bytes) else text).split()
    request = Resources({parts[i]: int(parts[i + 1]) for i in range(0, len(parts), 2)})
    if len(_DECODED) < _DECODED_MAX:
        _DECODED[text] = request
    return request


class NodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A node as the store holds it: observed spec plus the binder's allocation figures."""

    name: str
    allocatable: Resources
    allocated: Resources
    version: int
    owner: str
    unschedulable: bool
    node: Node

    @property
    def free(self) -> Resources:
        return self.allocatable - self.allocated


class PodRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A pod as the store holds it.

    ``node`` is the binding ('' while pending); ``accounted`` the node whose allocated
    figures include this pod's request ('' when none: pending, finished, or node gone);
    ``cards`` the GPU cards' shares it holds there besides (``gpu.caldera.io/<i>`` amounts).
    """

    uid: str
    pod: Pod
    request: Resources
    scheduler: str
    group: str
    priority: int
    node: str
    accounted: str
    phase: str
    version: int
    cards: Resources = Resources()

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def pending(self) -> bool:
        return self.node == "" and self.phase not in TERMINAL_PHASES


_node_decoder = msgspec.msgpack.Decoder(Node)
_pod_decoder = msgspec.msgpack.Decoder(Pod)


def _text(value: bytes | None) -> str:
    return value.decode() if value is not None else ""


def node_record(name: str, fields: dict[bytes, bytes]) -> NodeRecord:
    """Decode a node hash (HGETALL) into a record."""
    alloc: dict[str, int] = {}
    used: dict[str, int] = {}
    for key, value in fields.items():
        if key.startswith(b"a:"):
            alloc[key[2:].decode()] = int(value)
        elif key.startswith(b"u:"):
            used[key[2:].decode()] = int(value)
    return NodeRecord(
        name=name,
        allocatable=Resources(alloc),
        allocated=Resources(used),
        version=int(fields[b"version"]),
        owner=_text(fields.get(b"owner")),
        unschedulable=fields.get(b"unsched") == b"1",
        node=_node_decoder.decode(fields[b"spec"]),
    )


def pod_record(uid: str, fields: dict[bytes, bytes]) -> PodRecord:
    """Decode a pod hash (HGETALL) into a record."""
    return PodRecord(
        uid=uid,
        pod=_pod_decoder.decode(fields[b"spec"]),
        request=decode_request(fields[b"req"]),
        scheduler=_text(fields.get(b"sched")),
        group=_text(fields.get(b"group")),
        priority=int(fields.get(b"prio") or 0),
        node=_text(fields.get(b"node")),
        accounted=_text(fields.get(b"acct")),
        phase=_text(fields.get(b"phase")),
        version=int(fields[b"version"]),
        cards=decode_request(cards) if (cards := fields.get(b"cards")) else NO_CARDS,
    )


CarriedFields = dict[str, str | Pod]
"""A pod's hash as a feed entry carries it (cluster.store.feed): the text fields, and the spec decoded
— or a change of a few fields (a commit's), with ``from``: the version of the pod it changes."""

carried_decoder = msgspec.msgpack.Decoder(dict[str, CarriedFields])
"""The records one entry of the ``recent`` stream carries, by uid."""


def carried_record(uid: str, fields: CarriedFields) -> PodRecord:
    """A pod record from the fields an entry carried (every field of the hash, as upsert_pod.lua
    wrote it), as :func:`pod_record` makes it from the hash."""
    spec = fields["spec"]
    assert isinstance(spec, Pod), "a carried record's spec decodes to a Pod"
    text = cast(dict[str, str], fields)
    return PodRecord(
        uid=uid,
        pod=spec,
        request=decode_request(text["req"]),
        scheduler=text["sched"],
        group=text["group"],
        priority=int(text["prio"] or 0),
        node=text["node"],
        accounted=text["acct"],
        phase=text["phase"],
        version=int(text["version"]),
        cards=decode_request(text["cards"]) if text["cards"] else NO_CARDS,
    )


def reported(pod: Pod, node: str, phase: str) -> Pod:
    """``pod`` as its kubelet reports it in ``phase`` on ``node``: its nodeName and its status's phase
    (what :meth:`~cluster.store.store.Store.set_phases` writes, and what a reader that holds the pod
    makes of the change that write carries)."""
    spec = msgspec.structs.replace(pod.spec, node_name=node)
    status = msgspec.structs.replace(pod.status, phase=phase)
    return msgspec.structs.replace(pod, spec=spec, status=status)


NodeChange = list[int | str]
"""A node's accounting change as a feed entry carries it (the prelude's ``carried_nodes``): the node's
version before the write, its version after, then each resource accounted and the amount used now."""

carried_nodes_decoder = msgspec.msgpack.Decoder(dict[str, NodeChange])
"""The nodes' changes one entry of the ``recent_nodes`` stream carries, by name."""


def changed_node(base: NodeRecord, change: NodeChange) -> NodeRecord | None:
    """``base`` with a carried accounting change applied (the used amounts it names, the version); None
    when the change is not of ``base``'s version."""
    if base.version != change[0]:
        return None
    used = dict(base.allocated.items())
    for i in range(2, len(change) - 1, 2):
        used[cast(str, change[i])] = cast(int, change[i + 1])
    return msgspec.structs.replace(base, allocated=Resources(used), version=cast(int, change[1]))


def merged_node_change(earlier: NodeChange, later: NodeChange) -> NodeChange | None:
    """Two carried changes of one node as one (the first one's base, the second one's version, the
    amounts of both, the second's where both name one); None when the second is not of the first's
    version."""
    if earlier[1] != later[0]:
        return None
    used = {earlier[i]: earlier[i + 1] for i in range(2, len(earlier) - 1, 2)}
    used |= {later[i]: later[i + 1] for i in range(2, len(later) - 1, 2)}
    return [earlier[0], later[1], *(x for pair in used.items() for x in pair)]


def is_change(fields: CarriedFields) -> bool:
    """Whether carried ``fields`` are a change of a few fields (the prelude's ``carry_change``), not a record."""
    return "from" in fields


def changed_record(base: PodRecord, fields: CarriedFields) -> PodRecord | None:
    """``base`` with a carried change applied — a commit's (the binding, the node that accounts the
    pod, its cards), a kubelet's report (the phase: the pod as :func:`reported`), or both merged —
    and its version; None when the change is not of ``base``'s version."""
    text = cast(dict[str, str], fields)
    if str(base.version) != text["from"]:
        return None
    node = text.get("node", base.node)
    changed: dict[str, Any] = {"version": int(text["version"])}
    if "node" in text:
        cards = text["cards"]
        changed |= {"node": node, "accounted": text["acct"], "cards": decode_request(cards) if cards else NO_CARDS}
    if "phase" in text:
        changed |= {"phase": text["phase"], "pod": reported(base.pod, node, text["phase"])}
    return msgspec.structs.replace(base, **changed)


def merged_fields(earlier: CarriedFields, change: CarriedFields) -> CarriedFields | None:
    """A carried record or change with a later carried change of the same pod applied, as carried
    fields (a record stays a record, a change a change of the first one's base); None when the later
    change is not of the earlier one's version."""
    if earlier.get("version") != change["from"]:
        return None
    merged = {**earlier, **change}
    if is_change(earlier):
        merged["from"] = earlier["from"]
        return merged
    del merged["from"]
    if "phase" in change:  # the pod as the report wrote it
        spec = merged["spec"]
        assert isinstance(spec, Pod), "a carried record's spec decodes to a Pod"
        merged["spec"] = reported(spec, cast(str, merged["node"]), cast(str, merged["phase"]))
    return merged


class Update(msgspec.Struct, kw_only=True):
    """What changed. ``full``: a complete listing, anything not in it is gone.

    Maps are keyed by name (uid for pods); a value of None means deleted.
    """

    version: int
    full: bool
    epoch: str = ""  # the store's epoch the update belongs to ('' before the store had one)
    nodes: dict[str, NodeRecord | None] = {}
    pods: dict[str, PodRecord | None] = {}
    objects: dict[Kind, dict[str, Any]] = {}
    # uid -> when the update's first change of that pod was written (seconds since the epoch, the
    # store's clock; 0 when the store did not say): how long the feed took to bring it.
    written: dict[str, float] = {}
    # uid -> when the update's last change of that pod was written (as ``written``): a pod that
    # changed once in the update has both the same.
    last_written: dict[str, float] = {}
