"""The periodic batch scheduler: Volcano's session, actions and plugins over caldera's node view.

``main`` starts the process; ``cache`` follows the feed; ``cycle`` runs a session every
period and does its I/O (commit, bind, evict, write-back, metrics). The decision is pure:
``session`` (built by ``session_input`` from ``tasks``, ``jobs`` and ``queues``), changed
only by a ``statement``; ``chooser`` picks nodes fast. Plugins see the session through
``framework`` (extension-point Protocols, the read-only view, the registry's types) and
answer with ``votes`` and ``reasons``; ``plugin_set`` combines them tier by tier. ``conf``
reads a Volcano conf against the value ``registry.default_registry()`` builds;
``actions/`` and ``plugins/`` hold one module each.
"""
