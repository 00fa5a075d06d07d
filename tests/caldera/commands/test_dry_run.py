"""`caldera dry-run` as users run it: YAML in, placements and reasons out; bad input is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {zone: b}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
"""

WORKLOAD = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
---
apiVersion: v1
kind: Pod
metadata: {name: agent-ok}
spec:
  schedulerName: agent-scheduler
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: agent-nowhere}
spec:
  schedulerName: agent-scheduler
  nodeSelector: {zone: c}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: lone}
spec:
  schedulerName: volcano
  containers: [{name: c, resources: {requests: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec:
  schedulerName: volcano
  containers: [{name: c, resources: {requests: {cpu: "16"}}}]
---
apiVersion: v1
kind: Service
metadata: {name: svc}
"""


def dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caldera", "dry-run", *args], capture_output=True, text=True, timeout=120
    )


def test_places_both_schedulers_pods_and_says_why_the_others_wait(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    r = dry_run(
        "-f",
        str(tmp_path / "nodes.yaml"),
        "-f",
        str(tmp_path / "workload.yaml"),
        "--sharding-mode",
        "none",
        "-o",
        "json",
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)  # exactly one JSON object
    assert set(result) == {"pods", "podgroups", "shards", "queues"}
    pods = {p["name"]: p for p in result["pods"]}
    assert pods["agent-ok"]["phase"] == "Bound" and pods["agent-ok"]["node"] in ("n1", "n2")
    assert pods["lone"]["phase"] == "Bound" and pods["lone"]["scheduler"] == "volcano"
    nowhere = pods["agent-nowhere"]
    assert nowhere["phase"] == "Pending" and nowhere["node"] is None
    assert "didn't match Pod's node affinity/selector" in nowhere["reason"]
    assert pods["too-big"]["phase"] == "Pending" and "cpu" in pods["too-big"]["reason"]
    queues = {q["name"]: q["allocated"] for q in result["queues"]}
    assert queues["default"]["cpu"] == "2"
    warning = r.stderr.strip().splitlines()
    assert warning == [
        "caldera dry-run: warning: skipped 2 object(s) of kinds caldera does not schedule: ConfigMap, Service"
    ]


def test_table_output_names_every_pod(tmp_path: Path) -> None:
    (tmp_path / "all.yaml").write_text(NODES + "---\n" + WORKLOAD)
    r = dry_run("-f", str(tmp_path / "all.yaml"))
    assert r.returncode == 0, r.stderr
    for name in ("agent-ok", "agent-nowhere", "lone", "too-big"):
        assert name in r.stdout


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("apiVersion: v1\nkind: Node\nmetadata: {name: n1\n", ["invalid YAML"]),
        (
            NODES
            + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: lots}}}]\n",
            ["document 2", "cpu", "lots"],
        ),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n", ["document 0", "spec.containers"]),
    ],
)
def test_a_bad_manifest_is_one_line_with_the_document_and_field(tmp_path: Path, text: str, needles: list[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    r = dry_run("-f", str(path))
    assert r.returncode == 2
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and all(n in lines[0] for n in needles), lines


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--max-rounds", "0"], "--max-rounds"),
        (["-f", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (["-o", "xml"], "invalid choice"),
        (["--scheduler-configs", "a:volcano:0.7:0.2:false:1:2"], "MIN_UTIL"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path: Path, extra: list[str], needle: str) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    r = dry_run("-f", str(tmp_path / "nodes.yaml"), *extra)
    assert r.returncode == 2
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_a_bad_conf_is_one_line_naming_the_entry(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    (tmp_path / "conf.yaml").write_text(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n'
    )
    r = dry_run("-f", str(tmp_path / "nodes.yaml"), "--conf", str(tmp_path / "conf.yaml"))
    assert r.returncode == 2
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1 and "tiers[0].plugins[0] (gang)" in lines[0] and "enableJobOrdr" in lines[0], lines
