"""``caldera bench trace``: how much GPU each placement policy strands on a real trace, per card.

The method is Weng et al.'s ("Beware of Fragmentation", USENIX ATC '23; their simulator's
``TunePodsByNodeTotalResource`` and ``SortClusterPods``), so the figures compare with the
paper's table:

- the cluster is the trace's GPU nodes, each GPU a card of 1000 thousandths — the paper's
  cluster: its simulator reads ``openb_node_list_gpu_node.csv``, the 1,213 GPU nodes of the
  1,523 in ``openb_node_list_all_node.csv``, in the same order, renamed. CPU-only pods then
  compete with GPU pods for the GPU nodes' cpu, which is what strands GPUs under policies
  blind to cpu (GPU packing, ties to the first node). ``--cpu-nodes`` keeps the CPU-only
  nodes too (then, on the default trace, GPU packing strands 3.4 points less and
  dot-product 1.4: the CPU pods take the CPU nodes first);
- per seed, the trace's pods (sorted by name) are shuffled, then pods drawn from the trace
  at random are appended until the work asked for reaches ``--tuning`` (1.3) × the
  cluster's GPUs (or random pods are dropped while it exceeds that);
- the pods arrive in that order and none departs; a pod that fits nowhere is skipped;
- after each pod, *arrived* is the GPU work asked so far and *allocated* the GPU work
  placed, both in % of the cluster's GPUs; the curve is unallocated GPU (100% −
  allocated) at each whole percent of arrived, 0–130% (points past the end repeat the
  last value), and the headline is its value at 100% arrived, the mean over seeds;
- FGD's typical pods are the trace's shapes, at ``--popularity`` (95)%, CPU pods included,
  added one shape at a time (the artifact's settings).

Every policy (``cluster/nodeview/gpu_policies.py``) runs on the same pod sequences, in
parallel over the machine's cores. Nodes' pod-count limits are not modelled (no trace node
comes near 110 pods).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Annotated, Any

import msgspec
import numpy as np

from caldera.bench.runner import positive_int
from caldera.flag_config import checked, from_flags, number, readable_file, writable_file
from cluster.model.resources import CPU, GPU, MEMORY
from cluster.nodeview.cards import Cards, Task
from cluster.nodeview.fgd import Workload, typical_pods
from cluster.nodeview.gpu_policies import policies
from cluster.sim.trace import GPU_MODEL_LABEL, read_nodes, read_pods, task_of

ARRIVED = 131  # curve points: 0 … 130% of the cluster's GPUs arrived
POLICIES = tuple(policies(Workload((), Cards([], [], [], []))))


class Policy(msgspec.Struct):
    unallocated_at_100: float  # fraction of the cluster's GPUs, mean over seeds
    per_seed: list[float]
    spread: float  # max − min over seeds
    unallocated_at_130: float
    curve: list[float]  # unallocated fraction at 0, 1, … 130% arrived, mean over seeds
    seconds: float  # replay time per seed, mean


class Report(msgspec.Struct):
    trace: str
    nodes: int
    gpus: int
    pods: int
    tuned_pods: int  # mean pods per seed after tuning
    tuning: float
    cpu_nodes: bool  # the trace's CPU-only nodes kept (--cpu-nodes)
    seeds: list[int]
    typical_pods: int
    unallocated_at_100: float  # the best policy's
    best_policy: str
    policies: dict[str, Policy]
    figure: str  # the PNG's path, '' without --png


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="GPU left unallocated per placement policy on a real trace, as Weng et al. (ATC '23) measure it",
    )
    p.add_argument("--trace", required=True, help="the pods CSV (OpenB format)")
    p.add_argument("--trace-nodes", required=True, help="the nodes CSV (OpenB format)")
    p.add_argument(
        "--cpu-nodes",
        action="store_true",
        help="keep the trace's CPU-only nodes (default: GPU nodes only, the paper's cluster)",
    )
    p.add_argument("--seeds", type=positive_int, default=3, help="shuffles per policy, seeds 42, 43, … (default: 3)")
    p.add_argument("--tuning", type=number, default=1.3, help="work asked, × the cluster's GPUs (default: 1.3)")
    p.add_argument(
        "--popularity",
        type=number,
        default=95.0,
        help="FGD's typical pods: the %% of pods their shapes cover (default: 95)",
    )
    p.add_argument("--policies", default="", help="comma-separated policy names (default: all)")
    p.add_argument(
        "--processes", type=positive_int, default=min(os.cpu_count() or 1, MAX_PROCESSES), help="replays run at once"
    )
    p.add_argument("--png", default="", help="write the curves to this PNG")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


MAX_PROCESSES = 64


class TraceBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench trace``'s flags, checked."""

    trace: str
    trace_nodes: str
    cpu_nodes: bool = False
    seeds: Annotated[int, msgspec.Meta(ge=1, le=1000, description="1 to 1,000 seeds")] = 3
    tuning: Annotated[float, msgspec.Meta(ge=1, le=10, description="1 to 10 × the cluster's GPUs")] = 1.3
    popularity: Annotated[float, msgspec.Meta(gt=0, le=100, description="a percentage in (0, 100]")] = 95.0
    policies: list[str] = []  # the policies' names; empty: all
    processes: Annotated[int, msgspec.Meta(ge=1, le=MAX_PROCESSES, description=f"1 to {MAX_PROCESSES} processes")] = 1
    png: str = ""
    json: bool = False


