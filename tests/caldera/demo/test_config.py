"""``caldera demo``'s flags as a user types them: durations, --rate, the sampling period."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

import pytest

from caldera.cli import build_parser
from caldera.demo import config
from caldera.demo.tracker import Tracker
from caldera.demo.workload import AGENT, VOLCANO, WorkloadDriver, load
from cluster.sim.pods import pod_duration
from cluster.store.store import Store


def parsed(*argv: str) -> config.DemoConfig:
    demo, _ = config.parse(build_parser().parse_args(["demo", *argv]))
    return demo


@pytest.mark.parametrize(
    "duration, seconds, period",
    [("30m", 1800.0, 60.0), ("90s", 90.0, 9.0), ("1h30m", 5400.0, 60.0), ("45", 45.0, 4.5), ("10", 10.0, 2.0)],
)
def test_duration_takes_go_durations_or_seconds_and_sets_the_sampling_period(
    duration: str, seconds: float, period: float
) -> None:
    demo = parsed("--duration", duration)
    assert demo.duration == seconds and demo.sample_every_s == period
    assert parsed("--duration", duration, "--sample-every", "20s").sample_every_s == 20.0


@pytest.mark.parametrize(
    "argv, line",
    [
        (["--rate", "0"], "--rate 0.0: expected a multiple of the arrival rates above 0, at most 100"),
        (["--duration", "8d"], "--duration: '8d' (expected a duration such as 90s, 30m or 1h30m, or plain seconds)"),
        (["--duration", "200h"], "--duration 720000.0: expected a duration above 0 and at most 7 days"),
        (["--sample-every", "0.5s"], "--sample-every 0.5: expected a duration from 1s to 1h"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from caldera.demo.run import run

    with pytest.raises(SystemExit) if "'" in line else contextlib.nullcontext():  # the parser's, or the check's
        assert run(build_parser().parse_args(["demo", *argv, "--out", str(tmp_path)])) == 2
    assert capsys.readouterr().err.strip().endswith(line)
    assert not list(tmp_path.iterdir())


def test_rate_is_refused_with_a_trace(tmp_path: Path) -> None:
    (tmp_path / "p.csv").write_text("x\n")
    with pytest.raises(ValueError, match="--rate 2: a workload's"):
        parsed("--trace", str(tmp_path / "p.csv"), "--trace-nodes", str(tmp_path / "p.csv"), "--rate", "2")


WORKLOAD = """
pools: [{name: cpu, count: 2, resources: {cpu: 8, memory: 16Gi}}]
agents: [{name: a, every_s: 0.05, burst: [1, 1], duration_s: [1, 2], requests: [{cpu: 100m}]}]
"""


async def test_rate_multiplies_every_arrival_rate(store: Store, tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    w = load(str(tmp_path / "w.yaml"))

    async def submitted(rate: float) -> int:
        tracker = Tracker([AGENT, VOLCANO])
        driver = WorkloadDriver(w, store, tracker, seed=7, duration=3.0, rate=rate)
        stop = asyncio.Event()
        task = asyncio.create_task(driver.run(stop))
        await asyncio.sleep(3.0)
        stop.set()
        await task
        return tracker.submitted_n[AGENT]

    once, four_times = await submitted(1.0), await submitted(4.0)
    assert 30 <= once <= 95 and 3 * once <= four_times, (once, four_times)  # 60 and 240 expected


def test_a_workload_field_named_with_a_line_break_is_refused_on_one_line(tmp_path: Path) -> None:
    """Found by the hostile-input fuzz test: a top-level key "\\n" put a line break in the refusal."""
    path = tmp_path / "w.yaml"
    path.write_text('"\\n": 1\npools: []\n')
    with pytest.raises(ValueError) as e:
        load(str(path))
    assert "\n" not in str(e.value) and "\\n: unknown field" in str(e.value), str(e.value)


def test_one_seed_is_one_workload_however_its_rounds_fall(store: Store) -> None:
    """The default workload drawn in rounds of 0.1 s and of 0.37 s: the same jobs and bursts (sizes,
    requests, durations; names follow the rounds), and another seed another workload."""
    w = load(None)

    def drawn(seed: int, step: float) -> list[tuple[object, ...]]:
        driver = WorkloadDriver(w, store, Tracker([AGENT, VOLCANO]), seed=seed, duration=20.0)
        out: list[tuple[object, ...]] = []
        t = 0.0
        while t < 20.0:
            t = min(t + step, 20.0)
            _, pods = driver.arrived(t)
            out += [(re.sub(r"-\d+", "", p.name), p.scheduler_name, str(p.request()), pod_duration(p)) for p in pods]
        return sorted(out, key=repr)

    first = drawn(1, 0.1)
    assert len(first) > 1000
    assert drawn(1, 0.37) == first
    assert drawn(2, 0.1) != first
