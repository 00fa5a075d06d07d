"""Scenario tests: a YAML cluster and workload through ``caldera dry-run`` (the real sessions, a real redis-server).

Each scenario is one YAML file here, with a comment at its top saying what it shows, and
a conf file beside it when it needs one. The dry run is a subprocess, as a user runs it;
the tests read its ``-o json`` result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.model.quantity import parse_quantity

HERE = Path(__file__).parent
REPO = HERE.parents[1]
TIMEOUT = 60.0

Result = dict[str, Any]


def dry_run(*scenarios: str, conf: str | None = None, sharding: str = "none") -> Result:
    """Run ``caldera dry-run -o json`` on scenario files of this directory; the parsed result."""
    args = [sys.executable, "-m", "caldera", "dry-run", "--sharding-mode", sharding, "-o", "json"]
    for name in scenarios:
        args += ["-f", str(HERE / name)]
    if conf is not None:
        args += ["--conf", str(HERE / conf)]
    done = subprocess.run(args, check=False, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"dry-run exited {done.returncode}:\n{done.stderr}"
    result: Result = json.loads(done.stdout)
    return result


# -- reading a result ------------------------------------------------------------------


def pods(result: Result, prefix: str = "") -> list[dict[str, Any]]:
    """The pods whose name starts with ``prefix``."""
    return [p for p in result["pods"] if p["name"].startswith(prefix)]


def pod(result: Result, name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [p for p in result["pods"] if p["name"] == name]
    assert len(matches) == 1, f"pod {name}: {len(matches)} entries in {[p['name'] for p in result['pods']]}"
    return matches[0]


def phases(result: Result, prefix: str) -> Counter[str]:
    return Counter(p["phase"] for p in pods(result, prefix))


def bound(result: Result, prefix: str) -> list[dict[str, Any]]:
    return [p for p in pods(result, prefix) if p["phase"] == "Bound"]


def podgroup(result: Result, name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [g for g in result["podgroups"] if g["name"] == name]
    assert len(matches) == 1, f"podgroup {name}: {len(matches)} entries"
    return matches[0]


def placements(result: Result) -> str:
    """Every pod as name→node (phase, reason): for assertion messages."""
    return "\n".join(f"  {p['name']} → {p['node']} ({p['phase']}) {p['reason']}" for p in result["pods"])


def assert_waits(result: Result, prefix: str, *facts: str) -> None:
    """No pod of ``prefix`` is bound, and each one's reason names every fact (case-insensitive)."""
    waiting = pods(result, prefix)
    assert waiting, f"no pods named {prefix}*"
    for p in waiting:
        assert p["phase"] == "Pending" and p["node"] is None, f"{p['name']} should wait:\n{placements(result)}"
        assert p["reason"], f"{p['name']} waits without a reason"
        for fact in facts:
            assert fact.lower() in p["reason"].lower(), f"{p['name']}: reason {p['reason']!r} does not mention {fact!r}"


