"""`caldera dry-run` refuses what Kubernetes or Volcano would, one line each, before anything runs; it warns of what it ignores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4", pods: "20"}}
"""

CLASSES = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 2}
"""

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: team}
spec:
  schedulerName: volcano
  priorityClassName: high
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        podAffinityTerm:
          topologyKey: zone
          labelSelector: {matchLabels: {app: web}}
          matchLabelKeys: [pod-template-hash]
  containers: [{name: c, ports: [{containerPort: 80, hostPort: 8080}], resources: {requests: {cpu: "1"}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, namespace: team}
spec: {minMember: 1, queue: research, subGroupPolicy: [{name: w, subGroupSize: 1}]}
"""


def dry_run(tmp_path: Path, **files: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "caldera", "dry-run", "--sharding-mode", "none", "-o", "json"]
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        args += ["-f", str(tmp_path / f"{name}.yaml")]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_objects_across_files_are_placed_and_what_is_ignored_is_warned_of(tmp_path: Path) -> None:
    r = dry_run(tmp_path, nodes=NODES, classes=CLASSES, pods=PODS)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "caldera dry-run: warning: Pod team/web-0: spec.containers[0].ports[0].hostPort is not honoured by caldera "
        "yet (placement ignores it)",
    ]
    pods = {p["name"]: p for p in json.loads(r.stdout)["pods"]}
    assert pods["web-0"]["phase"] == "Bound"


def test_every_refusal_of_every_file_is_one_line_and_nothing_runs(tmp_path: Path) -> None:
    bad_pods = PODS.replace("priorityClassName: high", "priorityClassName: hgh").replace("requests:", "requets:", 0)
    bad_pods += (
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers: [{name: c, resources: "
        "{requests: {cpu: 1e16, nvidia.com/gpu: 0.5}}}]\n"
    )
    bad_classes = CLASSES.replace("weight: 2", "weight: -1, capabilty: {cpu: 4}")
    r = dry_run(tmp_path, nodes=NODES, classes=bad_classes, pods=bad_pods)
    c, p = tmp_path / "classes.yaml", tmp_path / "pods.yaml"
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"caldera dry-run: error: {c}: document 1 (Queue research): spec.capabilty: unknown field (did you mean capability?)",
        f"caldera dry-run: error: {p}: document 2 (Pod big): spec.containers[0].resources.requests.cpu: quantity '1e16' "
        "is too large (at most 9223372036854775807 millicores)",
        f"caldera dry-run: error: {p}: document 2 (Pod big): spec.containers[0].resources.requests.nvidia.com/gpu: 0.5 is "
        "not a whole number (nvidia.com/gpu is an extended resource, counted in whole units)",
        f"caldera dry-run: error: {p}: document 0 (Pod web-0): spec.priorityClassName: 'hgh' is not a PriorityClass of "
        "the files (did you mean high?)",
    ]


def test_a_queue_the_files_do_not_define_is_refused(tmp_path: Path) -> None:
    r = dry_run(tmp_path, nodes=NODES, pods=PODS)  # no classes file: neither PriorityClass high nor Queue research
    p = tmp_path / "pods.yaml"
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"caldera dry-run: error: {p}: document 0 (Pod web-0): spec.priorityClassName: 'high' is not a PriorityClass of "
        "the files (defined: none; built in: system-cluster-critical, system-node-critical)",
        f"caldera dry-run: error: {p}: document 1 (PodGroup g): spec.queue: 'research' is not a Queue of the files "
        "(defined: none; built in: default, root)",
    ]
