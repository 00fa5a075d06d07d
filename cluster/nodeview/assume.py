"""Holding a placement on the node table until the store's records count it: assume, forget, confirm.

A scheduler decides on its node table (a cache of the store's node records, kept from the
feed). A placement it has sent to the binder is not in the store's records yet, and once
committed it is in the records of a version the feed has not delivered yet; meanwhile any
refresh of that node from an older record would drop it from the table, and the next
decision would fill the same room again. kube-scheduler's cache solves the same problem
with assumed pods; this is that discipline for node figures::

                 assume(node, request)
      (none) ─────────────────────────────▶ ASSUMED ──forget(token)──▶ (gone: request given back)
                                               │
                                               │ confirm(token, version)   (the binder committed it;
                                               ▼                            ``version``: the node's new version)
                                           CONFIRMED ──a record of the node with version ≥ ``version``──▶ (gone:
                                                                                                the record counts it)

While ASSUMED or CONFIRMED the request is counted on the table: every refresh of the node's
figures (:meth:`Assumed.apply` for feed updates, :meth:`Assumed.set_figures` for the
figures a binder answer carries) puts it back over the new record, unless the record is at
least the confirmed version — then the token ends, as the record already counts the
placement. A node that is removed ends its tokens; a listing of a new store (another epoch:
Redis came back empty or from an older copy) ends them all. Both schedulers hold placements this
way: the agent's worker from its decision until the binder answers and the feed catches
up, the batch scheduler's cache from each committed gang until the feed reports it.
"""

from __future__ import annotations

from cluster.model.resources import Resources
from cluster.nodeview.table import NodeTable
from cluster.store.records import Update


class Token:
    """One assumed placement (identity matters: two alike placements are two tokens)."""

    __slots__ = ("node", "request", "version")

    def __init__(self, node: str, request: Resources) -> None:
        self.node = node
        self.request = request
        self.version: int | None = None  # set by confirm: the node version whose record counts it


class Assumed:
    """The placements held on one node table (see the module docstring for the states)."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._by_node: dict[str, list[Token]] = {}
        self._epoch = ""  # the store's epoch the held versions belong to

    def __len__(self) -> int:
        return sum(len(tokens) for tokens in self._by_node.values())

    def assume(self, node: str, request: Resources, *, taken: bool = False) -> Token:
        """Count ``request`` on ``node`` until forgotten or confirmed and caught up. ``taken``: the
        decision already took it on the table (the agent core takes as it decides)."""
        token = Token(node, request)
        if not taken:
            self.table.take(node, request)
        self._by_node.setdefault(node, []).append(token)
        return token

    def forget(self, token: Token) -> None:
        """The placement will not happen (the commit failed): give the request back."""
        if self._drop(token) and token.node in self.table.index:
            self.table.give_back(token.node, token.request)

    def confirm(self, token: Token, version: int) -> None:
        """The binder committed it; the node's records from ``version`` on count it."""
        token.version = version
        i = self.table.index.get(token.node)
        if i is not None and int(self.table.version[i]) >= version and self._drop(token):
            # The table already holds a record that counts it (the feed was quick): do not count it twice.
            self.table.give_back(token.node, token.request)

    def apply(self, update: Update) -> None:
        """Apply a feed update to the table, then hold the placements over the refreshed nodes (those
        whose figures the update replaced)."""
        refreshed = self.table.apply(update)
        if update.full and self._epoch and update.epoch != self._epoch:
            # A new store: the versions held are another epoch's, and the listing is the truth
            # (a placement committed before counts as a bound pod, or was lost and is pending).
            self._by_node.clear()
        if update.epoch:
            self._epoch = update.epoch
        if update.full:
            for node in [n for n in self._by_node if n not in self.table.index]:
                del self._by_node[node]
        for name, record in update.nodes.items():
            if name in self._by_node:
                if record is None:
                    del self._by_node[name]
                elif name in refreshed:
                    self._refreshed(name, record.version)

    def set_figures(
        self, name: str, allocatable: Resources, allocated: Resources, version: int, unschedulable: bool
    ) -> bool:
        """Refresh one node's figures (a binder answer's), then hold its placements over them."""
        if not self.table.set_figures(name, allocatable, allocated, version, unschedulable):
            return False
        self._refreshed(name, version)
        return True

    def _refreshed(self, node: str, version: int) -> None:
        kept = []
        for token in self._by_node.get(node, ()):
            if token.version is not None and version >= token.version:
                continue  # the record counts it
            self.table.take(node, token.request)
            kept.append(token)
        if kept:
            self._by_node[node] = kept
        else:
            self._by_node.pop(node, None)

    def _drop(self, token: Token) -> bool:
        tokens = self._by_node.get(token.node)
        if tokens is None:
            return False
        for i, t in enumerate(tokens):
            if t is token:
                del tokens[i]
                if not tokens:
                    del self._by_node[token.node]
                return True
        return False
