"""Faults an operator meets, switched on and off while the test server runs: latency on every
request, and ``pods/binding`` answered with an error; plus the count of bindings that worked,
per pod, so that a pod bound twice shows.

Set from any thread; read by the server's handlers (single attribute reads and writes).
"""

from __future__ import annotations

import collections
import threading


class Faults:
    def __init__(self) -> None:
        self.latency = 0.0  # seconds added before every request is answered
        self.bind_status = 0  # 0: bindings work; else the HTTP status every binding is answered with
        self.binds: collections.Counter[str] = collections.Counter()  # pod uid -> bindings that worked
        self._lock = threading.Lock()

    def bound(self, uid: str) -> None:
        with self._lock:
            self.binds[uid] += 1

    def bound_twice(self) -> list[str]:
        """Pods with more than one binding that worked."""
        with self._lock:
            return sorted(uid for uid, n in self.binds.items() if n > 1)
