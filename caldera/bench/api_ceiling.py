"""The API path's ceiling: a binder that decides nothing, as a process of its own.

``python -m caldera.bench.api_ceiling --master URL --scheduler NAME`` lists the nodes, watches
every pod (raw JSON, decoded with msgspec, as the mirror does), and binds each pending pod of
``NAME`` to the next node in turn with ``pods/binding``, from ``--threads`` threads, unpaced and
with no check of room. Whatever rate it reaches is the most pods/s the API server, its watch and
its binding calls allow this machine: ``caldera bench api`` measures caldera beside it. Prints
``binding`` once it follows the pods, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from cluster.kube.bulk import PlainBinder, pooled_client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caldera.bench.api_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True, help="the API server's address")
    parser.add_argument("--scheduler", required=True, help="bind the pods whose schedulerName is this")
    parser.add_argument("--threads", type=int, default=8, help="binding calls at once (default: 8)")
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= 256:
        parser.error(f"--threads {args.threads}: expected 1 to 256")
    try:
        api = pooled_client(args.master, args.threads + 2)  # a connection per thread, none waited for
    except ValueError as e:
        parser.error(str(e))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    PlainBinder(api, args.scheduler, args.threads).run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
