"""``caldera dry-run``: try a cluster, a workload and a conf offline, and see where every pod goes and why.

It reads ordinary Kubernetes YAML (Nodes, Pods, PodGroups, Queues, PriorityClasses, and
Volcano Jobs, expanded into their pods and PodGroup), starts a private redis-server,
runs one sharding sync, then rounds of: the agent scheduler's worker code in-process (the
same decision core and commit path its Ray workers run, without Ray) for
``agent-scheduler`` pods, and one batch session for ``volcano`` pods — until two rounds
in a row change nothing, or ``--max-rounds``. Pods never complete; bound pods are
reported Running by the simulated kubelets, and evicted pods are gone.

The files are checked first, all of them, as ``kubectl apply --validate=strict`` and
Kubernetes' and Volcano's admission would check them (cluster.model.manifests): every refusal is
one line naming the file, the object, the field and what is accepted, the exit code is 2
and nothing runs. A field that changes placement but that caldera does not honour yet
(pod anti-affinity, topology spread, ...) is one warning line per object and field.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from agent_scheduler.core import CoreConfig
from agent_scheduler.worker import Worker, WorkerConfig
from batch_scheduler.cache import KINDS as BATCH_KINDS
from batch_scheduler.conf import ConfError, SchedulerConf, load_conf
from batch_scheduler.cycle import BatchScheduler, SchedulerConfig
from batch_scheduler.registry import default_registry
from batch_scheduler.session import Session
from batch_scheduler.session_input import SessionConfig
from binder.commit import Binder
from caldera._loop import run_loop
from caldera._store import client
from caldera.flag_config import from_flags, readable_file, whole
from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.kinds import ClusterObject
from cluster.model.manifests import (
    Manifest,
    ManifestErrors,
    admit,
    expand,
    read_manifests,
)
from cluster.model.sharding import ShardingMode
from cluster.model.text import one_line
from cluster.model.topology import HyperNode
from cluster.model.unhonoured import notice
from cluster.model.volcano import NodeShard, PodGroup, Queue
from cluster.nodeview.table import NodeTable
from cluster.runtime.flags import add_sharding_mode
from cluster.runtime.redis_server import RedisServer
from cluster.sim.cluster import SimBindTarget, SimEvictor
from cluster.store.informer import Informer
from cluster.store.keys import Keys
from cluster.store.records import PodRecord
from cluster.store.store import Put, Store
from sharding.config import (
    DEFAULT_SCHEDULER_CONFIGS,
    ConfigError,
    ShardConfig,
    parse_scheduler_configs,
)
from sharding.controller import ControllerConfig, ShardingController

if TYPE_CHECKING:
    from rich.console import Console

AGENT = "agent-scheduler"
BATCH = "volcano"
MAX_ROUNDS = 10_000


class PodResult(msgspec.Struct, frozen=True):
    namespace: str
    name: str
    scheduler: str
    node: str | None
    phase: str  # Bound | Pending | Evicted
    reason: str


class PodGroupResult(msgspec.Struct, frozen=True):
    namespace: str
    name: str
    queue: str
    phase: str
    reason: str


class QueueResult(msgspec.Struct, frozen=True):
    name: str
    allocated: dict[str, str]


class DryRunResult(msgspec.Struct, frozen=True):
    pods: list[PodResult]
    podgroups: list[PodGroupResult]
    shards: dict[str, list[str]]
    queues: list[QueueResult]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dry-run", help="place a YAML cluster + workload offline and say why each pending pod waits")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="multi-document Kubernetes YAML (Node, Pod, PodGroup, Queue, PriorityClass, Volcano Job, "
        "Deployment, ReplicaSet, StatefulSet, batch Job, Kubeflow PyTorchJob/TFJob/MPIJob); repeatable",
    )
    p.add_argument("--conf", default=None, help="Volcano-format scheduler conf (default: Volcano's Helm-chart conf)")
    p.add_argument(
        "--scheduler-configs",
        default=DEFAULT_SCHEDULER_CONFIGS,
        help=f"sharding bands, as for caldera sharding (default: {DEFAULT_SCHEDULER_CONFIGS})",
    )
    add_sharding_mode(p, "how both schedulers use their shards (default: soft)")
    p.add_argument("-o", "--output", default="table", choices=["table", "json"], help="table or json (default: table)")
    p.add_argument("--max-rounds", type=whole, default=20, help="most scheduling rounds (default: 20)")
    p.set_defaults(run=run)


class DryRunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera dry-run``'s flags, checked."""

    max_rounds: Annotated[int, msgspec.Meta(ge=1, le=MAX_ROUNDS, description=f"1 to {MAX_ROUNDS:,} rounds")] = 20
    sharding_mode: ShardingMode = ShardingMode.SOFT
    output: str = "table"