def config(args: argparse.Namespace) -> tuple[TraceBench, Cards, list[Task]]:
    """The flags checked and the trace read (ValueError naming the flag or the file); nothing started or written."""
    names = [n.strip() for n in args.policies.split(",") if n.strip()] or list(POLICIES)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise ValueError(f"--policies {unknown[0]}: expected some of {', '.join(POLICIES)}")
    if args.png:
        writable_file("--png", args.png)
    bench = from_flags(
        TraceBench,
        args,
        trace=readable_file("--trace", args.trace),
        trace_nodes=readable_file("--trace-nodes", args.trace_nodes),
        policies=names,
    )
    cluster, tasks = load(bench.trace, bench.trace_nodes, bench.cpu_nodes)
    return bench, cluster, tasks


def cluster_of(path: str, cpu_nodes: bool = False) -> Cards:
    """The trace's GPU nodes (all of them with ``cpu_nodes``) as cards; ValueError when malformed."""
    nodes = sorted(read_nodes(path), key=lambda n: n.name)  # ties go to the first: the smallest name
    cpu, memory, gpus, models = [], [], [], []
    for n in nodes:
        a = n.allocatable_resources()
        if not a.get(GPU, 0) and not cpu_nodes:
            continue
        cpu.append(a.get(CPU, 0))
        memory.append(a.get(MEMORY, 0) // 2**20)
        gpus.append(a.get(GPU, 0))
        models.append(n.labels.get(GPU_MODEL_LABEL, ""))
    return Cards(cpu, memory, gpus, models)


def load(pods_csv: str, nodes_csv: str, cpu_nodes: bool = False) -> tuple[Cards, list[Task]]:
    """The trace's nodes as cards (ordered by name) and its pods as tasks; ValueError when malformed."""
    cluster = cluster_of(nodes_csv, cpu_nodes)
    tasks = [task_of(tp) for tp in read_pods(pods_csv)]
    if not cluster.total_milli or not any(t.gpus for t in tasks):
        raise ValueError(f"{pods_csv}: no GPUs on the nodes or no pod asking for one (nothing to measure)")
    return cluster, tasks


def arrivals(tasks: Sequence[Task], capacity: int, tuning: float, seed: int) -> list[Task]:
    """The pods in a seed's order: shuffled, then tuned to ``tuning`` × ``capacity`` GPU thousandths."""
    rng = np.random.default_rng(seed)
    order = [tasks[i] for i in rng.permutation(len(tasks))]
    target = tuning * capacity
    asked = sum(t.gpu_milli for t in order)
    while asked > target and order:
        asked -= order.pop(int(rng.integers(len(order)))).gpu_milli
    if asked < target:
        while True:
            t = tasks[int(rng.integers(len(tasks)))]
            if asked + t.milli > target:  # the simulator's test: one card's worth, not the whole pod
                break
            asked += t.gpu_milli
            order.append(t)
    return order


def replay(cluster: Cards, sequence: Sequence[Task], policy: str, workload: Workload, seed: int) -> list[float]:
    """Unallocated GPU (fraction) at each whole percent of arrived work, placing with ``policy``."""
    cards = Cards.copy_of(cluster)
    place = policies(workload)[policy]
    rng = np.random.default_rng([seed, 1])
    capacity = cards.total_milli
    curve: list[float] = []
    arrived = allocated = 0
    for task in sequence:
        arrived += task.gpu_milli
        nodes = np.flatnonzero(cards.fits(task))
        if len(nodes):
            choice = place(cards, task, nodes, rng)
            cards.take(choice.node, choice.cards, task)
            allocated += task.gpu_milli
        while len(curve) < ARRIVED and arrived * 100 >= len(curve) * capacity:
            curve.append(1 - allocated / capacity)
    while len(curve) < ARRIVED:
        curve.append(1 - allocated / capacity)
    return curve


def _job(args: tuple[Cards, list[Task], str, Workload, int]) -> tuple[str, int, list[float], float]:
    cluster, sequence, policy, workload, seed = args
    started = time.monotonic()
    curve = replay(cluster, sequence, policy, workload, seed)
    return policy, seed, curve, time.monotonic() - started


def measure(
    name: str,
    cluster: Cards,
    tasks: list[Task],
    *,
    seeds: int,
    tuning: float,
    popularity: float,
    names: Sequence[str],
    processes: int,
    cpu_nodes: bool = False,
) -> Report:
    typical = typical_pods(tasks, threshold=popularity)
    workload = Workload(typical, cluster)
    seed_list = list(range(42, 42 + seeds))
    sequences = {s: arrivals(tasks, cluster.total_milli, tuning, s) for s in seed_list}
    jobs = [(cluster, sequences[s], p, workload, s) for p in names for s in seed_list]
    with ProcessPoolExecutor(max_workers=processes) as pool:
        done = list(pool.map(_job, jobs))
    out: dict[str, Policy] = {}
    for p in names:
        runs = [(curve, secs) for policy, _, curve, secs in done if policy == p]
        curves = np.asarray([c for c, _ in runs])
        at_100 = [round(float(c[100]), 5) for c, _ in runs]
        out[p] = Policy(
            unallocated_at_100=round(float(np.mean(at_100)), 5),
            per_seed=at_100,
            spread=round(max(at_100) - min(at_100), 5),
            unallocated_at_130=round(float(curves[:, 130].mean()), 5),
            curve=[round(float(v), 5) for v in curves.mean(axis=0)],
            seconds=round(float(np.mean([s for _, s in runs])), 2),
        )
    best = min(out, key=lambda p: out[p].unallocated_at_100)
    return Report(
        trace=name,
        nodes=len(cluster),
        gpus=cluster.total_milli // 1000,
        pods=len(tasks),
        tuned_pods=round(float(np.mean([len(s) for s in sequences.values()]))),
        tuning=tuning,
        cpu_nodes=cpu_nodes,
        seeds=seed_list,
        typical_pods=len(typical),
        unallocated_at_100=out[best].unallocated_at_100,
        best_policy=best,
        policies=out,
        figure="",
    )


def text(report: Report) -> str:
    lines = [
        f"{report.trace}: {report.nodes} {'nodes' if report.cpu_nodes else 'GPU nodes'}, {report.gpus} GPUs, {report.pods} pods "
        f"(~{report.tuned_pods} after tuning to {report.tuning:g}×), seeds {report.seeds[0]}–{report.seeds[-1]}, "
        f"{report.typical_pods} typical pods",
        f"{'policy':14} {'unallocated at 100%':>20} {'spread':>8} {'at 130%':>8} {'s/seed':>7}",
    ]
    for name, p in sorted(report.policies.items(), key=lambda kv: kv[1].unallocated_at_100):
        lines.append(
            f"{name:14} {100 * p.unallocated_at_100:19.2f}% {100 * p.spread:7.2f}% {100 * p.unallocated_at_130:7.2f}% {p.seconds:7.1f}"
        )
    if report.figure:
        lines.append(f"figure: {report.figure}")
    return "\n".join(lines)


def plot(report: Report, path: str) -> None:
    """Unallocated GPU against arrived work, one line per policy, as the paper's figure (80–130%)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = list(range(ARRIVED))
    for name, p in sorted(report.policies.items(), key=lambda kv: -kv[1].unallocated_at_100):
        ax.plot(xs[80:], [100 * v for v in p.curve[80:]], label=f"{name} ({100 * p.unallocated_at_100:.2f}% at 100%)")
    ax.axvline(100, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("arrived work (% of the cluster's GPUs)")
    ax.set_ylabel("unallocated GPUs (% of the cluster's)")
    ax.set_title(f"{report.trace}: {report.gpus} GPUs, mean of {len(report.seeds)} seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    checked_flags = checked("caldera bench trace", args, config)
    if checked_flags is None:
        return 2
    bench, cluster, tasks = checked_flags
    report = measure(
        os.path.basename(bench.trace),
        cluster,
        tasks,
        seeds=bench.seeds,
        tuning=bench.tuning,
        popularity=bench.popularity,
        names=bench.policies,
        processes=bench.processes,
        cpu_nodes=bench.cpu_nodes,
    )
    if bench.png:
        plot(report, bench.png)
        report.figure = bench.png
    print(msgspec.json.encode(report).decode() if args.json else text(report))
    return 0
