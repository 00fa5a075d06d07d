"""``caldera status``: what the system is doing, from the store — shards, queues, processes, and why
the top pending jobs wait.

Shards: each scheduler's nodes and their cpu / GPU utilization. Processes: every process's
heartbeat (up, leading, its figures; for the batch scheduler, also the Volcano plugins and
actions its conf names that caldera does not implement yet). Queues: weight, deserved,
allocated, capability and jobs, as the leading batch scheduler last saw them. Pending: the
jobs (PodGroups, or lone pods) with the most waiting pods, and the reason each waits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import msgspec

from caldera._loop import run_loop
from caldera._store import client, store_failure, store_url
from cluster.model.core import ResourceList
from cluster.model.text import one_line
from cluster.model.volcano import Queue
from cluster.runtime import heartbeat
from cluster.runtime.process import add_redis_flags
from cluster.store.client import StoreError
from cluster.store.keys import Keys
from cluster.store.store import Store

if TYPE_CHECKING:
    from rich.console import Group

PENDING_SCAN = 5000  # pending pods read to group by job


class ShardRow(msgspec.Struct, frozen=True, kw_only=True):
    scheduler: str  # the nodes' owner, or (unowned)
    nodes: int
    cpu: float  # share allocated
    gpu: float


class ProcessRow(msgspec.Struct, frozen=True, kw_only=True):
    component: str
    holder: str
    up: bool
    leading: bool
    seconds_ago: float  # since its last heartbeat
    stats: dict[str, Any]  # the figures of its heartbeat, each process its own (the batch scheduler's queues: QueueRow)


class QueueRow(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    weight: int
    allocated: ResourceList
    capability: ResourceList
    deserved: ResourceList  # empty when no batch scheduler runs
    pending_jobs: int
    running_jobs: int


class PendingRow(msgspec.Struct, frozen=True, kw_only=True):
    job: str  # a PodGroup, or a lone pod's namespace/name
    scheduler: str
    waiting: int  # its pending pods
    reason: str  # the first one's, as its scheduler wrote it


class Report(msgspec.Struct, frozen=True, kw_only=True):
    shards: list[ShardRow]
    processes: list[ProcessRow]
    queues: list[QueueRow]
    pending: list[PendingRow]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("status", help="shards, queues, processes, and why the top pending jobs wait")
    add_redis_flags(p)
    p.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    p.add_argument("-o", "--output", default="table", choices=["table", "json"], help="table or json (default: table)")
    p.add_argument("--top", type=int, default=10, help="pending jobs shown (default: 10)")
    p.add_argument("--watch", action="store_true", help="refresh every 2 s until Ctrl-C")
    p.set_defaults(run=run)


def _fraction(used: int, total: int) -> float:
    return round(used / total, 3) if total else 0.0


async def collect(store: Store, top: int) -> Report:
    now = time.time()
    nodes = await store.list_nodes()
    by_owner: dict[str, dict[str, int]] = {}
    for n in nodes:
        row = by_owner.setdefault(n.owner or "(unowned)", Counter())
        row["nodes"] += 1
        for r in ("cpu", "nvidia.com/gpu"):
            row[f"a:{r}"] += n.allocatable.get(r, 0)
            row[f"u:{r}"] += n.allocated.get(r, 0)
    shards = [
        ShardRow(
            scheduler=owner,
            nodes=row["nodes"],
            cpu=_fraction(row["u:cpu"], row["a:cpu"]),
            gpu=_fraction(row["u:nvidia.com/gpu"], row["a:nvidia.com/gpu"]),
        )
        for owner, row in sorted(by_owner.items())
    ]
    beats = await heartbeat.beats(store.client, store.keys)
    processes = [
        ProcessRow(
            component=b.component,
            holder=b.holder,
            up=b.up(now),
            leading=b.leading,
            seconds_ago=round(now - b.at, 1),
            stats={k: v for k, v in b.stats.items() if k != "queues"},
        )
        for b in beats
    ]
    batch = next(
        (b for b in beats if b.component == "batch-scheduler" and b.leading and b.up(now) and "queues" in b.stats), None
    )
    if batch is not None:
        queues = [
            msgspec.convert({"name": name, **info}, QueueRow) for name, info in sorted(batch.stats["queues"].items())
        ]
    else:  # no batch scheduler running: what the Queue objects say
        queues = [
            QueueRow(
                name=q.name,
                weight=q.spec.weight,
                allocated=dict(q.status.allocated),
                capability=dict(q.spec.capability),
                deserved={},
                pending_jobs=q.status.pending + q.status.inqueue,
                running_jobs=q.status.running,
            )
            for q in (await store.list_objects(Queue)).values()
        ]
    pending = await _pending(store, top)
    return Report(shards=shards, processes=processes, queues=queues, pending=pending)


async def _pending(store: Store, top: int) -> list[PendingRow]:
    prefix = store.keys.pending("")
    schedulers = sorted([k.decode()[len(prefix) :] async for k in store.client.scan_iter(match=prefix + "*")])
    waiting: Counter[tuple[str, str]] = Counter()  # (scheduler, job) -> pending pods
    reason: dict[tuple[str, str], str] = {}  # the first non-empty reason among them
    for scheduler in schedulers:
        uids = (await store.pending(scheduler))[:PENDING_SCAN]
        reasons = await store.reasons(scheduler)
        for uid, record in (await store.get_pods(uids)).items():
            key = (scheduler, record.group or f"{record.namespace}/{record.name}")
            waiting[key] += 1
            if not reason.get(key):
                reason[key] = reasons.get(uid, "")
    ranked = sorted(waiting, key=lambda key: (-waiting[key], key[1]))
    return [
        PendingRow(
            job=job,
            scheduler=scheduler,
            waiting=waiting[scheduler, job],
            reason=reason[scheduler, job] or "not tried yet",
        )
        for scheduler, job in ranked[:top]
    ]


def _unimplemented(names: Any) -> str:
    """``; not implemented by caldera yet (no effect): plugins sla, tdm; actions shuffle`` or nothing."""
    if not isinstance(names, dict):
        return ""
    listed = [f"{kind} {', '.join(names[kind])}" for kind in ("plugins", "actions") if names.get(kind)]
    return f"; not implemented by caldera yet (no effect): {'; '.join(listed)}" if listed else ""


def render(report: Report) -> Group:
    from rich.console import Group  # only the tables need rich
    from rich.table import Table

    shards = Table(title="shards")
    for col in ("scheduler", "nodes", "cpu used", "gpu used"):
        shards.add_column(col, justify="right" if col != "scheduler" else "left")
    for s in report.shards:
        shards.add_row(s.scheduler, str(s.nodes), f"{s.cpu:.0%}", f"{s.gpu:.0%}")
    processes = Table(title="processes")
    for col in ("process", "up", "leading", "figures"):
        processes.add_column(col)
    for p in report.processes:
        figures = ", ".join(f"{k} {v}" for k, v in p.stats.items() if not isinstance(v, (dict, list)))
        figures += _unimplemented(p.stats.get("unimplemented"))
        problems = p.stats.get("hypernode_problems")
        if isinstance(problems, list) and problems:
            figures += f"; HyperNodes left out: {'; '.join(str(x) for x in problems)}"
        ignored = p.stats.get("ignored_settings")
        if isinstance(ignored, list) and ignored:
            figures += f"; ignored: {'; '.join(str(x) for x in ignored)}"
        processes.add_row(
            f"{p.component} ({p.holder})",
            "yes" if p.up else f"no ({p.seconds_ago:.0f}s)",
            "yes" if p.leading else "no",
            figures,
        )
    queues = Table(title="queues")
    for col in ("queue", "weight", "deserved", "allocated", "capability", "pending jobs", "running jobs"):
        queues.add_column(col)
    for q in report.queues:

        def fmt(r: ResourceList) -> str:
            return ", ".join(f"{k}={v}" for k, v in r.items()) or "-"

        queues.add_row(
            q.name,
            str(q.weight),
            fmt(q.deserved),
            fmt(q.allocated),
            fmt(q.capability),
            str(q.pending_jobs),
            str(q.running_jobs),
        )
    pending = Table(title="why the top pending jobs wait")
    for col in ("job", "scheduler", "waiting pods", "reason"):
        pending.add_column(col, overflow="fold")
    for e in report.pending:
        pending.add_row(e.job, e.scheduler, str(e.waiting), e.reason)
    return Group(shards, processes, queues, pending)


async def once(url: str, cluster: str, top: int) -> Report:
    async with client(url) as c:
        return await collect(Store(c, Keys(cluster)), top)


def run(args: argparse.Namespace) -> int:
    try:
        Keys(args.cluster)
        if args.top < 1:
            raise ValueError(f"--top: {args.top} (expected a positive integer)")
    except ValueError as e:
        print(f"caldera status: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    url = store_url("caldera status", args)
    if url is None:
        return 2
    try:
        report = run_loop(once(url, args.cluster, args.top))
    except (OSError, StoreError) as e:
        print(store_failure("caldera status", url, e), file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(msgspec.to_builtins(report)))
        return 0
    from rich.console import Console
    from rich.live import Live

    console = Console() if sys.stdout.isatty() else Console(width=200)
    if not args.watch:
        console.print(render(report))
        return 0
    with Live(render(report), console=console, refresh_per_second=1) as live:
        while True:
            time.sleep(2)
            live.update(render(run_loop(once(url, args.cluster, args.top))))