class DryRun(msgspec.Struct, frozen=True, kw_only=True):
    """What the dry run places: the flags, the files' objects and conf, checked; and what to warn about."""

    config: DryRunConfig
    objects: list[ClusterObject]
    conf: SchedulerConf
    configs: list[ShardConfig]  # the sharding controller's bands
    warnings: list[str]


def config(args: argparse.Namespace) -> DryRun:
    """The flags checked, the files read and checked; ManifestErrors (a line per refusal) or ValueError (one line).
    Starts nothing, writes nothing."""
    flags = from_flags(DryRunConfig, args)
    objects, skipped, unhonoured = load_objects(args.filename)
    path = readable_file("--conf", args.conf) if args.conf is not None else None
    try:
        conf = load_conf(path, default_registry(), "--conf")
    except ConfError as e:
        raise ValueError(f"--conf {path}: {e}") from None
    try:
        configs = parse_scheduler_configs(args.scheduler_configs)
    except ConfigError as e:
        raise ValueError(str(e)) from None  # it names --scheduler-configs
    warnings = [*conf.warnings, *unhonoured]  # a Volcano plugin caldera does not implement yet; a field it ignores
    if skipped:
        warnings.append(
            f"skipped {len(skipped)} object(s) of kinds caldera does not schedule: {', '.join(sorted(set(skipped)))}"
        )
    return DryRun(config=flags, objects=objects, conf=conf, configs=configs, warnings=warnings)


