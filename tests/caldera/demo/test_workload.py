"""A demo workload is held to what the API server and Volcano refuse: misspelled keys by name, quantities, ranges."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from caldera.demo import workload

POOL = "pools: [{name: a, count: 1, resources: {cpu: 2}}]\n"
TRAINING = "training: [{name: t, queue: q, every_s: 1, pods: [1], duration_s: [1, 2], requests: {cpu: 1}}]\nqueues: [{name: q}]\n"


@pytest.mark.parametrize(("text", "message"), [
    (POOL.replace("resources:", "resorces:"), "pools[0].resorces: unknown field (did you mean resources?)"),
    # NodePool itself lets unknown keys pass; the workload does not
    (POOL.replace("}]", ", lables: {x: y}}]"), "pools[0].lables: unknown field (did you mean labels?)"),
    (POOL.replace("}]", ", taints: [{key: k, efect: NoSchedule}]}]"),
     "pools[0].taints[0].efect: unknown field (did you mean effect?)"),
    (POOL + TRAINING.replace("requests:", "requets:"), "training[0].requets: unknown field (did you mean requests?)"),
    (POOL + "queues: [{name: q, capabilty: {cpu: 1}}]\n", "queues[0].capabilty: unknown field (did you mean capability?)"),
    (POOL + "ramp: {start: 1, ned: 2}\n", "ramp.ned: unknown field (did you mean end?)"),
    (POOL + TRAINING.replace("cpu: 1}", "nvidia.com/gpu: 0.5}"),
     "training[t].requests.nvidia.com/gpu: 0.5 is not a whole number (nvidia.com/gpu is an extended resource, counted in "
     "whole units)"),
    (POOL + TRAINING.replace("cpu: 1}", "memroy: 1Gi}"), "training[t].requests.memroy: 'memroy' is not a resource a container "
     "may request"),
    (POOL + TRAINING.replace("cpu: 1}", "cpu: 1e16}"),
     "training[t].requests.cpu: quantity '1e16' is too large (at most 9223372036854775807 millicores)"),
    (POOL.replace("cpu: 2", "nvidia.com/gpu: 1.5"), "pools[a].resources.nvidia.com/gpu: 1.5 is not a whole number"),
    (POOL + "queues: [{name: q, capability: {nvidia.com/gpu: '0.5'}}]\n", "queues[q].capability.nvidia.com/gpu: '0.5' is not a "
     "whole number"),
    (POOL + "queues: [{name: q, weight: 70000}]\n", "Expected `int` <= 65535 - at `$.queues[0].weight`"),
    (POOL.replace("}]", ", switches: {leaf: 0, spine: 2}}]"), "switches.leaf: 0 (expected 1 or more)"),
    (POOL.replace("}]", ", switches: {leaf: 8, spin: 2}}]"), "pools[0].switches.spin: unknown field"),
    (POOL + TRAINING.replace("requests:", "network_topology: {mode: tight}, requests:"),
     "training[t].network_topology.mode: 'tight' (expected hard or soft)"),
    (POOL + "priority_classes: [{name: x, value: 2000000000}]\n",
     "priority_classes[x].value: 2000000000 is above 1,000,000,000 (the highest value a user-defined PriorityClass may have)"),
])  # fmt: skip
def test_a_bad_workload_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        workload.load(str(path))
    assert str(e.value).startswith(f"workload {path}: ") and message in str(e.value) and "\n" not in str(e.value), (
        e.value
    )


def test_a_workload_that_is_not_text_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "binary"
    path.write_bytes(b"\x00\xff\xfe pools: []")
    with pytest.raises(ValueError) as e:
        workload.load(str(path))
    assert str(e.value) == f"workload {path}: not UTF-8 text (byte 1; expected a workload YAML)"


def test_demo_refuses_a_misspelled_key_by_name_and_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(POOL + TRAINING.replace("requests:", "requets:"))
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "demo", "--workload", str(tmp_path / "w.yaml"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 2 and out.splitlines() == [
        f"caldera demo: error: workload {tmp_path / 'w.yaml'}: training[0].requets: unknown field (did you mean requests?)"
    ]
    assert not (tmp_path / "demo-report.json").exists() and not (tmp_path / "demo-logs").exists()


def test_pool_switches_label_each_node_with_its_leaf_and_spine_and_training_asks_for_topology() -> None:
    w = workload.load(None)  # the default: 8 GPU nodes to a leaf, 4 leaves to a spine
    gpu = [n for n in w.nodes() if n.metadata.labels.get("caldera.io/pool") == "gpu"]
    leaves = {n.metadata.labels["topology.caldera.io/leaf"] for n in gpu}
    spines = {n.metadata.labels["topology.caldera.io/spine"] for n in gpu}
    assert (len(gpu), len(leaves), len(spines)) == (128, 16, 4)
    assert (
        gpu[7].metadata.labels["topology.caldera.io/leaf"]
        == "gpu-l0"
        != gpu[8].metadata.labels["topology.caldera.io/leaf"]
    )
    finetune = next(c for c in w.training if c.name == "finetune")
    assert finetune.network_topology is not None and finetune.network_topology.highest_tier_allowed == 1
