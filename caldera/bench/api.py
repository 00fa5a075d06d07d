"""``caldera bench api``: pods placed through a Kubernetes API server, beside that path's own ceiling.

Each shape (nodes × pods) runs three times, each on a fresh in-repo API server (``tests/kubeapi``,
a process of its own, on uvloop: the bench runs from a checkout with the test extras) and, where
caldera runs, a fresh redis-server:

- **caldera** — ``caldera mirror`` and ``caldera sharding`` (every node in the agent scheduler's
  shard) as processes, as ``deploy/`` runs them; the pods are created through the API and come
  into the store by the mirror's watch; then ``caldera agent-scheduler`` (``--workers``) starts:
  its workers place the pods, the binder commits them and POSTs ``pods/binding``; the mirror
  brings the bindings back and posts a ``Scheduled`` Event for each pod, as a scheduler does.
- **ceiling** — the same nodes and pods, bound by a binder that decides nothing
  (:mod:`caldera.bench.api_ceiling`: one watch, ``pods/binding`` to the next node in turn from 8
  threads, unpaced, no Events): the most this server, its watch and this machine allow.
- **watch** — the mirror alone: stopped (SIGSTOP) while the pods are created, then continued; the
  pods/s at which its watch brings the backlog into the store.

Each side is measured twice over. *Throughput*: a backlog of the shape's pods is created first
(``--create-threads`` calls at once), then the binder starts; pods/s is the backlog over the time
from its first bind to its last, as a watcher of the API sees them — the bench's own watch,
separate from every scheduler (so neither Ray's start nor the creation is counted). *Latency*:
then pods are created at a steady ``--rate`` for ``--steady`` seconds, and each one's latency runs
from its creation (the create call's answer, or the bench's watch seeing it, whichever is first)
to that watch seeing it bound. ``ratio`` is caldera's pods/s over the ceiling's. The pods ask for
100m CPU and 128Mi each and stay; the nodes have 16 CPUs, 64Gi and 110 pods each, so every pod
fits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from caldera.bench.api_parts import (
    AGENT,
    START_S,
    api_server,
    caldera_processes,
    common_flags,
    end,
    wait_for,
)
from caldera.bench.chaos.system import NoApiServer
from caldera.bench.runner import MAX_NODES, MAX_PODS, MAX_WORKERS, positive_int
from caldera.demo.tracker import percentile
from cluster.kube.bulk import Watcher, create_nodes, create_pods, pooled_client
from cluster.model.text import one_line
from cluster.store.keys import Kind

CEILING, NOBODY = "api-ceiling", "nobody"
SHAPES = ((1000, 10_000), (5000, 10_000))
QUICK = ((200, 1000),)
RATE, STEADY_S = 100.0, 10.0


class Run(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    pods: int
    workers: int
    pods_per_s: float
    p50_ms: float
    p99_ms: float
    ceiling_pods_per_s: float
    ceiling_p50_ms: float
    ceiling_p99_ms: float
    ratio: float
    watch_pods_per_s: float
    created_per_s: float
    rate: float
    unbound: int  # caldera's pods not bound when the run ended


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The first shape's figures at the top (``--json``), every shape in ``runs``."""

    pods_per_s: float
    ceiling_pods_per_s: float
    ratio: float
    p50_ms: float
    p99_ms: float
    runs: list[Run]


class ApiConfig(msgspec.Struct, frozen=True, kw_only=True):
    shapes: tuple[tuple[int, int], ...]
    workers: int
    create_threads: int
    timeout: float
    rate: float  # pods/s of the steady part
    steady_s: float  # how long the steady part lasts
    out: Path | None
    extra: tuple[str, ...]  # more flags for caldera agent-scheduler


