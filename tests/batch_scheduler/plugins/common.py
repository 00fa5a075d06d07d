"""Helpers the plugin test files share: finding a plugin in a session, a lone pod's job, tasks by name."""

from __future__ import annotations

from typing import Any, TypeVar

from batch_scheduler.jobs import JobInfo
from batch_scheduler.session import Session
from batch_scheduler.session_input import IMPLICIT_PREFIX
from batch_scheduler.tasks import TaskInfo
from tests.builders import node

P = TypeVar("P")
GI = 2**30


def plugin(ssn: Session, kind: type[P]) -> P:
    found = [p for tier in ssn.tiers.tiers for p in tier if isinstance(p, kind)]
    assert len(found) == 1, f"{kind.__name__} not in the session's conf"
    return found[0]


def lone(ssn: Session, pod_name: str) -> JobInfo:
    """The implicit one-pod job of a pod without a PodGroup."""
    return ssn.jobs[f"default/{IMPLICIT_PREFIX}uid-{pod_name}"]


def by_name(ssn: Session, *names: str) -> list[TaskInfo]:
    return [ssn.tasks[f"uid-{n}"] for n in names]


def names(tasks: list[TaskInfo] | None) -> list[str]:
    assert tasks is not None
    return [t.name for t in tasks]


def stamp(i: int) -> str:
    return f"2024-01-01T00:00:{i:02d}Z"


THREE_NODES = [node(f"n{i}", cpu=10, memory="64Gi") for i in range(3)]


def scores(ssn: Session, kind: type[Any], pod_name: str = "p") -> list[float]:
    return [float(x) for x in plugin(ssn, kind).score(ssn.columns, ssn.placing(ssn.tasks[f"uid-{pod_name}"]), None)]
