"""The Redis key layout of one cluster (DESIGN.md §3).

Every key starts with ``caldera:{<cluster>}:``; the braces are a Redis Cluster hash tag,
so all keys of one cluster live in one slot and every multi-key script stays legal there.
"""

from __future__ import annotations

import enum

import msgspec


class Kind(enum.StrEnum):
    """The kinds of object the store holds; the value is the word used in keys and the feed."""

    NODE = "node"
    POD = "pod"
    PODGROUP = "podgroup"
    QUEUE = "queue"
    PRIORITYCLASS = "priorityclass"
    NODESHARD = "nodeshard"
    HYPERNODE = "hypernode"
    NAMESPACE = "namespace"


class Keys(msgspec.Struct, frozen=True):
    """Key names for one cluster."""

    cluster: str = "default"

    def __post_init__(self) -> None:
        if not self.cluster or any(c in self.cluster for c in "{}: \n"):
            raise ValueError(
                f"cluster: invalid name {self.cluster!r} (expected a non-empty name without braces, colons or spaces)"
            )

    @property
    def prefix(self) -> str:
        return f"caldera:{{{self.cluster}}}:"

    @property
    def rv(self) -> str:
        """The cluster-wide resourceVersion counter."""
        return self.prefix + "rv"

    @property
    def feed(self) -> str:
        """The change feed stream."""
        return self.prefix + "feed"

    @property
    def recent(self) -> str:
        """The records some feed entries carry, under the same ids (cluster.store.feed)."""
        return self.prefix + "recent"

    @property
    def recent_nodes(self) -> str:
        """The nodes' accounting changes some feed entries carry, under the same ids (cluster.store.feed)."""
        return self.prefix + "recent_nodes"

    @property
    def epoch(self) -> str:
        """The store's epoch: made with the store's first write, and anew when Redis came back
        from a restart; every feed entry carries it (a reader whose epoch differs lists again)."""
        return self.prefix + "epoch"

    def binding(self, scheduler: str) -> str:
        """Pods one scheduler committed and has not yet bound in the cluster, scored by the commit's
        time (ms): what a scheduler that died between the two leaves for its successor to bind."""
        return f"{self.prefix}binding:{scheduler}"

    def index(self, kind: Kind) -> str:
        """The set of names (uids for pods) of every object of one kind."""
        return f"{self.prefix}index:{kind}"

    def object(self, kind: Kind, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    def node(self, name: str) -> str:
        return self.object(Kind.NODE, name)

    def pod(self, uid: str) -> str:
        return self.object(Kind.POD, uid)

    def pending(self, scheduler: str) -> str:
        """Pending pods of one scheduler, scored by the version at which they became pending."""
        return f"{self.prefix}pending:{scheduler}"

    def reasons(self, scheduler: str) -> str:
        """Why each of a scheduler's pending pods is pending (uid -> message)."""
        return f"{self.prefix}reasons:{scheduler}"

    def bound_to(self, node: str) -> str:
        """Uids of the pods bound to a node."""
        return f"{self.prefix}bynode:{node}"

    @property
    def processes(self) -> str:
        """Each process's heartbeat: one field per ``component/holder``."""
        return self.prefix + "processes"

    def lease(self, name: str) -> str:
        """The leader lease of one process (when election runs over Redis)."""
        return f"{self.prefix}lease:{name}"

    def agent_inbox(self, worker: str, token: str) -> str:
        """Batches handed to one agent worker (per worker handle, so a restart never reads an old one)."""
        return f"{self.prefix}agent:inbox:{worker}:{token}"

    def agent_outbox(self, worker: str, token: str) -> str:
        """The answers of one agent worker handle."""
        return f"{self.prefix}agent:outbox:{worker}:{token}"
