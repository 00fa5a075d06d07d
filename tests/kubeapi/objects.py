"""The object store behind the test API server: objects, one resourceVersion counter, a bounded history.

Every write takes the next revision (a cluster-wide integer, as etcd's) and stamps it on the
object as ``metadata.resourceVersion``; a list reports the revision it was taken at. Each
resource keeps its last ``history`` changes so that a watch can resume from a version;
one from before the retained window gets ``410 Expired``, which is how tests force a re-list.

The store outlives a server: hand the same store to a new server on the same port and
clients see a restart, not a new cluster. All methods are thread-safe (tests may seed it
from their own thread while the server's loop serves it); listeners are called under the
lock, so every watcher sees changes in revision order.
"""

from __future__ import annotations

import builtins
import copy
import enum
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from . import errors
from .resources import Obj, Resource


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Change:
    """One write. ``new`` of a DELETED change is the last state, stamped with the deletion's version.

    The objects are the store's own: readers must not modify them."""

    revision: int
    type: EventType
    old: Obj | None
    new: Obj


@dataclass(frozen=True)
class Progress:
    """A bookmark: every change of the resource up to ``revision`` has been delivered."""

    revision: int


Listener = Callable[[Change | Progress], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = obj["metadata"] = {}
    return m


def key_of(resource: Resource, obj: Obj) -> tuple[str, str]:
    m = meta(obj)
    return (str(m.get("namespace", "")) if resource.namespaced else "", str(m.get("name", "")))


class ObjectStore:
    def __init__(self, *, history: int = 1000, clock: Callable[[], datetime] = utc_now) -> None:
        if history < 1:
            raise ValueError(f"history: {history} (expected at least 1 change per resource)")
        self.history = history
        self.clock = clock
        self._lock = threading.Lock()
        self._revision = 1  # as etcd's: an empty store is at 1, so no listing is at "0", which means "any" to a watch
        self._objects: dict[Resource, dict[tuple[str, str], Obj]] = {}
        self._changes: dict[Resource, deque[Change]] = {}
        self._evicted: dict[Resource, int] = {}  # the newest revision no longer in the history
        self._listeners: dict[Resource, set[Listener]] = {}

    @property
    def revision(self) -> int:
        with self._lock:
            return self._revision

    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        with self._lock:
            obj = self._objects.get(resource, {}).get((namespace if resource.namespaced else "", name))
            if obj is None:
                raise errors.not_found(resource, name)
            return copy.deepcopy(obj)

    def list(self, resource: Resource, namespace: str | None = None) -> tuple[list[Obj], int]:
        """The objects (of one namespace, or all) and the revision the listing is current at."""
        with self._lock:
            items = [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self._objects.get(resource, {}).items())
                if namespace is None or ns == namespace
            ]
            return items, self._revision

    def create(self, resource: Resource, obj: Obj) -> Obj:
        """Store a new object; uid and creationTimestamp are filled in when missing. 409 if it exists."""
        obj = copy.deepcopy(obj)
        m = meta(obj)
        m.setdefault("uid", str(uuid.uuid4()))
        m.setdefault("creationTimestamp", self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
        key = key_of(resource, obj)
        with self._lock:
            objects = self._objects.setdefault(resource, {})
            if key in objects:
                raise errors.already_exists(resource, key[1])
            self._write(resource, EventType.ADDED, None, obj)
            objects[key] = obj
            return copy.deepcopy(obj)

    def replace(self, resource: Resource, obj: Obj, *, expected: str) -> Obj:
        """Store a new state of an existing object, if its version is still ``expected`` (409 if not)."""
        obj = copy.deepcopy(obj)
        key = key_of(resource, obj)
        with self._lock:
            objects = self._objects.get(resource, {})
            old = objects.get(key)
            if old is None:
                raise errors.not_found(resource, key[1])
            if meta(old)["resourceVersion"] != expected:
                raise errors.stale(resource, key[1])
            self._write(resource, EventType.MODIFIED, old, obj)
            objects[key] = obj
            return copy.deepcopy(obj)

    def delete(
        self, resource: Resource, namespace: str, name: str, *, uid: str | None = None, version: str | None = None
    ) -> Obj:
        """Remove an object at once (no grace period, no finalizers); returns its last state. 409 on a failed
        uid or resourceVersion precondition."""
        key = (namespace if resource.namespaced else "", name)
        with self._lock:
            objects = self._objects.get(resource, {})
            old = objects.get(key)
            if old is None:
                raise errors.not_found(resource, name)
            m = meta(old)
            if uid is not None and uid != m.get("uid"):
                raise errors.conflict(
                    resource,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {m.get('uid')}",
                )
            if version is not None and version != m.get("resourceVersion"):
                raise errors.conflict(
                    resource,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{version}, ResourceVersion in object meta: "
                    f"{m.get('resourceVersion')}",
                )
            gone = copy.deepcopy(old)
            self._write(resource, EventType.DELETED, old, gone)
            del objects[key]
            return copy.deepcopy(gone)

    def _write(self, resource: Resource, type: EventType, old: Obj | None, new: Obj) -> None:
        self._revision += 1
        meta(new)["resourceVersion"] = str(self._revision)
        change = Change(self._revision, type, old, new)
        changes = self._changes.setdefault(resource, deque(maxlen=self.history))
        if len(changes) == self.history:
            self._evicted[resource] = changes[0].revision
        changes.append(change)
        for listener in list(self._listeners.get(resource, ())):
            listener(change)

    def watch(
        self, resource: Resource, since: int | None, listener: Listener
    ) -> tuple[builtins.list[Change], Callable[[], None]]:
        """Subscribe ``listener`` to the resource's changes after revision ``since`` and return, atomically, the
        changes it missed and how to unsubscribe. ``since=None`` means now: the backlog is then an ADDED for each
        existing object. 410 if ``since`` is older than the history, 504 if the store never reached it."""
        with self._lock:
            if since is None:
                objects = sorted(
                    self._objects.get(resource, {}).values(), key=lambda o: int(meta(o)["resourceVersion"])
                )
                backlog = [Change(int(meta(o)["resourceVersion"]), EventType.ADDED, None, o) for o in objects]
            elif since > self._revision:
                raise errors.too_large_version(since, self._revision)
            elif since < self._evicted.get(resource, 0):
                oldest = self._changes[resource][0].revision
                raise errors.expired(f"too old resource version: {since} ({oldest - 1})")
            else:
                backlog = [c for c in self._changes.get(resource, ()) if c.revision > since]
            listeners = self._listeners.setdefault(resource, set())
            listeners.add(listener)

        def unsubscribe() -> None:
            with self._lock:
                listeners.discard(listener)

        return backlog, unsubscribe

    def progress(self, listener: Listener) -> None:
        """Tell ``listener`` the current revision, in order with the changes it is sent."""
        with self._lock:
            listener(Progress(self._revision))
