"""deploy/examples: valid Kubernetes objects that caldera reads as meant, and that schedule in
`caldera dry-run` — the Volcano Job as a gang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.model.core import Pod
from cluster.model.manifests import expand, load_manifests
from cluster.model.volcano import PodGroup
from tests.deploy.manifests import (
    EXAMPLES,
    K8S_VERSIONS,
    ROOT,
    examples,
    load,
    validate_builtin,
)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_examples_validate_against_kubernetes_schemas(version: str) -> None:
    """Built-in kinds directly; a Volcano Job's pod templates as the pods they become (the
    custom kinds are checked against our CRDs in test_crds)."""
    for obj in examples():
        if obj["kind"] == "Job" and obj["apiVersion"] == "batch.volcano.sh/v1alpha1":
            for task in obj["spec"]["tasks"]:
                template = task["template"]
                name = f"{obj['metadata']['name']}-{task['name']}-0"
                validate_builtin(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {**template.get("metadata", {}), "name": name},
                        "spec": template["spec"],
                    },
                    version,
                )
        elif not obj["apiVersion"].split("/")[0].endswith("volcano.sh"):
            validate_builtin(obj, version)


def test_example_volcano_job_is_a_gang_of_four_one_gpu_workers() -> None:
    text = (EXAMPLES / "volcano-job.yaml").read_text()
    job = yaml.safe_load(text)
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["minAvailable"] == 4
    objects, skipped = load_manifests(text)
    assert skipped == []
    expanded = expand(objects)
    groups = [o for o in expanded if isinstance(o, PodGroup)]
    pods = [o for o in expanded if isinstance(o, Pod)]
    assert [(g.spec.min_member, g.spec.queue) for g in groups] == [(4, "research")]
    assert len(pods) == 4
    for pod in pods:
        assert pod.scheduler_name == "volcano" and pod.request().get("nvidia.com/gpu") == 1
    queues = [o["metadata"]["name"] for o in examples() if o["kind"] == "Queue"]
    assert "research" in queues, "the example Job's queue is not among the examples"


def test_example_agent_pod_goes_to_the_agent_scheduler() -> None:
    pod = load(EXAMPLES / "agent-pod.yaml")[0]
    assert pod["kind"] == "Pod" and pod["spec"]["schedulerName"] == "agent-scheduler"


_NODES = """
apiVersion: v1
kind: Node
metadata: {name: gpu-0}
status: {allocatable: {cpu: "96", memory: 768Gi, nvidia.com/gpu: %d, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: cpu-0}
status: {allocatable: {cpu: "32", memory: 128Gi, pods: "110"}}
"""


def _dry_run(tmp_path: Path, gpus: int) -> dict[str, Any]:
    nodes = tmp_path / f"nodes-{gpus}.yaml"
    nodes.write_text(_NODES % gpus)
    files = [a for p in sorted(EXAMPLES.glob("*.yaml")) for a in ("-f", str(p))]
    result = subprocess.run(
        [sys.executable, "-m", "caldera", "dry-run", "-f", str(nodes), *files, "-o", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_example_workload_schedules_in_dry_run(tmp_path: Path) -> None:
    pods = {p["name"]: p for p in _dry_run(tmp_path, gpus=8)["pods"]}
    assert all(p["phase"] == "Bound" for p in pods.values()), pods
    workers = [p for name, p in pods.items() if name.startswith("llm-finetune-worker-")]
    assert len(workers) == 4 and {p["node"] for p in workers} == {"gpu-0"}
    assert pods["agent-sandbox"]["scheduler"] == "agent-scheduler"


def test_example_job_starts_whole_or_not_at_all(tmp_path: Path) -> None:
    pods = _dry_run(tmp_path, gpus=3)["pods"]
    workers = [p for p in pods if p["name"].startswith("llm-finetune-worker-")]
    assert len(workers) == 4 and all(p["phase"] != "Bound" for p in workers), workers
