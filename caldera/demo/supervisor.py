"""Processes kept running as a cluster keeps a Deployment's pods: restarted when they die, and each death told.

A :class:`Supervisor` starts named children (an argv, a log file, a readiness needle: a line
the process logs once it serves), and :meth:`Supervisor.poll` — called every fraction of a
second, or :meth:`Supervisor.watch` as a task — notices a child that exited without being
asked to stop and restarts it after a back-off, as kubelet's CrashLoopBackOff does but in
seconds: 1 s after the first death, doubling after each death that follows within
``reset_after_s`` (60 s) of serving, capped at 16 s (:class:`Backoff`). A restarted child
appends to the same log, after one separator line. Each death is a :class:`Restart` in
:attr:`Supervisor.restarts`: which process, when (seconds since :attr:`Supervisor.epoch`),
how (``exit N`` or the signal's name, e.g. ``SIGKILL``), whether that run of it logged a
traceback, and how long after its death it served again (the needle, in the log after the
separator). A child that never served is a start-up failure (:meth:`Supervisor.wait_ready`
raises), not restarted. A stopped child (``SIGSTOP``) is alive and is left alone.

Each child runs in a session of its own and gets SIGTERM if this process dies. When a
child dies, everything left in its session is killed before it is restarted: a SIGKILLed
agent scheduler leaves Ray's dashboard agent and runtime-env agent running (reparented to
init; its raylet, GCS and workers exit by themselves), and a restarted one would start a
second Ray beside them. :meth:`Supervisor.stop_all` sends SIGTERM (and SIGCONT, so that a
stopped child gets it), waits, SIGKILLs what is left after the timeout, then empties each
child's session: nothing a child started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import psutil

from cluster.store.pause import pause


class Restart(msgspec.Struct, frozen=True, kw_only=True):
    """One death of a supervised process, and its way back."""

    process: str
    at_s: float  # seconds since the supervisor's epoch (the demo: since its load began)
    how: str  # "exit 1", or the signal's name: "SIGKILL"
    traceback: bool  # the run that died logged a traceback
    ready_after_s: float | None = None  # seconds from the death until it served again; None: not (yet)


class Backoff(msgspec.Struct, frozen=True, kw_only=True):
    """The wait before a restart: ``first_s``, doubled per further death, at most ``cap_s``; forgotten
    once the process has served ``reset_after_s`` without dying."""

    first_s: float = 1.0
    cap_s: float = 16.0
    reset_after_s: float = 60.0

    def delay(self, deaths: int) -> float:
        return float(min(self.cap_s, self.first_s * 2.0 ** max(0, deaths - 1)))


class State(enum.Enum):
    STARTING = "starting"  # started, its needle not logged yet
    SERVING = "serving"
    WAITING = "waiting"  # dead, restarted when its back-off ends
    FAILED = "failed"  # died before it ever served
    STOPPED = "stopped"  # asked to stop


class _Child:
    """A supervised process's bookkeeping (the supervisor's lock guards it)."""

    def __init__(self, name: str, argv: Sequence[str], needle: str, log: Path) -> None:
        self.name, self.argv, self.needle, self.log = name, list(argv), needle, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.state = State.STARTING
        self.offset = 0  # where this run's output begins in the log
        self.died_at = 0.0  # clock time of the last death
        self.serving_since = 0.0
        self.served = False  # ever
        self.deaths = 0  # in a row, for the back-off
        self.restart_at = 0.0
        self.pending: int | None = None  # index in restarts of the death awaiting its "serving again"

    def output(self) -> str:
        """This run's output so far."""
        try:
            with self.log.open("rb") as f:
                f.seek(self.offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""


def how_it_died(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
        return f"signal {-returncode}"
    return f"exit {returncode}"


def _die_with_parent() -> None:
    """In the child before exec: Linux sends it SIGTERM when the supervising process dies, however it dies."""
    if sys.platform == "linux":
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def empty_session(sid: int) -> list[int]:
    """SIGKILL every process left in session ``sid`` (a dead child's); their pids."""
    killed = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and os.getsid(p.pid) == sid:
                p.kill()
                killed.append(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return killed


def _wait_gone(pids: Sequence[int], timeout: float) -> None:
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    psutil.wait_procs(procs, timeout=timeout)


class Supervisor:
    """Named children, restarted when they die; see the module's docstring.

    Children are started on a thread of the supervisor's own, which outlives them: Linux sends a
    child SIGTERM when the *thread* that started it ends, and a child takes its CPU priority
    from that thread. Every method is thread-safe.
    """

    def __init__(
        self,
        logs: Path,
        *,
        env: Mapping[str, str] | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logs = logs
        self.env = dict(os.environ if env is None else env)
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.epoch = clock()
        self.restarts: list[Restart] = []
        self._children: dict[str, _Child] = {}
        self._lock = threading.RLock()
        # Every child is started (and restarted) on this one thread, made by the first start and kept
        # for the supervisor's life: a child inherits its CPU priority from the thread that starts it, so the
        # supervising thread may lower its own (the demo's does, :data:`caldera.demo.run.HARNESS_NICE`)
        # without lowering the children's; and Linux sends them SIGTERM when this thread ends.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="supervisor-spawn")

    # -- starting and asking -----------------------------------------------------------------

    def start(self, name: str, argv: Sequence[str], *, ready: str) -> None:
        """Start ``argv`` as ``name``, its output in ``<logs>/<name>.log``; it serves once it logs ``ready``."""
        with self._lock:
            if name in self._children:
                raise ValueError(f"{name}: already started")
            self.logs.mkdir(parents=True, exist_ok=True)
            child = _Child(name, argv, ready, self.logs / f"{name}.log")
            child.log.write_bytes(b"")
            self._children[name] = child
            self._spawn(child)

    def wait_ready(self, name: str, timeout: float) -> None:
        """Until ``name`` has served (its start-up succeeded); RuntimeError with its last lines if it exits first
        or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                child = self._children[name]
                if child.state is State.STARTING:
                    self._check(child, self.clock())  # no restart from here: see the class's docstring
                if child.served:
                    return
                if child.state is State.FAILED:
                    tail = child.output().strip().splitlines()[-5:]
                    code = child.proc.returncode if child.proc is not None else None
                    raise RuntimeError(f"{name} exited with {code}: {' | '.join(tail)}")
            time.sleep(0.1)
        raise RuntimeError(f"{name} not ready after {timeout:.0f}s (see {self._children[name].log})")

    def names(self) -> list[str]:
        return list(self._children)

    def pid(self, name: str) -> int | None:
        """The pid of ``name``'s current run; None while it waits to be restarted or after it stopped."""
        with self._lock:
            child = self._children[name]
            alive = child.proc is not None and child.proc.returncode is None
            return child.proc.pid if alive and child.proc is not None else None

    def serving(self, name: str) -> bool:
        with self._lock:
            return self._children[name].state is State.SERVING

    def log(self, name: str) -> Path:
        return self._children[name].log

    def kill(self, name: str, sig: int) -> None:
        """Send ``sig`` to ``name`` (from outside: SIGKILL it, SIGSTOP or SIGCONT it); a death is restarted."""
        pid = self.pid(name)
        if pid is None:
            raise ProcessLookupError(f"{name} is not running")
        os.kill(pid, sig)

    def tracebacks(self) -> list[str]:
        """The processes whose log holds a traceback, any run of them."""
        return [
            c.name
            for c in self._children.values()
            if c.log.exists() and "Traceback" in c.log.read_text(errors="replace")
        ]

    # -- watching ----------------------------------------------------------------------------

    def poll(self) -> None:
        """Notice deaths, restart those whose back-off ended, notice a restarted child serving."""
        with self._lock:
            now = self.clock()
            for child in self._children.values():
                if child.state in (State.STARTING, State.SERVING):
                    self._check(child, now)
                elif child.state is State.WAITING and now >= child.restart_at:
                    self._restart(child, now)

    async def watch(self, stop: asyncio.Event, every_s: float = 0.25) -> None:
        """:meth:`poll` every ``every_s`` until ``stop`` is set."""
        while not stop.is_set():
            self.poll()
            await pause(stop, every_s)

    def _check(self, child: _Child, now: float) -> None:
        assert child.proc is not None
        code = child.proc.poll()
        if child.state is State.STARTING and child.needle in child.output():  # it served, if only briefly
            child.state, child.serving_since, child.served = State.SERVING, now, True
            if child.pending is not None:
                done = self.restarts[child.pending]
                self.restarts[child.pending] = msgspec.structs.replace(
                    done, ready_after_s=round(now - child.died_at, 1)
                )
                child.pending = None
        if code is None:
            if child.state is State.SERVING and now - child.serving_since >= self.backoff.reset_after_s:
                child.deaths = 0
            return
        empty_session(child.proc.pid)  # what it started, before another run starts more
        if not child.served:
            child.state = State.FAILED
            return
        child.deaths += 1
        child.died_at = now
        child.state, child.restart_at = State.WAITING, now + self.backoff.delay(child.deaths)
        self.restarts.append(
            Restart(
                process=child.name,
                at_s=round(now - self.epoch, 1),
                how=how_it_died(code),
                traceback="Traceback" in child.output(),
            )
        )
        child.pending = len(self.restarts) - 1

    def _restart(self, child: _Child, now: float) -> None:
        last = self.restarts[child.pending] if child.pending is not None else None
        why = f"after it died ({last.how}) at {last.at_s:.1f} s" if last is not None else ""
        with child.log.open("a") as out:
            out.write(f"\n----- supervisor: {child.name} restarted at {now - self.epoch:.1f} s {why} -----\n")
        self._spawn(child)

    def _spawn(self, child: _Child) -> None:
        self._spawner.submit(self._popen, child).result()
        child.state = State.STARTING

    def _popen(self, child: _Child) -> None:
        """On the spawner's thread (see ``__init__``)."""
        child.offset = child.log.stat().st_size if child.log.exists() else 0
        with child.log.open("ab") as out:
            child.proc = subprocess.Popen(
                child.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # its own session: what it starts can be found and stopped with it
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (prctl only; no locks taken)
            )

    # -- stopping ----------------------------------------------------------------------------

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM every child, SIGKILL those still running after ``timeout``, then kill what is left in
        their sessions; returns when all of it is gone. None of them is restarted afterwards."""
        with self._lock:
            running = []
            for child in self._children.values():
                child.state = State.STOPPED
                if child.proc is not None and child.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        child.proc.send_signal(signal.SIGTERM)
                        child.proc.send_signal(signal.SIGCONT)  # a stopped child gets its SIGTERM too
                    running.append(child.proc)
            deadline = time.monotonic() + timeout
            for proc in running:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            left = [pid for c in self._children.values() if c.proc is not None for pid in empty_session(c.proc.pid)]
            _wait_gone(left, timeout=5.0)
