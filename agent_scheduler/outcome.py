"""What an agent worker answers for a batch: each pod's outcome and the call's figures.

Sent back to the loop through the store (msgpack, :mod:`agent_scheduler.actors`), so plain structs.
"""

from __future__ import annotations

import enum

import msgspec


class OutcomeKind(enum.StrEnum):
    BOUND = "bound"
    UNSCHEDULABLE = "unschedulable"  # fits nowhere: back off
    RETRY = "retry"  # conflicts outlasted the retries, or the bind failed: try again first thing
    GONE = "gone"  # deleted, finished, or bound by someone else
    HANDED_OVER = "handed-over"  # room only in another worker's partition: that worker places it


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    kind: OutcomeKind
    node: str = ""
    reason: str = ""
    attempts: int = 1
    worker: int = -1  # HANDED_OVER: the worker (its index) whose partition has room for the pod


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    outcomes: list[Outcome]
    committed: int = 0
    conflicts: int = 0
    resolved: int = 0
    rejected: int = 0
    seconds: float = 0.0
    started_wall: float = 0.0  # when the worker started on the call (time.time(): the loop's handoff stage)
    commit_seconds: list[float] = []  # each commit round trip of the call (the loop's binder metrics)
    # of ``seconds``: waiting for the binder once a round's deciding was done (its commits were sent
    # as it decided: their round trips overlap ``decide_seconds``)
    commit_wait_seconds: float = 0.0
    released: int = 0  # reservations given back because their bind failed
    decide_seconds: float = 0.0  # of ``seconds``: deciding (every attempt)
    bind_seconds: float = 0.0  # of ``seconds``: the bind calls
    bound_wall: float = 0.0  # when the bind calls returned (time.time(): the loop compares it with the feed's)
    # How many more pods like the batch's fit on the nodes the worker fills first (its
    # partition), after the batch: the loop sizes its next shares by it. None: one worker, or
    # not asked (WorkerConfig.report_room).
    room: int | None = None