def manifests(name: str) -> list[dict[str, Any]]:
    with open(HERE / name, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def amounts(resources: Mapping[str, Any]) -> dict[str, Fraction]:
    return {r: parse_quantity(v, field=r) for r, v in resources.items()}


# -- 1, 2, 6, 11, FIFO: who runs and who waits --------------------------------------------------


def test_gang_deadlock_runs_the_gang_that_fits_and_holds_nothing_for_the_other() -> None:
    result = dry_run("gang_deadlock.yaml")
    assert phases(result, "b-worker-") == {"Bound": 3}, placements(result)
    assert_waits(result, "a-worker-", "gpu")
    assert podgroup(result, "b")["phase"] == "Running"
    assert podgroup(result, "a")["phase"] != "Running" and podgroup(result, "a")["reason"]


def test_queue_capability_refuses_the_job_that_would_exceed_it() -> None:
    result = dry_run("queue_capability.yaml")
    assert_waits(result, "big-worker-", "queue capped", "capability", "nvidia.com/gpu")
    assert pod(result, "small-worker-0")["phase"] == "Bound", placements(result)
    assert "capability" in podgroup(result, "big")["reason"]


def test_higher_priority_class_runs_first_though_created_later() -> None:
    result = dry_run("priority_order.yaml")
    assert phases(result, "b-high-") == {"Bound": 4}, placements(result)
    assert_waits(result, "a-low-", "gpu")


def test_volcano_jobs_start_in_creation_order() -> None:
    result = dry_run("fifo_order.yaml")
    assert phases(result, "zeta-") == {"Bound": 3}, placements(result)
    assert_waits(result, "alpha-", "gpu")


def test_volcano_job_with_two_tasks_is_expanded_and_runs_whole() -> None:
    result = dry_run("volcano_job.yaml")
    assert sorted(p["name"] for p in result["pods"]) == ["tf-ps-0", "tf-worker-0", "tf-worker-1", "tf-worker-2"]
    assert phases(result, "tf-") == {"Bound": 4}, placements(result)
    assert all(p["scheduler"] == "volcano" for p in result["pods"])
    group = podgroup(result, "tf")
    assert (group["namespace"], group["queue"], group["phase"]) == ("ml", "default", "Running")


def test_network_topology_keeps_a_gang_under_one_leaf_and_says_why_one_waits() -> None:
    result = dry_run("network_topology.yaml")
    nodes = {p["node"] for p in bound(result, "train-worker-")}
    assert len(nodes) == 2 and len({n.rsplit("-", 1)[0] for n in nodes}) == 1, placements(result)
    assert_waits(result, "wide-worker-", "network topology", "tier 1")


# -- 3, 4, 5: sharing -----------------------------------------------------------------------


def test_queue_weights_split_a_contended_resource_two_to_one() -> None:
    result = dry_run("queue_weights.yaml")
    # Nine GPUs, both queues want ten: all nine used, 6 : 3 by weight.
    assert (len(bound(result, "heavy-job-")), len(bound(result, "light-job-"))) == (6, 3), placements(result)


def test_guarantee_is_kept_for_a_low_weight_queue() -> None:
    result = dry_run("queue_guarantee.yaml")
    small, big = len(bound(result, "small-job-")), len(bound(result, "big-job-"))
    assert small >= 3, f"small holds {small} GPUs, below its guarantee of 3:\n{placements(result)}"
    assert small + big == 8, f"{8 - small - big} GPU(s) left idle:\n{placements(result)}"


def test_drf_lets_a_cpu_heavy_and_a_gpu_heavy_job_both_progress() -> None:
    result = dry_run("drf.yaml")
    cpu_pods, gpu_pods = len(bound(result, "cpu-heavy-")), len(bound(result, "gpu-heavy-"))
    cpu_share, gpu_share = Fraction(3 * cpu_pods, 18), Fraction(gpu_pods, 9)  # dominant: CPU of 18, GPU of 9
    assert cpu_pods >= 3 and gpu_pods >= 3, f"cpu-heavy {cpu_pods}, gpu-heavy {gpu_pods} pods:\n{placements(result)}"
    # Within one cpu-heavy pod (1/6) of each other; FIFO would give 1 vs 0, DRF 2/3 each.
    assert abs(cpu_share - gpu_share) <= Fraction(1, 6), f"dominant shares {cpu_share} vs {gpu_share}"


# -- 7, 8: preempt and reclaim --------------------------------------------------------------


def test_preempt_evicts_low_priority_pods_for_a_high_priority_job() -> None:
    result = dry_run("preempt.yaml", conf="preempt.conf.yaml")
    assert phases(result, "high-") == {"Bound": 2}, placements(result)
    assert phases(result, "low-") == {"Evicted": 2, "Bound": 2}, placements(result)
    assert podgroup(result, "high")["phase"] == "Running"


def test_preempt_never_evicts_pods_that_opted_out() -> None:
    result = dry_run("preempt_opt_out.yaml", conf="preempt.conf.yaml")
    for name, node in (("low-0", "gpu-0"), ("low-1", "gpu-1")):
        assert (pod(result, name)["phase"], pod(result, name)["node"]) == ("Bound", node), placements(result)
    assert phases(result, "low-") == {"Bound": 2, "Evicted": 2}, placements(result)
    assert sorted(p["node"] for p in bound(result, "high-")) == ["gpu-2", "gpu-3"], placements(result)


def test_reclaim_takes_back_a_queues_deserved_share() -> None:
    result = dry_run("reclaim.yaml", conf="preempt.conf.yaml")
    assert phases(result, "b-job-") == {"Bound": 2}, placements(result)
    # a keeps its deserved half: exactly two of its four pods go.
    assert phases(result, "a-job-") == {"Evicted": 2, "Bound": 2}, placements(result)
    assert podgroup(result, "b-job")["phase"] == "Running"


# -- 9, 10: node choice ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conf", "nodes_used"), [("binpack.conf.yaml", 1), ("spread.conf.yaml", 4)], ids=["binpack", "spread"]
)
def test_binpack_packs_and_leastrequested_spreads(conf: str, nodes_used: int) -> None:
    result = dry_run("binpack_spread.yaml", conf=conf)
    assert phases(result, "svc-") == {"Bound": 4}, placements(result)
    assert len({p["node"] for p in result["pods"]}) == nodes_used, placements(result)


