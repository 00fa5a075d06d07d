"""The test API server's fixtures, and a check that no test leaves a server running."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.kubeapi.fixtures import kube_api, kube_api_factory, kube_client  # noqa: F401


@pytest.fixture(autouse=True)
def _no_server_left_running() -> Iterator[None]:
    yield
    assert not [t.name for t in threading.enumerate() if t.name.startswith("kubeapi:")]
