"""`caldera bench trace`: GPU left unallocated per policy, measured as Weng et al. (ATC '23) do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    + "".join(f"g{i},64000,262144,4,T4\n" for i in range(6))
    + "c0,32000,65536,0,\n"
)
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)


def bench(tmp_path: Path, pods: str, *flags: str, nodes: str = NODES) -> subprocess.CompletedProcess[str]:
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "pods.csv").write_text(HEADER + pods)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera",
            "bench",
            "trace",
            "--trace",
            str(tmp_path / "pods.csv"),
            "--trace-nodes",
            str(tmp_path / "nodes.csv"),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def mixed_pods() -> str:
    rows = [f"s{i},2000,4096,1,{300 + 100 * (i % 5)},,LS,Running,{i},," for i in range(30)]
    rows += [f"w{i},8000,16384,{1 + i % 4},1000,,BE,Running,{100 + i},," for i in range(12)]
    rows += [f"c{i},4000,8192,0,0,,BE,Running,{200 + i},," for i in range(10)]
    return "\n".join(rows) + "\n"


def test_every_policy_gets_a_curve_and_the_best_is_reported(tmp_path: Path) -> None:
    r = bench(tmp_path, mixed_pods(), "--seeds", "2", "--json", "--png", str(tmp_path / "curve.png"))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    # the paper's cluster: the GPU nodes alone (c0 is left out)
    assert (report["nodes"], report["gpus"], report["pods"], report["seeds"]) == (6, 24, 52, [42, 43])
    assert report["cpu_nodes"] is False
    policies = report["policies"]
    assert set(policies) == {"random", "dot-product", "gpu-packing", "best-fit", "fgd", "fgd-pack"}
    assert report["unallocated_at_100"] == policies[report["best_policy"]]["unallocated_at_100"]
    assert report["unallocated_at_100"] == min(p["unallocated_at_100"] for p in policies.values())
    for name, p in policies.items():
        curve = p["curve"]
        assert len(curve) == 131 and len(p["per_seed"]) == 2, name
        # nothing departs: what is unallocated only shrinks as work arrives
        assert all(1 >= a >= b >= 0 for a, b in zip(curve, curve[1:])), name
        assert p["unallocated_at_100"] == curve[100] or abs(p["unallocated_at_100"] - curve[100]) < 1e-4, name
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and report["figure"].endswith("curve.png")


def test_whole_gpu_pods_that_always_fit_leave_nothing_unallocated_at_100(tmp_path: Path) -> None:
    pods = "".join(f"w{i},1000,1024,1,1000,,BE,Running,{i},,\n" for i in range(10))
    r = bench(tmp_path, pods, "--tuning", "1.0", "--json", "--policies", "best-fit,fgd,random")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert set(report["policies"]) == {"best-fit", "fgd", "random"} and report["tuned_pods"] == 24
    assert all(p["unallocated_at_100"] == 0.0 for p in report["policies"].values())


def test_cpu_pods_compete_for_the_gpu_nodes_cpu_unless_cpu_nodes_are_kept(tmp_path: Path) -> None:
    """As in the paper's cluster (GPU nodes only), a CPU pod blind packing puts on a GPU node takes
    the cpu its idle GPUs need; with the CPU-only node kept it goes there ("c0" sorts first)."""
    nodes = "sn,cpu_milli,memory_mib,gpu,model\ng0,16000,65536,4,T4\ng1,16000,65536,4,T4\nc0,64000,65536,0,\n"
    pods = "".join(f"w{i},4000,1024,1,1000,,BE,Running,{i},,\n" for i in range(8))
    pods += "".join(f"c{i},16000,1024,0,0,,BE,Running,{10 + i},,\n" for i in range(2))
    flags = ["--tuning", "1.0", "--seeds", "4", "--json", "--policies", "gpu-packing"]
    runs = {}
    for extra in ([], ["--cpu-nodes"]):
        r = bench(tmp_path, pods, *flags, *extra, nodes=nodes)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[bool(extra)] = json.loads(r.stdout)
    assert (runs[False]["nodes"], runs[True]["nodes"], runs[True]["cpu_nodes"]) == (2, 3, True)
    assert runs[True]["policies"]["gpu-packing"]["unallocated_at_100"] == 0.0
    assert runs[False]["policies"]["gpu-packing"]["unallocated_at_100"] > 0.0


def test_the_text_report_ranks_the_policies(tmp_path: Path) -> None:
    r = bench(tmp_path, mixed_pods(), "--seeds", "1", "--policies", "fgd,best-fit")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "6 GPU nodes, 24 GPUs, 52 pods" in lines[0] and lines[1].split()[0] == "policy"
    assert {line.split()[0] for line in lines[2:4]} == {"fgd", "best-fit"}


def test_bad_flags_are_refused_in_one_line(tmp_path: Path) -> None:
    for flags, needle in (
        (["--policies", "fgd,tetris"], "--policies tetris: expected some of random, dot-product"),
        (["--tuning", "0.5"], "--tuning 0.5: expected 1 to 10"),
        (["--popularity", "0"], "--popularity 0.0: expected a percentage in (0, 100]"),
    ):
        r = bench(tmp_path, mixed_pods(), *flags)
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2 and len(out.splitlines()) == 1 and needle in out, out
    r = bench(tmp_path, "c0,1000,1024,0,0,,BE,Running,0,,\n")
    assert r.returncode == 2 and "no pod asking for one" in r.stderr
