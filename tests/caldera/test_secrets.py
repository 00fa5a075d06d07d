"""The four processes as deploy/ runs them, on a Kubernetes cluster (the in-repo API server) and a
Redis that knows only caldera's ACL users: each process reads its own URL (its user and password)
from a file, as from its mounted Secret, and they schedule gangs and agent pods together. No
password shows in a log line, in any process's command line or environment (the agent scheduler's
Ray processes included), in Ray's own log files, anywhere in the store (the heartbeats included),
or in `caldera status`; `caldera audit` as the read-only user finds the store sound."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import kubernetes
import psutil
import pytest
import redis

from cluster.runtime.redis_server import RedisServer
from cluster.store.acl import Role, acl_file
from cluster.store.keys import Keys
from tests.caldera.kube_processes import kubeconfig, pod
from tests.kubeapi.fixtures import kube_api  # noqa: F401
from tests.kubeapi.server import KubeAPIServer

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "sec"


class Secured:
    """A redis-server with the ACL file of :data:`CLUSTER`, distinctive passwords, and an ``admin``
    the test reads everything with; each role's URL in a file of its own (mode 0600)."""

    def __init__(self, directory: Path) -> None:
        self.passwords = {role: f"Pw{role.value.replace('-', '')}{secrets.token_hex(12)}" for role in Role}
        self.admin = secrets.token_hex(12)
        aclfile = directory / "users.acl"
        aclfile.write_text(acl_file(Keys(CLUSTER), self.passwords) + f"user admin reset on >{self.admin} ~* +@all\n")
        self.server = RedisServer(aclfile=str(aclfile))
        self.files: dict[Role, Path] = {}
        for role in Role:
            path = directory / f"{role.value}.url"
            path.write_text(f"redis://{role.user}:{self.passwords[role]}@127.0.0.1:{self.server.port}/0\n")
            path.chmod(0o600)
            self.files[role] = path

    def everything(self) -> bytes:
        """Every key and value in the store, as the admin reads them."""
        client = redis.Redis(host="127.0.0.1", port=self.server.port, username="admin", password=self.admin)
        try:
            return b"\n".join(k + b"=" + (client.dump(k) or b"") for k in client.scan_iter(match="*"))
        finally:
            client.close()


@pytest.fixture
def ray_tmp() -> Iterator[str]:
    """Ray's temporary folder for the agent scheduler: short (Ray's socket paths live under it), removed after."""
    path = tempfile.mkdtemp(prefix="cs", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Secured]:
    running = Secured(tmp_path)
    try:
        yield running
    finally:
        running.server.stop()


def leaks(text: bytes | str, passwords: dict[Role, str]) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [role.user for role, pw in passwords.items() if pw.encode() in data]


def start(args: list[str], url_file: Path, ray_tmp: str, log: IO[bytes]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALDERA_REDIS_URL")}
    env.update({"CALDERA_REDIS_URL_FILE": str(url_file), "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": ray_tmp})
    return subprocess.Popen(
        [sys.executable, "-m", "caldera", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )


def caldera_command(*args: str, url_file: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CALDERA_REDIS_URL_FILE": str(url_file)}
    return subprocess.run(
        [sys.executable, "-m", "caldera", *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )


def in_process_table(passwords: dict[Role, str]) -> list[str]:
    """Processes whose command line or environment holds a password (all of this host's, as root
    sees them; those it may not read are skipped)."""
    found = []
    for proc in psutil.process_iter():
        try:
            seen = " ".join(proc.cmdline()) + "\n" + "\n".join(f"{k}={v}" for k, v in proc.environ().items())
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if leaks(seen, passwords):
            found.append(f"{proc.pid} {proc.cmdline()[:3]}")
    return found


async def test_the_processes_work_as_their_own_users_and_no_password_leaks(
    secured: Secured, kube_api: KubeAPIServer, ray_tmp: str, tmp_path: Path
) -> None:  # noqa: F811
    config = kubeconfig(tmp_path / "kubeconfig", kube_api.url)
    api = kubernetes.client.ApiClient(kube_api.configuration())
    core, custom = kubernetes.client.CoreV1Api(api), kubernetes.client.CustomObjectsApi(api)
    for i in range(3):
        core.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"}},
            }
        )
    custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "work",
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "work"},
            "spec": {"minMember": 2},
        },
    )
    names = [f"train-{i}" for i in range(2)] + [f"agent-{i}" for i in range(6)]
    for name in names[:2]:
        core.create_namespaced_pod("work", pod(name, "volcano", "2", gpu=2, group="train"))
    for name in names[2:]:
        core.create_namespaced_pod("work", pod(name, "agent-scheduler", "500m"))

    common = ["--kubeconfig", str(config), "--cluster", CLUSTER, "--metrics-port", "0", "--leader-elect"]
    commands = {
        Role.MIRROR: ["mirror", *common, "--watch-timeout", "5s"],
        Role.SHARDING: ["sharding", *common, "--shard-sync-period", "2s"],
        Role.BATCH_SCHEDULER: ["batch-scheduler", *common, "--schedule-period", "300ms"],
        Role.AGENT_SCHEDULER: ["agent-scheduler", *common, "--workers", "1"],
    }
    logs = {role: open(tmp_path / f"{role.value}.log", "wb") for role in commands}  # noqa: SIM115
    procs = {role: start(args, secured.files[role], ray_tmp, logs[role]) for role, args in commands.items()}
    try:
        deadline = time.monotonic() + 150
        while True:
            nodes = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("work").items}
            if all(nodes[n] for n in names):
                break
            dead = {
                r.value: (tmp_path / f"{r.value}.log").read_text() for r, p in procs.items() if p.poll() is not None
            }
            assert not dead and time.monotonic() < deadline, (dead, {n: v for n, v in nodes.items() if not v})
            await asyncio.sleep(0.3)
        deadline = time.monotonic() + 20  # every process has sent a heartbeat
        while (
            status := caldera_command(
                "status", "--cluster", CLUSTER, "-o", "json", url_file=secured.files[Role.READONLY]
            )
        ).stdout.count('"component"') < 4:
            assert status.returncode == 0 and time.monotonic() < deadline, status.stderr + status.stdout
            await asyncio.sleep(0.5)

        assert in_process_table(secured.passwords) == []
        assert leaks(secured.everything(), secured.passwords) == []
        table = caldera_command("status", "--cluster", CLUSTER, url_file=secured.files[Role.READONLY])
        assert table.returncode == 0 and "sharding" in table.stdout, table.stderr
        assert leaks(status.stdout + table.stdout + status.stderr + table.stderr, secured.passwords) == []
        audit = caldera_command("audit", "--cluster", CLUSTER, url_file=secured.files[Role.READONLY])
        assert (audit.returncode, audit.stdout.strip()) == (0, "audit: ok"), audit.stderr

        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for role, p in procs.items():
            p.wait(timeout=60)
            assert p.returncode == 0, (role, (tmp_path / f"{role.value}.log").read_text())
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs.values():
            log.close()
    for role in commands:
        text = (tmp_path / f"{role.value}.log").read_bytes()
        assert text, f"{role.value} logged nothing: the check below would prove nothing"
        assert leaks(text, secured.passwords) == [], f"{role.value}'s log"
    ray_files = [p for p in Path(ray_tmp).rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.suffix in (".out", ".err", ".log") for p in ray_files), "no Ray logs: the check would prove nothing"
    assert [str(p) for p in ray_files if leaks(p.read_bytes(), secured.passwords)] == []
