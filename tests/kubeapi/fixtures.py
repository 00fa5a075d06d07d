"""Fixtures that start the test API server; import them into a conftest.py to use them elsewhere:

from tests.kubeapi.fixtures import kube_api, kube_client, kube_api_factory  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from .clients import close
from .objects import ObjectStore
from .server import KubeAPIServer


@pytest.fixture
def kube_api() -> Iterator[KubeAPIServer]:
    """A fresh test API server on a free loopback port, stopped when the test ends."""
    with KubeAPIServer() as server:
        yield server


@pytest.fixture
def kube_client(kube_api: KubeAPIServer) -> Iterator[kubernetes.client.ApiClient]:
    """The official client's ApiClient, pointed at ``kube_api``."""
    client = kubernetes.client.ApiClient(kube_api.configuration())
    yield client
    close(client)


@pytest.fixture
def kube_api_factory() -> Iterator[Callable[..., KubeAPIServer]]:
    """Start servers with ``KubeAPIServer``'s arguments (a store, a port, …); all are stopped when the test
    ends. For restarts: ``start(old.store, port=old.port)`` after ``old.stop()``."""
    started: list[KubeAPIServer] = []

    def start(store: ObjectStore | None = None, **kwargs: Any) -> KubeAPIServer:
        server = KubeAPIServer(store, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
