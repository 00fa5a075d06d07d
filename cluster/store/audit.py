"""The allocation invariant (DESIGN.md §4), checked against a consistent read of the store.

For every node: allocated == the sum of the requests of the pods accounted on it, and
allocated ≤ allocatable. No pod is bound twice: each pod is in at most one node's set,
the one its binding names; a pod is accounted only on the node it is bound to; pending
pods, and only those, are in their scheduler's pending index.
"""

from __future__ import annotations

from collections import defaultdict

from cluster.model.resources import Resources
from cluster.store.records import TERMINAL_PHASES, decode_request
from cluster.store.scripts import Script
from cluster.store.store import Store


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


async def audit(store: Store) -> list[str]:  # noqa: C901 (one check per invariant, in turn)
    """Every violation of the invariant, one line each; empty when the store is sound."""
    script = Script("cluster.store", "audit_dump")
    raw_nodes, raw_pods, raw_bynode, raw_pending = await script.call_read_only(
        store.client, [store.keys.rv], [store.keys.prefix, 0]
    )
    problems: list[str] = []
    alloc: dict[str, dict[str, int]] = {}
    used: dict[str, dict[str, int]] = {}
    for name_b, fields in raw_nodes:
        name = _text(name_b)
        alloc[name], used[name] = {}, {}
        for i in range(0, len(fields), 2):
            f, v = _text(fields[i]), int(fields[i + 1])
            (alloc if f.startswith("a:") else used)[name][f[2:]] = v
    expected: dict[str, Resources] = defaultdict(Resources)
    pod_node: dict[str, str] = {}
    pending_expected: set[str] = set()
    for uid_b, node_b, acct_b, req_b, phase_b, _ in raw_pods:
        uid, node, acct, phase = _text(uid_b), _text(node_b), _text(acct_b), _text(phase_b)
        pod_node[uid] = node
        if acct:
            if acct != node:
                problems.append(f"pod {uid}: accounted on {acct} but bound to {node or 'no node'}")
            if acct not in alloc:
                problems.append(f"pod {uid}: accounted on {acct}, which does not exist")
            else:
                expected[acct] = expected[acct] + decode_request(req_b)
        elif node and node in alloc and phase not in TERMINAL_PHASES:
            problems.append(f"pod {uid}: bound to {node} and {phase or 'live'} but holds no resources there")
        if not node and phase not in TERMINAL_PHASES:
            pending_expected.add(uid)
    for name in sorted(alloc):
        actual = Resources(used[name])
        if actual != expected[name]:
            diff = actual - expected[name]
            problems.append(
                f"node {name}: allocated {dict(actual)} != sum of its pods' requests {dict(expected[name])} (off by {dict(diff)})"
            )
        for res, amount in used[name].items():
            if amount > alloc[name].get(res, 0):
                problems.append(f"node {name}: {res} allocated {amount} > allocatable {alloc[name].get(res, 0)}")
            if amount < 0:
                problems.append(f"node {name}: {res} allocated {amount} is negative")
    seen: dict[str, str] = {}
    for node_b, members in raw_bynode:
        node = _text(node_b)
        for uid_b in members:
            uid = _text(uid_b)
            if uid in seen:
                problems.append(f"pod {uid}: bound twice, to {seen[uid]} and {node}")
            seen[uid] = node
            if pod_node.get(uid) != node:
                problems.append(f"pod {uid}: in {node}'s pod set but bound to {pod_node.get(uid) or 'no node'}")
    for uid, node in pod_node.items():
        if node and seen.get(uid) != node:
            problems.append(f"pod {uid}: bound to {node} but missing from its pod set")
    pending_actual = {_text(u) for _, members in raw_pending for u in members}
    for uid in sorted(pending_expected - pending_actual):
        problems.append(f"pod {uid}: pending but not in its scheduler's pending index")
    for uid in sorted(pending_actual - pending_expected):
        problems.append(f"pod {uid}: in a pending index but bound, finished or gone")
    return problems
