"""Watch streams: newline-delimited JSON events, from a resourceVersion, until timeoutSeconds.

A watch from version N first replays the retained changes after N, then follows live
ones; from no version (or "0") it starts with an ADDED per existing object. A change
seen through a selector becomes what the watcher can tell: an object that stops matching is
DELETED for it, one that starts matching is ADDED. With ``allowWatchBookmarks`` the stream
carries a BOOKMARK with the current version every ``bookmark_interval`` seconds. A version the
server no longer has ends the stream with an ERROR event holding a 410 Expired Status.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from dataclasses import dataclass

from aiohttp import web

from .errors import APIError
from .objects import Change, EventType, ObjectStore, Progress, meta
from .resources import Obj, Resource
from .selectors import Predicate

_Item = Change | Progress | None  # None: the server is stopping


@dataclass(frozen=True)
class WatchRequest:
    resource: Resource
    since: int | None
    timeout: float
    bookmarks: bool
    matches: Predicate


def event_for(change: Change, matches: Predicate) -> Obj | None:
    """What a watcher whose filter is ``matches`` is told about ``change``, if anything."""
    if change.type is EventType.MODIFIED:
        assert change.old is not None
        was, now = matches(change.old), matches(change.new)
        if was and now:
            return {"type": "MODIFIED", "object": change.new}
        if now:
            return {"type": "ADDED", "object": change.new}
        if was:  # the last state it matched in, at the version it stopped matching
            gone = copy.deepcopy(change.old)
            meta(gone)["resourceVersion"] = str(change.revision)
            return {"type": "DELETED", "object": gone}
        return None
    return {"type": str(change.type), "object": change.new} if matches(change.new) else None


class Watches:
    """The open watch streams of one server, so that stopping the server ends them."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[_Item]] = set()

    def add(self, queue: asyncio.Queue[_Item]) -> None:
        self._queues.add(queue)

    def discard(self, queue: asyncio.Queue[_Item]) -> None:
        self._queues.discard(queue)

    def close_all(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)


def _encode(event: Obj) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


async def _send(response: web.StreamResponse, event: Obj) -> None:
    await response.write(_encode(event))


def _line(watch: WatchRequest, item: Change | Progress) -> bytes:
    """What the watcher is sent for ``item``: a BOOKMARK, its event, or nothing (b"")."""
    if isinstance(item, Progress):
        bookmark = {
            "kind": watch.resource.kind,
            "apiVersion": watch.resource.api_version,
            "metadata": {"resourceVersion": str(item.revision)},
        }
        return _encode({"type": "BOOKMARK", "object": bookmark})
    event = event_for(item, watch.matches)
    return _encode(event) if event is not None else b""


async def serve(
    request: web.Request, store: ObjectStore, watch: WatchRequest, watches: Watches, bookmark_interval: float
) -> web.StreamResponse:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Item] = asyncio.Queue()

    def listener(item: Change | Progress) -> None:
        with contextlib.suppress(RuntimeError):  # the server's loop is closed: the stream is gone with it
            loop.call_soon_threadsafe(queue.put_nowait, item)

    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        backlog, unsubscribe = store.watch(watch.resource, watch.since, listener)
    except APIError as e:
        await response.prepare(request)
        await _send(response, {"type": "ERROR", "object": e.status()})
        await response.write_eof()
        return response
    watches.add(queue)
    try:
        await response.prepare(request)
        for change in backlog:
            if (event := event_for(change, watch.matches)) is not None:
                await _send(response, event)
        deadline = loop.time() + watch.timeout
        next_bookmark = loop.time() + bookmark_interval
        while (now := loop.time()) < deadline:
            if watch.bookmarks and now >= next_bookmark:
                store.progress(listener)  # through the queue, so it follows every change already sent
                next_bookmark = now + bookmark_interval
            wake = min(deadline, next_bookmark) if watch.bookmarks else deadline
            try:
                item = await asyncio.wait_for(queue.get(), max(wake - now, 0.0))
            except TimeoutError:
                continue
            # Whatever else is queued goes out in the same write (one send for many events under load).
            items = [item]
            while item is not None and not queue.empty():
                item = queue.get_nowait()
                items.append(item)
            lines = [_line(watch, i) for i in items if i is not None]
            if any(lines):
                await response.write(b"".join(lines))
            if item is None:
                break
        await response.write_eof()
    except ConnectionError:  # the client went away
        pass
    finally:
        unsubscribe()
        watches.discard(queue)
    return response
