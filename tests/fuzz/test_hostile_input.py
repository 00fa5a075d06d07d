"""Hostile input, fuzzed: what a user feeds caldera is refused in one line naming it, or taken whole.

Each strategy starts from a valid input (a manifest of each kind, Volcano's Helm conf, a
trace) and breaks one thing in it — a value replaced by another type, a huge or negative
number, a huge exponent, unicode digits, deep nesting, a key dropped or added — then runs
the parser the command runs. Accepted: the input is taken (and what the later steps do with
it does not raise), or refused with the parser's error, each line one line. Anything else —
another exception, a multi-line message — is a defect. A hang fails on the suite's timeout.
The number of examples is bounded to keep ``make test`` short.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from batch_scheduler.conf import ConfError, parse_conf
from batch_scheduler.registry import default_registry
from caldera.commands.dry_run import load_objects
from cluster.model.core import Node, Pod
from cluster.model.devices import node_allocatable
from cluster.model.manifests import ManifestErrors
from cluster.model.quantity import MAX_INT64, QuantityError, parse_amount
from cluster.sim.trace import read_nodes, read_pods, task_of, to_pod

# Bounded for `make test`; CALDERA_FUZZ_EXAMPLES=5000 hunts longer.
COUNT = int(os.environ.get("CALDERA_FUZZ_EXAMPLES", "120"))
EXAMPLES = settings(max_examples=COUNT, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

ODD_TEXT = [
    "1e16",
    "1E400",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "-1",
    "0.0000000001",
    "1e-400",
    "0x10",
    "١٢",
    "²",
    "∞",
    "nan",
    "1Ki",
    "1.5Pi",
    "12345678901234567890Ei",
    "",
    " ",
    "\u0000",
    "a" * 300,
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(ODD_TEXT),
    st.text(max_size=10),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON-like tree, the root included."""
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths(v, (*at, i))
    return out


