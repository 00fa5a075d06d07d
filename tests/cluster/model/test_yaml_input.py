"""YAML from outside is checked before it is built or walked: no alias bomb, no cycle, no overflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from batch_scheduler.conf import ConfError, parse_conf
from batch_scheduler.registry import default_registry
from caldera.demo.workload import load as load_workload
from cluster.model import yaml_input
from cluster.model.manifests import read_manifests
from cluster.sim.pools import parse_pools


def laughs(levels: int = 9) -> str:
    """Each anchor names the one before nine times: 9**levels strings once expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "aliases": (laughs(), "its aliases expand to more than 1,000,000 values"),
    "cycle": ("a: &a [1, *a]\n", "an alias refers to a value that contains it"),
    "deep": ("[" * 5000 + "]" * 5000, "nested too deeply"),
    "deep-mapping": ("{a: " * 3000 + "1" + "}" * 3000, "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_yaml_is_refused_before_it_is_built(name: str) -> None:
    text, needle = HOSTILE[name]
    with pytest.raises(yaml.YAMLError, match=needle):
        yaml_input.load_all(text)


def test_aliases_that_stay_small_are_expanded_as_yaml_does() -> None:
    text = "base: &b {cpu: 1, memory: 1Gi}\nlimits: *b\nmerged: {<<: *b, cpu: 2}\n" + laughs(5)
    assert yaml_input.load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_yaml_reader_refuses_it_in_one_line(name: str) -> None:
    text, needle = HOSTILE[name]
    _, errors = read_manifests(text)
    assert len(errors) == 1 and needle in errors[0] and "\n" not in errors[0]
    with pytest.raises(ConfError) as conf:
        parse_conf(text, default_registry())
    assert needle in str(conf.value) and "\n" not in str(conf.value)
    with pytest.raises(ValueError, match=needle):
        parse_pools(text)


def test_the_demo_workload_and_dry_run_refuse_an_alias_bomb_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(laughs())
    with pytest.raises(ValueError, match="its aliases expand"):
        load_workload(str(path))
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "dry-run", "-f", str(path)], capture_output=True, text=True, timeout=120
    )
    out = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(out) == 1 and "its aliases expand to more than 1,000,000 values" in out[0], out


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(documents=st.lists(JSON, min_size=1, max_size=3))
def test_benign_yaml_loads_exactly_as_safe_load(documents: list[Any]) -> None:
    text = yaml.safe_dump_all(documents)
    assert yaml_input.load_all(text) == list(yaml.safe_load_all(text))