class Side(msgspec.Struct, frozen=True):
    """One binder's figures: pods/s through a backlog, latency at a steady rate."""

    pods_per_s: float  # the backlog's pods over the time from its first bind to its last
    p50_ms: float  # created -> seen bound, at the steady rate
    p99_ms: float
    bound: int  # of the backlog and the steady pods together
    created_per_s: float  # how fast the bench created the backlog (the API server's create rate)


def measure_side(
    api: Any, watcher: Watcher, scheduler: str, config: ApiConfig, pods: int, start: Callable[[], None]
) -> Side:
    """The backlog of ``pods`` created first, ``start()`` the binder, its pods/s; then pods at the steady
    rate for the latency."""
    backlog = [f"b-{i:06d}" for i in range(pods)]
    began = time.monotonic()
    create_pods(api, backlog, scheduler, config.create_threads)
    created_per_s = pods / (time.monotonic() - began)
    start()
    wait_for(f"{scheduler}'s backlog bound", lambda: watcher.count_bound() >= pods, config.timeout)
    steady = [f"s-{i:06d}" for i in range(int(config.rate * config.steady_s))]
    created = create_pods(api, steady, scheduler, config.create_threads, config.rate)
    wait_for(f"{scheduler}'s steady pods bound", lambda: watcher.count_bound() >= pods + len(steady), config.timeout)
    seen, bound = watcher.snapshot()
    binds = [bound[n] for n in backlog if n in bound]
    span = max(binds, default=0.0) - min(binds, default=0.0)
    latencies = [1000 * (bound[n] - min(t, seen.get(n, t))) for n, t in created.items() if n in bound]
    return Side(
        pods_per_s=len(binds) / span if span > 0 else 0.0,
        p50_ms=percentile(latencies, 50) if latencies else 0.0,
        p99_ms=percentile(latencies, 99) if latencies else 0.0,
        bound=len(binds) + len(latencies),
        created_per_s=created_per_s,
    )


# -- the three runs of a shape ---------------------------------------------------------------


def run_ceiling(folder: Path, nodes: int, pods: int, config: ApiConfig) -> Side:
    with api_server(folder) as url, contextlib.ExitStack() as stack:
        api = pooled_client(url, config.create_threads + 2)
        create_nodes(api, nodes, config.create_threads)
        log = stack.enter_context((folder / "api-ceiling.log").open("wb"))
        watcher = stack.enter_context(Watcher(api))
        binders: list[subprocess.Popen[bytes]] = []

        def start() -> None:
            argv = [sys.executable, "-m", "caldera.bench.api_ceiling", "--master", url, "--scheduler", CEILING]
            binders.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, start_new_session=True))
            stdout = binders[0].stdout
            if stdout is None or stdout.readline().strip() != b"binding":
                raise RuntimeError(f"the ceiling's binder did not start (see {folder / 'api-ceiling.log'})")

        try:
            return measure_side(api, watcher, CEILING, config, pods, start)
        finally:
            for binder in binders:
                end(binder)


def run_caldera(folder: Path, nodes: int, pods: int, config: ApiConfig) -> Side:
    """The mirror and the sharding controller first (the backlog comes into the store through the
    mirror's watch), then the agent scheduler: its pods/s from its first bind, so Ray's start is not
    counted."""
    with api_server(folder) as url:
        api = pooled_client(url, config.create_threads + 2)
        create_nodes(api, nodes, config.create_threads)
        with caldera_processes(folder, url) as (supervisor, store), Watcher(api) as watcher:
            if not wait_for("every node in the agent's shard", lambda: store.shard_size() >= nodes, START_S, 0.5):
                raise RuntimeError(f"the agent's shard did not get the {nodes} nodes (see {folder / 'logs'})")
            kubeconfig = folder / "kubeconfig"

            def start() -> None:
                wait_for("the backlog in the store", lambda: store.count(Kind.POD) >= pods, config.timeout)
                argv = [sys.executable, "-m", "caldera", "agent-scheduler", *common_flags(kubeconfig, store)]
                argv += ["--workers", str(config.workers), *config.extra]
                supervisor.start(AGENT, argv, ready="workers ready")
                supervisor.wait_ready(AGENT, START_S)

            return measure_side(api, watcher, AGENT, config, pods, start)


