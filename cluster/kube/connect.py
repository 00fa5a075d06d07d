"""The one place that builds a Kubernetes client: from ``--kubeconfig``, ``--master``, or in-cluster config.

Everything else takes the ``ApiClient`` this returns (dependencies injected); nothing reads
the environment but :func:`api_client`, which each process's ``main`` calls.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

import kubernetes
import msgspec
import yaml
from kubernetes import client as k8s

from cluster.model import yaml_input

IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"


KUBE_API_QPS, KUBE_API_BURST = 2000.0, 2000
"""A process's pacing of its calls to the API server unless told otherwise: Volcano's scheduler's
defaults (``--kube-api-qps 2000 --kube-api-burst 2000``), which its users' API servers are sized for.
kube-scheduler's 50/100 would hold a binder to 50 pods/s."""


def add_kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: in-cluster config inside a pod, else $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument("--master", default=None, help="the API server's address, overriding the kubeconfig's")
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=KUBE_API_QPS,
        help=f"requests per second to the API server, the whole process's (default: {KUBE_API_QPS:g}, Volcano's)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=KUBE_API_BURST,
        help=f"burst of requests to the API server (default: {KUBE_API_BURST}, Volcano's)",
    )


MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024


def _check_kubeconfig(path: str) -> None:
    """ConfigException unless ``path`` holds one YAML mapping (the client's loader fails with a
    TypeError on anything else: a text file, a list), read with the hostile-input checks."""
    if os.path.getsize(path) > MAX_KUBECONFIG_BYTES:
        raise kubernetes.config.ConfigException(f"larger than {MAX_KUBECONFIG_BYTES >> 20} MiB")
    try:
        with open(path, encoding="utf-8") as f:
            document = yaml_input.load(f.read())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise kubernetes.config.ConfigException(f"not YAML: {type(e).__name__}") from None
    if not isinstance(document, dict):
        raise kubernetes.config.ConfigException(
            f"not a kubeconfig (a YAML {type(document).__name__}; expected a mapping with clusters, contexts and users)"
        )


def api_client(kubeconfig: str | None, master: str | None) -> k8s.ApiClient:
    """A client for the cluster: the kubeconfig if given, in-cluster config inside a pod, else the
    default kubeconfig; ``master`` overrides the server address. Raises ValueError with one line."""
    config = k8s.Configuration()
    try:
        if kubeconfig:
            _check_kubeconfig(kubeconfig)
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


class KubeConnection(msgspec.Struct, frozen=True, kw_only=True):
    """How to reach the API server (a process passes it on, e.g. to its Ray workers)."""

    kubeconfig: str | None = None
    master: str | None = None
    qps: float = KUBE_API_QPS
    burst: int = KUBE_API_BURST

    def client(self) -> k8s.ApiClient:
        return api_client(self.kubeconfig, self.master)


def kube_connection(args: argparse.Namespace, environ: Mapping[str, str]) -> KubeConnection | None:
    """The cluster to bind in: given by ``--kubeconfig``/``--master``, or the one this pod runs in;
    None means the simulator (the store alone). Checks the connection's settings (ValueError, one line)."""
    if not (args.kubeconfig or args.master or environ.get(IN_CLUSTER_HOST_ENV)):
        return None
    if args.kube_api_qps <= 0 or args.kube_api_burst < 1:
        raise ValueError(
            f"--kube-api-qps {args.kube_api_qps} / --kube-api-burst {args.kube_api_burst} "
            "(expected a positive rate and a burst of at least 1)"
        )
    connection = KubeConnection(
        kubeconfig=args.kubeconfig, master=args.master, qps=args.kube_api_qps, burst=args.kube_api_burst
    )
    connection.client()  # a bad kubeconfig or master fails here, at start
    return connection
