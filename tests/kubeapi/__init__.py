"""An in-repo Kubernetes API server for tests: exactly the API semantics caldera relies on (DESIGN.md §8).

Fixtures (``fixtures.py``; import them into a conftest.py): ``kube_api`` (a server on a free
loopback port), ``kube_client`` (an official ``ApiClient`` pointed at it), ``kube_api_factory``
(start several, or restart one on the same port with the same store). Without fixtures:
``with KubeAPIServer() as server:`` and ``kubernetes.client.ApiClient(server.configuration())``.
``server.store`` is the :class:`ObjectStore`: tests may seed or change it directly (raw writes,
no API rules) while the server runs. ``KubeAPIServer(authorize=True)`` authenticates bearer tokens
and authorizes with RBAC over its own Role/ClusterRole/binding objects (``auth.py``, ``rbac.py``).
"""

from .objects import ObjectStore
from .resources import RESOURCES, Resource
from .server import KubeAPIServer

__all__ = ["KubeAPIServer", "ObjectStore", "RESOURCES", "Resource"]