def run_watch(folder: Path, nodes: int, pods: int, config: ApiConfig) -> float:
    """The mirror's watch alone: pods/s from its continuing to the store holding every pod."""
    with api_server(folder) as url:
        api = pooled_client(url, config.create_threads + 2)
        create_nodes(api, nodes, config.create_threads)
        with caldera_processes(folder, url, sharding=False) as (supervisor, store):
            if not wait_for("the mirror's nodes", lambda: store.count(Kind.NODE) >= nodes, START_S):
                raise RuntimeError(f"the mirror did not store the {nodes} nodes (see {folder / 'logs'})")
            supervisor.kill("mirror", signal.SIGSTOP)
            try:
                create_pods(api, [f"w-{i:06d}" for i in range(pods)], NOBODY, config.create_threads)
            finally:
                supervisor.kill("mirror", signal.SIGCONT)
            started = time.monotonic()
            wait_for("the mirror's pods", lambda: store.count(Kind.POD) >= pods, config.timeout, 0.01)
            return pods / (time.monotonic() - started)


def run_shape(folder: Path, nodes: int, pods: int, config: ApiConfig) -> Run:
    def part(name: str) -> Path:
        path = folder / f"{nodes}x{pods}-{name}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    ceiling = run_ceiling(part("ceiling"), nodes, pods, config)
    print(f"bench api: {nodes} nodes, {pods} pods: ceiling {ceiling}", file=sys.stderr, flush=True)
    ours = run_caldera(part("caldera"), nodes, pods, config)
    print(f"bench api: {nodes} nodes, {pods} pods: caldera {ours}", file=sys.stderr, flush=True)
    watch = run_watch(part("watch"), nodes, pods, config)
    return Run(
        nodes=nodes,
        pods=pods,
        workers=config.workers,
        pods_per_s=round(ours.pods_per_s, 1),
        p50_ms=round(ours.p50_ms, 1),
        p99_ms=round(ours.p99_ms, 1),
        ceiling_pods_per_s=round(ceiling.pods_per_s, 1),
        ceiling_p50_ms=round(ceiling.p50_ms, 1),
        ceiling_p99_ms=round(ceiling.p99_ms, 1),
        ratio=round(ours.pods_per_s / ceiling.pods_per_s, 3) if ceiling.pods_per_s else 0.0,
        watch_pods_per_s=round(watch, 1),
        created_per_s=round(ours.created_per_s, 1),
        rate=config.rate,
        unbound=pods + int(config.rate * config.steady_s) - ours.bound,
    )


def measure(config: ApiConfig) -> Report:
    with contextlib.ExitStack() as stack:
        folder = config.out or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-api-")))
        runs = [run_shape(folder, nodes, pods, config) for nodes, pods in config.shapes]
    first = runs[0]
    return Report(
        pods_per_s=first.pods_per_s,
        ceiling_pods_per_s=first.ceiling_pods_per_s,
        ratio=first.ratio,
        p50_ms=first.p50_ms,
        p99_ms=first.p99_ms,
        runs=runs,
    )


# -- the command -------------------------------------------------------------------------------