@st.composite
def broken(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with one thing broken at a random place (or left as it is, now and then)."""
    obj = copy.deepcopy(base)
    path = draw(st.sampled_from(paths(obj)[1:]))
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "nest", "keep"]))
    if action == "replace":
        parent[key] = draw(VALUES)
    elif action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
    elif action == "nest":
        value: Any = parent[key]
        for _ in range(draw(st.integers(min_value=1, max_value=60))):
            value = [value]
        parent[key] = value
    return obj


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "default",
        "labels": {"app": "x"},
        "annotations": {"scheduling.volcano.sh/queue-name": "q", "volcano.sh/gpu-index": "0"},
    },
    "spec": {
        "schedulerName": "volcano",
        "priorityClassName": "high",
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                }
            }
        },
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                    "limits": {"nvidia.com/gpu": "1", "volcano.sh/vgpu-memory": "1000"},
                },
            }
        ],
    },
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "n1",
        "labels": {"zone": "a"},
        "annotations": {"volcano.sh/node-vgpu-register": "GPU-a,10,16384,NVIDIA-A100,true,hami-core:"},
    },
    "spec": {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {
            "cpu": "8",
            "memory": "16Gi",
            "pods": "110",
            "nvidia.com/gpu": "1",
            "volcano.sh/vgpu-number": "10",
            "volcano.sh/vgpu-memory": "16384",
            "volcano.sh/vgpu-cores": "100",
        }
    },
}
QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "q"},
    "spec": {"weight": 1, "capability": {"cpu": "8"}, "deserved": {"cpu": "4"}, "parent": "root"},
}
PRIORITY = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}
PODGROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "default"},
    "spec": {"minMember": 2, "queue": "q", "minResources": {"cpu": "2"}, "networkTopology": {"mode": "hard"}},
}
JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "default"},
    "spec": {
        "minAvailable": 2,
        "queue": "q",
        "schedulerName": "volcano",
        "tasks": [
            {
                "name": "t",
                "replicas": 2,
                "template": {
                    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
                },
            }
        ],
    },
}
KINDS = {"Pod": POD, "Node": NODE, "Queue": QUEUE, "PodGroup": PODGROUP, "Job": JOB}


def one_line(lines: list[str]) -> None:
    assert lines and all(line and "\n" not in line for line in lines), lines


@pytest.mark.parametrize("kind", sorted(KINDS))
@EXAMPLES
@given(data=st.data())
def test_a_broken_manifest_is_refused_in_one_line_or_taken_whole(
    tmp_path: Path, kind: str, data: st.DataObject
) -> None:
    doc = data.draw(broken(KINDS[kind]))
    others = [d for d in (NODE, QUEUE, PRIORITY) if d is not KINDS[kind]]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([*others, doc], allow_unicode=True))
    try:
        objects, _, warnings = load_objects([str(path)])
    except ManifestErrors as e:
        event("refused")
        one_line(list(e.lines))
        return
    event("taken")
    if warnings:
        one_line(warnings)
    for o in objects:  # what the dry run does next with them must not raise
        if isinstance(o, Pod):
            o.request()
        elif isinstance(o, Node):
            node_allocatable(o)


CONF = """\
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
    arguments: {overcommit-factor: 1.2}
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments: {binpack.weight: 10, binpack.cpu: 2, binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 5}
  - name: deviceshare
    arguments: {deviceshare.SchedulePolicy: fgd, deviceshare.FGDTypicalPods: "cpu=1,gpus=1,milli=500,share=1"}
configurations:
- name: enqueue
  arguments: {overcommit-factor: 1.5}
"""


@EXAMPLES
@given(data=st.data())
def test_a_broken_scheduler_conf_is_refused_in_one_line_or_loads(data: st.DataObject) -> None:
    conf = data.draw(broken(yaml.safe_load(CONF)))
    try:
        parse_conf(yaml.safe_dump(conf, allow_unicode=True), default_registry()).build()
    except ConfError as e:
        event("refused")
        one_line([str(e)])
        return
    event("taken")


NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,T4\nn1,64000,262144,8,V100M16\n"
PODS_CSV = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "p0,4000,8192,1,500,,LS,Running,0,100,0\n"
    "p1,8000,16384,2,1000,V100M16|V100M32,BE,Running,10,,10\n"
)
CELLS = st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=8), st.integers(-(2**70), 2**70).map(str))


@st.composite
def broken_csv(draw: st.DrawFn, text: str) -> str:
    rows = [line.split(",") for line in text.strip().split("\n")]
    r = draw(st.integers(min_value=0, max_value=len(rows) - 1))
    c = draw(st.integers(min_value=0, max_value=len(rows[r]) - 1))
    action = draw(st.sampled_from(["cell", "cell", "drop", "extra"]))
    if action == "cell":
        rows[r][c] = draw(CELLS).replace(",", ";").replace("\n", " ").replace("\r", " ")
    elif action == "drop":
        del rows[r][c]
    else:
        rows[r].append("x")
    return "\n".join(",".join(row) for row in rows) + "\n"


@EXAMPLES
@given(data=st.data())
def test_a_broken_trace_is_refused_in_one_line_or_read_whole(tmp_path: Path, data: st.DataObject) -> None:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    broken_nodes = data.draw(st.booleans())
    nodes.write_text(data.draw(broken_csv(NODES_CSV)) if broken_nodes else NODES_CSV)
    pods.write_text(PODS_CSV if broken_nodes else data.draw(broken_csv(PODS_CSV)))
    try:
        for n in read_nodes(nodes):
            node_allocatable(n)
        for tp in read_pods(pods):
            task_of(tp)
            to_pod(tp, "volcano").request()
    except ValueError as e:
        event("refused")
        one_line([str(e)])
        return
    event("taken")


QUANTITY = st.one_of(
    st.sampled_from(ODD_TEXT),
    st.text(alphabet="0123456789+-.eEkKMGTPiumn ١²", max_size=14),
    st.builds(
        lambda m, e, s: f"{m}e{e}{s}",
        st.integers(-(10**30), 10**30),
        st.integers(-500, 500),
        st.sampled_from(["", "m", "Ki", "G"]),
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**80), 2**80),
)


@settings(max_examples=4 * COUNT, deadline=None)
@given(value=QUANTITY, resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]))
def test_a_quantity_is_an_int64_amount_or_one_line_naming_the_field(value: Any, resource: str) -> None:
    try:
        amount = parse_amount(resource, value, field="spec.x")
    except QuantityError as e:
        assert str(e).startswith("spec.x: "), e
        one_line([str(e)])
        return
    assert -MAX_INT64 - 1 <= amount <= MAX_INT64


# The defects these strategies found, each pinned by its own case.


def test_a_field_name_holding_a_newline_is_named_on_one_line() -> None:
    from cluster.model.manifests import read_manifests

    _, errors = read_manifests(yaml.safe_dump({**QUEUE, "sp\nec": 1}))
    assert len(errors) == 1 and "sp\\nec" in errors[0] and "\n" not in errors[0], errors
    with pytest.raises(ConfError) as e:
        parse_conf('actions: "allocate"\ntiers: []\n"x\\ny": 1\n', default_registry())
    assert "x\\ny" in str(e.value) and "\n" not in str(e.value)


def test_a_node_claiming_more_cards_than_are_tracked_does_not_enumerate_them(tmp_path: Path) -> None:
    """2**51 GPUs on a node that shares them in thousandths once meant a list of 2**51 cards."""
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,2251799813685247,T4\n")
    [node] = read_nodes(tmp_path / "nodes.csv")
    assert not any(r.startswith("gpu.caldera.io/") for r in node_allocatable(node).names())
    manifest = copy.deepcopy(NODE)
    manifest["metadata"]["annotations"] = {}
    manifest["status"]["allocatable"] = {"cpu": "8", "nvidia.com/gpu": "100000", "caldera.io/gpu-milli": "100000000"}
    path = tmp_path / "n.yaml"
    path.write_text(yaml.safe_dump(manifest))
    with pytest.raises(ManifestErrors) as e:
        load_objects([str(path)])
    assert e.value.lines == [
        f"{path}: document 0 (Node n1): status.allocatable.nvidia.com/gpu: 100000 cards (at most 64 are tracked "
        "one by one; this node's are not, its totals count)"
    ]


def test_card_annotations_with_other_digits_are_no_cards() -> None:
    from cluster.model.devices import CARDS_ANNOTATION, GPU_INDEX, pod_cards
    from tests.builders import gpu_pod

    for notes in ({CARDS_ANNOTATION: "²=500"}, {CARDS_ANNOTATION: "0=" + "9" * 5000}, {GPU_INDEX: "١"}):
        pod = gpu_pod("p", limits={"volcano.sh/gpu-memory": 100}, annotations=notes, node="n1")
        assert not pod_cards(pod), notes


def _processes() -> dict[str, tuple[Any, Any]]:
    from agent_scheduler import main as agent
    from batch_scheduler import main as batch
    from cluster.kube import mirror_main as mirror
    from sharding import main as sharding

    return {
        "agent-scheduler": (agent.build_parser, agent.agent_config),
        "batch-scheduler": (batch.build_parser, batch.parse_config),
        "sharding": (sharding.build_parser, sharding.process_config),
        "mirror": (mirror.build_parser, mirror.parse_config),
    }


FLAG_VALUES = st.one_of(
    st.sampled_from([*ODD_TEXT, "/", "/dev/null", "/etc/passwd", "/nonexistent/x", "-1s", "1h", "10m5s", "0"]),
    st.text(max_size=10),
    st.integers(-(2**70), 2**70).map(str),
)


@pytest.mark.parametrize("component", ["agent-scheduler", "batch-scheduler", "mirror", "sharding"])
@EXAMPLES
@given(data=st.data())
def test_a_bad_flag_value_is_one_line_and_exit_2_or_a_config(component: str, data: st.DataObject) -> None:
    """Each process's flags, as its ``main`` reads them (the parser, then the config builders),
    before anything starts: a value is taken, or refused in one line with exit 2."""
    import contextlib
    import io

    from cluster.runtime.process import configs_or_none

    build_parser, build = _processes()[component]
    parser = build_parser(f"caldera {component}")
    flags = [a for a in parser._actions if a.option_strings and a.nargs != 0 and a.dest != "help"]
    chosen = data.draw(st.lists(st.sampled_from(flags), min_size=1, max_size=3, unique_by=lambda a: a.dest))
    argv = [x for a in chosen for x in (a.option_strings[-1], data.draw(FLAG_VALUES))]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            configs = configs_or_none(parser.prog, component, parser.parse_args(argv), build)
        except SystemExit as e:
            assert e.code == 2, argv
            configs = None
    if configs is None:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"caldera {component}: error: "), (argv, lines)


def test_a_flag_value_holding_a_line_break_is_named_on_one_line() -> None:
    import subprocess
    import sys

    for argv in (
        ["dry-run", "-f", "a\nb"],
        ["mirror", "--redis-url-file", "a\x1eb"],
        ["bench", "trace", "--trace", "x", "--trace-nodes", "a\u2028b"],
    ):
        r = subprocess.run([sys.executable, "-m", "caldera", *argv], capture_output=True, text=True, timeout=120)
        lines = (r.stdout + r.stderr).strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "error: " in lines[0], (argv, lines)


@EXAMPLES
@given(data=st.data())
def test_a_broken_demo_workload_is_refused_in_one_line_or_bounded(tmp_path: Path, data: st.DataObject) -> None:
    """The default workload with one thing broken: refused in one line, or a workload whose sizes
    stay bounded (no pool, gang or burst that would build without end)."""
    from importlib import resources

    from caldera.demo import workload

    base = yaml.safe_load(resources.files("caldera.demo").joinpath("workloads", workload.DEFAULT).read_text())
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data.draw(broken(base)), allow_unicode=True))
    try:
        w = workload.load(str(path))
    except ValueError as e:
        event("refused")
        one_line([str(e)])
        return
    event("taken")
    assert sum(p.count for p in w.pools) <= 100_000 * len(w.pools)
    assert all(max(c.pods) <= workload.MAX_GANG for c in w.training)
    assert all(c.burst[1] <= workload.MAX_BURST and c.every_s >= 0.001 for c in w.agents)


def test_a_workload_asking_for_a_trillion_nodes_or_pods_is_refused(tmp_path: Path) -> None:
    """Before, a pool of 10**12 nodes or a gang of 10**12 pods was taken, and the demo set out to build them."""
    from caldera.demo import workload

    path = tmp_path / "w.yaml"
    training = "training: [{name: t, queue: q, every_s: 1, pods: [%s], duration_s: [1, 2], requests: {cpu: 1}}]\n"
    for text, needle in (
        (
            "pools: [{name: p, count: 1000000000000, resources: {cpu: 1}}]\n",
            "pools[p].count: 1000000000000 (expected 0 to 100,000 nodes)",
        ),
        ("pools: [{name: p, count: 1, resources: {cpu: 1}}]\nqueues: [{name: q}]\n" + training % 10**12, "pods"),
    ):
        path.write_text(text)
        with pytest.raises(ValueError) as e:
            workload.load(str(path))
        assert needle in str(e.value) and "\n" not in str(e.value), e.value


# -- the commands' own flags: caldera demo, caldera bench (each), caldera dry-run -------------------------------

COMMAND_NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,131072,4,T4\n"
COMMAND_PODS_CSV = PODS_CSV
COMMAND_WORKLOAD = "pools: [{name: cpu, count: 4, resources: {cpu: 8, memory: 16Gi}}]\n"
COMMAND_MANIFEST = yaml.safe_dump_all([NODE, QUEUE, PRIORITY, POD])


def _command_files(root: Path) -> list[str]:
    """Files a user might hand a flag: good ones of each kind (given to the wrong flag, too), a folder,
    a missing file, an empty one, bytes that are neither YAML nor CSV."""
    files = root / "given"
    if not files.exists():
        files.mkdir()
        (files / "nodes.csv").write_text(COMMAND_NODES_CSV)
        (files / "pods.csv").write_text(COMMAND_PODS_CSV)
        (files / "workload.yaml").write_text(COMMAND_WORKLOAD)
        (files / "manifest.yaml").write_text(COMMAND_MANIFEST)
        (files / "conf.yaml").write_text(CONF)
        (files / "empty").write_text("")
        (files / "binary").write_bytes(b"\x00\xff\xfe[{\n\t:\x80" * 10)
        (files / "sub").mkdir()
    return [str(files / n) for n in ("nodes.csv", "pods.csv", "workload.yaml", "manifest.yaml", "conf.yaml")] + [
        str(files / n) for n in ("empty", "binary", "sub", "missing.yaml")
    ]


NUMBERS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "-1e400",
    "-1",
    "-0",
    "0",
    "0.0",
    "1",
    "2",
    "0.5",
    "1.5",
    "100",
    "1e20",
    str(2**63),
    str(10**30),
    "١٢",
    "１",
    "1_000",
    "0x10",
    " 3 ",
    "",
    "30m",
    "90s",
    "1h30m",
    "-5s",
    "1e9h",
    "redis://127.0.0.1:1/0",
    "redis://127.0.0.1:port/0",
    "http://x",
    "soft",
    "json",
    "fgd,best-fit",
    "tetris",
]


def _commands() -> dict[str, tuple[list[str], Any]]:
    from caldera.bench import agent, batch, binder, mixed, peer, saturation, sharding, suite, topology, trace
    from caldera.commands import dry_run
    from caldera.demo import config as demo

    benches = {m.__name__.rsplit(".", 1)[1]: m for m in (agent, batch, binder, mixed, peer, saturation, sharding)}
    benches |= {"topology": topology, "trace": trace}
    return {
        "demo": (["demo"], demo.parse),
        "bench": (["bench"], suite.config),
        **{f"bench {name}": (["bench", name], m.config) for name, m in benches.items()},
        "dry-run": (["dry-run"], dry_run.config),
    }


def _parser_of(path: list[str]) -> Any:
    import argparse

    from caldera.cli import build_parser

    parser: Any = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _bounded(value: Any, at: str = "") -> None:
    """What a command takes is finite and of a size a machine builds (the seed aside)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        assert value == value and abs(value) < float("inf"), (at, value)
    elif isinstance(value, int) and at != "seed":
        assert -1 <= value <= 1_000_000, (at, value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _bounded(v, k)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _bounded(v, at)


@pytest.mark.parametrize("command", sorted(_commands()))
@settings(max_examples=max(10, COUNT // 3), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_command_flag_is_refused_in_one_line_naming_it_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, data: st.DataObject
) -> None:
    """Each command's flags as its ``run`` checks them (the parser, then the command's ``config``), before it
    starts anything: taken, with every figure finite and bounded; or refused in one line that names the flag
    or the value, exit 2 — no process started, no file written."""
    import contextlib
    import io

    import msgspec
    import psutil

    from caldera.flag_config import checked

    monkeypatch.chdir(tmp_path)
    files = _command_files(tmp_path)
    path, build = _commands()[command]
    parser = _parser_of(path)
    flags = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    chosen = data.draw(st.lists(st.sampled_from(flags), min_size=1, max_size=4, unique_by=lambda a: a.dest))
    argv: list[str] = []
    values: list[str] = []
    for a in chosen:
        if a.nargs == 0:
            argv.append(a.option_strings[-1])
            continue
        value = data.draw(st.one_of(st.sampled_from(NUMBERS + files), FLAG_VALUES), label=a.option_strings[-1])
        argv += [a.option_strings[-1], value]
        values.append(value)
    before_files = _tree(tmp_path)
    before_children = {p.pid for p in psutil.Process().children(recursive=True)}
    err = io.StringIO()
    prog = "caldera " + " ".join(path)
    with contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            assert e.code == 2, argv
            args = None
        outcome = checked(prog, args, build) if args is not None else None
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before_children, argv
    assert _tree(tmp_path) == before_files, argv
    if outcome is not None:
        event("taken")
        config = outcome[0] if isinstance(outcome, tuple) else outcome
        _bounded(msgspec.to_builtins(getattr(config, "config", config), enc_hook=str))
        return
    event("refused")
    lines = err.getvalue().strip().splitlines()
    assert len(lines) >= 1 and all(line.startswith(f"{prog}: error: ") for line in lines), (argv, lines)
    if command != "dry-run":  # its manifests are refused a line per refusal, each naming its file
        assert len(lines) == 1, (argv, lines)
    named = [*(f for a in chosen for f in a.option_strings), *(v.strip() for v in values if v.strip())]
    assert any(n in lines[0] for n in named) or "required" in lines[0], (argv, lines)


# The defects the command fuzz found, each pinned by its own case: before, each of these was taken (and set out
# to run: a demo of NaN seconds, a bench of 10**20 nodes) or failed later with a traceback or a line naming
# neither the flag nor the file. Run as a user runs them; each must be refused in one line, exit 2, at once.
def _flag_defects(root: Path) -> list[tuple[list[str], str]]:
    given = _command_files(root)
    nodes, pods = given[0], given[1]
    folder, binary = str(root / "given" / "sub"), str(root / "given" / "binary")
    trace = ["--trace", pods, "--trace-nodes", nodes]
    return [
        # 1. NaN slipped past checks written as `x <= 0` / `x < 0`
        (["demo", "--duration", "nan"], "--duration: 'nan'"),
        (["bench", "agent", "--rate", "nan"], "--rate: nan (expected a finite number)"),
        # 2. no upper bound: sizes that set out to build without end
        (["bench", "sharding", "--nodes", str(10**20)], f"--nodes {10**20}: expected 2 to 1,000,000 nodes"),
        (["demo", "--workers", "1000000"], "--workers 1000000: expected 1 to 64 workers"),
        # 3. digits of other scripts read as numbers
        (["bench", "binder", "--pods", "٨"], "--pods: ٨ (expected a positive integer)"),
        # 4. --out naming a file: a traceback once Redis had started
        (["demo", "--out", nodes], f"--out {nodes}: {nodes} is a file (expected a folder)"),
        # 5. --png naming a folder: a traceback after the whole measurement
        (["bench", "trace", *trace, "--png", folder], f"--png {folder}: a directory (expected a file name)"),
        # 6. a Redis URL of another scheme: a traceback at the first connection
        (["bench", "peer", "--redis-url", "localhost:6379"], "--redis-url localhost:6379: expected a redis://"),
        # 7. a conf that is no conf, refused without naming --conf or the file
        (["bench", "batch", "--conf", "/dev/null"], "--conf /dev/null: scheduler conf: expected a mapping"),
        # 8. a file that is not text: a codec's message, naming nothing
        (["dry-run", "-f", binary], f"-f {binary}: not UTF-8 text"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_a_flag_defect_the_fuzz_found_stays_refused(tmp_path: Path, case: int) -> None:
    import subprocess
    import sys

    argv, needle = _flag_defects(tmp_path)[case]
    out = tmp_path / "out"
    out.mkdir()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "caldera", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=out,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{argv}: taken, and still running after 60 s") from None
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], (argv, r.returncode, lines[-3:])
    assert not list(out.iterdir()), argv
