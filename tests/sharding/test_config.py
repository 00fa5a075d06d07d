"""--scheduler-configs parsing: the documented default, and one line per malformed entry."""

from __future__ import annotations

import pytest

from sharding.config import (
    DEFAULT_SCHEDULER_CONFIGS,
    ConfigError,
    SchedulerType,
    ShardConfig,
    parse_scheduler_configs,
)

GOOD = "volcano:volcano:0.0:0.6:false:2:100"


def test_default_parses_to_the_documented_two_shards() -> None:
    assert parse_scheduler_configs(DEFAULT_SCHEDULER_CONFIGS) == [
        ShardConfig(
            name="volcano",
            type=SchedulerType.VOLCANO,
            min_util=0.0,
            max_util=0.6,
            prefer_warmup=False,
            min_nodes=2,
            max_nodes=100,
        ),
        ShardConfig(
            name="agent-scheduler",
            type=SchedulerType.AGENT,
            min_util=0.7,
            max_util=1.0,
            prefer_warmup=True,
            min_nodes=2,
            max_nodes=100,
        ),
    ]


@pytest.mark.parametrize(
    ("text", "entry", "problem"),
    [
        # wrong field count
        ("volcano:volcano:0.0:0.6:false:2", "volcano:volcano:0.0:0.6:false:2", "fields"),
        ("volcano:volcano:0.0:0.6:false:2:100:7", "volcano:volcano:0.0:0.6:false:2:100:7", "fields"),
        (f"{GOOD},agent", "agent", "fields"),
        # MIN_UTIL > MAX_UTIL
        ("v:volcano:0.7:0.6:false:2:100", "v:volcano:0.7:0.6:false:2:100", "MAX_UTIL"),
        # utilization outside [0, 1]
        ("v:volcano:-0.1:0.6:false:2:100", "v:volcano:-0.1:0.6:false:2:100", "outside"),
        ("v:volcano:0.0:1.5:false:2:100", "v:volcano:0.0:1.5:false:2:100", "outside"),
        ("v:volcano:nan:0.6:false:2:100", "v:volcano:nan:0.6:false:2:100", "MIN_UTIL"),
        # utilization not a number
        ("v:volcano:low:0.6:false:2:100", "v:volcano:low:0.6:false:2:100", "not a number"),
        ("v:volcano:0.0::false:2:100", "v:volcano:0.0::false:2:100", "not a number"),
        # MIN_NODES > MAX_NODES
        ("v:volcano:0.0:0.6:false:5:4", "v:volcano:0.0:0.6:false:5:4", "MAX_NODES"),
        # negative counts
        ("v:volcano:0.0:0.6:false:-1:100", "v:volcano:0.0:0.6:false:-1:100", "negative"),
        ("v:volcano:0.0:0.6:false:0:-3", "v:volcano:0.0:0.6:false:0:-3", "negative"),
        # non-integer counts
        ("v:volcano:0.0:0.6:false:1.5:100", "v:volcano:0.0:0.6:false:1.5:100", "integer"),
        ("v:volcano:0.0:0.6:false:2:lots", "v:volcano:0.0:0.6:false:2:lots", "integer"),
        # duplicate NAME (the second entry is the offending one)
        (f"{GOOD},volcano:agent:0.7:1.0:true:2:100", "volcano:agent:0.7:1.0:true:2:100", "twice"),
        # unknown TYPE
        ("v:kube:0.0:0.6:false:2:100", "v:kube:0.0:0.6:false:2:100", "TYPE"),
        ("v:Volcano:0.0:0.6:false:2:100", "v:Volcano:0.0:0.6:false:2:100", "unknown"),
        # PREFER_WARMUP not true/false
        ("v:volcano:0.0:0.6:yes:2:100", "v:volcano:0.0:0.6:yes:2:100", "PREFER_WARMUP"),
        ("v:volcano:0.0:0.6::2:100", "v:volcano:0.0:0.6::2:100", "PREFER_WARMUP"),
        # empty NAME
        (":volcano:0.0:0.6:false:2:100", ":volcano:0.0:0.6:false:2:100", "NAME"),
    ],
)
def test_malformed_entry_is_named_with_its_problem(text: str, entry: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_scheduler_configs(text)
    message = str(err.value)
    assert "\n" not in message
    assert entry in message
    assert problem in message


@pytest.mark.parametrize("text", ["", "   ", ",", " , "])
def test_empty_flag_is_rejected(text: str) -> None:
    with pytest.raises(ConfigError, match="empty"):
        parse_scheduler_configs(text)


def test_overlapping_bands_are_accepted_in_order() -> None:
    configs = parse_scheduler_configs("a:volcano:0.0:0.8:false:0:10,b:agent:0.5:1.0:TRUE:1:1")
    assert [(c.name, c.min_util, c.max_util, c.prefer_warmup, c.min_nodes, c.max_nodes) for c in configs] == [
        ("a", 0.0, 0.8, False, 0, 10),
        ("b", 0.5, 1.0, True, 1, 1),
    ]


def test_whitespace_around_entries_is_ignored() -> None:
    assert parse_scheduler_configs(f" {GOOD} ,\tagent-scheduler:agent:0.7:1.0:true:2:100 ") == parse_scheduler_configs(
        DEFAULT_SCHEDULER_CONFIGS
    )
