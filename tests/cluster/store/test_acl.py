"""The store's ACL users (cluster/store/acl.py) on a real redis-server loaded with the ACL file they
render: each process's own code works under its own user, and the wrong user's writes are refused
and change nothing.

Redis 7.0 words a refusal inside a script as ``ERR The user executing the script can't …`` and a
refused command as ``NOPERM …``; :func:`refused` accepts both (newer servers say NOPERM for both).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest
import redis
import redis.asyncio as aioredis

from binder.commit import Binder
from binder.results import Committed, Placement
from cluster.model.core import Namespace, ObjectMeta, PriorityClass
from cluster.model.volcano import NodeShard, PodGroup, Queue
from cluster.runtime import heartbeat
from cluster.runtime.redis_server import RedisServer
from cluster.sim.pods import make_podgroup
from cluster.store.acl import Role, acl_file, grants, script_commands
from cluster.store.audit import audit
from cluster.store.client import connect
from cluster.store.keys import Keys, Kind
from cluster.store.lease import RedisLease
from cluster.store.store import Delete, Own, Put, Store
from sharding.config import parse_scheduler_configs
from sharding.controller import ControllerConfig, ShardingController
from tests.builders import hypernode, node, pod

KEYS = Keys("acl")
PROCESSES = [Role.MIRROR, Role.SHARDING, Role.BATCH_SCHEDULER, Role.AGENT_SCHEDULER]


class AclRedis:
    """A redis-server with the users of :data:`KEYS`'s cluster, plus an ``admin`` for the tests' own
    set-up and checks (no such user is in what acl.py renders)."""

    def __init__(self, directory: Path, keys: Keys = KEYS) -> None:
        self.passwords = {role: secrets.token_hex(16) for role in Role}
        self.admin_password = secrets.token_hex(16)
        path = directory / "users.acl"
        path.write_text(acl_file(keys, self.passwords) + f"user admin reset on >{self.admin_password} ~* &* +@all\n")
        self.server = RedisServer(aclfile=str(path))

    def url(self, role: Role) -> str:
        return f"redis://{role.user}:{self.passwords[role]}@127.0.0.1:{self.server.port}/0"

    @property
    def admin_url(self) -> str:
        return f"redis://admin:{self.admin_password}@127.0.0.1:{self.server.port}/0"


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclRedis]:
    running = AclRedis(tmp_path_factory.mktemp("acl"))
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture
async def stores(acl_redis: AclRedis) -> AsyncIterator[dict[Role, Store]]:
    """One store per user, on an emptied server."""
    admin = redis.Redis.from_url(acl_redis.admin_url)
    admin.flushall()
    admin.close()
    out = {role: Store(connect(acl_redis.url(role)), KEYS) for role in Role}
    yield out
    for s in out.values():
        await s.client.aclose()


def refused(error: BaseException) -> bool:
    """The error is Redis refusing the user (a command, or a key inside a script)."""
    text = str(error)
    return isinstance(error, redis.exceptions.NoPermissionError) or any(
        needle in text for needle in ("NOPERM", "can't access", "can't run this command")
    )


async def snapshot(acl_redis: AclRedis) -> dict[bytes, object]:
    """Every key and its value, read as the admin: what a refused call must leave unchanged."""
    admin = aioredis.Redis.from_url(acl_redis.admin_url)
    try:
        out: dict[bytes, object] = {}
        async for key in admin.scan_iter(match="*"):
            out[key] = await admin.dump(key)
        return out
    finally:
        await admin.aclose()


def queue(name: str) -> Queue:
    return msgspec.convert({"metadata": {"name": name}, "spec": {"weight": 1}}, Queue)


async def test_only_the_users_with_their_passwords_get_in(acl_redis: AclRedis, stores: dict[Role, Store]) -> None:
    for role in Role:
        assert await stores[role].client.ping()
    anonymous = aioredis.Redis.from_url(acl_redis.server.url)
    default = aioredis.Redis.from_url(f"redis://default:x@127.0.0.1:{acl_redis.server.port}/0")
    wrong = aioredis.Redis.from_url(f"redis://caldera-mirror:wrong@127.0.0.1:{acl_redis.server.port}/0")
    try:
        for client in (anonymous, default, wrong):
            with pytest.raises(redis.AuthenticationError):
                await client.ping()
    finally:
        for client in (anonymous, default, wrong):
            await client.aclose()


async def test_the_mirror_writes_what_it_observes(stores: dict[Role, Store]) -> None:
    mirror, reader = stores[Role.MIRROR], stores[Role.READONLY]
    bound = pod("bound", cpu="2", node="n1", phase="Running", scheduler="other")
    pending = pod("pending", scheduler="volcano", group="g")
    await mirror.upsert_nodes([node("n1"), node("n2")])
    await mirror.upsert_pods([bound, pending])
    pc = PriorityClass(metadata=ObjectMeta(name="high"), value=1000)
    ns = Namespace(metadata=ObjectMeta(name="work", labels={"team": "a"}))
    await mirror.write(
        [Put(make_podgroup("g", min_member=1)), Put(queue("q")), Put(pc), Put(ns), Put(hypernode("h", 1, nodes=["n1"]))]
    )
    await mirror.write([Delete(Kind.QUEUE, "q")])
    await mirror.delete_pods([bound.uid])
    await mirror.delete_nodes(["n2"])
    assert [n.name for n in await reader.list_nodes()] == ["n1"]
    assert [p.uid for p in await reader.list_pods()] == [pending.uid]
    assert set(await reader.list_objects(PodGroup)) == {"default/g"}
    assert await reader.list_objects(Queue) == {}
    assert await audit(reader) == []


async def test_the_sharding_controller_shards_under_its_own_user(stores: dict[Role, Store]) -> None:
    await stores[Role.MIRROR].upsert_nodes([node(f"n{i}", cpu="10") for i in range(6)])
    configs = parse_scheduler_configs("volcano:volcano:0.0:0.6:false:2:100,agent-scheduler:agent:0.7:1.0:true:2:100")
    controller = ShardingController(stores[Role.SHARDING], ControllerConfig(configs=configs, sync_period=60.0))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        deadline = time.monotonic() + 10
        while len(await stores[Role.READONLY].list_objects(NodeShard)) < 2:
            assert not task.done(), task.exception()
            assert time.monotonic() < deadline, "no NodeShards written"
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    owners = await stores[Role.READONLY].owners()
    assert sorted(owners.values()) == ["agent-scheduler"] * 2 + ["volcano"] * 4


async def test_the_schedulers_commit_release_and_explain_under_their_own_users(stores: dict[Role, Store]) -> None:
    mirror, reader = stores[Role.MIRROR], stores[Role.READONLY]
    gang = [pod(f"g{i}", cpu="2", scheduler="volcano", group="g") for i in range(2)]
    agent_pod = pod("a", scheduler="agent-scheduler")
    await mirror.upsert_nodes([node("n1")])
    await mirror.upsert_pods([*gang, agent_pod])
    batch_store, agent_store = stores[Role.BATCH_SCHEDULER], stores[Role.AGENT_SCHEDULER]

    batch = Binder(batch_store.client, KEYS, "volcano")
    placed = await batch.commit([Placement(uid=p.uid, node="n1", request=p.request(), version=0) for p in gang], True)
    assert all(isinstance(r, Committed) for r in placed), placed
    assert await batch.release([gang[0].uid]) == [True]
    await batch_store.set_reasons("volcano", {gang[0].uid: "gang short by 1"})
    await batch_store.clear_reasons("volcano", [gang[0].uid])
    group = make_podgroup("g", min_member=2)
    await batch_store.write(
        [Put(msgspec.structs.replace(group, status=msgspec.structs.replace(group.status, running=1)))]
    )
    await batch_store.write([Put(queue("default")), Put(hypernode("h", 1, nodes=["n1"]))])

    agent = Binder(agent_store.client, KEYS, "agent-scheduler")
    [r] = await agent.commit([Placement(uid=agent_pod.uid, node="n1", request=agent_pod.request(), version=0)])
    assert isinstance(r, Committed), r
    assert await agent.release([agent_pod.uid]) == [True]
    await agent_store.set_reasons("agent-scheduler", {agent_pod.uid: "fits nowhere"})
    # The workers' inbox and outbox, as agent_scheduler/actors.py uses them.
    inbox = KEYS.agent_inbox("w0", "t0")
    await agent_store.client.rpush(inbox, b"batch")
    assert await agent_store.client.blpop([inbox], timeout=1) == (inbox.encode(), b"batch")
    await agent_store.client.delete(inbox)

    records = {r.uid: r for r in await reader.list_pods()}
    assert records[gang[0].uid].node == "" and records[gang[1].uid].node == "n1"
    assert (await reader.list_objects(PodGroup))["default/g"].status.running == 1
    assert await reader.reasons("agent-scheduler") == {agent_pod.uid: "fits nowhere"}
    assert await audit(reader) == []


async def test_each_process_beats_and_takes_its_own_lease_only(stores: dict[Role, Store]) -> None:
    for role in PROCESSES:
        client = stores[role].client
        await heartbeat.beat(
            client, KEYS, heartbeat.Beat(component=role.value, holder="h", leading=True, at=time.time())
        )
        lease = RedisLease(client, KEYS.lease(role.value), "h", ttl=5, renew_every=1)
        assert await lease.try_acquire()
        stop = asyncio.Event()
        stop.set()
        await lease.run(stop)  # gives the lease up
    assert [b.component for b in await heartbeat.beats(stores[Role.READONLY].client, KEYS)] == sorted(
        r.value for r in PROCESSES
    )
    # Another process's lease is not this one's to take: it could stop that process acting.
    with pytest.raises(redis.ResponseError) as e:
        await RedisLease(stores[Role.MIRROR].client, KEYS.lease("sharding"), "h", ttl=5, renew_every=1).try_acquire()
    assert refused(e.value)


async def test_the_sharding_controller_cannot_write_a_pod(acl_redis: AclRedis, stores: dict[Role, Store]) -> None:
    await stores[Role.MIRROR].upsert_nodes([node("n1")])
    victim = pod("p", node="n1", phase="Running")
    await stores[Role.MIRROR].upsert_pods([victim])
    before = await snapshot(acl_redis)
    sharding = stores[Role.SHARDING]
    for attempt in (
        sharding.upsert_pods([pod("new")]),
        sharding.delete_pods([victim.uid]),
        sharding.client.hset(KEYS.pod(victim.uid), "node", "n2"),
        sharding.client.delete(KEYS.pod(victim.uid)),
    ):
        with pytest.raises(redis.ResponseError) as e:
            await attempt
        assert refused(e.value), e.value
    assert await snapshot(acl_redis) == before
    # What it does write: owners and NodeShards.
    shard = msgspec.convert({"metadata": {"name": "volcano"}, "spec": {"nodesDesired": ["n1"]}}, NodeShard)
    await sharding.write([Own("n1", "volcano"), Put(shard)])
    assert await stores[Role.READONLY].owners() == {"n1": "volcano"}


async def test_the_mirror_cannot_run_the_binders_scripts(acl_redis: AclRedis, stores: dict[Role, Store]) -> None:
    """It may write nodes and pods, as the binder's scripts do, but not the binding set: the commit
    is refused before it writes anything, the release at its first write."""
    mirror = stores[Role.MIRROR]
    await mirror.upsert_nodes([node("n1")])
    pending, bound = pod("p", scheduler="volcano"), pod("b", scheduler="volcano")
    await mirror.upsert_pods([pending, bound])
    [r] = await Binder(stores[Role.BATCH_SCHEDULER].client, KEYS, "volcano").commit(
        [Placement(uid=bound.uid, node="n1", request=bound.request(), version=0)]
    )
    assert isinstance(r, Committed)
    before = await snapshot(acl_redis)
    binder = Binder(mirror.client, KEYS, "volcano")
    with pytest.raises(redis.exceptions.NoPermissionError):
        await binder.commit([Placement(uid=pending.uid, node="n1", request=pending.request(), version=0)])
    with pytest.raises(redis.ResponseError) as e:
        await binder.release([bound.uid])
    assert refused(e.value), e.value
    assert await snapshot(acl_redis) == before
    assert await audit(stores[Role.READONLY]) == []


async def test_the_mirror_cannot_write_what_schedulers_and_the_sharding_controller_own(
    acl_redis: AclRedis, stores: dict[Role, Store]
) -> None:
    mirror = stores[Role.MIRROR]
    await mirror.upsert_nodes([node("n1")])
    before = await snapshot(acl_redis)
    shard = msgspec.convert({"metadata": {"name": "volcano"}, "spec": {"nodesDesired": ["n1"]}}, NodeShard)
    for attempt in (
        mirror.client.zadd(KEYS.prefix + "binding:volcano", {"uid": 1}),
        mirror.client.rpush(KEYS.agent_inbox("w0", "t"), b"x"),
        mirror.client.hset(KEYS.object(Kind.NODESHARD, "volcano"), "spec", b"x"),
    ):
        with pytest.raises(redis.ResponseError) as e:
            await attempt
        assert refused(e.value), e.value
    assert await snapshot(acl_redis) == before
    with pytest.raises(redis.ResponseError) as e:
        await mirror.write([Put(shard)])
    assert refused(e.value), e.value
    assert await stores[Role.READONLY].list_objects(NodeShard) == {}


async def test_the_read_only_user_writes_nothing(acl_redis: AclRedis, stores: dict[Role, Store]) -> None:
    await stores[Role.MIRROR].upsert_nodes([node("n1")])
    p = pod("p", scheduler="volcano")
    await stores[Role.MIRROR].upsert_pods([p])
    before = await snapshot(acl_redis)
    reader = stores[Role.READONLY]
    binder = Binder(reader.client, KEYS, "volcano")
    for attempt in (
        reader.upsert_nodes([node("n2")]),
        reader.delete_pods([p.uid]),
        reader.write([Own("n1", "volcano")]),
        reader.set_reasons("volcano", {p.uid: "x"}),
        binder.commit([Placement(uid=p.uid, node="n1", request=p.request(), version=0)]),
        heartbeat.beat(reader.client, KEYS, heartbeat.Beat(component="x", holder="h", leading=True, at=0.0)),
        reader.client.set(KEYS.rv, 99),
        reader.client.eval("return redis.call('DEL', KEYS[1])", 1, KEYS.node("n1")),
        reader.client.flushall(),
    ):
        with pytest.raises(redis.ResponseError) as e:
            await attempt
        assert refused(e.value), e.value
    # Writes inside a read-only script are refused by Redis itself.
    with pytest.raises(redis.ResponseError):
        await reader.client.eval_ro("return redis.call('DEL', KEYS[1])", 1, KEYS.node("n1"))
    assert await snapshot(acl_redis) == before
    assert await audit(reader) == []  # what it is for


async def test_a_cluster_named_with_glob_characters_grants_its_own_keys_only(tmp_path: Path) -> None:
    starred = Keys("a*")
    running = AclRedis(tmp_path, starred)
    try:
        mirror = Store(connect(running.url(Role.MIRROR)), starred)
        other = Store(mirror.client, Keys("ab"))
        await mirror.upsert_nodes([node("n1")])
        with pytest.raises(redis.ResponseError) as e:
            await other.upsert_nodes([node("n1")])
        assert refused(e.value), e.value
        await mirror.client.aclose()
    finally:
        running.server.stop()


def test_every_command_a_users_scripts_run_is_granted_and_the_read_only_user_has_no_write_command() -> None:
    by_role = {g.role: set(g.commands) for g in grants(KEYS)}
    for name in ("upsert_node", "delete_node", "upsert_pod", "delete_pod", "set_phase", "put_objects", "prelude"):
        assert script_commands("cluster.store", name) <= by_role[Role.MIRROR], name
    for name in ("commit", "release"):
        for role in (Role.BATCH_SCHEDULER, Role.AGENT_SCHEDULER):
            assert script_commands("binder", name) <= by_role[role], (name, role)
    assert script_commands("cluster.store", "audit_dump") <= by_role[Role.READONLY]
    writes = {"set", "hset", "hdel", "del", "incr", "xadd", "sadd", "srem", "zadd", "zrem", "hincrby", "evalsha"}
    assert by_role[Role.READONLY] & writes == set()
    assert not {g.role for g in grants(KEYS) if g.role is Role.READONLY and g.writes}


def test_the_acl_file_needs_every_password_and_holds_only_their_hashes() -> None:
    passwords = {role: f"pw-{role.value}" for role in Role}
    text = acl_file(KEYS, passwords)
    assert text.splitlines()[0] == "user default reset"
    assert not any(pw in text for pw in passwords.values())
    with pytest.raises(ValueError, match="caldera-readonly"):
        acl_file(KEYS, {**passwords, Role.READONLY: ""})
