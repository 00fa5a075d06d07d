"""The confs of Volcano's installer and docs load unchanged in ``caldera dry-run``.

Each file under ``confs/`` stands for one conf of Volcano's installer (the Helm chart's
config/*.conf and the ConfigMaps of the installer's manifests) or one distinct conf shape
of its docs; its first line names the Volcano file, and the text is ours, reproducing the
sections, plugins, switches and arguments found there. Each loads (exit 0), its pods are
placed (where the conf has allocate), and stderr names, once each, exactly the plugins
and actions of the conf that caldera does not implement yet — plus any warning the file
announces in a ``# warns:`` line. ``confs/refused/`` holds the doc confs Volcano itself
refuses (misspelt or removed names, fragments), each with the one line a ``# refused:``
line announces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).parent
REPO = HERE.parents[1]
CLUSTER = HERE / "cluster.yaml"
CONFS = sorted((HERE / "confs").glob("*.conf"))
REFUSED = sorted((HERE / "confs" / "refused").glob("*.conf"))
TIMEOUT = 60.0

# What caldera implements today (batch_scheduler/registry.py); everything else a conf names is Volcano's.
IMPLEMENTED_PLUGINS = {
    "priority",
    "gang",
    "conformance",
    "drf",
    "proportion",
    "capacity",
    "predicates",
    "nodeorder",
    "binpack",
    "deviceshare",
    "overcommit",
    "network-topology-aware",
    "task-topology",
}
IMPLEMENTED_ACTIONS = {"enqueue", "allocate", "backfill", "preempt", "reclaim"}


def dry_run(conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caldera", "dry-run", "--conf", str(conf), "-f", str(CLUSTER), "-o", "json"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def header(conf: Path, key: str) -> list[str]:
    """The values of the file's ``# key: value`` comment lines."""
    prefix = f"# {key}: "
    return [line[len(prefix) :].rstrip("\r") for line in conf.read_text().splitlines() if line.startswith(prefix)]


def unimplemented(conf: Path) -> list[str]:
    """The warning line for each Volcano plugin and action of the conf caldera does not implement, in conf order."""
    raw: dict[str, Any] = yaml.safe_load(conf.read_text())
    actions = [a.strip() for a in raw["actions"].split(",") if a.strip()]
    plugins = [p["name"] for tier in raw["tiers"] for p in tier["plugins"]]
    named = [("action", a) for a in dict.fromkeys(actions) if a not in IMPLEMENTED_ACTIONS]
    named += [("plugin", p) for p in plugins if p not in IMPLEMENTED_PLUGINS]
    return [
        f'caldera dry-run: warning: conf {kind} "{name}" is not implemented by caldera yet; it has no effect'
        for kind, name in named
    ]


def test_the_corpus_holds_every_installer_conf_and_the_doc_shapes() -> None:
    sources = {header(c, "Volcano")[0].split(" ")[0].rstrip(",") for c in CONFS + REFUSED}
    assert {
        "installer/helm/chart/volcano/config/volcano-scheduler.conf",
        "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf",
        "installer/helm/chart/volcano/config/agent-scheduler.conf",
        "installer/helm/chart/volcano/templates/agent_scheduler.yaml",
    } <= sources
    assert len([s for s in sources if s.startswith("docs/")]) >= 25
    assert all(c.read_text().startswith("# Volcano: ") for c in CONFS + REFUSED)


@pytest.mark.parametrize("conf", CONFS, ids=[c.stem for c in CONFS])
def test_a_volcano_conf_loads_and_schedules(conf: Path) -> None:
    done = dry_run(conf)
    assert done.returncode == 0, f"dry-run exited {done.returncode}:\n{done.stderr}"
    expected = unimplemented(conf) + [f"caldera dry-run: warning: {w}" for w in header(conf, "warns")]
    assert done.stderr.splitlines() == expected
    result: dict[str, Any] = json.loads(done.stdout)
    pods = {p["name"]: p for p in result["pods"]}
    assert set(pods) == {"train-worker-0", "train-worker-1", "notebook"}
    actions = {a.strip() for a in yaml.safe_load(conf.read_text())["actions"].split(",")}
    if "allocate" in actions:
        assert all(p["phase"] == "Bound" for p in pods.values()), pods
        assert pods["train-worker-0"]["node"] and pods["train-worker-1"]["node"]
    else:  # nothing places a pod, in Volcano either
        assert all(p["phase"] == "Pending" for p in pods.values()), pods


@pytest.mark.parametrize("conf", REFUSED, ids=[c.stem for c in REFUSED])
def test_a_doc_conf_volcano_refuses_too_is_one_line(conf: Path) -> None:
    done = dry_run(conf)
    assert done.returncode == 2
    refused = header(conf, "refused")[0]
    assert (done.stdout + done.stderr).strip().splitlines() == [f"caldera dry-run: error: --conf {conf}: {refused}"]
