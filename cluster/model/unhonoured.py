"""What an object asks of placement that caldera does not honour yet, by field path.

caldera's schedulers place a pod as if these fields were absent (inter-pod affinity and
topology spread are honoured whole by both schedulers: required terms and DoNotSchedule
constraints filter, preferred terms and ScheduleAnyway ones score, a namespaceSelector reads
the Namespaces' labels, matchLabelKeys/mismatchLabelKeys merge the pod's label values): DRA claims, PVC-backed volumes (volume topology), host ports, NUMA
policy (scheduling gates are honoured: a gated pod waits until its gates are removed); a
Queue's node-group affinity. (A PodGroup's network topology and subgroups are honoured by the
batch scheduler.) Saying so beats a placement that silently breaks what the user asked for.

:func:`unhonoured` is pure and works on the decoded model, so the dry-run warns from it
and a running scheduler can emit one Kubernetes Event per pod and field (:func:`notice`
is the wording). A field set but empty (``podAffinity: {}``) asks nothing and is not listed.
"""

from __future__ import annotations

from cluster.model.core import Container, Pod
from cluster.model.labels import NUMA_POLICY_KEY
from cluster.model.volcano import PodGroup, Queue

"""The pod annotation Volcano's numa-aware plugin reads (a Volcano Job task's ``topologyPolicy`` becomes it)."""


def unhonoured(obj: Pod | PodGroup | Queue) -> list[str]:
    """The field paths of ``obj`` that change placement and that caldera ignores, in field order."""
    if isinstance(obj, Pod):
        return _pod(obj)
    if isinstance(obj, PodGroup):
        return []  # its network topology and subgroups are honoured by the batch scheduler
    return ["spec.affinity"] if obj.spec.affinity else []


def notice(path: str) -> str:
    """One line saying ``path`` is not honoured: for a warning or an Event's message."""
    return f"{path} is not honoured by caldera yet (placement ignores it)"


def _pod(pod: Pod) -> list[str]:
    spec = pod.spec
    paths: list[str] = []
    if NUMA_POLICY_KEY in pod.metadata.annotations:
        paths.append(f"metadata.annotations.{NUMA_POLICY_KEY}")
    if spec.resource_claims:
        paths.append("spec.resourceClaims")
    for i, volume in enumerate(spec.volumes):
        if volume.persistent_volume_claim is not None:
            paths.append(f"spec.volumes[{i}].persistentVolumeClaim")
        if volume.ephemeral is not None:
            paths.append(f"spec.volumes[{i}].ephemeral")
    paths += _host_ports("spec.initContainers", spec.init_containers)
    paths += _host_ports("spec.containers", spec.containers)
    # On the host network every container port is a port of the node (the API server sets hostPort).
    if spec.host_network and any(c.ports for c in [*spec.init_containers, *spec.containers]):
        paths.append("spec.hostNetwork")
    return paths


def _host_ports(field: str, containers: list[Container]) -> list[str]:
    return [
        f"{field}[{i}].ports[{j}].hostPort"
        for i, c in enumerate(containers)
        for j, port in enumerate(c.ports)
        if port.host_port
    ]
