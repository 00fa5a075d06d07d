"""caldera's processes against the in-repo Kubernetes API server, as the end-to-end tests start them: a
kubeconfig (with a bearer token when the server authorizes), each process a subprocess in its own
session, and the objects `kubectl apply` would send."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "%s"}}]
users: [{name: test, user: {%s}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
"""


def kubeconfig(path: Path, server: str, token: str | None = None) -> Path:
    """Write a kubeconfig for ``server`` (its user sends ``token``, if any) and return its path."""
    path.write_text(KUBECONFIG % (server, f"token: {token}" if token else ""))
    return path


def caldera(*args: str) -> subprocess.Popen[str]:
    """``python -m caldera ARGS`` in a session of its own (so that it and its children can be killed at once)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def pod(
    name: str, scheduler: str, cpu: str, gpu: int = 0, group: str = "", limits: dict[str, str] | None = None
) -> dict[str, object]:
    """A pod in namespace ``work``: ``gpu`` whole cards, or other device ``limits`` (a gpushare share)."""
    requests: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    limits = dict(limits or {})
    if gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "work",
            "annotations": {"scheduling.k8s.io/group-name": group} if group else {},
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}],
        },
    }
