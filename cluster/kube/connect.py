"""The one place that builds a Kubernetes client: from ``--kubeconfig``, ``--master``, or in-cluster config.

Everything else takes the ``ApiClient`` this returns (dependencies injected); nothing reads
the environment but :func:`api_client`, which each process's ``main`` calls.
"""

from __future__ import annotations

import argparse
import os

import kubernetes
from kubernetes import client as k8s

IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"


def add_kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster config inside a pod, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--master", default=None, help="the API server's address, overriding the kubeconfig's")
    parser.add_argument("--kube-api-qps", type=float, default=50.0, help="requests per second to the API server (default: 50)")
    parser.add_argument("--kube-api-burst", type=int, default=100, help="burst of requests to the API server (default: 100)")


def api_client(kubeconfig: str | None, master: str | None) -> k8s.ApiClient:
    """A client for the cluster: the kubeconfig if given, in-cluster config inside a pod, else the
    default kubeconfig; ``master`` overrides the server address. Raises ValueError with one line."""
    config = k8s.Configuration()
    try:
        if kubeconfig:
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)  # type: ignore[no-untyped-call]
        elif os.environ.get(IN_CLUSTER_HOST_ENV):
            kubernetes.config.load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        elif master is None:
            kubernetes.config.load_kube_config(client_configuration=config)  # type: ignore[no-untyped-call]
    except (kubernetes.config.ConfigException, OSError) as e:
        where = f"--kubeconfig: {kubeconfig}" if kubeconfig else "kubeconfig"
        raise ValueError(f"{where}: {' '.join(str(e).split())}") from None
    if master:
        if not master.startswith(("http://", "https://")):
            raise ValueError(f"--master: {master!r} (expected an http:// or https:// address)")
        config.host = master
    return k8s.ApiClient(config)
