from __future__ import annotations

import pytest

from tests.deploy.manifests import DEPLOY, Obj, kustomize


@pytest.fixture(scope="session")
def rendered() -> list[Obj]:
    """deploy/ as `kubectl apply -k deploy/` would send it."""
    return kustomize(DEPLOY)