def _shapes(text: str) -> tuple[tuple[int, int], ...]:
    shapes = []
    for part in text.split(","):
        nodes, sep, pods = part.strip().partition("x")
        try:
            shape = (int(nodes), int(pods)) if sep and nodes.isdigit() and pods.isdigit() else None
        except ValueError:
            shape = None
        if shape is None or not (1 <= shape[0] <= MAX_NODES and 1 <= shape[1] <= MAX_PODS):
            raise ValueError(
                f"--shapes: {part.strip()!r} (expected NODESxPODS, e.g. 1000x10000, with 1 to {MAX_NODES} nodes "
                f"and 1 to {MAX_PODS} pods)"
            )
        shapes.append(shape)
    return tuple(shapes)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("api", help="pods bound through the Kubernetes API server, beside the API path's ceiling")
    default = ",".join(f"{n}x{p}" for n, p in SHAPES)
    p.add_argument("--shapes", default=default, help=f"NODESxPODS,... to run (default: {default})")
    p.add_argument("--quick", action="store_true", help=f"one small shape ({QUICK[0][0]}x{QUICK[0][1]})")
    p.add_argument("--workers", type=positive_int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--create-threads", type=positive_int, default=8, help="pod create calls at once (default: 8)")
    p.add_argument(
        "--rate", type=float, default=RATE, help=f"pods/s of the steady part, for the latency (default: {RATE:g})"
    )
    p.add_argument(
        "--steady", type=float, default=STEADY_S, help=f"seconds the steady part lasts (default: {STEADY_S:g})"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds each part may take to bind (default: 300)")
    p.add_argument(
        "--agent-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="one more flag for caldera agent-scheduler, e.g. --agent-flag=--kube-api-qps=50 (repeatable)",
    )
    p.add_argument("--out", default=None, help="keep the processes' logs in this folder (default: a temporary one)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def api_config(args: argparse.Namespace) -> ApiConfig:
    if args.workers > MAX_WORKERS:
        raise ValueError(f"--workers: {args.workers} (expected 1 to {MAX_WORKERS})")
    if args.create_threads > 64:
        raise ValueError(f"--create-threads: {args.create_threads} (expected 1 to 64)")
    if not 0 < args.timeout < float("inf"):
        raise ValueError(f"--timeout: {args.timeout} (expected a positive number of seconds)")
    if not 0 < args.rate <= 10_000:
        raise ValueError(f"--rate: {args.rate} (expected pods/s above 0 and at most 10000)")
    if not 0 < args.steady <= 3600 or args.rate * args.steady > MAX_PODS:
        raise ValueError(f"--steady: {args.steady} (expected seconds above 0, at most 3600 and {MAX_PODS} pods)")
    bad = [f for f in args.agent_flag if not f.startswith("--")]
    if bad:
        raise ValueError(f"--agent-flag: {bad[0]!r} (expected a flag of caldera agent-scheduler, e.g. --batch-size=64)")
    return ApiConfig(
        shapes=QUICK if args.quick else _shapes(args.shapes),
        workers=args.workers,
        create_threads=args.create_threads,
        timeout=args.timeout,
        rate=args.rate,
        steady_s=args.steady,
        out=Path(args.out) if args.out else None,
        extra=tuple(args.agent_flag),
    )


def table(report: Report) -> str:
    head = (
        f"{'nodes':>6} {'pods':>7} {'pods/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'ceiling/s':>10} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'ratio':>6} {'watch/s':>8} {'created/s':>9} {'unbound':>7}"
    )
    lines = [head]
    for r in report.runs:
        lines.append(
            f"{r.nodes:>6} {r.pods:>7} {r.pods_per_s:>8.0f} {r.p50_ms:>8.0f} {r.p99_ms:>8.0f} "
            f"{r.ceiling_pods_per_s:>10.0f} {r.ceiling_p50_ms:>8.0f} {r.ceiling_p99_ms:>8.0f} {r.ratio:>6.2f} "
            f"{r.watch_pods_per_s:>8.0f} {r.created_per_s:>9.0f} {r.unbound:>7}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        config = api_config(args)
    except ValueError as e:
        print(f"caldera bench api: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    try:
        report = measure(config)
    except NoApiServer as e:
        print(f"caldera bench api: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # a process did not start; its log says why
        print(f"caldera bench api: error: {one_line(str(e))}", file=sys.stderr)
        return 1
    print(json.dumps(msgspec.to_builtins(report)) if args.json else table(report))
    return 0 if all(r.unbound == 0 for r in report.runs) else 1
