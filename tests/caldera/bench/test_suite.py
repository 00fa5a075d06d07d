"""`caldera bench`: the whole suite in one table (at tiny sizes here), and the two trace benches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    + "".join(f"g{i},32000,131072,4,T4\n" for i in range(4))
    + "c0,32000,131072,0,\n"
)


def pods() -> str:
    """More GPU asked than the 16 GPUs have: 8 shared, then 4-GPU pods (and cpu pods) until well past full."""
    rows = [
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    ]
    rows += [f"share-{i},1000,1024,1,500,,LS,Running,{i},," for i in range(8)]
    rows += [f"whole-{i},2000,2048,4,1000,,BE,Running,{10 + i},," for i in range(6)]
    rows += [f"cpu-{i},500,512,0,0,,LS,Running,{20 + i},," for i in range(4)]
    return "\n".join(rows) + "\n"


def on_trace(tmp_path: Path, pods_csv: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``caldera ARGS --trace … --trace-nodes …`` on NODES and ``pods_csv`` written under ``tmp_path``."""
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(pods_csv)
    trace = ["--trace", str(tmp_path / "pods.csv"), "--trace-nodes", str(tmp_path / "nodes.csv")]
    return subprocess.run(
        [sys.executable, "-m", "caldera", *args, *trace], capture_output=True, text=True, timeout=timeout
    )


def test_bench_runs_every_bench_and_puts_each_figure_beside_its_baseline(tmp_path: Path) -> None:
    r = on_trace(tmp_path, pods(), "bench", "--quick", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = json.loads(r.stdout)
    benches = out["benches"]
    assert list(benches) == [
        "binder",
        "sharding",
        "batch",
        "topology",
        "mixed",
        "api",
        "agent",
        "peer",
        "saturation",
        "trace",
    ]
    for name, bench in benches.items():
        assert bench["rows"] and all(len(row) == 4 and row[1] for row in bench["rows"]), name
    binder = benches["binder"]["report"]
    assert binder["single"]["commits_per_s"] > 0 and binder["single"]["ratio"] > 0
    small, big = benches["batch"]["report"][1], benches["batch"]["report"][0]
    assert (big["nodes"], small["nodes"]) == (200, 100) and big["steady"]["audit"] == small["burst"]["audit"] == "ok"
    topology = benches["topology"]["report"]
    assert topology["nodes"] == 512 and topology["gangs"] > 0 and 0 < topology["best_tier_share"] <= 1
    assert (
        benches["mixed"]["report"]["audit"] == "ok"
        and benches["mixed"]["report"]["schedulers"]["agent-scheduler"]["pods_bound"] > 0
    )
    api = benches["api"]["report"]
    assert api["runs"][0]["unbound"] == 0 and api["pods_per_s"] > 0 and api["ratio"] > 0 and api["p50_ms"] > 0
    agent = benches["agent"]["report"]
    assert (
        agent["placed"] == 1000
        and agent["baseline_one_worker_pods_per_s"] > 0
        and agent["coarse_attempts_per_pod"] >= 1
    )
    peer = benches["peer"]["report"]
    assert peer["placed"] == peer["pods"] == 1000 and peer["volcano_pods_per_s"] == 936
    saturation = benches["saturation"]["report"]
    for policy in (saturation["binpack"], saturation["least_allocated"]):
        # 16 GPUs: the shares take 4, then 4-GPU pods fill what whole GPUs remain; the next one fits nowhere
        assert policy["first_gpu_failure"] and policy["audit"] == "ok"
        assert 0.25 <= policy["gpu_allocated"] <= 1.0 and policy["placed"] < 18
    assert (saturation["nodes"], saturation["gpus"], saturation["pods"]) == (5, 16, 18)
    trace = benches["trace"]["report"]
    assert (trace["gpus"], trace["seeds"], trace["best_policy"] in trace["policies"]) == (16, [42], True)
    assert trace["unallocated_at_100"] == min(p["unallocated_at_100"] for p in trace["policies"].values())
    assert "bench saturation…" in r.stderr and "bench trace…" in r.stderr  # progress goes to stderr when stdout is JSON


def test_bench_trace_refuses_a_malformed_trace_in_one_line(tmp_path: Path) -> None:
    malformed = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,x,0\n"
    for args in (["bench", "trace"], ["bench", "saturation"], ["bench"]):
        r = on_trace(tmp_path, malformed, *args, timeout=60)
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2 and len(out.splitlines()) == 1 and "num_gpu" in out and "line 2" in out, out


def test_bench_topology_reports_the_best_tier_share_free_leaves_and_the_session_ratio() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "bench", "topology", "--nodes", "256", "--rounds", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert (report["nodes"], report["leaves"], report["spines"]) == (256, 32, 2)
    run = report["rounds"][0]
    assert run["placed_gangs"] == run["gangs"] == report["gangs"] > 0 and run["audit"] == "ok"
    assert report["best_tier_share"] == 1.0  # soft gangs, one session, room for all: each in its lowest tier
    assert 0 <= report["free_leaf_share"] <= 1 and report["session_ratio"] > 0
    bad = subprocess.run(
        [sys.executable, "-m", "caldera", "bench", "topology", "--busy", "1.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "caldera bench topology: error: --busy 1.5: expected a share in [0, 1)"
    ]


def test_bench_saturation_with_fgd_runs_the_trace_through_the_agent_schedulers_fgd(tmp_path: Path) -> None:
    r = on_trace(tmp_path, pods(), "bench", "saturation", "--fgd", "--workers", "1", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    fgd = json.loads(r.stdout)["fgd"]
    # the 8 half-card shares pair up on 4 cards, then 4-GPU pods take the idle nodes until one fits nowhere
    assert fgd["first_gpu_failure"] and fgd["audit"] == "ok" and fgd["placed"] < 18
    assert 0.25 <= fgd["gpu_allocated"] <= 1.0
