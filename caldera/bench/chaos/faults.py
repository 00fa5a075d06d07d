"""The faults an operator meets, one at a time: each injects itself and returns when it is over.

"Over" is where recovery starts to count: a process killed with -9 — at once (its restart is
part of recovering, as a Deployment's is); Redis or the API server restarted — when it
answers again; a slow API server or failing binds — when the window ends; a stalled
process — when it is continued.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import msgspec
import psutil

from caldera.bench.chaos.system import BATCH, LEASE_S, System

WINDOW_S = 10.0  # how long a slow API server or failing binds last
DOWN_S = 2.0  # how long Redis or the API server is gone before it starts again


class Fault(msgspec.Struct, frozen=True):
    name: str
    what: str


async def _kill(system: System, process: str) -> None:
    system.supervisor.kill(process, signal.SIGKILL)


async def _leader(system: System) -> str:
    leader = await asyncio.to_thread(system.batch_leader)
    return leader or BATCH[0]


def _ray_process(system: System, match: Callable[[psutil.Process], bool]) -> psutil.Process:
    pid = system.supervisor.pid("agent-scheduler")
    if pid is None:
        raise LookupError("the agent scheduler is not running")
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if match(child):
                return child
        except psutil.Error:
            continue
    raise LookupError("no such Ray process under the agent scheduler")


def _is_worker(p: psutil.Process) -> bool:
    return any("WorkerActor" in part for part in p.cmdline())


def _is_raylet(p: psutil.Process) -> bool:
    return p.name() == "raylet"


async def _window(system: System, attribute: str, value: float | int) -> None:
    setattr(system.faults, attribute, value)
    try:
        await asyncio.sleep(WINDOW_S)
    finally:
        setattr(system.faults, attribute, type(value)(0))


async def inject(fault: Fault, system: System) -> None:
    """Do ``fault`` to ``system``; returns when it is over."""
    actions: dict[str, Callable[[], Awaitable[None]]] = {
        "kill-mirror": lambda: _kill(system, "mirror"),
        "kill-sharding": lambda: _kill(system, "sharding"),
        "kill-batch-leader": lambda: _kill_leader(system),
        "kill-agent": lambda: _kill(system, "agent-scheduler"),
        "kill-ray-worker": lambda: asyncio.to_thread(lambda: _ray_process(system, _is_worker).kill()),
        "kill-raylet": lambda: asyncio.to_thread(lambda: _ray_process(system, _is_raylet).kill()),
        "redis-restart-empty": lambda: system.restart_redis(DOWN_S, keep_data=False),
        "redis-restart-aof": lambda: system.restart_redis(DOWN_S, keep_data=True),
        "api-restart": lambda: system.restart_api_server(DOWN_S),
        "api-slow": lambda: _window(system, "latency", 2.0),
        "binds-409": lambda: _window(system, "bind_status", 409),
        "binds-500": lambda: _window(system, "bind_status", 500),
        "stall-batch-leader": lambda: _stall_leader(system),
    }
    await actions[fault.name]()


async def _kill_leader(system: System) -> None:
    await _kill(system, await _leader(system))


async def _stall_leader(system: System) -> None:
    """SIGSTOP the leading batch scheduler for twice its lease (the other replica takes over), then SIGCONT."""
    leader = await _leader(system)
    system.supervisor.kill(leader, signal.SIGSTOP)
    try:
        await asyncio.sleep(2 * LEASE_S)
    finally:
        system.supervisor.kill(leader, signal.SIGCONT)


FAULTS = (
    Fault("kill-mirror", "caldera mirror killed with -9 (restarted by its supervisor)"),
    Fault("kill-sharding", "the sharding controller killed with -9"),
    Fault("kill-batch-leader", "the leading batch scheduler killed with -9 (a second replica waits)"),
    Fault("kill-agent", "the agent scheduler killed with -9 (its local Ray goes with it)"),
    Fault("kill-ray-worker", "one Ray worker (an agent worker actor) killed with -9"),
    Fault("kill-raylet", "the agent scheduler's raylet killed with -9"),
    Fault("redis-restart-empty", f"Redis killed, started again {DOWN_S:g}s later without its data"),
    Fault("redis-restart-aof", f"Redis killed, started again {DOWN_S:g}s later from its append-only file"),
    Fault("api-restart", f"the API server stopped, started again {DOWN_S:g}s later (same objects)"),
    Fault("api-slow", f"every API request answered 2s late for {WINDOW_S:g}s"),
    Fault("binds-409", f"every pods/binding answered 409 for {WINDOW_S:g}s"),
    Fault("binds-500", f"every pods/binding answered 500 for {WINDOW_S:g}s"),
    Fault("stall-batch-leader", f"the leading batch scheduler stopped (SIGSTOP) for {2 * LEASE_S:g}s, past its lease"),
)
BY_NAME = {f.name: f for f in FAULTS}
