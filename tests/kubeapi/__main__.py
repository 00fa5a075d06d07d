"""The test Kubernetes API server as a process of its own: ``python -m tests.kubeapi [--port N]``.

Prints ``serving http://127.0.0.1:PORT`` on its first line once it accepts connections, and serves
until SIGTERM or SIGINT. A bench runs it this way so that the server has a core's worth of Python
to itself, as a real API server would, instead of sharing the bench's interpreter lock.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading

import uvloop

from .server import KubeAPIServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kubeapi", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--bookmark-interval", type=float, default=5.0, help="seconds between watch BOOKMARKs")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port}: expected 0 to 65535")
    if not 0 < args.bookmark_interval < float("inf"):
        parser.error(f"--bookmark-interval {args.bookmark_interval}: expected a positive number of seconds")
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # the server's loop, made in its thread
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    server = KubeAPIServer(host=args.host, port=args.port, bookmark_interval=args.bookmark_interval).start()
    print(f"serving {server.url}", flush=True)
    try:
        done.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