def test_taints_keep_untolerating_pods_off_gpu_nodes() -> None:
    result = dry_run("taints.yaml")
    etl = pods(result, "etl-")
    assert not [p for p in etl if p["node"] and p["node"].startswith("gpu-")], placements(result)
    assert sorted(p["node"] for p in bound(result, "etl-")) == ["cpu-0", "cpu-1"], placements(result)
    assert_waits(result, "etl-step-2", "untolerated taint")
    assert_waits(result, "etl-step-3", "untolerated taint")
    assert sorted(p["node"] for p in bound(result, "train-")) == ["gpu-0", "gpu-1"], placements(result)


# -- 12: hierarchical queues ----------------------------------------------------------------


def test_parent_queue_capability_caps_its_children() -> None:
    result = dry_run("hierarchical_queues.yaml", conf="capacity.conf.yaml")
    assert phases(result, "a-train-") == {"Bound": 3}, placements(result)
    assert_waits(result, "b-train-", "queue team (parent of team-b)", "capability nvidia.com/gpu 4")
    assert podgroup(result, "b-train")["phase"] == "Pending"  # refused by enqueue (team: 3 admitted + 2 > 4)
    assert "team" in podgroup(result, "b-train")["reason"]


# -- both schedulers in one cluster ---------------------------------------------------------


def test_agent_and_volcano_pods_share_a_cluster_without_overcommitting() -> None:
    name = "mixed_schedulers.yaml"
    result = dry_run(name)
    docs = manifests(name)
    allocatable = {d["metadata"]["name"]: amounts(d["status"]["allocatable"]) for d in docs if d["kind"] == "Node"}
    requests = {
        d["metadata"]["name"]: amounts(d["spec"]["containers"][0]["resources"]["requests"])
        for d in docs
        if d["kind"] == "Pod"
    }
    job = next(d for d in docs if d["kind"] == "Job")
    task = job["spec"]["tasks"][0]
    for i in range(task["replicas"]):
        requests[f"{job['metadata']['name']}-{task['name']}-{i}"] = amounts(
            task["template"]["spec"]["containers"][0]["resources"]["requests"]
        )
    used: dict[str, dict[str, Fraction]] = {n: {} for n in allocatable}
    for p in result["pods"]:
        if p["phase"] == "Bound":
            held = used[p["node"]]
            for r, v in requests[p["name"]].items():
                held[r] = held.get(r, Fraction(0)) + v
    for node, held in used.items():
        for r, v in held.items():
            assert v <= allocatable[node][r], (
                f"{node} over-committed in {r}: {v} > {allocatable[node][r]}:\n{placements(result)}"
            )
    agent, batch = bound(result, "web-"), bound(result, "batch-")
    assert all(p["scheduler"] == "agent-scheduler" for p in pods(result, "web-"))
    assert len(agent) >= 1 and len(batch) >= 2, placements(result)  # batch: at least its gang
    assert len(agent) + len(batch) == 6, f"the cluster holds six pods:\n{placements(result)}"
