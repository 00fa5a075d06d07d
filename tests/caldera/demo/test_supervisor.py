"""The supervisor with real processes: a death is restarted and told, a stopped process is left alone,
and nothing a child started outlives it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from caldera.demo.supervisor import Backoff, Supervisor

# Serves ("ready"), then sleeps; with an argument, first starts a grandchild that sleeps on in its session.
CHILD = """
import subprocess, sys, time
if len(sys.argv) > 1:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("ready", flush=True)
time.sleep(600)
"""
CRASH = "print('ready', flush=True); raise SystemExit(3)"
TRACEBACK = "print('ready', flush=True); import time; time.sleep(0.3); 1 / 0"


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    s = Supervisor(tmp_path / "logs", backoff=Backoff(first_s=0.2, cap_s=0.8, reset_after_s=60))
    try:
        yield s
    finally:
        s.stop_all(timeout=5)


def until(check: Callable[[], bool], supervisor: Supervisor, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        supervisor.poll()
        time.sleep(0.05)


def test_a_child_killed_with_sigkill_is_restarted_and_its_death_told(supervisor: Supervisor) -> None:
    supervisor.start("web", [sys.executable, "-c", CHILD], ready="ready")
    supervisor.wait_ready("web", 20)
    first = supervisor.pid("web")
    supervisor.kill("web", signal.SIGKILL)
    until(lambda: bool(supervisor.restarts) and supervisor.restarts[0].ready_after_s is not None, supervisor)
    [r] = supervisor.restarts
    assert r.process == "web" and r.how == "SIGKILL" and not r.traceback and r.at_s >= 0
    assert r.ready_after_s is not None and r.ready_after_s >= 0.2  # the back-off, then its needle again
    assert supervisor.serving("web") and supervisor.pid("web") not in (None, first)
    log = supervisor.log("web").read_text()
    assert log.count("ready") == 2 and "----- supervisor: web restarted at" in log and "(SIGKILL)" in log


def test_a_stopped_child_is_alive_and_not_restarted(supervisor: Supervisor) -> None:
    supervisor.start("web", [sys.executable, "-c", CHILD], ready="ready")
    supervisor.wait_ready("web", 20)
    pid = supervisor.pid("web")
    supervisor.kill("web", signal.SIGSTOP)
    for _ in range(20):
        supervisor.poll()
        time.sleep(0.05)
    assert supervisor.restarts == [] and supervisor.pid("web") == pid
    assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
    supervisor.kill("web", signal.SIGCONT)
    supervisor.stop_all(timeout=5)  # a stopped child gets its SIGTERM as well
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_crashes_are_told_by_exit_code_and_traceback_and_backed_off_longer_each_time(supervisor: Supervisor) -> None:
    supervisor.start("crash", [sys.executable, "-c", CRASH], ready="ready")
    supervisor.start("oops", [sys.executable, "-c", TRACEBACK], ready="ready")
    supervisor.wait_ready("crash", 20)
    until(lambda: sum(r.process == "crash" for r in supervisor.restarts) >= 4, supervisor)
    until(lambda: any(r.process == "oops" for r in supervisor.restarts), supervisor)
    crash = [r for r in supervisor.restarts if r.process == "crash"]
    assert all(r.how == "exit 3" and not r.traceback for r in crash)
    gaps = [b.at_s - a.at_s for a, b in zip(crash, crash[1:])]
    # Each gap is the back-off (0.2 s, 0.4 s, then the 0.8 s cap) plus a start-up whose length a
    # loaded machine decides: the back-offs are lower bounds.
    assert all(gap >= wait - 0.1 for gap, wait in zip(gaps, (0.2, 0.4, 0.8))), gaps
    assert [supervisor.backoff.delay(n) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 0.8]
    oops = next(r for r in supervisor.restarts if r.process == "oops")
    assert oops.how == "exit 1" and oops.traceback and supervisor.tracebacks() == ["oops"]


def test_a_child_that_never_served_is_a_start_up_failure(supervisor: Supervisor) -> None:
    supervisor.start("bad", [sys.executable, "-c", "print('no such flag'); raise SystemExit(2)"], ready="ready")
    with pytest.raises(RuntimeError, match="bad exited with 2: no such flag"):
        supervisor.wait_ready("bad", 20)
    supervisor.poll()
    assert supervisor.restarts == []


def test_what_a_dead_child_started_is_killed_before_it_is_restarted_and_nothing_outlives_stop_all(
    supervisor: Supervisor,
) -> None:
    supervisor.start("parent", [sys.executable, "-c", CHILD, "grandchild"], ready="ready")
    supervisor.wait_ready("parent", 20)
    pid = supervisor.pid("parent")
    assert pid is not None
    [grandchild] = psutil.Process(pid).children()
    supervisor.kill("parent", signal.SIGKILL)
    until(lambda: bool(supervisor.restarts), supervisor)
    psutil.wait_procs([grandchild], timeout=5)
    assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE  # orphaned, then killed
    until(lambda: supervisor.serving("parent"), supervisor)
    now = supervisor.pid("parent")
    assert now is not None
    second = psutil.Process(now).children()
    supervisor.stop_all(timeout=5)
    for p in [psutil.Process(now) if psutil.pid_exists(now) else None, *second]:
        assert p is None or not p.is_running() or p.status() == psutil.STATUS_ZOMBIE


def test_a_child_restarted_by_a_thread_that_lowered_its_own_priority_keeps_the_normal_one(
    supervisor: Supervisor,
) -> None:
    """The demo lowers its own priority below its children's (``HARNESS_NICE``); a restart must not pass it on."""
    normal = os.getpriority(os.PRIO_PROCESS, 0)
    supervisor.start("web", [sys.executable, "-c", CHILD], ready="ready")
    supervisor.wait_ready("web", 20)
    first = supervisor.pid("web")

    def lowered() -> None:  # on a thread of its own: a priority lowered cannot be raised again
        os.nice(5)
        supervisor.kill("web", signal.SIGKILL)
        until(lambda: supervisor.serving("web") and supervisor.pid("web") != first, supervisor)

    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join()
    restarted = supervisor.pid("web")
    assert restarted not in (None, first)
    assert psutil.Process(restarted).nice() == normal
