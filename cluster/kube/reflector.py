"""List and watch one kind of object from the API server, as raw JSON decoded with msgspec.

A :class:`Reflector` runs in its own thread (the official client is synchronous): it
lists, hands the whole listing on, then watches from the listing's resourceVersion and
hands on each event; a watch that ends (``timeoutSeconds``) resumes from the last
version seen (bookmarks keep it fresh); ``410 Gone`` — the server no longer has that
version — or a resync due means list again; a broken connection is retried with backoff
and a re-list. Pods come at high rates, so nothing goes through the client's pydantic
models: the response body is read raw (``_preload_content=False``) and decoded with msgspec.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec
from kubernetes import client as k8s

from cluster.model.core import Namespace, Node, Pod, PriorityClass
from cluster.model.decode import decode_json
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.store.keys import Kind

T = TypeVar("T")
KubeObject = Node | Pod | PodGroup | Queue | PriorityClass
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
TOPOLOGY = ("topology.volcano.sh", "v1alpha1")


class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""


class _List(msgspec.Struct, Generic[T]):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[T] | None = None


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class Listed(msgspec.Struct, frozen=True):
    """Everything of a kind that exists, at ``version``: anything else of that kind is gone."""

    kind: Kind
    objects: list[Any]
    version: str


class Changed(msgspec.Struct, frozen=True):
    kind: Kind
    object: Any
    deleted: bool


Delta = Listed | Changed


class Gone(Exception):
    """The server no longer has the version the watch asked for (HTTP 410): list again."""


class KubeKind(msgspec.Struct, frozen=True):
    """How to list and watch one kind: the store's kind, the client call, the model type."""

    kind: Kind
    call: Callable[..., Any]
    type: type
    fast: bool = False  # decode straight with msgspec (the API server's JSON); else drop nulls first


def kinds(api: k8s.ApiClient) -> list[KubeKind]:
    """The kinds the mirror follows."""
    core, custom, scheduling = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api), k8s.SchedulingV1Api(api)
    return [
        KubeKind(kind=Kind.NODE, call=core.list_node, type=Node),
        KubeKind(kind=Kind.POD, call=core.list_pod_for_all_namespaces, type=Pod, fast=True),
        KubeKind(
            kind=Kind.PODGROUP,
            call=functools.partial(custom.list_cluster_custom_object, *VOLCANO, "podgroups"),
            type=PodGroup,
        ),
        KubeKind(
            kind=Kind.QUEUE, call=functools.partial(custom.list_cluster_custom_object, *VOLCANO, "queues"), type=Queue
        ),
        KubeKind(kind=Kind.PRIORITYCLASS, call=scheduling.list_priority_class, type=PriorityClass),
        KubeKind(
            kind=Kind.HYPERNODE,
            call=functools.partial(custom.list_cluster_custom_object, *TOPOLOGY, "hypernodes"),
            type=HyperNode,
        ),
        KubeKind(kind=Kind.NAMESPACE, call=core.list_namespace, type=Namespace),
    ]


class Reflector:
    def __init__(
        self,
        kind: KubeKind,
        sink: Callable[[Delta], None],
        *,
        watch_seconds: int = 60,
        resync_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self.sink = sink
        self.watch_seconds = watch_seconds
        self.resync_seconds = resync_seconds
        self.clock = clock
        self.lists = 0
        self.gone = 0
        self.errors = 0
        self._stopping = threading.Event()
        self._relist = threading.Event()
        self._response: Any = None
        self._list_decoder: msgspec.json.Decoder[Any] | None = (
            msgspec.json.Decoder(_List[kind.type]) if kind.fast else None  # type: ignore[name-defined]
        )
        self._object_decoder: msgspec.json.Decoder[Any] | None = msgspec.json.Decoder(kind.type) if kind.fast else None

    def stop(self) -> None:
        """End :meth:`run` soon: a watch blocked in a read is cut (:meth:`_cut`)."""
        self._stopping.set()
        self._cut()

    def _cut(self) -> None:
        """Wake the thread blocked reading the watch: its socket is shut down, which returns at once.
        (Closing the response from here would wait for that read to end: the next event or bookmark,
        up to the watch's length on a quiet kind.)"""
        response = self._response
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: the reader ends either way
                sock.shutdown(socket.SHUT_RDWR)

    def relist(self) -> None:
        """List again soon (the store lost what the last listing gave it): a watch blocked in a
        read is cut as by :meth:`stop`."""
        self._relist.set()
        self._cut()

    def _decode(self, raw: bytes | msgspec.Raw, *, many: bool) -> Any:
        if self.kind.fast:
            decoder = self._list_decoder if many else self._object_decoder
            assert decoder is not None
            return decoder.decode(raw)
        return decode_json(bytes(raw), _List[self.kind.type] if many else self.kind.type)  # type: ignore[name-defined]

    def run(self) -> None:
        version: str | None = None
        listed_at = 0.0
        backoff = 0.2
        while not self._stopping.is_set():
            if self._relist.is_set():
                self._relist.clear()
                version = None
            try:
                if version is None or self.clock() - listed_at >= self.resync_seconds:
                    version = self._list()
                    listed_at = self.clock()
                if self._relist.is_set():
                    continue
                version = self._watch(version)
                backoff = 0.2
            except Gone:
                self.gone += 1
                version = None
            except Exception:
                if self._stopping.is_set():
                    return
                if self._relist.is_set():
                    continue  # the watch was cut on purpose: list at once
                self.errors += 1
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                version = None  # after a broken connection, list again: events may have been missed

    def _list(self) -> str:
        response = self.kind.call(_preload_content=False, _request_timeout=(5, 60))
        try:
            body = response.data if hasattr(response, "data") else response.read()
        finally:
            response.release_conn()
        listing = self._decode(body, many=True)
        self.lists += 1
        self.sink(
            Listed(kind=self.kind.kind, objects=list(listing.items or []), version=listing.metadata.resource_version)
        )
        return str(listing.metadata.resource_version)

    def _watch(self, version: str) -> str:
        """Follow events from ``version``; the last version seen. A stream that ends well before its
        ``timeoutSeconds`` (the server went away, a proxy cut it) raises :class:`Gone`: what the server
        holds now may not follow from our version (after a restore, say), so list again."""
        started = self.clock()
        response = self.kind.call(
            _preload_content=False,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_seconds,
            _request_timeout=(5, self.watch_seconds + 10),
        )
        self._response = response
        try:
            pending = b""
            for chunk in response.stream(65536, decode_content=True):
                if self._stopping.is_set() or self._relist.is_set():
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        version = self._event(line, version)
        finally:
            self._response = None
            response.release_conn()
        if not self._stopping.is_set() and self.clock() - started < self.watch_seconds * 0.9:
            raise Gone(f"the {self.kind.kind} watch ended after {self.clock() - started:.1f}s of {self.watch_seconds}s")
        return version

    def _event(self, line: bytes, version: str) -> str:
        event = msgspec.json.decode(line, type=_Event)
        if event.type == "ERROR":
            status = msgspec.json.decode(event.object, type=_Status)
            if status.code == 410:
                raise Gone(status.message)
            raise RuntimeError(f"watch error {status.code} {status.reason}: {status.message}")
        meta = json.loads(bytes(event.object)).get("metadata") or {} if event.type == "BOOKMARK" else None
        if meta is not None:
            return str(meta.get("resourceVersion") or version)
        obj = self._decode(event.object, many=False)
        self.sink(Changed(kind=self.kind.kind, object=obj, deleted=event.type == "DELETED"))
        return obj.metadata.resource_version or version