def load_objects(paths: Sequence[str]) -> tuple[list[ClusterObject], list[str], list[str]]:
    """Every object of the files, checked, Volcano Jobs expanded; the kinds skipped; a warning per ignored field.

    The checks are ``kubectl apply --validate=strict``'s and admission's (cluster.model.manifests),
    across all the files. Raises ManifestErrors, one line per refusal, when any object is
    refused (so nothing is applied), and ValueError when a file cannot be read.
    """
    manifests: list[Manifest] = []
    errors: list[str] = []
    for path in paths:
        try:
            with open(readable_file("-f", path), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"-f {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise ValueError(f"-f {path}: not UTF-8 text (expected Kubernetes YAML)") from None
        found, refused = read_manifests(text, source=path)
        manifests += found
        errors += refused
    errors += admit(manifests)
    if errors:
        raise ManifestErrors(errors)
    objects = expand([m.obj for m in manifests if m.obj is not None])
    skipped = [m.kind for m in manifests if m.obj is None]
    warnings = [f"{m.title}: {notice(path)}" for m in manifests for path in m.unhonoured]
    return objects, skipped, warnings


async def simulate(
    objects: Sequence[ClusterObject],
    conf: SchedulerConf,
    controller_config: ControllerConfig,
    mode: ShardingMode,
    max_rounds: int,
    url: str,
) -> DryRunResult:
    async with client(url) as c:
        store = Store(c, Keys("dry-run"))
        await store.upsert_nodes([o for o in objects if isinstance(o, Node)])
        await store.write(
            [Put(o) for o in objects if isinstance(o, (PodGroup, Queue, PriorityClass, HyperNode, Namespace))]
        )
        await store.upsert_pods([o for o in objects if isinstance(o, Pod)])
        controller = ShardingController(store, controller_config)
        controller.columns = NodeTable(await store.list_nodes())
        if len(controller.columns):
            await controller.sync()
        target, evictor = SimBindTarget(store), SimEvictor(store)
        batch = BatchScheduler(
            store,
            conf,
            SchedulerConfig(names=(BATCH,), session=SessionConfig(scheduler=BATCH, sharding=mode)),
            bind_target=target,
            evictor=evictor,
        )
        agent = Worker(
            store,
            Binder(c, store.keys, AGENT, sharding=mode),
            target,
            WorkerConfig(core=CoreConfig(scheduler=AGENT, sharding=mode)),
        )
        informer = Informer(store, list(BATCH_KINDS))
        evicted: dict[str, PodRecord] = {}
        agent_reasons: dict[str, str] = {}
        quiet, session = 0, None
        for _ in range(max_rounds):
            before = await store.version()
            agent.columns = NodeTable(await store.list_nodes())
            pending_agent = await store.pending(AGENT)
            if pending_agent:
                records = await store.get_pods(pending_agent)
                result = await agent.schedule([records[u] for u in pending_agent if u in records])
                agent_reasons = {o.uid: o.reason for o in result.outcomes if o.reason}
            listing = await informer.listing()
            batch.apply(listing)
            victims = {uid: r for uid, r in batch.pods.items()}
            report = await batch.run_session()
            session = report.session
            for uid in list(batch.releasing):
                if uid in victims:
                    evicted[uid] = victims[uid]
            bound = [r for r in await store.list_pods() if r.node and r.phase == "Pending"]
            if bound:
                await store.set_phases(bound, "Running")  # as the kubelets report it
            moved = (
                report.committed
                or report.evicted
                or (pending_agent and any(o.kind.value == "bound" for o in result.outcomes))
            )
            quiet = 0 if moved else quiet + 1
            if quiet >= 2 or (before == await store.version() and not moved and quiet >= 1):
                break
        return await collect(store, session, evicted, agent_reasons)


async def collect(
    store: Store, session: Session | None, evicted: dict[str, PodRecord], agent_reasons: dict[str, str]
) -> DryRunResult:
    records = await store.list_pods()
    batch_reasons = await store.reasons(BATCH)
    stored_agent = await store.reasons(AGENT)
    pods: list[PodResult] = []
    for r in records:
        if r.node:
            pods.append(PodResult(r.namespace, r.name, r.scheduler, r.node, "Bound", ""))
        else:
            reason = batch_reasons.get(r.uid) or stored_agent.get(r.uid) or agent_reasons.get(r.uid, "")
            if not reason and r.scheduler not in (AGENT, BATCH):
                reason = f"schedulerName {r.scheduler!r} is served by neither scheduler ({AGENT}, {BATCH})"
            pods.append(PodResult(r.namespace, r.name, r.scheduler, None, "Pending", reason))
    for r in evicted.values():
        pods.append(PodResult(r.namespace, r.name, r.scheduler, None, "Evicted", "evicted by preempt or reclaim"))
    pods.sort(key=lambda p: (p.namespace, p.name))
    groups = await store.list_objects(PodGroup)
    podgroups = []
    for pg in sorted(groups.values(), key=lambda g: (g.namespace, g.name)):
        condition = pg.status.conditions[0] if pg.status.conditions else None
        reason = condition.message if condition is not None and condition.type == "Unschedulable" else ""
        podgroups.append(PodGroupResult(pg.namespace, pg.name, pg.spec.queue, pg.status.phase, reason))
    shards: dict[str, list[str]] = {}
    for shard in (await store.list_objects(NodeShard)).values():
        shards[shard.name] = sorted(shard.spec.nodes_desired)
    queues = []
    if session is not None:
        for name in sorted(session.queues):
            queues.append(
                QueueResult(name, dict(session.queues[name].allocated.to_amounts(pods=False).to_quantities()))
            )
    return DryRunResult(pods=pods, podgroups=podgroups, shards=shards, queues=queues)


def print_table(result: DryRunResult, console: Console) -> None:
    from rich.table import Table  # only the tables need rich

    table = Table(title="pods")
    for col in ("namespace/name", "scheduler", "node", "phase", "reason"):
        table.add_column(col, overflow="fold")
    for p in result.pods:
        table.add_row(f"{p.namespace}/{p.name}", p.scheduler, p.node or "-", p.phase, p.reason)
    console.print(table)
    if result.podgroups:
        groups = Table(title="podgroups")
        for col in ("namespace/name", "queue", "phase", "reason"):
            groups.add_column(col, overflow="fold")
        for g in result.podgroups:
            groups.add_row(f"{g.namespace}/{g.name}", g.queue, g.phase, g.reason)
        console.print(groups)
    queues = Table(title="queues")
    queues.add_column("queue")
    queues.add_column("allocated")
    for q in result.queues:
        queues.add_row(q.name, ", ".join(f"{k}={v}" for k, v in q.allocated.items()) or "-")
    console.print(queues)
    for shard, nodes in result.shards.items():
        listed = f": {', '.join(nodes)}" if 0 < len(nodes) <= 12 else ""
        console.print(f"shard {shard}: {len(nodes)} node(s){listed}")


def run(args: argparse.Namespace) -> int:
    prog = "caldera dry-run"
    try:
        dry = config(args)
    except ManifestErrors as e:
        for line in e.lines:
            print(f"{prog}: error: {line}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    for line in dry.warnings:
        print(f"{prog}: warning: {line}", file=sys.stderr)
    with RedisServer() as server:
        result = run_loop(
            simulate(
                dry.objects,
                dry.conf,
                ControllerConfig(configs=dry.configs, event_trigger=False),
                dry.config.sharding_mode,
                dry.config.max_rounds,
                server.url,
            )
        )
    if dry.config.output == "json":
        sys.stdout.write(json.dumps(msgspec.to_builtins(result)) + "\n")
    else:
        # Piped output is not cut to 80 columns: names and reasons stay on one line each.
        from rich.console import Console

        print_table(result, Console() if sys.stdout.isatty() else Console(width=240))
    return 0
