"""Every process's HTTP endpoint: ``/metrics`` (Prometheus) and ``/healthz``."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server6(WSGIServer):
    address_family = socket.AF_INET6


class HttpEndpoint:
    """Serves in a daemon thread on ``host`` (an IPv4 or IPv6 address); ``port=0`` picks a free
    port (see ``.port``). OSError when the address cannot be bound."""

    def __init__(
        self, registry: CollectorRegistry, healthy: Callable[[], bool], *, host: str = "0.0.0.0", port: int = 0
    ) -> None:
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/healthz":
                ok = healthy()
                start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"ok\n" if ok else b"unhealthy\n"]
            if path == "/metrics":
                return metrics(environ, start_response)  # type: ignore[no-any-return]
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]

        server_class = _Server6 if ":" in host else WSGIServer
        self._server: WSGIServer = make_server(host, port, app, server_class=server_class, handler_class=_Quiet)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-endpoint", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
