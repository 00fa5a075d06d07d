"""The test Kubernetes API server, run in a thread of its own with its own event loop, stopped by handle.

``with KubeAPIServer() as server:`` serves on a free loopback port until the block ends;
``server.configuration()`` is a ``kubernetes.client.Configuration`` pointing at it
(``async_configuration()`` for ``kubernetes_asyncio``). To restart it, stop it and start
``KubeAPIServer(server.store, port=server.port)``: same objects and versions, same address.

``KubeAPIServer(authorize=True)`` authenticates and authorizes every request as a real server with
RBAC does (``auth.py``): ``server.auth`` holds the admin's token and every decision, and
``configuration(token=...)`` speaks as someone else than the admin.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType

import kubernetes
import kubernetes_asyncio
from aiohttp import web

from .auth import TOKEN_PATH, Auth
from .faults import Faults
from .objects import ObjectStore
from .resources import RESOURCES, Resource
from .routes import API


class KubeAPIServer:
    def __init__(
        self,
        store: ObjectStore | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        resources: tuple[Resource, ...] = RESOURCES,
        bookmark_interval: float = 1.0,
        watch_timeout: float = 1800.0,
        seed: int = 0,
        faults: Faults | None = None,
        authorize: bool = False,
    ) -> None:
        """``port=0`` picks a free port. ``bookmark_interval``: seconds between BOOKMARKs on a watch that asked
        for them (the real server: about a minute). ``watch_timeout``: how long a watch without
        ``timeoutSeconds`` lasts. ``seed``: for generated names. ``faults``: latency and failing
        bindings to switch on (:mod:`.faults`; hand the same one to a restarted server). ``authorize``:
        require a bearer token and allow only what RBAC grants (else everything is allowed to anyone)."""
        self.store = store if store is not None else ObjectStore()
        self.host = host
        self.port = port
        self.api = API(
            self.store,
            resources,
            bookmark_interval=bookmark_interval,
            watch_timeout=watch_timeout,
            seed=seed,
            faults=faults,
        )
        self.auth = Auth(self.store) if authorize else None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _token(self, token: str | None) -> str | None:
        return token if token is not None or self.auth is None else self.auth.admin_token

    def configuration(self, token: str | None = None) -> kubernetes.client.Configuration:
        """A client configuration for this server; with ``token``, its requests carry it (default: the admin's
        when the server authorizes, none otherwise)."""
        config = kubernetes.client.Configuration(host=self.url)
        if (bearer := self._token(token)) is not None:
            config.api_key, config.api_key_prefix = {"authorization": bearer}, {"authorization": "Bearer"}
        return config

    def async_configuration(self, token: str | None = None) -> kubernetes_asyncio.client.Configuration:
        config = kubernetes_asyncio.client.Configuration(host=self.url)
        if (bearer := self._token(token)) is not None:
            config.api_key, config.api_key_prefix = {"authorization": bearer}, {"authorization": "Bearer"}
        return config

    def _application(self) -> web.Application:
        """The routes, behind authentication and authorization when the server authorizes."""
        if self.auth is None:
            app = web.Application()
        else:
            self.auth.bootstrap()
            app = web.Application(middlewares=[self.auth.middleware])
            app.router.add_post(TOKEN_PATH, self.auth.token_request)
        app.router.add_route("*", "/{path:.*}", self.api.handle)
        return app

    def start(self, timeout: float = 10.0) -> KubeAPIServer:
        """Serve from now on; returns once the port accepts connections. Raises OSError if the port is taken."""
        if self._thread is not None:
            raise RuntimeError(
                "KubeAPIServer.start: already started (a stopped server is not restarted: make a new "
                "one with the same store and port)"
            )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            app = self._application()
            self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
            await self._runner.setup()
            await web.SockSite(self._runner, sock).start()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(serve())
            except BaseException as e:  # handed to start(), which raises it
                failure.append(e)
                sock.close()
                loop.close()
                ready.set()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"kubeapi:{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"KubeAPIServer: did not start within {timeout}s on {self.url}")
        if failure:
            self._thread.join()
            raise failure[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End every watch stream, close every connection and the port, and join the thread. Idempotent."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None or not thread.is_alive():
            return

        async def shutdown() -> None:
            self.api.watches.close_all()
            if runner is not None:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self._runner = None

    def __enter__(self) -> KubeAPIServer:
        return self.start() if self._thread is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
