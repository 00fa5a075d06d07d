"""``caldera audit --kubeconfig``: over-commits as the API server holds them, whoever bound the pods."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes

from tests.caldera.kube_processes import kubeconfig
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer


def node_body(name: str, cpu: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
    }


def pod_body(name: str, cpu: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
    }


def audit(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caldera", "audit", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_audit_counts_what_the_api_server_has_bound_on_each_node(kube_api: KubeAPIServer, tmp_path: Path) -> None:  # noqa: F811
    config = kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(kube_api.configuration()))
    core.create_node(node_body("n1", "4"))
    core.create_node(node_body("n2", "4"))

    def bind(name: str, cpu: str, node: str) -> None:
        core.create_namespaced_pod("default", pod_body(name, cpu))
        core.create_namespaced_pod_binding(
            name,
            "default",
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
            _preload_content=False,
        )

    bind("a", "3", "n1")
    bind("b", "3", "n2")
    sound = audit(config)
    assert (sound.returncode, sound.stdout.strip()) == (0, "audit: ok"), sound.stderr
    bind("c", "2", "n1")  # 5 cpus on a 4-cpu node: what a scheduler must never do
    bind("d", "1", "gone")
    done = core.read_namespaced_pod("b", "default")
    done.status.phase = "Succeeded"  # a finished pod holds nothing
    core.replace_namespaced_pod_status("b", "default", done)
    bind("e", "4", "n2")
    bad = audit(config)
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout.splitlines() == [
        "API server: pod default/d: bound to gone, which does not exist",
        "API server: node n1: cpu requested by its pods 5000 > allocatable 4000",
        "audit: 2 violation(s)",
    ]


def test_audit_without_anything_to_check_says_what_to_give() -> None:
    out = subprocess.run([sys.executable, "-m", "caldera", "audit"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "caldera audit: error: give --redis-url or --redis-url-file, --kubeconfig or --master (what to check)"
    )
