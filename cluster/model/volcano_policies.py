"""A Volcano Job's lifecycle policies (events, actions, exit codes, timeouts), as its admission webhook checks them.

Read from Volcano release-1.14 ``pkg/webhooks/admission/jobs/validate/util.go``; the rest of
the Job's checks are :mod:`cluster.model.volcano_admission`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.model.duration import parse_duration
from cluster.model.volcano_job_api import JobError, LifecyclePolicy

# The events and actions a policy may name (validate/util.go: the externally allowed ones).
EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)


def validate_policy_schema(policy: LifecyclePolicy, field: str) -> None:
    if policy.timeout is not None:
        try:
            parse_duration(policy.timeout, signed=True)
        except ValueError:
            raise JobError(
                f"{field}.timeout",
                policy.timeout,
                f"{policy.timeout!r} is not a duration (expected e.g. 30s, 5m, 1h30m)",
            ) from None


def validate_policies(policies: Sequence[LifecyclePolicy], field: str) -> None:
    """One list of policies, as ``validatePolicies``: events and exit codes each at most once."""
    seen_events: dict[str, int] = {}
    seen_codes: dict[int, int] = {}
    for i, policy in enumerate(policies):
        where = f"{field}[{i}]"
        events = policy.event_list()
        if events and policy.exit_code is not None:
            raise JobError(
                where,
                events,
                f"both event {', '.join(events)} and exitCode {policy.exit_code} are set (expected one of them)",
            )
        if not events and policy.exit_code is None:
            raise JobError(where, policy, "neither an event nor an exitCode (a policy needs one of them)")
        if events:
            for event in events:
                if event not in EVENTS:
                    raise JobError(
                        f"{where}.event",
                        event,
                        f"{event!r} is not a policy event (expected one of {', '.join(EVENTS)})",
                    )
                if policy.action not in ACTIONS:
                    raise JobError(
                        f"{where}.action",
                        policy.action,
                        f"{policy.action!r} is not a policy action (expected one of {', '.join(ACTIONS)})",
                    )
                if event in seen_events:
                    raise JobError(
                        f"{where}.event",
                        event,
                        f"duplicated policy event {event!r}: "
                        f"{field}[{seen_events[event]}] names it too (each event at most once per list)",
                    )
                seen_events[event] = i
        else:
            code = policy.exit_code
            assert code is not None
            if code == 0:
                raise JobError(f"{where}.exitCode", code, "0 is not an error code (expected a non-zero exit code)")
            if code in seen_codes:
                raise JobError(
                    f"{where}.exitCode",
                    code,
                    f"duplicated exitCode {code}: "
                    f"{field}[{seen_codes[code]}] names it too (each exit code at most once per list)",
                )
            seen_codes[code] = i
    if "*" in seen_events and len(seen_events) > 1:
        others = ", ".join(e for e in seen_events if e != "*")
        raise JobError(
            f"{field}[{seen_events['*']}].event",
            "*",
            f"'*' (any event) is used beside {others} (with '*', no other event may be named)",
        )
