"""Who may do what in the store: one Redis ACL user per process (DESIGN.md §3).

Each process connects as its own user, allowed the commands its code sends and writes to
the keys its scripts write, nothing else. Redis 7 checks every ``redis.call`` inside a
script against the user that called the script, so running a script gives a user no key it
lacks: the mirror may call the binder's commit script, but it may not write
``binding:<scheduler>`` (a key only the binder writes), which the script checks before its
first write (a script's writes before an error are not undone); the sharding controller's
write of a pod is refused, and so is any write of ``caldera status``/``audit``'s read-only
user. Every user reads every key of its cluster (an informer lists whatever it follows).

The commands a script runs are read from its Lua source, so a script that starts using a
new command grants it to the users that run the script; the keys come from
:class:`~cluster.store.keys.Keys`. :func:`acl_file` renders the rules as a Redis ACL file
(``redis-server --aclfile``), with the passwords' SHA-256 only; ``caldera redis-acl`` writes it.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Mapping
from importlib import resources

import msgspec

from cluster.store.keys import Keys, Kind

# The scripts each writer runs, as (package, name) of their Lua files. The binder's live in
# binder/lua: named here, not imported, since cluster never imports binder. Every write
# script runs the prelude's version() and publish() (INCR, XADD) and its accounting.
_PRELUDE = (("cluster.store", "prelude"),)
_OBSERVED = tuple(
    ("cluster.store", n) for n in ("upsert_node", "delete_node", "upsert_pod", "delete_pod", "set_phase", "new_epoch")
)
_OBJECTS = (("cluster.store", "put_objects"),)
_BINDER = (("binder", "commit"), ("binder", "release"), ("binder", "unbound"))
_SIM_BIND = (("cluster.store", "pod_nodes"),)  # binding in the simulator reads where pods went

# What the code sends itself, outside scripts.
_CONNECT = ("ping", "select")  # a health check; SELECT for a URL naming a database other than 0
_READ = ("get", "smembers", "hget", "hgetall", "zrange", "xread")  # Store's reads; the informer's feed
_HEAD = ("multi", "exec")  # Store.head: the epoch and the version read together (the informers)
_CALL = ("evalsha", "script|load")  # Script.call: by SHA, loaded again after a NOSCRIPT
_BEAT = ("hset", "hdel")  # heartbeat: the process's field of `processes`, removed on exit
_LEASE = ("set", "eval", "get", "pexpire", "del")  # RedisLease: SET NX PX; renew and give up by script
_REASONS = ("hset", "hdel")  # Store.set_reasons / clear_reasons
_LISTS = ("rpush", "blpop", "del")  # the agent workers' inbox and outbox lists
_BOUND = ("zrem",)  # Binder.bound: a bound pod leaves its scheduler's binding set
_RESTARTS = ("info",)  # the mirror tells a restarted Redis by its run_id (INFO server)
_STATUS = ("scan",)  # caldera status finds the schedulers' pending indexes
_AUDIT = ("eval_ro",)  # caldera audit's consistent read, sent whole: no script is loaded

_CALLS = re.compile(r"redis\.call\(\s*'([A-Za-z_|]+)'")
_GLOB = re.compile(r"([*?\[\]\\])")


class Role(enum.StrEnum):
    """A user of the store: each process (by its component name) and the read-only commands."""

    MIRROR = "mirror"
    SHARDING = "sharding"
    BATCH_SCHEDULER = "batch-scheduler"
    AGENT_SCHEDULER = "agent-scheduler"
    READONLY = "readonly"  # caldera status, caldera audit

    @property
    def user(self) -> str:
        """The Redis user name."""
        return f"caldera-{self.value}"


class Grant(msgspec.Struct, frozen=True, kw_only=True):
    """One user's rules: the commands it may send, the key patterns it reads and writes, and
    those it only reads (Redis glob patterns, the cluster's prefix matched literally)."""

    role: Role
    commands: tuple[str, ...]
    writes: tuple[str, ...]
    reads: tuple[str, ...]

    def rules(self, password: str) -> str:
        """This user's line of an ACL file: defined from scratch, on, with the password's hash."""
        digest = hashlib.sha256(password.encode()).hexdigest()
        return " ".join(
            [
                f"user {self.role.user} reset on #{digest}",
                *(f"+{c}" for c in self.commands),
                *(f"~{p}" for p in self.writes),
                *(f"%R~{p}" for p in self.reads),
            ]
        )


def script_commands(package: str, name: str) -> set[str]:
    """The commands one Lua file of a package's ``lua/`` folder runs, lower case."""
    source = resources.files(package).joinpath(f"lua/{name}.lua").read_text()
    return {c.lower() for c in _CALLS.findall(source)}


def _commands(*groups: Iterable[str], scripts: Iterable[tuple[str, str]] = ()) -> tuple[str, ...]:
    found = {c for g in groups for c in g}
    for package, name in scripts:
        found |= script_commands(package, name)
    return tuple(sorted(found))


def _pattern(keys: Keys, key: str) -> str:
    """A key (or a key with ``*`` after the prefix) as a glob: the prefix's glob characters
    (a cluster may be named ``a*b``) are escaped, the rest is left as the pattern it is."""
    assert key.startswith(keys.prefix), key
    return _GLOB.sub(r"\\\1", keys.prefix) + key[len(keys.prefix) :]


def grants(keys: Keys) -> list[Grant]:
    """Every user's rules for one cluster, in :class:`Role` order."""
    every = keys.prefix + "*"
    # Every write script takes a version (INCR rv), appends to the feed (and the records an entry
    # carries to `recent`, the nodes' accounting to `recent_nodes`), and reads the epoch (creating it
    # when missing).
    versioned = [keys.rv, keys.feed, keys.recent, keys.recent_nodes, keys.epoch]
    allocations = [keys.node("*"), keys.pod("*"), keys.bound_to("*"), keys.pending("*"), keys.reasons("*")]
    binding = keys.binding("*")  # the binder's committed-but-unbound pods, per scheduler
    observed_kinds = (Kind.PODGROUP, Kind.QUEUE, Kind.PRIORITYCLASS, Kind.HYPERNODE, Kind.NAMESPACE)
    status_kinds = (Kind.PODGROUP, Kind.QUEUE, Kind.HYPERNODE)  # the batch scheduler writes their status

    def process(role: Role) -> list[str]:
        return [*versioned, keys.processes, keys.lease(role.value)]

    def objects(kinds: Iterable[Kind]) -> list[str]:
        return [k for kind in kinds for k in (keys.object(kind, "*"), keys.index(kind))]

    writes: dict[Role, list[str]] = {
        Role.MIRROR: [
            *process(Role.MIRROR),
            *allocations,
            keys.index(Kind.NODE),
            keys.index(Kind.POD),
            *objects(observed_kinds),
        ],
        Role.SHARDING: [*process(Role.SHARDING), keys.node("*"), *objects([Kind.NODESHARD])],
        Role.BATCH_SCHEDULER: [*process(Role.BATCH_SCHEDULER), *allocations, binding, *objects(status_kinds)],
        Role.AGENT_SCHEDULER: [
            *process(Role.AGENT_SCHEDULER),
            *allocations,
            binding,
            keys.agent_inbox("*", "*"),  # the workers' batches
            keys.agent_outbox("*", "*"),  # and their answers
        ],
        Role.READONLY: [],
    }
    writer = (*_CONNECT, *_READ, *_HEAD, *_CALL, *_BEAT, *_LEASE)
    binder = (*_PRELUDE, *_BINDER, *_SIM_BIND)
    commands: dict[Role, tuple[str, ...]] = {
        Role.MIRROR: _commands(writer, _RESTARTS, scripts=(*_PRELUDE, *_OBSERVED, *_OBJECTS)),
        Role.SHARDING: _commands(writer, scripts=(*_PRELUDE, *_OBJECTS)),
        Role.BATCH_SCHEDULER: _commands(writer, _REASONS, _BOUND, scripts=(*binder, *_OBJECTS)),
        Role.AGENT_SCHEDULER: _commands(writer, _REASONS, _BOUND, _LISTS, scripts=binder),
        Role.READONLY: _commands(_CONNECT, _READ, _STATUS, _AUDIT, scripts=[("cluster.store", "audit_dump")]),
    }
    return [
        Grant(
            role=role,
            commands=commands[role],
            writes=tuple(_pattern(keys, k) for k in writes[role]),
            reads=(_pattern(keys, every),),
        )
        for role in Role
    ]


def acl_file(keys: Keys, passwords: Mapping[Role, str]) -> str:
    """A Redis ACL file: the ``default`` user off with no rights, then one line per :class:`Role`."""
    missing = [r.user for r in Role if not passwords.get(r)]
    if missing:
        raise ValueError(f"passwords: none for {', '.join(missing)}")
    lines = ["user default reset", *(g.rules(passwords[g.role]) for g in grants(keys))]
    return "\n".join(lines) + "\n"
