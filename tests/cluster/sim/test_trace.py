"""OpenB trace files: nodes and their GPU labels, pod requests for whole and shared GPUs,
gpu_spec as node affinity the predicates honour, the qos → scheduler mapping, and one-line
errors for bad input."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cluster.model.core import Node
from cluster.nodeview.predicates import filter_nodes
from cluster.nodeview.table import NodeTable
from cluster.sim.pods import pod_duration
from cluster.sim.trace import (
    DEFAULT_MAPPING,
    GPU,
    GPU_MILLI,
    GPU_MODEL_LABEL,
    TracePod,
    parse_mapping,
    read_nodes,
    read_pods,
    scheduler_for,
    to_pod,
)
from tests.builders import node_table

NODES = """sn,cpu_milli,memory_mib,gpu,model
cpu-0,32000,262144,0,
t4-0,96000,786432,2,T4
v100-0,96000,786432,8,V100M16
v100-1,96000,786432,8,V100M32
"""
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
PODS = (
    POD_HEADER
    + """late,1000,2048,0,0,,BE,Running,30.5,40,30.5
whole,12000,16384,2,1000,,LS,Running,10,,10
share,6000,12288,1,460,V100M16|V100M32,LS,Pending,10,20,
"""
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def columns_of(nodes: list[Node]) -> NodeTable:
    return node_table(nodes)


def pod_named(pods: list[TracePod], name: str) -> TracePod:
    return next(p for p in pods if p.name == name)


def test_nodes_offer_cpu_memory_pods_and_gpus_in_whole_and_milli_with_a_model_label(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    assert [n.name for n in nodes] == ["cpu-0", "t4-0", "v100-0", "v100-1"]
    assert nodes[0].allocatable_resources() == {"cpu": 32000, "memory": 262144 * 2**20, "pods": 110}
    assert nodes[1].allocatable_resources() == {
        "cpu": 96000,
        "memory": 786432 * 2**20,
        "pods": 110,
        GPU: 2,
        GPU_MILLI: 2000,
    }
    assert GPU_MODEL_LABEL not in nodes[0].labels
    assert nodes[1].labels[GPU_MODEL_LABEL] == "T4"
    assert nodes[1].labels["kubernetes.io/hostname"] == "t4-0"


def test_pods_come_in_creation_order_with_times_qos_and_phase(tmp_path: Path) -> None:
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    assert [(p.name, p.created, p.deleted) for p in pods] == [
        ("share", 10.0, 20.0),
        ("whole", 10.0, None),
        ("late", 30.5, 40.0),
    ]
    assert (pods[0].qos, pods[0].phase) == ("LS", "Pending")


def test_whole_gpus_count_in_milli_too_and_a_share_asks_only_milli(tmp_path: Path) -> None:
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    assert pod_named(pods, "whole").requests == {"cpu": "12000m", "memory": "16384Mi", GPU: "2", GPU_MILLI: "2000"}
    assert pod_named(pods, "share").requests == {"cpu": "6000m", "memory": "12288Mi", GPU_MILLI: "460"}
    assert pod_named(pods, "late").requests == {"cpu": "1000m", "memory": "2048Mi"}


def test_whole_and_shared_gpus_draw_on_one_per_node_total(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,96000,786432,1,T4\n"))
    pods = read_pods(
        write(
            tmp_path,
            "pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nshare,1000,1024,1,500\nwhole,1000,1024,1,1000\n",
        )
    )
    cols = columns_of(nodes)
    share, whole = (to_pod(pod_named(pods, n), "s") for n in ("share", "whole"))
    assert filter_nodes(cols, whole, whole.request()).available == 1
    cols.take("n", share.request())
    assert (
        filter_nodes(cols, whole, whole.request()).reason() == f"0/1 nodes are available: 1 Insufficient {GPU_MILLI}."
    )


def test_gpu_spec_is_required_affinity_that_the_predicates_honour(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    cols = columns_of(nodes)

    def feasible(name: str) -> list[str]:
        pod = to_pod(pod_named(pods, name), "volcano")
        return [cols.names[i] for i in np.flatnonzero(filter_nodes(cols, pod, pod.request()).mask)]

    assert pod_named(pods, "share").gpu_models == ("V100M16", "V100M32")
    assert feasible("share") == ["v100-0", "v100-1"]
    assert feasible("whole") == ["t4-0", "v100-0", "v100-1"]  # any model; never a CPU-only node
    assert feasible("late") == ["cpu-0", "t4-0", "v100-0", "v100-1"]


def test_to_pod_sets_scheduler_duration_and_uid(tmp_path: Path) -> None:
    tp = pod_named(read_pods(write(tmp_path, "pods.csv", PODS)), "late")
    pod = to_pod(tp, "agent-scheduler", duration=9.5, uid="u1")
    assert (pod.name, pod.scheduler_name, pod.uid, pod.phase) == ("late", "agent-scheduler", "u1", "Pending")
    assert pod_duration(pod) == 9.5
    assert pod.spec.affinity is None


def test_five_column_file_reads_with_everything_created_at_zero(tmp_path: Path) -> None:
    text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nb,8000,30720,8,1000\na,4000,15360,1,250\n"
    pods = read_pods(write(tmp_path, "multigpu50.csv", text))
    assert [(p.name, p.created, p.deleted, p.qos, p.phase, p.gpu_models) for p in pods] == [
        ("a", 0.0, None, "", "", ()),
        ("b", 0.0, None, "", "", ()),
    ]
    assert pods[1].requests[GPU] == "8"


def test_files_without_rows_are_empty(tmp_path: Path) -> None:
    assert read_pods(write(tmp_path, "pods.csv", POD_HEADER)) == []
    assert read_nodes(write(tmp_path, "nodes.csv", "")) == []


def test_a_trace_that_is_not_text_is_refused_by_path(tmp_path: Path) -> None:
    for reader, name in ((read_pods, "pods.csv"), (read_nodes, "nodes.csv")):
        path = tmp_path / name
        path.write_bytes(b"sn,cpu_milli\n\xff\xfe,1\n")
        with pytest.raises(ValueError) as info:
            reader(str(path))
        assert str(info.value) == f"{path}: not UTF-8 text (expected an OpenB CSV)"


def test_mapping_sends_named_qos_classes_and_star_takes_the_rest() -> None:
    default = parse_mapping(DEFAULT_MAPPING)
    assert default == {"LS": "agent-scheduler", "*": "volcano"}
    ls, be = (TracePod(name="p", created=0, deleted=None, requests={}, qos=q) for q in ("LS", "BE"))
    assert (scheduler_for(ls, default), scheduler_for(be, default)) == ("agent-scheduler", "volcano")
    custom = parse_mapping(" LS = a , Burstable=b,*=c")
    assert custom == {"LS": "a", "Burstable": "b", "*": "c"}
    assert scheduler_for(TracePod(name="p", created=0, deleted=None, requests={}), custom) == "c"


EXPECTED_FORM = (
    "(expected QOS=SCHEDULER pairs separated by commas, with * for every other qos, e.g. LS=agent-scheduler,*=volcano)"
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("LS=a", "no *=SCHEDULER for the other qos classes (every pod must go to some scheduler)"),
        ("", '"" is not QOS=SCHEDULER'),
        ("LS=a,,*=b", '"" is not QOS=SCHEDULER'),
        ("LS,*=b", '"LS" is not QOS=SCHEDULER'),
        ("LS=,*=b", '"LS=" is not QOS=SCHEDULER'),
        ("=a,*=b", '"=a" is not QOS=SCHEDULER'),
        ("LS=a,LS=b,*=c", "LS is given twice"),
    ],
)
def test_bad_mapping_says_what_is_wrong_and_the_accepted_form(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_mapping(text)
    assert str(e.value) == f'scheduler mapping "{text}": {problem} {EXPECTED_FORM}'


SHORT_POD = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,gpu_spec\n"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p,1000,1024,x,0,0,,", 'num_gpu "x" is not a whole number (expected 0 or more)'),
        ("p,-5,1024,0,0,0,,", 'cpu_milli "-5" is negative (expected 0 or more)'),
        ("p,1000,1.5,0,0,0,,", 'memory_mib "1.5" is not a whole number (expected 0 or more)'),
        ("p,1000,1024,1,1001,0,,", 'gpu_milli "1001" is more than 1000 (expected 0 to 1000)'),
        ("p,1000,1024,1,-1,0,,", 'gpu_milli "-1" is negative (expected 0 to 1000)'),
        ("p,1000,1024,0,0,soon,,", 'creation_time "soon" is not a number of seconds (expected 0 or more, e.g. 12.5)'),
        ("p,1000,1024,0,0,nan,,", 'creation_time "nan" is not a number of seconds (expected 0 or more, e.g. 12.5)'),
        ("p,1000,1024,0,0,-1,,", 'creation_time "-1" is negative (expected seconds, 0 or more)'),
        ("p,1000,1024,0,0,,,", 'creation_time "" is empty (expected seconds, 0 or more)'),
        ("p,1000,1024,0,0,10,5,", 'deletion_time "5" is before creation_time "10" (expected empty or no earlier)'),
        (
            "p,1000,1024,1,1000,0,,T4||G2",
            'gpu_spec "T4||G2" has an empty model (expected GPU models separated by |, e.g. V100M16|V100M32)',
        ),
        (",1000,1024,0,0,0,,", 'name "" is empty (expected a name)'),
        ("ok,1,1,0,0,0,,\np,1000,1024", "3 values, but the header has 8 columns (expected one value per column)"),
        ("p,1,1,0,0,0,,\np,1,1,0,0,0,,", 'name "p" repeats line 2 (expected each name once)'),
    ],
)
def test_bad_pod_row_names_file_line_column_value_and_what_is_accepted(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "pods.csv", SHORT_POD + row + "\n")
    line = 1 + len(row.splitlines())
    with pytest.raises(ValueError) as e:
        read_pods(path)
    assert str(e.value) == f"{path} line {line}: {message}"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("n,32000,1024,two,T4", 'gpu "two" is not a whole number (expected 0 or more)'),
        ("n,32000,-1,0,", 'memory_mib "-1" is negative (expected 0 or more)'),
        ("n,1,1,0,\nn,1,1,0,", 'sn "n" repeats line 2 (expected each name once)'),
    ],
)
def test_bad_node_row_names_file_line_column_value_and_what_is_accepted(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\n" + row + "\n")
    with pytest.raises(ValueError) as e:
        read_nodes(path)
    assert str(e.value) == f"{path} line {1 + len(row.splitlines())}: {message}"


def test_missing_column_is_named_with_the_header_found(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n")
    with pytest.raises(
        ValueError, match=re.escape(f'{path}: no column "gpu_milli" (header found: name,cpu_milli,memory_mib,num_gpu)')
    ):
        read_pods(path)
    nodes = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu\n")
    with pytest.raises(ValueError, match=re.escape('no column "model"')):
        read_nodes(nodes)
