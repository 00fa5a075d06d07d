"""How many pods each agent worker's next batch takes: the loop's share of a burst.

:class:`Shares` keeps, for each worker, the pods of its batches out now and the room its partition of
the nodes has left as its last answer said (``--room-shares``), and answers :meth:`Shares.share`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

ROOM_STALE_S = 0.5
"""A worker's figure of its partition's room is trusted this long (pods end and free room,
other workers take some): a worker whose partition was full takes a look (:data:`ROOM_PROBE`)
again after it."""


ROOM_PROBE = 16
"""What a worker whose figure said full, and is older than :data:`ROOM_STALE_S`, takes while another
worker has room: enough to learn whether pods ended on its partition, too few to crowd another's."""


class Shares:
    """The figures a burst is shared by: each worker's batches out, its partition's room."""

    def __init__(self, *, batch_size: int, inflight: int, room_shares: bool, clock: Callable[[], float]) -> None:
        self.batch_size = batch_size
        self.inflight = inflight
        self.room_shares = room_shares
        self.clock = clock
        self.handed = 0  # batches with a worker now
        # worker -> (pods like its last batch's its partition still has room for, less those
        # handed to it since; when its answer said so)
        self.room: dict[str, tuple[int, float]] = {}
        self.out: dict[str, int] = {}  # worker -> pods in its batches out now

    def share(self, worker: str, live: Sequence[str], ready: int) -> int:
        """How many pods ``worker``'s next batch takes now: the ``ready`` pods split evenly over the
        batches that could be handed out (``inflight`` per worker of ``live``, less those in flight) —
        but over no more batches than there are live workers — at most ``batch_size``. A burst goes to
        every worker at once rather than in whole batches to the first few, whose partitions would
        overflow into the others' (and collide there). One batch per worker, not one per free slot:
        a burst reaches the loop in pieces (the store takes it a few pods to a write), and its first
        piece split over every free slot left the rest waiting for one (a call holds its slot until
        its pods are bound); in one batch, the rest goes out in the slot left free as soon as it is
        read. Measured in the default demo (six alternated pairs, one worker): the agent pods'
        queue stage p50 6.1–9.3 → 1.5–3.7 ms, submit → bound p50 mean 40.0 → 34.9 ms (better in five
        of the six), the first pod of a round ~1.5 ms later.

        With ``room_shares`` a worker also takes at most the room its partition of the nodes has
        left (as its last answer said, less its other batches still out and what it was handed
        since), and a worker whose partition is full takes nothing while another's has room (it
        would place in theirs, and collide there) — once its figure is older than
        :data:`ROOM_STALE_S` (pods end and free room) at most :data:`ROOM_PROBE` pods, and its even
        share again when every partition is full and no answer is on its way. An old figure with
        room still caps the share (at the figure, or a look of :data:`ROOM_PROBE` pods when
        smaller). Measured (``caldera bench agent --fill 0.9 --take 0.8``, four runs each, off /
        on): true conflicts at 8 workers 1–10% → 0.07–0.2% at the same pods/s; at 2 workers 0–0.9%
        either way, and 0 in every run since the figures count the batches out and the loop waits
        for answers when all say full (the demo at 2 workers: 10–12% → 6–8%, latency as before); the
        rare run at 8 workers that still spilled a whole batch was answers heard out of order (see
        :meth:`Worker.schedule`'s room, taken last). A worker alone
        (the others failed, or ``--workers 1``) takes its even share: it collides with no one,
        and holding pods back would only delay them."""
        now = self.clock()
        by_room = self.room_shares and len(live) > 1  # a worker alone collides with no one
        roomy = [name for name in live if self.has_room(name, now)] if by_room else list(live)
        if worker not in roomy and roomy:
            return 0
        if by_room and not roomy and any(self.out.values()):
            return 0  # every figure says full, but answers are on their way with fresher ones
        takers = len(roomy or live)
        free = min(takers, takers * self.inflight - self.handed)
        share = max(1, min(self.batch_size, -(-ready // max(1, free))))
        room = self.room.get(worker) if by_room else None
        if room is not None and room[0] > 0:
            # An old figure still caps: pods may have ended there since, so a look beyond it, but not
            # the even share (at 8 workers in a full-shard burst a worker's answers come ~1 s apart)
            share = min(share, room[0] if now - room[1] <= ROOM_STALE_S else max(room[0], ROOM_PROBE))
        elif room is not None and len(roomy) > 1:
            share = min(share, ROOM_PROBE)  # full when last heard of, others have room: a look, not a share
        return share

    def has_room(self, worker: str, now: float) -> bool:
        room = self.room.get(worker)
        return room is None or room[0] > 0 or now - room[1] > ROOM_STALE_S

    def took(self, worker: str, pods: int) -> None:
        """A batch of ``pods`` handed to ``worker``: out until its answer, and taken off its room figure."""
        room = self.room.get(worker)
        if room is not None:  # what this batch takes of it, until its answer says
            self.room[worker] = (room[0] - pods, room[1])
        self.out[worker] = self.out.get(worker, 0) + pods

    def failed(self, worker: str, pods: int) -> None:
        """A batch of ``pods`` that ``worker`` did not answer: back in the queue, no longer out."""
        self.out[worker] = self.out.get(worker, 0) - pods

    def answered(self, worker: str, pods: int, room: int | None, now: float) -> None:
        """``worker``'s answer for a batch of ``pods``, with its partition's room (None: not said)."""
        self.out[worker] = self.out.get(worker, 0) - pods
        if room is not None:  # less the worker's other batches out: the figure may not count them yet
            self.room[worker] = (room - self.out[worker], now)
