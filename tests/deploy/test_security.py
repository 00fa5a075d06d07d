"""deploy/'s containers run as a numeric non-root user on a read-only root filesystem with no
privileges, and writing only to their emptyDir volumes — checked on every container of every
workload, and, for the agent scheduler (Ray: the one process that writes files), by running it here
as its Deployment says: as that user, with every mount read-only but fresh filesystems at its
emptyDir mount paths (a Linux mount namespace; needs root and util-linux's unshare and setpriv)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from cluster.runtime.redis_server import RedisServer
from cluster.store.store import Store
from tests.builders import node, pod
from tests.deploy.manifests import DEPLOY, ROOT, Obj, label, one

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet", "Pod")


def _pod_spec(obj: Obj) -> Obj:
    if obj["kind"] == "Pod":
        return obj["spec"]  # type: ignore[no-any-return]
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return obj["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def _image_uid() -> int:
    users = [line.split()[1] for line in (DEPLOY / "Dockerfile").read_text().splitlines() if line.startswith("USER ")]
    return int(users[-1])


def test_every_container_runs_unprivileged_as_a_numeric_user_on_a_read_only_root(rendered: list[Obj]) -> None:
    workloads = [o for o in rendered if o["kind"] in WORKLOADS]
    assert {label(o) for o in workloads} >= {
        "Deployment/caldera-mirror",
        "Deployment/caldera-sharding",
        "Deployment/caldera-batch-scheduler",
        "Deployment/caldera-agent-scheduler",
        "Deployment/caldera-redis",
    }
    for workload in workloads:
        pod = _pod_spec(workload)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            where = f"{label(workload)} container {c['name']}"
            sc = c.get("securityContext", {})
            assert sc.get("runAsNonRoot") is True, where
            assert isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("capabilities") == {"drop": ["ALL"]}, where
            assert sc.get("seccompProfile") == {"type": "RuntimeDefault"}, where
            assert not sc.get("privileged"), where
            for mount in c.get("volumeMounts", []):
                volume = volumes[mount["name"]]
                writable = "emptyDir" in volume and not mount.get("readOnly")
                assert writable or mount.get("readOnly") or "emptyDir" not in volume, where
                assert "emptyDir" in volume or mount.get("readOnly") or set(volume) & {"secret", "configMap"}, (
                    f"{where}: {mount['mountPath']} is writable and not an emptyDir"
                )
            if c["image"].startswith("caldera"):
                assert sc["runAsUser"] == _image_uid(), f"{where}: not the image's user"


def test_the_image_runs_as_its_numeric_user_with_no_writable_home_needed() -> None:
    lines = [ln.strip() for ln in (DEPLOY / "Dockerfile").read_text().splitlines() if ln.strip()]
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1].isdigit() and int(users[-1]) >= 1000
    # Python writes no .pyc files beside the code (the root filesystem is read-only).
    assert any("PYTHONDONTWRITEBYTECODE=1" in ln for ln in lines)


# -- the agent scheduler on a read-only root --------------------------------------------------------------


def _sandbox_script(
    writable: list[str], hidden: list[tuple[str, list[str]]], uid: int, needed: Sequence[str] = ()
) -> str:
    """A shell script for ``unshare -m``: keep the paths under a folder other users cannot enter
    reachable (a tmpfs over that folder, the paths bound back in), put a fresh tmpfs at each
    writable path (a ``needed`` path under one — a checkout in /tmp — bound back in), make every
    other mount read-only, and run the command as ``uid``."""
    lines = ["set -e", "mount -t tmpfs -o mode=0700 tmpfs /mnt"]
    under = [p for p in needed if any(p == w or p.startswith(w.rstrip("/") + "/") for w in writable)]
    under = [p for p in under if not any(p != q and p.startswith(q + "/") for q in under)]  # the topmost
    for n, path in enumerate(under):
        lines += [f"mkdir -p /mnt/w{n}", f"mount --bind '{path}' /mnt/w{n}"]
    for i, (folder, paths) in enumerate(hidden):
        for j, path in enumerate(paths):
            lines += [f"mkdir -p /mnt/k{i}.{j}", f"mount --bind '{path}' /mnt/k{i}.{j}"]
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs '{folder}'")
        for j, path in enumerate(paths):
            lines += [f"mkdir -p '{path}'", f"mount --move /mnt/k{i}.{j} '{path}'"]
    lines += [f"mount -t tmpfs -o mode=1777 tmpfs '{p}'" for p in writable]
    for n, path in enumerate(under):
        lines += [f"mkdir -p '{path}'", f"mount --move /mnt/w{n} '{path}'"]
    keep = "|".join(["/proc", "/proc/*", "/sys", "/sys/*", "/dev", "/dev/pts", *writable])
    lines += [
        "for m in $(awk '{print $2}' /proc/self/mounts | sort -u); do",
        f"  case $m in {keep}) continue;; esac",  # the writable tmpfs stay writable, what is in them not
        '  mount -o remount,bind,ro "$m" 2>/dev/null || true',
        "done",
    ]
    lines.append(f'exec setpriv --reuid={uid} --regid={uid} --clear-groups "$@"')
    return "\n".join(lines)


def _hidden(paths: list[str]) -> list[tuple[str, list[str]]]:
    """For each path, its topmost ancestor other users cannot enter, if any: (that folder, paths)."""
    out: dict[str, list[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for i in range(2, len(parts)):
            folder = str(Path(*parts[:i]))
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                out.setdefault(folder, []).append(path)
                break
    return list(out.items())


def _can_sandbox() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a mount namespace with a read-only root"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"needs util-linux's {tool}"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        return f"unshare -m is refused here: {probe.stderr.decode().strip()}"
    return None


async def test_the_agent_scheduler_runs_on_a_read_only_root_as_its_deployment_says(
    rendered: list[Obj], store: Store, redis_server: RedisServer
) -> None:
    why = _can_sandbox()
    if why is not None:
        pytest.skip(why)
    pod_spec = one(rendered, "Deployment", "caldera-agent-scheduler")["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    writable = sorted(m["mountPath"] for m in container["volumeMounts"] if "emptyDir" in volumes[m["name"]])
    assert writable == ["/dev/shm", "/tmp"]
    uid = container["securityContext"]["runAsUser"]
    needed = sorted({os.path.realpath(sys.base_prefix), sys.prefix, str(ROOT)})
    script = _sandbox_script(writable, _hidden(needed), uid, needed)

    await store.upsert_nodes([node("n1", cpu="16")])
    pods = [pod(f"a{i}", scheduler="agent-scheduler") for i in range(5)]
    await store.upsert_pods(pods)
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",  # as the image sets it
        "HOME": str(ROOT),  # a home it cannot write, as the image's on a read-only root
    }
    args = ["--redis-url", redis_server.url, "--cluster", store.keys.cluster, "--workers", "1", "--metrics-port", "0"]
    proc = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sandbox"]
        + [sys.executable, "-m", "caldera", "agent-scheduler", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not all(r.node for r in await store.list_pods()):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the agent scheduler bound nothing on a read-only root"
            await asyncio.sleep(0.3)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert any("raylet" in " ".join(c.cmdline()) for c in children), "no local Ray started"
        assert psutil.Process(proc.pid).uids().real == uid
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
