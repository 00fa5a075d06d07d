"""A PodGroup's subgroups (Volcano 1.14's SubJobs): which of a job's tasks form which sub-gang.

Each task joins one subjob (``getOrCreateSubJob``): the first ``subGroupPolicy`` whose label
selector matches the pod and on which the pod has a non-empty value for every
``matchLabelKeys`` key; pods with equal values form one subjob of that family (a Volcano Job's
partition: same task, same ``volcano.sh/partition-id``). Its gang size is the policy's
``subGroupSize`` (default 1), its network topology the policy's, its match index the first
value read as an integer (else 0). A pod no policy takes goes to the job's default subjob, a
gang of 1 with the job's topology. A family with ``minSubGroups`` needs that many subjobs ready
for the job to be, and that many to exist for it to be scheduled at all. A job without
policies has no subjobs: it is one gang, as before.
"""

from __future__ import annotations

import zlib

from batch_scheduler.jobs import JobInfo, SubJob

_MAX_VALUES = 128  # longer joined values are replaced by a hash, as Volcano's (FNV there; crc32 here)


def split(job: JobInfo) -> tuple[list[SubJob], dict[str, int]]:
    """The job's subjobs (none without policies) and each family's ``minSubGroups``."""
    policies = job.podgroup.spec.sub_group_policy if job.podgroup is not None else []
    if not policies:
        return [], {}
    found: dict[str, SubJob] = {}
    default = SubJob(id=job.key, family="", min_available=1, topology=job.podgroup.spec.network_topology, match_index=0)  # type: ignore[union-attr]
    for task in sorted(job.tasks.values(), key=lambda t: (t.index if t.index is not None else -1, t.created, t.uid)):
        labels = task.pod.metadata.labels
        for policy in policies:
            values = [labels.get(k, "") for k in policy.match_label_keys]
            if not policy.selects(labels) or not all(values):
                continue
            joined = "-".join(values)
            if len(joined) > _MAX_VALUES:
                joined = f"{zlib.crc32(joined.encode()):08x}"
            key = f"{job.key}/{policy.name}-{joined}" if joined else f"{job.key}/{policy.name}"
            sub = found.get(key)
            if sub is None:
                index = int(values[0]) if values and values[0].isascii() and values[0].isdigit() else 0
                sub = found[key] = SubJob(
                    id=key,
                    family=policy.name,
                    min_available=policy.sub_group_size if policy.sub_group_size is not None else 1,
                    topology=policy.network_topology,
                    match_index=index,
                )
            sub.tasks.append(task)
            break
        else:
            default.tasks.append(task)
    subs = list(found.values())
    if default.tasks:
        subs.append(default)
    return subs, {p.name: p.min_sub_groups or 0 for p in policies}


def order(job: JobInfo) -> list[SubJob]:
    """The subjobs in the order allocate takes them: per family, the ones still needed to reach its
    minimum first; then not-ready before ready, then by match index and id (Volcano's
    organizeJobWorksheet and SubJobOrderFn, priority aside)."""
    required: set[str] = set()
    for family, minimum in job.min_sub_jobs.items():
        members = sorted(
            (s for s in job.sub_jobs if s.family == family), key=lambda s: (s.ready(), s.match_index, s.id)
        )
        short = minimum - sum(1 for s in members if s.ready())
        required.update(s.id for s in [m for m in members if not m.ready()][: max(short, 0)])
    return sorted(job.sub_jobs, key=lambda s: (s.id not in required, s.ready(), s.match_index, s.id))


def ready_families(job: JobInfo, *, pipelined: bool = False) -> bool:
    """Every family with a minimum has that many subjobs ready (or pipelined) (Volcano's CheckSubJobReady)."""
    for family, minimum in job.min_sub_jobs.items():
        if minimum > 0:
            count = sum(1 for s in job.sub_jobs if s.family == family and (s.pipelined() if pipelined else s.ready()))
            if count < minimum:
                return False
    return True
